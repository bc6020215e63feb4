// How one message looks. Each type has its own class and label so a
// thought, a tool call or an error never passes for conversation; attention
// messages (an agent asking a person for something) carry a border and
// background that stand out.

import { h } from "../dom.js";
import { timeEl } from "../time.js";

const kinds = {
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

// renderMessage answers the element for msg. names maps participant ids to
// names (for delivery chips of agents the message does not name).
export function renderMessage(msg, { meId, names, download }) {
  const type = kinds[msg.message_type] !== undefined ? msg.message_type : "text";
  const kind = kinds[type];
  const mine = msg.sender_id === meId;
  const meta = msg.metadata || {};
  const el = h("article", {
    class: `msg type-${type}${mine ? " mine" : ""}`,
    dataset: { id: msg.id, type },
    "aria-label": `${kind ? `${kind} from` : "Message from"} ${msg.sender_name || "unknown"}`,
  },
  h("header", {},
    h("span", { class: "sender" }, msg.sender_name || "unknown"),
    kind ? h("span", { class: "kind" }, kind) : null,
    timeEl(msg.inserted_at)),
  h("div", { class: "body" }, withMentions(msg.content || "", meta.mentions || [])),
  attachments(msg.attachments || [], download),
  deliveries(meta, names));
  return el;
}

// withMentions marks the @handles the message really mentions; other text
// stays plain text.
function withMentions(content, mentions) {
  const handles = mentions.map((m) => m.handle).filter(Boolean).sort((a, b) => b.length - a.length);
  if (!handles.length) return content;
  const pattern = new RegExp(`@(${handles.map((x) => x.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|")})`, "g");
  const out = [];
  let last = 0;
  for (const m of content.matchAll(pattern)) {
    out.push(content.slice(last, m.index));
    out.push(h("span", { class: "mention" }, m[0]));
    last = m.index + m[0].length;
  }
  out.push(content.slice(last));
  return out;
}

function attachments(list, download) {
  if (!list.length) return null;
  return h("div", { class: "attachments" }, list.map((a) =>
    h("button", { type: "button", class: "secondary", onclick: () => download(a) },
      `Download ${a.name} (${size(a.size ?? a.bytes ?? 0)})`)));
}

export function size(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / (1 << 20)).toFixed(1)} MB`;
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
