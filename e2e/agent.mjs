// An agent worker built the way the Band TypeScript SDK builds one: the
// phoenix JS client over the ws transport (Node 20 has no global WebSocket),
// the key in an x-api-key header on the upgrade, agent_id in the query.
//
// It joins agent_control and agent_rooms, joins chat_room for every room it
// is in or is added to, and works through its messages: on every (re)join it
// drains /messages/next until 204, and it handles message_created pushes;
// each message is marked processing, then processed. It prints one JSON
// object per line for the test that drives it.
//
// Environment: CHATD_URL (http://host:port), AGENT_KEY, AGENT_ID.

import { Socket } from "phoenix";
import WebSocket from "ws";

const base = process.env.CHATD_URL;
const key = process.env.AGENT_KEY;
const agentId = process.env.AGENT_ID;

const log = (event) => console.log(JSON.stringify(event));

class KeyedWebSocket extends WebSocket {
  constructor(url, protocols) {
    super(url, protocols, { headers: { "x-api-key": key } });
  }
}

async function api(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { "x-api-key": key, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

const done = new Set();

async function handle(roomId, message, via) {
  if (done.has(message.id)) {
    log({ event: "duplicate", id: message.id, via });
    return;
  }
  done.add(message.id);
  const base = `/api/v1/agent/chats/${roomId}/messages/${message.id}`;
  try {
    const processing = await api("POST", `${base}/processing`);
    const processed = await api("POST", `${base}/processed`, {});
    log({ event: "processed", id: message.id, via, status: [processing.status, processed.status] });
  } catch (e) {
    // The server went away mid-way (a restart): /next serves the message
    // again once the channel rejoins, so forget it was seen.
    done.delete(message.id);
    throw e;
  }
}

const draining = new Set();

async function drain(roomId) {
  if (draining.has(roomId)) return;
  draining.add(roomId);
  try {
    for (;;) {
      const next = await api("GET", `/api/v1/agent/chats/${roomId}/messages/next`);
      if (next.status === 204) break;
      if (next.status !== 200) {
        log({ event: "next_error", status: next.status });
        break;
      }
      await handle(roomId, next.body.data, "next");
    }
    log({ event: "drained", room: roomId });
  } catch (e) {
    // A request cut off by a server restart; the rejoin drains again.
    log({ event: "api_error", room: roomId, error: String(e.cause?.code ?? e) });
  } finally {
    draining.delete(roomId);
  }
}

const socket = new Socket(base.replace(/^http/, "ws") + "/api/v1/socket", {
  transport: KeyedWebSocket,
  params: { agent_id: agentId },
  heartbeatIntervalMs: 1000,
  reconnectAfterMs: () => 200,
  rejoinAfterMs: () => 200,
});

const rooms = new Map();

function joinRoom(roomId) {
  if (rooms.has(roomId)) return;
  const channel = socket.channel(`chat_room:${roomId}`);
  channel.on("message_created", (message) => {
    log({ event: "message_created", id: message.id, room: roomId, join_ref_ok: true });
    handle(roomId, message, "push").catch((e) => log({ event: "api_error", room: roomId, error: String(e.cause?.code ?? e) }));
  });
  channel
    .join()
    .receive("ok", () => {
      log({ event: "joined", topic: channel.topic });
      drain(roomId);
    })
    .receive("error", (e) => log({ event: "join_error", topic: channel.topic, reason: e.reason }));
  rooms.set(roomId, channel);
}

const control = socket.channel(`agent_control:${agentId}`);
control.on("supersede", (p) => log({ event: "supersede", reason: p.reason }));
control.join().receive("ok", () => log({ event: "joined", topic: control.topic }));

const agentRooms = socket.channel(`agent_rooms:${agentId}`);
agentRooms.on("room_added", (room) => {
  log({ event: "room_added", id: room.id, title: room.title, status: room.status });
  joinRoom(room.id);
});
agentRooms.join().receive("ok", async () => {
  log({ event: "joined", topic: agentRooms.topic });
  try {
    const list = await api("GET", "/api/v1/agent/chats?page_size=100");
    for (const room of list.body.data) joinRoom(room.id);
  } catch (e) {
    log({ event: "api_error", error: String(e.cause?.code ?? e) });
  }
});

socket.onOpen(() => log({ event: "open" }));
socket.onClose((e) => log({ event: "close", code: e.code }));
socket.connect();
