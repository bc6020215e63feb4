// The room's attention messages (an agent asking a person a question,
// stating an assumption, reporting a failure, asking for a review) in one
// list in the side panel, open ones first: "Open" shows the message in the
// room, "Mark done" puts it away for this person. An attention message an
// agent resolved (a later event whose metadata.resolves names it) is done
// for everyone.
//
// Done marks are kept per person on the server when it offers chatd's
// attention extension (PUT …/messages/{id}/done), else in this browser.

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

  key() {
    return `chatd.attentionDone.${this.ctx.me.id}`;
  }

  doneSet() {
    return new Set(JSON.parse(localStorage.getItem(this.key()) || "[]"));
  }

  async load() {
    const { items } = await this.ctx.api.page(`/api/v1/me/chats/${this.ctx.esc(this.roomId)}/messages`, { message_type: "attention", limit: 100 });
    this.items.clear();
    for (const m of items) this.items.set(m.id, m);
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
    return this.doneSet().has(m.id) || this.resolved.has(m.id) || Boolean(m.deleted_at);
  }

  mark(m, done) {
    const set = this.doneSet();
    if (done) set.add(m.id);
    else set.delete(m.id);
    localStorage.setItem(this.key(), JSON.stringify([...set]));
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
