// An agent that works over MCP alone, with the official TypeScript SDK's
// client on the Streamable HTTP transport: the agent's key in an X-API-Key
// header, one URL, no socket and no REST call.
//
// It lists the tools, waits for a message addressed to it
// (wait_for_message), posts a thought about it, answers its sender with a
// mention, marks it processed, ends its session and exits. It prints one
// JSON object per line, one per step, for the test that drives it; a
// refused tool call is printed and ends it with status 1.
//
// Environment: CHATD_URL (http://host:port), AGENT_KEY.

import { isDeepStrictEqual } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const log = (step) => console.log(JSON.stringify(step));

const transport = new StreamableHTTPClientTransport(new URL("/mcp", process.env.CHATD_URL), {
  requestInit: { headers: { "X-API-Key": process.env.AGENT_KEY } },
});
const client = new Client({ name: "chatd-e2e-mcp-agent", version: "1.0.0" });

// call calls a tool and returns its structured result. chatd sends the
// same JSON as text, for clients that read only text: that is checked too.
async function call(name, args) {
  // wait_for_message may hold the request for its whole timeout.
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 90_000 });
  const text = result.content?.[0]?.type === "text" ? result.content[0].text : undefined;
  if (result.isError) {
    log({ step: "refused", tool: name, error: text });
    process.exit(1);
  }
  let fromText;
  try {
    fromText = JSON.parse(text);
  } catch {
    fromText = undefined;
  }
  if (!isDeepStrictEqual(fromText, result.structuredContent)) {
    log({ step: "text_differs", tool: name, text, structured: result.structuredContent });
    process.exit(1);
  }
  return result.structuredContent;
}

await client.connect(transport);
log({ step: "connected", server: client.getServerVersion(), session: transport.sessionId });

const { tools } = await client.listTools();
log({ step: "tools", names: tools.map((t) => t.name).sort() });

const me = (await call("whoami", {})).agent;
log({ step: "whoami", id: me.id, handle: me.handle });

let taken;
while (!taken) {
  log({ step: "waiting" });
  taken = await call("wait_for_message", { timeout_seconds: 30 });
  if (!taken.message) {
    taken = undefined;
  }
}
const { message, room_id: room } = taken;
log({ step: "message", id: message.id, room, content: message.content, status: message.metadata.status });

const participants = (await call("list_participants", { room_id: room })).participants;
const sender = participants.find((p) => p.id === message.sender_id);
log({ step: "sender", id: sender?.id, handle: sender?.handle });

const thought = (await call("post_event", {
  room_id: room,
  message_type: "thought",
  content: `Answering ${sender.handle}.`,
})).event;
log({ step: "thought", id: thought.id, message_type: thought.message_type });

const reply = (await call("send_message", {
  room_id: room,
  content: `@${sender.handle} you said: ${message.content}`,
  mentions: [sender.handle],
})).message;
log({ step: "replied", id: reply.id, success: reply.success });

const delivery = (await call("mark_processed", { room_id: room, message_id: message.id })).delivery;
log({ step: "processed", id: message.id, status: delivery.status });

await transport.terminateSession();
await client.close();
log({ step: "closed" });
