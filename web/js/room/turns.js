// Agent turns: the steps an agent posts while it works on a message
// (thoughts, tool calls, tool results, errors) shown as one block per turn
// instead of a line each, folded by default to one line that says what
// happened (how many steps, which tools, how long, whether it failed),
// unfolded while the agent is still at it. Errors show even when the block
// is folded: a failure is never hidden.
//
// A turn is a run of one agent's steps with nothing else between them in
// the room; the agent's answer, or anyone else's message, ends it.

import { h } from "../dom.js";

export const stepTypes = new Set(["thought", "tool_call", "tool_result", "error"]);

export const isStep = (m) => stepTypes.has(m.message_type) && m.sender_type === "Agent" && !m.deleted_at;

// dayOf is the local day of a timestamp, remembered: a render of a long
// history asks it of every message.
const days = new Map();
function dayOf(iso) {
  const key = iso.slice(0, 16); // the minute: every time zone's day starts on one
  let d = days.get(key);
  if (d === undefined) {
    d = new Date(iso).toDateString();
    days.set(key, d);
  }
  return d;
}

// blocks cuts the messages, oldest first, into what the timeline shows:
// {kind: "day", date}, {kind: "unread"}, {kind: "message", msg} and
// {kind: "turn", id, sender, steps}. firstUnread is the id of the first
// unread message, or null.
export function blocks(messages, firstUnread) {
  const out = [];
  let day = null;
  let turn = null;
  for (const m of messages) {
    const d = dayOf(m.inserted_at);
    if (d !== day) {
      day = d;
      turn = null;
      out.push({ kind: "day", key: `day-${d}`, date: m.inserted_at });
    }
    if (m.id === firstUnread) {
      turn = null;
      out.push({ kind: "unread", key: "unread" });
    }
    if (isStep(m)) {
      if (turn && turn.sender === m.sender_id) {
        turn.steps.push(m);
        continue;
      }
      turn = { kind: "turn", key: `turn-${m.id}`, id: m.id, sender: m.sender_id, name: m.sender_name, steps: [m] };
      out.push(turn);
      continue;
    }
    turn = null;
    out.push({ kind: "message", key: m.id, msg: m });
  }
  return out;
}

// toolName finds the tool a tool call names: in its metadata (Band's
// {function: {name}}, or {tool} or {name}), or its JSON content's name,
// or the word before its first parenthesis.
export function toolName(m) {
  const meta = m.metadata || {};
  if (meta.function && typeof meta.function.name === "string") return meta.function.name;
  for (const k of ["tool", "name", "tool_name"]) if (typeof meta[k] === "string" && meta[k]) return meta[k];
  const t = (m.content || "").trim();
  if (t.startsWith("{")) {
    try {
      const v = JSON.parse(t);
      if (v && typeof v.name === "string") return v.name;
      if (v && v.function && typeof v.function.name === "string") return v.function.name;
    } catch {
      // not JSON after all
    }
  }
  const word = /^([\w.:/-]{1,40})\s*\(/.exec(t);
  return word ? word[1] : null;
}

// summary is the folded block's line.
export function summary(turn, working) {
  const n = turn.steps.length;
  const tools = [...new Set(turn.steps.filter((s) => s.message_type === "tool_call").map(toolName).filter(Boolean))];
  const failed = turn.steps.some((s) => s.message_type === "error");
  const first = new Date(turn.steps[0].inserted_at);
  const last = new Date(turn.steps[n - 1].inserted_at);
  const parts = [`${n} step${n === 1 ? "" : "s"}`];
  if (tools.length) parts.push(`tools: ${tools.slice(0, 4).join(", ")}${tools.length > 4 ? ` +${tools.length - 4}` : ""}`);
  if (n > 1) parts.push(duration(last - first));
  return { text: `${turn.name || "Agent"} ${working ? "is working" : "worked"}: ${parts.join(" · ")}`, failed };
}

export function duration(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

// renderTurn answers the block's element. open says whether it starts
// unfolded; render(msg, where) renders a step (where is "error" for the
// copy of an error shown under a folded block); onToggle(open) keeps the person's
// choice.
export function renderTurn(turn, { open, working, render, onToggle }) {
  const { text, failed } = summary(turn, working);
  const steps = h("div", { class: "steps" }, turn.steps.map(render));
  const errors = h("div", { class: "turn-errors" });
  const showErrors = (isOpen) => {
    errors.replaceChildren(...(isOpen ? [] : turn.steps.filter((s) => s.message_type === "error").map((s) => render(s, "error"))));
  };
  const details = h("details", { open },
    h("summary", {},
      working ? h("span", { class: "spinner", "aria-hidden": "true" }) : null,
      h("span", {}, text),
      failed ? h("span", { class: "badge failed" }, "failed") : null),
    steps);
  details.addEventListener("toggle", () => {
    showErrors(details.open);
    // Created open, a block fires a toggle of its own: only a change from
    // how it was made is the person's.
    if (details.open === open) return;
    onToggle(details.open);
  });
  showErrors(open);
  return h("section", { class: `turn${failed ? " failed" : ""}${working ? " working" : ""}`, dataset: { turn: turn.id, sender: turn.sender } },
    details, errors);
}
