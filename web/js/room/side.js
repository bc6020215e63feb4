// The room's side panel: who is in it (add from the peers not yet in the
// room, remove), and the board goal with its history of edits.

import { h, replace, field, busy, errorBox, showError } from "../dom.js";
import { confirmDialog } from "../ui.js";
import { when, timeEl } from "../time.js";

export class Participants {
  constructor(ctx, roomId, onChange) {
    this.ctx = ctx;
    this.roomId = roomId;
    this.onChange = onChange;
    this.items = [];
    this.list = h("ul", { "aria-label": "Participants" });
    this.peers = h("select", { name: "peer" });
    this.err = errorBox();
    this.form = h("form", { class: "stack" }, field("Add participant", this.peers), this.err,
      h("button", { type: "submit", class: "secondary" }, "Add"));
    this.form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.add();
    });
    this.el = h("section", { "aria-labelledby": `p-${roomId}` },
      h("h2", { id: `p-${roomId}`, tabindex: "-1" }, "Participants"), this.list, this.form);
  }

  base() {
    return `/api/v1/me/chats/${this.ctx.esc(this.roomId)}/participants`;
  }

  async load() {
    const { items } = await this.ctx.api.page(this.base(), { limit: 100 });
    this.items = items;
    replace(this.list, items.map((p) => h("li", { dataset: { participant: p.id } },
      h("span", {}, h("span", { class: "dot", "aria-hidden": "true" }), p.name, " ", h("span", { class: "muted" },
        `${p.type === "Agent" ? "agent" : "person"}${p.role === "owner" ? ", owner" : ""}`),
      p.type === "Agent" ? h("span", { class: "agent-status" }) : null),
      p.id === this.ctx.me.id ? null : h("button", {
        type: "button", class: "link", "aria-label": `Remove ${p.name}`, onclick: () => this.remove(p),
      }, "Remove"))));
    this.onChange(items);
    await this.loadPeers();
  }

  // decorate shows each agent's state and presence (agents.js).
  decorate(states) {
    for (const li of this.list.querySelectorAll("li[data-participant]")) {
      const id = li.dataset.participant;
      const seen = states.seen(id);
      li.classList.toggle("online", seen.connected);
      const status = li.querySelector(".agent-status");
      if (status) status.textContent = `${states.describe(id)} · ${seen.text}`;
    }
  }

  async loadPeers() {
    const { items } = await this.ctx.api.page("/api/v1/me/peers", { not_in_chat: this.roomId, page_size: 100 }, { page: 1 });
    replace(this.peers, items.length
      ? [h("option", { value: "" }, "Choose…"), items.map((p) => h("option", { value: p.id }, `${p.name} (@${p.handle})`))]
      : h("option", { value: "" }, "Nobody else to add"));
    this.form.querySelector("button").disabled = !items.length;
  }

  async add() {
    showError(this.err, null);
    if (!this.peers.value) {
      showError(this.err, new Error("Choose someone to add."));
      return;
    }
    try {
      await busy(this.form, () => this.ctx.api.post(this.base(), { participant: { participant_id: this.peers.value } }));
      await this.load();
    } catch (e) {
      showError(this.err, e);
    }
  }

  async remove(p) {
    const removed = await confirmDialog({
      title: `Remove ${p.name} from this room?`,
      text: p.type === "Agent" ? "The agent stops receiving this room's messages." : "They lose access to this room.",
      confirm: "Remove",
      action: async () => {
        await this.ctx.api.del(`${this.base()}/${this.ctx.esc(p.id)}`);
        return true;
      },
    });
    if (removed) await this.load().catch((e) => this.ctx.notify(e.message, "error"));
  }
}

export class Board {
  constructor(ctx, roomId) {
    this.ctx = ctx;
    this.roomId = roomId;
    this.view = h("div");
    this.title = h("input", { name: "goal_title", maxlength: 200 });
    this.summary = h("textarea", { name: "goal_summary", rows: 3 });
    this.err = errorBox();
    this.form = h("form", { class: "stack", hidden: true },
      field("Goal", this.title), field("Summary", this.summary), this.err,
      h("div", { class: "row" }, h("button", { type: "submit" }, "Save goal"),
        h("button", { type: "button", class: "secondary", onclick: () => { this.form.hidden = true; } }, "Cancel")));
    this.form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.save();
    });
    this.edit = h("button", { type: "button", class: "secondary", onclick: () => this.open() }, "Edit goal");
    this.history = h("details", {});
    this.tasks = h("ul", { class: "tasks", "aria-label": "Tasks" });
    this.el = h("section", { "aria-labelledby": `b-${roomId}` },
      h("h2", { id: `b-${roomId}` }, "Board"), this.view, this.edit, this.form, this.history,
      h("h3", {}, "Tasks"), this.tasks);
  }

  path() {
    return `/api/v1/me/chats/${this.ctx.esc(this.roomId)}/board`;
  }

  // loadTasks shows the room's tasks, by number, each with its state and
  // where each assignee is with it.
  async loadTasks() {
    const { items } = await this.ctx.api.page(`/api/v1/me/chats/${this.ctx.esc(this.roomId)}/tasks`, { state: "all", limit: 100 });
    replace(this.tasks, items.length ? items.map((t) => h("li", { class: `task-item state-${t.state}`, dataset: { task: t.id } },
      h("span", {}, h("strong", {}, `#${t.number}`), " ", t.subject),
      h("span", { class: "muted task-state" }, [t.state === "active" ? t.overall_status.replace(/_/g, " ") : t.state,
        ...t.assignments.map((a) => ` · ${a.assignee.name || "someone"}: ${a.status.replace(/_/g, " ")}`)].join("")))) :
      h("li", { class: "muted" }, "No tasks yet. Agents add them as they plan."));
  }

  async load() {
    this.loadTasks().catch((e) => replace(this.tasks, h("li", { class: "error" }, e.message)));
    const b = await this.ctx.api.get(`${this.path()}?include=history`);
    this.board = b;
    replace(this.view, b.goal_title
      ? [h("p", {}, h("strong", {}, b.goal_title)), b.goal_summary ? h("p", {}, b.goal_summary) : null,
        h("p", { class: "hint" }, `Set by ${(b.updated_by && b.updated_by.name) || "someone"} ${when(b.updated_at)}`)]
      : h("p", { class: "muted" }, "No goal yet."));
    const events = b.history || [];
    replace(this.history, h("summary", {}, `History (${events.length}${b.history_truncated ? "+" : ""})`),
      events.length ? h("ol", { class: "board-history" }, events.slice().reverse().map((e) =>
        h("li", {}, timeEl(e.at), " ",
          (e.actor && e.actor.name) || "someone", ": ", describe(e)))) : h("p", { class: "muted" }, "No changes yet."));
  }

  open() {
    this.title.value = (this.board && this.board.goal_title) || "";
    this.summary.value = (this.board && this.board.goal_summary) || "";
    this.form.hidden = false;
    this.title.focus();
  }

  async save() {
    showError(this.err, null);
    try {
      await busy(this.form, () => this.ctx.api.put(this.path(),
        { goal_title: this.title.value.trim() || null, goal_summary: this.summary.value.trim() || null }));
      this.form.hidden = true;
      await this.load();
    } catch (e) {
      showError(this.err, e);
    }
  }
}

// describe puts one board event into words: which fields went from what
// to what.
function describe(e) {
  const changes = Object.entries(e.payload || {}).map(([k, v]) => {
    const label = k === "goal_title" ? "goal" : k === "goal_summary" ? "summary" : k.replace(/_/g, " ");
    if (v && typeof v === "object" && "to" in v) return v.to === null ? `cleared the ${label}` : `set the ${label} to “${v.to}”`;
    return label;
  });
  return changes.length ? changes.join(", ") : e.event.replace(/_/g, " ");
}
