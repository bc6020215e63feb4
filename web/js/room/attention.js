// The room's attention messages (an agent asking a person a question,
// stating an assumption, reporting a failure, asking for a review) in one
// list in the side panel, open ones first: "Open" shows the message in the
// room, "Mark done" puts it away for this person. An attention message an
// agent resolved (a later event whose metadata.resolves names it) is done
// for everyone.
//
// Done marks are each person's own, kept by the server (chatd's attention
// marks: PUT and DELETE …/messages/{id}/done, GET …/done).

import { h, replace } from "../dom.js";
import { relTimeEl } from "../time.js";
import { plain } from "../markdown.js";

export class AttentionList {
  constructor(ctx, roomId, { reveal }) {
    this.ctx = ctx;
    this.roomId = roomId;
    this.reveal = reveal;
    this.items = new Map(); // id -> msg
    this.resolved = new Set();
    this.done = new Set(); // the messages this person marked done
    this.list = h("ul", { class: "attention-list" });
    this.count = h("span", { class: "count" });
    this.showDone = false;
    this.toggle = h("button", { type: "button", class: "link", onclick: () => {
      this.showDone = !this.showDone;
      this.render();
    } }, "Show done");
    this.el = h("section", { "aria-labelledby": `a-${roomId}`, class: "attention-panel" },
      h("h2", { id: `a-${roomId}`, tabindex: "-1" }, "Attention ", this.count), this.list, this.toggle);
  }

  base() {
    return `/api/v1/me/chats/${this.ctx.esc(this.roomId)}`;
  }

  async load() {
    const [{ items }, marks] = await Promise.all([
      this.ctx.api.page(`${this.base()}/messages`, { message_type: "attention", limit: 100 }),
      this.ctx.api.get(`${this.base()}/done`),
    ]);
    this.items.clear();
    for (const m of items) this.items.set(m.id, m);
    this.done = new Set((marks || []).map((x) => x.message_id));
    this.render();
  }

  add(m) {
    if (m.metadata && m.metadata.resolves) this.resolved.add(m.metadata.resolves);
    if (m.message_type !== "attention") return;
    this.items.set(m.id, m);
    this.render();
  }

  update(m) {
    if (!this.items.has(m.id)) return;
    this.items.set(m.id, { ...this.items.get(m.id), ...m });
    this.render();
  }

  isDone(m) {
    return this.done.has(m.id) || this.resolved.has(m.id) || Boolean(m.deleted_at);
  }

  async mark(m, done) {
    const path = `${this.base()}/messages/${this.ctx.esc(m.id)}/done`;
    try {
      if (done) await this.ctx.api.put(path);
      else await this.ctx.api.del(path);
    } catch (e) {
      this.ctx.notify(`Could not ${done ? "mark it done" : "reopen it"}: ${e.message}`, "error");
      return;
    }
    if (done) this.done.add(m.id);
    else this.done.delete(m.id);
    this.render();
  }

  render() {
    for (const m of this.items.values()) if (m.metadata && m.metadata.resolves) this.resolved.add(m.metadata.resolves);
    const all = [...this.items.values()].sort((a, b) => (a.inserted_at < b.inserted_at ? 1 : -1));
    const open = all.filter((m) => !this.isDone(m));
    const shown = this.showDone ? all : open;
    replace(this.count, open.length ? h("span", { class: "unread" }, String(open.length)) : "");
    this.toggle.textContent = this.showDone ? "Hide done" : "Show done";
    this.toggle.hidden = open.length === all.length && !this.showDone;
    replace(this.list, shown.length ? shown.map((m) => {
      const done = this.isDone(m);
      const kind = (m.metadata && m.metadata.kind) || "question";
      const text = plain(m.content).slice(0, 140);
      return h("li", { class: `attention-item${done ? " done" : ""}`, dataset: { id: m.id } },
        h("p", {}, h("strong", {}, m.sender_name), ` (${kind}) `, relTimeEl(m.inserted_at)),
        h("p", { class: "attention-text" }, text),
        h("div", { class: "row" },
          h("button", { type: "button", class: "secondary", "aria-label": `Open: ${text}`, onclick: () => this.reveal(m.id) }, "Open"),
          this.resolved.has(m.id) ? h("span", { class: "muted" }, "resolved by the agent")
            : h("button", { type: "button", class: "secondary", "aria-label": `${done ? "Reopen" : "Mark done"}: ${text}`,
              onclick: () => this.mark(m, !done) }, done ? "Reopen" : "Mark done")));
    }) : h("li", { class: "muted" }, "Nothing needs your attention."));
  }
}
