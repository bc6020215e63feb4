// The message list of one room: the newest page first, older pages as the
// person scrolls up (or presses "Load earlier messages"), new ones live
// from the chat_room channel. Messages are keyed by id, so a push that
// races a page load, or a reload after reconnecting, never shows one twice.

import { h, replace } from "../dom.js";
import { renderMessage, mergeUpdate } from "./message.js";

const PAGE = 30;
// revealPages bounds how far back a search result's message is looked for.
const revealPages = 20;

export class Timeline {
  constructor(ctx, roomId, { names, onNew }) {
    this.ctx = ctx;
    this.roomId = roomId;
    this.names = names;
    this.onNew = onNew;
    this.byId = new Map(); // id -> {msg, el}
    this.next = null;
    this.loading = false;
    this.list = h("div", { class: "messages", role: "log", "aria-label": "Messages", tabindex: "0" });
    this.top = h("div", { class: "history-end" });
    this.earlier = h("button", { type: "button", class: "link", onclick: () => this.loadOlder() }, "Load earlier messages");
    this.list.append(this.top);
    this.list.addEventListener("scroll", () => {
      if (this.list.scrollTop < 80) this.loadOlder();
    });
  }

  path() {
    return `/api/v1/me/chats/${this.ctx.esc(this.roomId)}/messages`;
  }

  // loadNewest (re)loads the newest page: at first, and after reconnecting
  // to catch up on what was pushed while away.
  async loadNewest() {
    const first = this.byId.size === 0;
    const { items, next } = await this.ctx.api.page(this.path(), { limit: PAGE });
    if (first) this.next = next;
    const stick = first || this.nearBottom();
    for (const m of items.reverse()) this.upsert(m, { live: false });
    this.updateTop();
    if (stick) this.scrollToBottom();
  }

  async loadOlder() {
    if (this.loading || !this.next) return;
    this.loading = true;
    const before = this.list.scrollHeight - this.list.scrollTop;
    try {
      const { items, next } = await this.ctx.api.page(this.path(), { limit: PAGE }, this.next);
      this.next = next;
      for (const m of items) this.prepend(m);
      this.list.scrollTop = this.list.scrollHeight - before;
    } catch (err) {
      this.ctx.notify(`Could not load earlier messages: ${err.message}`, "error");
    } finally {
      this.loading = false;
      this.updateTop();
    }
  }

  // reveal scrolls to the message id, loading earlier pages until it is
  // shown (at most revealPages of them), marks it and moves the focus to
  // it; it answers whether the message was found.
  async reveal(id) {
    for (let n = 0; !this.byId.has(id) && this.next && n < revealPages; n++) await this.loadOlder();
    const held = this.byId.get(id);
    if (!held) return false;
    for (const el of this.list.querySelectorAll("article.msg.found")) el.classList.remove("found");
    held.el.classList.add("found");
    held.el.tabIndex = -1;
    held.el.scrollIntoView({ block: "center" });
    held.el.focus({ preventScroll: true });
    return true;
  }

  updateTop() {
    replace(this.top, this.next ? this.earlier : "This is the beginning of the room.");
  }

  render(msg) {
    return renderMessage(msg, { meId: this.ctx.me.id, names: this.names, download: (a) => this.download(a) });
  }

  prepend(msg) {
    if (this.byId.has(msg.id)) return;
    const el = this.render(msg);
    this.byId.set(msg.id, { msg, el });
    this.top.after(el);
  }

  // upsert adds a message at the end, or refreshes the one held.
  upsert(msg, { live }) {
    const held = this.byId.get(msg.id);
    if (held) {
      const merged = mergeUpdate(held.msg, msg);
      const el = this.render(merged);
      held.el.replaceWith(el);
      this.byId.set(msg.id, { msg: merged, el });
      return;
    }
    const stick = this.nearBottom();
    const el = this.render(msg);
    this.byId.set(msg.id, { msg, el });
    this.list.append(el);
    if (live) {
      if (stick || msg.sender_id === this.ctx.me.id) this.scrollToBottom();
      this.onNew(msg);
    }
  }

  // update applies a message_updated push to a message we show.
  update(msg) {
    if (this.byId.has(msg.id)) this.upsert(msg, { live: false });
  }

  // refreshNames re-renders after the participant names changed.
  refreshNames() {
    for (const [id, held] of this.byId) {
      const el = this.render(held.msg);
      held.el.replaceWith(el);
      this.byId.set(id, { msg: held.msg, el });
    }
  }

  nearBottom() {
    return this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight < 120;
  }

  scrollToBottom() {
    this.list.scrollTop = this.list.scrollHeight;
  }

  newestId() {
    let last = null;
    for (const el of this.list.querySelectorAll("article.msg")) last = el.dataset.id;
    return last;
  }

  // download fetches an attachment with the session's credentials and
  // hands it to the browser as a file.
  async download(a) {
    try {
      const blob = await this.ctx.api.blob(`/api/v1/me/chats/${this.ctx.esc(this.roomId)}/files/${this.ctx.esc(a.id)}`);
      const url = URL.createObjectURL(blob);
      const link = h("a", { href: url, download: a.name, hidden: true });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (err) {
      this.ctx.notify(`Could not download ${a.name}: ${err.message}`, "error");
    }
  }
}
