// A sample chatd agent for Node that reacts to pushes: the `phoenix` client
// over the `ws` transport, as the Band TypeScript SDK connects, and fetch for
// the REST calls.
//
// It joins its control and rooms topics, and the chat_room topic of every
// room it is in or is added to. A message_created push that mentions it is
// worked on at once: marked /processing, answered in the room mentioning
// the person who wrote it, marked /processed (or /failed, with the reason).
// Whenever a room's topic is joined (at start and after any reconnect) it
// first drains GET .../messages/next until 204, since pushes are not
// replayed. SIGTERM or SIGINT (Ctrl-C) stops it once the work at hand is done.
//
// It needs the four variables `chatd dev` prints for an agent: BAND_REST_URL,
// BAND_WS_URL, BAND_AGENT_ID and BAND_API_KEY.   npm ci && node agent.mjs

import { Socket } from "phoenix";
import WebSocket from "ws";

const { BAND_REST_URL, BAND_WS_URL, BAND_AGENT_ID: agentId, BAND_API_KEY: key } = process.env;
if (!BAND_REST_URL || !BAND_WS_URL || !agentId || !key) {
  console.error("agent.mjs: set BAND_REST_URL, BAND_WS_URL, BAND_AGENT_ID and BAND_API_KEY (chatd dev prints them)");
  process.exit(2);
}
const base = BAND_REST_URL.replace(/\/$/, "");
const log = (text) => console.log(`${new Date().toISOString()} ${text}`);

async function api(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { "x-api-key": key, "content-type": "application/json", accept: "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path} answered ${res.status}: ${text}`);
  return { status: res.status, ...(text ? JSON.parse(text) : {}) };
}

// Delivery is at least once: a push and a drain may bring the same message,
// so each is worked on once, by id. (A long-lived agent would forget old ids.)
const handled = new Set();
const inFlight = new Set();

function work(roomId, message, via) {
  if (handled.has(message.id)) return Promise.resolve();
  handled.add(message.id);
  const job = answer(roomId, message, via).finally(() => inFlight.delete(job));
  inFlight.add(job);
  return job;
}

async function answer(roomId, message, via) {
  const path = `/api/v1/agent/chats/${roomId}/messages/${message.id}`;
  try {
    await api("POST", `${path}/processing`, {});
    // Only people get an answer: two sample agents answering each other's
    // mentions would never stop.
    if (message.sender_type === "User") {
      await api("POST", `/api/v1/agent/chats/${roomId}/messages`, {
        message: { content: `Got it: ${message.content}`, mentions: [{ id: message.sender_id }] },
      });
    }
    await api("POST", `${path}/processed`, {});
    log(`processed ${message.id} in ${roomId} (${via})`);
  } catch (err) {
    handled.delete(message.id); // /next serves it again for a retry
    log(`failed ${message.id} in ${roomId}: ${err.message}`);
    await api("POST", `${path}/failed`, { error: err.message.slice(0, 500) }).catch(() => {});
  }
}

async function drain(roomId) {
  const tried = new Set();
  for (;;) {
    const next = await api("GET", `/api/v1/agent/chats/${roomId}/messages/next`);
    // Done when nothing is left, or when /next offers a message tried in
    // this pass (it failed, or a push is still working on it).
    if (next.status === 204 || tried.has(next.data.id)) return;
    tried.add(next.data.id);
    await work(roomId, next.data, "next");
  }
}

// Node 20 has no WebSocket of its own, and phoenix would silently fall back
// to long polling without one; the key goes in the upgrade's x-api-key
// header, as the TypeScript SDK sends it.
class KeyedWebSocket extends WebSocket {
  constructor(url, protocols) {
    super(url, protocols, { headers: { "x-api-key": key } });
  }
}

// phoenix appends /websocket (and vsn=2.0.0) itself.
const socket = new Socket(BAND_WS_URL.replace(/\/websocket$/, ""), { transport: KeyedWebSocket, params: { agent_id: agentId } });
const rooms = new Map();
const report = (err) => log(`error: ${err.message}`);

function joinRoom(roomId) {
  if (rooms.has(roomId)) return;
  const channel = socket.channel(`chat_room:${roomId}`);
  channel.on("message_created", (message) => {
    const mentionsMe = (message.metadata?.mentions ?? []).some((m) => m.id === agentId);
    if (mentionsMe) work(roomId, message, "push").catch(report);
  });
  channel.join()
    .receive("ok", () => {
      log(`joined ${channel.topic}`);
      drain(roomId).catch(report);
    })
    .receive("error", (e) => log(`could not join ${channel.topic}: ${e.reason}`));
  rooms.set(roomId, channel);
}

// The SDKs join agent_control first; "supersede" there means another
// connection of this agent took over, and this one should go.
const control = socket.channel(`agent_control:${agentId}`);
control.on("supersede", () => stop("another connection of this agent took over", 1));
control.join().receive("error", (e) => stop(`could not join ${control.topic}: ${e.reason}`, 1));

const agentRooms = socket.channel(`agent_rooms:${agentId}`);
agentRooms.on("room_added", (room) => joinRoom(room.id));
agentRooms.on("room_removed", (room) => {
  rooms.get(room.id)?.leave();
  rooms.delete(room.id);
});
agentRooms.join().receive("ok", async () => {
  try {
    // This listing pages by page and page_size.
    for (let page = 1, pages = 1; page <= pages; page++) {
      const list = await api("GET", `/api/v1/agent/chats?page=${page}&page_size=100`);
      list.data.forEach((room) => joinRoom(room.id));
      pages = list.metadata.total_pages;
    }
  } catch (err) {
    report(err);
  }
});

socket.onOpen(() => log(`connected as ${agentId}`));
socket.connect();

async function stop(why, code = 0) {
  log(`stopping: ${why}`);
  socket.disconnect();
  await Promise.allSettled([...inFlight]);
  process.exit(code);
}
process.on("SIGTERM", () => stop("SIGTERM"));
process.on("SIGINT", () => stop("SIGINT"));
