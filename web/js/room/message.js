// How one message looks. Text is Markdown (markdown.js renders it safely);
// each type has its own class and label so a thought, a tool call or an
// error never passes for conversation; attention messages (an agent asking
// a person for something) stand out. A message shows the quote of what it
// replies to, its attachments (images as thumbnails that open a viewer,
// other files as chips with their size), its reactions, where each agent
// it mentions is with it, and, on hover or focus, what the reader may do
// with it: reply, react, and edit or delete their own.

import { h } from "../dom.js";
import { relTimeEl } from "../time.js";
import { render } from "../markdown.js";
import { attachmentsOf, size } from "./attachments.js";

export { size };

export const kinds = {
  text: "",
  thought: "Thought",
  tool_call: "Tool call",
  tool_result: "Tool result",
  error: "Error",
  task: "Task",
  attention: "Needs attention",
  system: "System",
  action: "Action",
  guidelines: "Guidelines",
};

const statusWords = {
  pending: "waiting",
  delivered: "delivered",
  processing: "working on it",
  processed: "processed",
  failed: "failed",
};

// The reactions offered by the React button; any emoji given elsewhere
// shows and can be added to with one click.
export const quickReactions = ["👍", "🎉", "❤️", "👀", "✅", "❌"];

// typeOf answers a message's known type (unknown ones show as text).
export const typeOf = (msg) => (kinds[msg.message_type] !== undefined ? msg.message_type : "text");

// renderMessage answers the element for msg. opts: meId, names (participant
// ids to names, for delivery chips of agents the message does not name),
// files (attachments.js's loader), act(action, msg, button) for the
// actions, and compact (a step inside an agent's turn: no actions).
export function renderMessage(msg, opts) {
  const type = typeOf(msg);
  const kind = kinds[type];
  const mine = msg.sender_id === opts.meId;
  const meta = msg.metadata || {};
  const deleted = Boolean(msg.deleted_at);
  const el = h("article", {
    class: `msg type-${type}${mine ? " mine" : ""}${deleted ? " deleted" : ""}`,
    dataset: { id: msg.id, type },
    // Focusable by a tap, which shows its actions on a touch screen.
    tabindex: "-1",
    "aria-label": `${kind ? `${kind} from` : "Message from"} ${msg.sender_name || "unknown"}`,
  },
  h("header", {},
    h("span", { class: "sender" }, msg.sender_name || "unknown"),
    kind ? h("span", { class: "kind" }, kind) : null,
    relTimeEl(msg.inserted_at),
    msg.edited_at && !deleted ? h("span", { class: "edited", title: `Edited ${new Date(msg.edited_at).toLocaleString()}` }, "(edited)") : null),
  quote(msg, opts),
  body(msg, type, meta),
  deleted ? null : attachmentsOf(msg, opts.files),
  deleted ? null : reactions(msg, opts),
  deliveries(meta, opts.names),
  opts.compact || deleted ? null : actions(msg, type, mine, opts));
  return el;
}

function body(msg, type, meta) {
  if (msg.deleted_at) return h("div", { class: "body muted" }, "This message was deleted.");
  const content = msg.content || "";
  if (type === "tool_call" || type === "tool_result") {
    return h("div", { class: "body" }, h("pre", { class: "tool" }, h("code", {}, pretty(content))));
  }
  const handles = new Set((meta.mentions || []).map((m) => m.handle).filter(Boolean));
  return h("div", { class: "body md" }, render(content, (handle) => handles.has(handle)));
}

// pretty indents content that is JSON, as tool calls and results often are.
function pretty(content) {
  const t = content.trim();
  if (!(t.startsWith("{") || t.startsWith("["))) return content;
  try {
    return JSON.stringify(JSON.parse(t), null, 2);
  } catch {
    return content;
  }
}

// quote shows what a reply answers; a click on it shows the parent in
// the room.
function quote(msg, opts) {
  const q = msg.reply_to;
  if (!msg.reply_to_id) return null;
  const label = q ? (q.deleted ? "a deleted message" : q.excerpt) : "a message";
  return h("button", {
    type: "button", class: "quote", "aria-label": `In reply to ${q ? q.sender_name : "a message"}: ${label}. Show it.`,
    onclick: () => opts.act("show", { id: msg.reply_to_id }),
  }, h("span", { class: "quote-sender" }, q ? q.sender_name : ""), " ", h("span", { class: "quote-text" }, label));
}

function reactions(msg, opts) {
  const list = msg.reactions || [];
  if (!list.length) return null;
  return h("div", { class: "reactions", role: "group", "aria-label": "Reactions" }, list.map((r) =>
    h("button", {
      type: "button", class: `reaction${r.reacted ? " reacted" : ""}`, "aria-pressed": String(Boolean(r.reacted)),
      "aria-label": `${r.emoji} ${r.count}${r.reacted ? ", yours: take it back" : ": react the same"}`,
      onclick: () => opts.act(r.reacted ? "unreact" : "react", msg, r.emoji),
    }, `${r.emoji} ${r.count}`)));
}

function actions(msg, type, mine, opts) {
  const who = msg.sender_name || "this message";
  const own = mine && type === "text";
  return h("div", { class: "actions", role: "toolbar", "aria-label": `Actions on the message from ${who}` },
    h("button", { type: "button", class: "link", onclick: () => opts.act("reply", msg) }, "Reply"),
    h("button", { type: "button", class: "link", "aria-haspopup": "true",
      onclick: (ev) => opts.act("pick-reaction", msg, ev.currentTarget) }, "React"),
    own ? h("button", { type: "button", class: "link", onclick: () => opts.act("edit", msg) }, "Edit") : null,
    mine || opts.owner ? h("button", { type: "button", class: "link danger-link", onclick: () => opts.act("delete", msg) }, "Delete") : null);
}

// deliveries shows where each mentioned agent is with the message.
function deliveries(meta, names) {
  const status = meta.delivery_status;
  if (!status || typeof status !== "object") return null;
  const byId = new Map((meta.mentions || []).map((m) => [m.id, m.name || m.handle]));
  const chips = Object.entries(status).map(([id, st]) => {
    const word = statusWords[st.status] || st.status;
    const who = byId.get(id) || names.get(id) || "agent";
    const attempt = st.current_attempt > 1 ? ` (attempt ${st.current_attempt})` : "";
    // A failed attempt says why on hover, as the agent reported it.
    const attempts = Array.isArray(st.attempts) ? st.attempts : [];
    const last = attempts[attempts.length - 1];
    const why = st.status === "failed" && last && last.error ? String(last.error) : null;
    return h("span", { class: `delivery ${st.status}`, dataset: { agent: id }, title: why },
      `${who}: ${word}${attempt}`);
  });
  return chips.length ? h("div", { class: "deliveries", "aria-label": "Delivery" }, chips) : null;
}

// mergeUpdate folds a message_updated push into the message we hold: a
// frame may carry only the recipients whose delivery changed.
export function mergeUpdate(held, update) {
  const merged = { ...held, ...update };
  const before = (held.metadata && held.metadata.delivery_status) || {};
  const after = (update.metadata && update.metadata.delivery_status) || {};
  merged.metadata = { ...(held.metadata || {}), ...(update.metadata || {}), delivery_status: { ...before, ...after } };
  return merged;
}
