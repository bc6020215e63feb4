// The message list of one room: the newest page first, older pages as the
// person scrolls up, new ones live from the chat_room channel. Messages
// are held by id, so a push that races a page load, or a reload after
// reconnecting, never shows one twice.
//
// What is shown is recomputed from the messages held (turns.js cuts them
// into day separators, the unread divider, messages and agents' turns) at
// most once a frame, reusing each message's element until it changes; the
// person's place is kept across a render by the element at the top of the
// view. Off-screen blocks are skipped by the browser's layout
// (content-visibility in app.css), so a long history scrolls smoothly.

import { h } from "../dom.js";
import { refreshTimes, dayLabel } from "../time.js";
import { renderMessage, mergeUpdate } from "./message.js";
import { blocks, renderTurn, isStep } from "./turns.js";

const PAGE = 50;
// revealPages bounds how far back a message is looked for.
const revealPages = 40;
// A turn whose last step is this recent is shown working even before the
// agent's delivery state says so.
const liveStepMs = 20000;

// unreadTypes are the types the server counts as unread (store/reads.go).
const unreadTypes = new Set(["text", "attention", "error"]);

export class Timeline {
  constructor(ctx, roomId, { names, onNew, files, act, working, owner }) {
    this.ctx = ctx;
    this.roomId = roomId;
    this.names = names;
    this.onNew = onNew;
    this.files = files;
    this.act = act;
    this.working = working; // agent id -> bool
    this.owner = owner;
    this.byId = new Map(); // id -> msg
    this.els = new Map(); // id -> element, until the message changes
    this.openTurns = new Map(); // turn id -> the person's choice
    this.showAll = localStorage.getItem("chatd.showSteps") === "1";
    this.firstUnread = null;
    this.next = null;
    this.loading = false;
    this.frame = 0;
    this.top = h("div", { class: "history-end" });
    this.body = h("div", { class: "timeline" });
    this.list = h("div", { class: "messages", role: "log", "aria-label": "Messages", tabindex: "0" }, this.top, this.body);
    this.earlier = h("button", { type: "button", class: "link", onclick: () => this.loadOlder() }, "Load earlier messages");
    // While the person is at the end, the end is where the view stays,
    // whatever grows above it (a block the browser lays out late, an
    // image, a new message).
    this.stuck = true;
    this.list.addEventListener("scroll", () => {
      this.stuck = this.nearBottom();
      if (this.list.scrollTop < 200) this.loadOlder();
      if (this.onScroll) this.onScroll();
    }, { passive: true });
    this.resize = new ResizeObserver(() => {
      if (this.stuck) this.scrollToBottom();
    });
    this.resize.observe(this.body);
    this.resize.observe(this.list);
    this.clock = setInterval(() => refreshTimes(this.list), 30000);
  }

  path() {
    return `/api/v1/me/chats/${this.ctx.esc(this.roomId)}/messages`;
  }

  // loadNewest (re)loads the newest page: at first, and after reconnecting
  // to catch up on what was pushed while away. unread (at first) is the
  // room's unread count, for the divider.
  async loadNewest(unread = 0) {
    const first = this.byId.size === 0;
    const { items, next } = await this.ctx.api.page(this.path(), { limit: PAGE });
    if (first) this.next = next;
    const stick = first || this.stuck;
    for (const m of items) this.put(m);
    if (first && unread) this.firstUnread = this.findFirstUnread(unread);
    this.renderNow();
    if (stick) this.scrollToBottom();
  }

  // findFirstUnread is the id of the oldest of the last n messages that
  // count as unread, which is where the person's read marker was.
  findFirstUnread(n) {
    const sorted = this.sorted();
    let seen = 0;
    for (let i = sorted.length - 1; i >= 0; i--) {
      const m = sorted[i];
      if (m.sender_id === this.ctx.me.id || !unreadTypes.has(m.message_type)) continue;
      if (++seen === n) return m.id;
    }
    return sorted.length ? sorted[0].id : null;
  }

  async loadOlder() {
    if (this.loading || !this.next) return;
    this.loading = true;
    try {
      const { items, next } = await this.ctx.api.page(this.path(), { limit: PAGE }, this.next);
      this.next = next;
      for (const m of items) this.put(m);
      this.renderNow();
    } catch (err) {
      this.ctx.notify(`Could not load earlier messages: ${err.message}`, "error");
    } finally {
      this.loading = false;
    }
  }

  // reveal scrolls to the message id, loading earlier pages until it is
  // held (at most revealPages of them), unfolds the turn it is in, marks
  // it and moves the focus to it; it answers whether it was found.
  async reveal(id) {
    for (let n = 0; !this.byId.has(id) && this.next && n < revealPages; n++) await this.loadOlder();
    const msg = this.byId.get(id);
    if (!msg) return false;
    const turn = this.body.querySelector(`[data-turn] article[data-id="${CSS.escape(id)}"]`);
    if (turn) {
      const section = turn.closest("[data-turn]");
      this.openTurns.set(section.dataset.turn, true);
      this.renderNow();
    }
    const el = this.body.querySelector(`article.msg[data-id="${CSS.escape(id)}"]`);
    if (!el) return false;
    for (const f of this.list.querySelectorAll("article.msg.found")) f.classList.remove("found");
    el.classList.add("found");
    el.tabIndex = -1;
    this.stuck = false;
    el.scrollIntoView({ block: "center" });
    el.focus({ preventScroll: true });
    return true;
  }

  put(msg) {
    const held = this.byId.get(msg.id);
    this.byId.set(msg.id, held ? mergeUpdate(held, msg) : msg);
    for (const key of [msg.id, `c:${msg.id}`, `cerror:${msg.id}`]) this.els.delete(key);
  }

  // upsert takes a pushed message: a new one is added at the end (and
  // scrolled to when the person was at the end), a held one refreshed.
  upsert(msg, { live }) {
    const isNew = !this.byId.has(msg.id);
    const stick = this.stuck;
    this.put(msg);
    this.schedule(() => {
      if (isNew && live && (stick || msg.sender_id === this.ctx.me.id)) this.scrollToBottom();
    });
    if (isNew && live) this.onNew(msg);
  }

  // update applies a message_updated push to a message we hold.
  update(msg) {
    if (this.byId.has(msg.id)) {
      this.put(msg);
      this.schedule();
    }
  }

  // refresh re-renders every message (names or states changed).
  refresh() {
    this.els.clear();
    this.schedule();
  }

  setShowAll(on) {
    this.showAll = on;
    this.openTurns.clear();
    localStorage.setItem("chatd.showSteps", on ? "1" : "0");
    this.renderNow();
  }

  sorted() {
    return [...this.byId.values()].sort((a, b) => (a.inserted_at < b.inserted_at ? -1 : a.inserted_at > b.inserted_at ? 1 : a.id < b.id ? -1 : 1));
  }

  schedule(after) {
    if (after) (this.afterRender ||= []).push(after);
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => this.renderNow());
  }

  messageEl(msg, compact, where = "") {
    const key = compact ? `c${where}:${msg.id}` : msg.id;
    let el = this.els.get(key);
    if (!el) {
      el = renderMessage(msg, { meId: this.ctx.me.id, names: this.names, files: this.files, act: this.act, compact, owner: this.owner() });
      this.els.set(key, el);
    }
    return el;
  }

  renderNow() {
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    const anchor = this.stuck ? null : this.anchor();
    const sorted = this.sorted();
    const list = blocks(sorted, this.firstUnread);
    const lastOf = new Map();
    for (const b of list) if (b.kind === "turn") lastOf.set(b.sender, b);
    const lastBlock = list[list.length - 1];
    const els = list.map((b) => {
      switch (b.kind) {
        case "day":
          return h("div", { class: "day", role: "separator", "aria-label": dayLabel(b.date) }, h("span", {}, dayLabel(b.date)));
        case "unread":
          return h("div", { class: "unread-divider", id: `unread-${this.roomId}`, role: "separator", "aria-label": "New since you last read" },
            h("span", {}, "New"));
        case "turn": {
          const last = b.steps[b.steps.length - 1];
          const working = lastOf.get(b.sender) === b && (this.working(b.sender) ||
            (b === lastBlock && Date.now() - new Date(last.inserted_at).getTime() < liveStepMs));
          const open = this.openTurns.has(b.id) ? this.openTurns.get(b.id) : this.showAll || working;
          return renderTurn(b, {
            open, working,
            render: (m, where) => this.messageEl(m, true, where),
            onToggle: (isOpen) => this.openTurns.set(b.id, isOpen),
          });
        }
        default:
          return this.messageEl(b.msg, false);
      }
    });
    this.body.replaceChildren(...els);
    this.top.replaceChildren(this.next ? this.earlier : "This is the beginning of the room.");
    if (anchor) this.restore(anchor);
    const after = this.afterRender || [];
    this.afterRender = null;
    for (const fn of after) fn();
    if (this.rendered) this.rendered();
  }

  // anchor is the message at the top of the view and how far from it the
  // view starts, to come back to after a render.
  anchor() {
    const top = this.list.getBoundingClientRect().top;
    for (const el of this.body.querySelectorAll("article.msg[data-id], section.turn")) {
      const r = el.getBoundingClientRect();
      if (r.bottom > top) return { el, offset: r.top - top };
    }
    return null;
  }

  restore({ el, offset }) {
    if (!el.isConnected) return;
    const top = this.list.getBoundingClientRect().top;
    this.list.scrollTop += el.getBoundingClientRect().top - top - offset;
  }

  nearBottom() {
    return this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight < 120;
  }

  scrollToBottom() {
    this.stuck = true;
    this.list.scrollTop = this.list.scrollHeight;
  }

  // newestId is the newest message held, which reading the room marks.
  newestId() {
    const sorted = this.sorted();
    return sorted.length ? sorted[sorted.length - 1].id : null;
  }

  messages() {
    return this.sorted();
  }

  // stepsOf answers whether msg is a step of an agent's turn.
  static isStep(msg) {
    return isStep(msg);
  }

  close() {
    this.resize.disconnect();
    clearInterval(this.clock);
    cancelAnimationFrame(this.frame);
  }
}
