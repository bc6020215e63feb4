// What each agent of the room is doing, at a glance: idle, queued (messages
// for it wait), working (since when) or failed, from the delivery states of
// the messages shown (pushed live as message_updated) and the agents'
// "working" reports; and whether it is connected now, or when it was last
// seen, from chatd's presence extension (GET …/presence, and the presence
// push on room_participants). A silent agent and a dead one look different.

import { h } from "../dom.js";
import { ago, exactly } from "../time.js";
import { duration } from "./turns.js";

export class AgentStates {
  constructor() {
    this.presence = new Map(); // id -> {connected, last_seen_at}
    this.states = new Map(); // id -> {state, since, queued, error}
    this.agents = [];
  }

  setPresence(list) {
    for (const p of list) this.presence.set(p.id, p);
  }

  // compute reads the states from the messages (oldest first) and the
  // participants.
  compute(messages, participants) {
    this.agents = participants.filter((p) => p.type === "Agent");
    const states = new Map();
    for (const a of this.agents) states.set(a.id, { state: "idle", since: null, queued: 0, error: null });
    for (const m of messages) {
      const ds = (m.metadata && m.metadata.delivery_status) || {};
      for (const [id, d] of Object.entries(ds)) {
        const s = states.get(id);
        if (!s || m.deleted_at) continue;
        const attempts = Array.isArray(d.attempts) ? d.attempts : [];
        const last = attempts[attempts.length - 1];
        if (d.status === "processing") {
          s.working = true;
          s.since = (last && last.started_at) || m.inserted_at;
        } else if (d.status === "pending" || d.status === "delivered") {
          s.queued += 1;
        }
        // The newest message settled for the agent says how its last
        // work ended.
        if (d.status === "failed") s.error = (last && last.error) || "failed";
        else if (d.status === "processed") s.error = null;
      }
    }
    for (const a of this.agents) {
      const s = states.get(a.id);
      if (s.working || a.working) s.state = "working";
      else if (s.queued) s.state = "queued";
      else if (s.error) s.state = "failed";
    }
    this.states = states;
  }

  working(id) {
    const s = this.states.get(id);
    return Boolean(s && s.state === "working");
  }

  // describe is one agent's state in words.
  describe(id) {
    const s = this.states.get(id) || { state: "idle" };
    switch (s.state) {
      case "working":
        return s.since ? `working for ${duration(Date.now() - new Date(s.since).getTime())}` : "working";
      case "queued":
        return `${s.queued} message${s.queued === 1 ? "" : "s"} waiting`;
      case "failed":
        return "failed on its last message";
      default:
        return "idle";
    }
  }

  // seen says whether the agent is connected, or when it was last seen.
  seen(id) {
    const p = this.presence.get(id);
    if (!p) return { connected: false, text: "presence unknown" };
    if (p.connected) return { connected: true, text: "connected" };
    return { connected: false, text: p.last_seen_at ? `last seen ${ago(p.last_seen_at)}` : "never connected", at: p.last_seen_at };
  }

  // chips answers the header's line of agents: a dot for presence and
  // the state, for each agent of the room.
  chips() {
    return this.agents.map((a) => {
      const s = this.states.get(a.id) || { state: "idle" };
      const seen = this.seen(a.id);
      const label = `${a.name}: ${this.describe(a.id)}, ${seen.text}`;
      return h("span", {
        class: `agent-chip state-${s.state}${seen.connected ? " online" : ""}`, dataset: { agent: a.id },
        title: s.error && s.state === "failed" ? `${label}: ${s.error}` : seen.at ? `${label} (${exactly(seen.at)})` : label,
        role: "status", "aria-label": label,
      }, h("span", { class: "dot", "aria-hidden": "true" }), h("span", { class: "agent-name" }, a.name),
      h("span", { class: "agent-state" }, this.describe(a.id)));
    });
  }
}
