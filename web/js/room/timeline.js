// The message list of one room: the newest page first, older pages as the
// person scrolls up, new ones live from the chat_room channel. Messages
// are held by id, so a push that races a page load, or a reload after
// reconnecting, never shows one twice.
//
// What is shown is worked out from the messages held (turns.js cuts them
// into day separators, the unread divider, messages and agents' turns) at
// most once a frame. Only the blocks near the view are in the page (a
// window of them, window.js), between two spacers as tall as the blocks
// they stand for, so a room of ten thousand messages costs the browser what
// a room of a hundred does; each block's element is kept until what it
// shows changes. The person's place is kept across a render by the block at
// the top of the view.

import { h } from "../dom.js";
import { refreshTimes, dayLabel } from "../time.js";
import { renderMessage, mergeUpdate } from "./message.js";
import { blocks, renderTurn, isStep } from "./turns.js";
import { BlockWindow } from "./window.js";

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
    this.order = null; // ids, oldest first, until a message is added
    this.els = new Map(); // message elements, until the message changes
    this.blockEls = new Map(); // separators' and turns' elements, by what they show
    this.usedKeys = new Set();
    this.versions = new Map(); // id -> how many times the message changed
    this.epoch = 0; // counts refresh(): every element made anew
    this.openTurns = new Map(); // turn id -> the person's choice
    this.showAll = localStorage.getItem("chatd.showSteps") === "1";
    this.firstUnread = null;
    this.next = null;
    this.loading = false;
    this.frame = 0;
    this.pin = null; // a block key the next render must show
    this.top = h("div", { class: "history-end" });
    this.view = new BlockWindow();
    this.body = this.view.body;
    this.list = h("div", { class: "messages", role: "log", "aria-label": "Messages", tabindex: "0" },
      this.top, this.view.before, this.body, this.view.after);
    this.earlier = h("button", { type: "button", class: "link", onclick: () => this.loadOlder() }, "Load earlier messages");
    // While the person is at the end, the end is where the view stays,
    // whatever grows above it (a block laid out late, an image, a new
    // message).
    this.stuck = true;
    this.list.addEventListener("scroll", () => this.scrolled(), { passive: true });
    this.resize = new ResizeObserver(() => {
      if (this.stuck) this.scrollToBottom();
    });
    this.resize.observe(this.body);
    this.resize.observe(this.list);
    // Earlier messages load while the top of the history is near, again
    // and again until it is not (a page may not fill the view).
    this.topSeen = false;
    this.topWatch = new IntersectionObserver(([e]) => {
      this.topSeen = e.isIntersecting;
      if (this.topSeen) this.loadOlder();
    }, { root: this.list, rootMargin: "600px 0px 0px 0px" });
    this.topWatch.observe(this.top);
    this.clock = setInterval(() => refreshTimes(this.list), 30000);
  }

  path() {
    return `/api/v1/me/chats/${this.ctx.esc(this.roomId)}/messages`;
  }

  scrolled() {
    this.stuck = this.nearBottom();
    if (this.list.scrollTop < 200) this.loadOlder();
    // Scrolled past what the window holds: the next frame moves it.
    if (this.view.needsMove(this.list)) this.schedule();
    if (this.onScroll) this.onScroll();
  }

  // loadNewest (re)loads the newest page: at first, and after reconnecting
  // to catch up on what was pushed while away. unread (at first) is the
  // room's unread count, for the divider.
  async loadNewest(unread = 0) {
    const first = !this.loadedOnce;
    this.loadedOnce = true;
    const { items, next } = await this.ctx.api.page(this.path(), { limit: PAGE });
    if (first) this.next = next;
    const stick = first || this.stuck;
    for (const m of items) this.put(m);
    if (first) this.unread = unread;
    this.placeUnread();
    this.renderNow();
    if (stick) this.scrollToBottom();
  }

  // placeUnread puts the New divider before the oldest of the last
  // this.unread messages that count as unread, which is where the person's
  // read marker was. While that one is older than what is held, the
  // divider stands above everything held (all of it is new) and moves up
  // as earlier pages load.
  placeUnread() {
    if (!this.unread) return;
    const sorted = this.sorted();
    let seen = 0;
    for (let i = sorted.length - 1; i >= 0; i--) {
      const m = sorted[i];
      if (m.sender_id === this.ctx.me.id || !unreadTypes.has(m.message_type)) continue;
      if (++seen === this.unread) {
        this.firstUnread = m.id;
        this.unread = 0;
        return;
      }
    }
    this.firstUnread = sorted.length ? sorted[0].id : null;
    if (!this.next) this.unread = 0;
  }

  // loadBack loads earlier pages while want() holds, at most revealPages
  // of them.
  async loadBack(want) {
    for (let n = 0; want() && this.next && n < revealPages; n++) await this.loadOlder();
  }

  async loadOlder() {
    if (this.loading || !this.next) return;
    this.loading = true;
    try {
      const { items, next } = await this.ctx.api.page(this.path(), { limit: PAGE }, this.next);
      this.next = next;
      for (const m of items) this.put(m);
      this.placeUnread();
      this.renderNow();
    } catch (err) {
      this.ctx.notify(`Could not load earlier messages: ${err.message}`, "error");
    } finally {
      this.loading = false;
    }
    if (this.topSeen && this.next) requestAnimationFrame(() => this.loadOlder());
  }

  // reveal scrolls to the message id, loading earlier pages until it is
  // held (at most revealPages of them), unfolds the turn it is in, marks
  // it and moves the focus to it; it answers whether it was found.
  async reveal(id) {
    await this.loadBack(() => !this.byId.has(id));
    if (!this.byId.has(id)) return false;
    const block = blocks(this.sorted(), this.firstUnread).find((b) => b.key === id || (b.steps && b.steps.some((m) => m.id === id)));
    if (!block) return false;
    if (block.kind === "turn") this.openTurns.set(block.id, true);
    this.pin = block.key;
    this.stuck = false;
    this.renderNow();
    const el = this.body.querySelector(`article.msg[data-id="${CSS.escape(id)}"]`);
    if (!el) return false;
    for (const f of this.list.querySelectorAll("article.msg.found")) f.classList.remove("found");
    el.classList.add("found");
    el.scrollIntoView({ block: "center" });
    el.focus({ preventScroll: true });
    return true;
  }

  // revealUnread scrolls to the New divider, loading earlier pages until
  // the first unread message is held.
  async revealUnread() {
    await this.loadBack(() => this.unread > 0);
    if (!this.firstUnread) return;
    this.pin = "unread";
    this.stuck = false;
    this.renderNow();
    const d = this.body.querySelector(".unread-divider");
    if (d) d.scrollIntoView({ block: "start" });
  }

  // unreadShown says whether the New divider is in the view.
  unreadShown() {
    const d = this.body.querySelector(".unread-divider");
    if (!d) return !this.firstUnread;
    const r = d.getBoundingClientRect();
    const l = this.list.getBoundingClientRect();
    return r.bottom >= l.top && r.top <= l.bottom;
  }

  put(msg) {
    const held = this.byId.get(msg.id);
    if (!held) this.order = null;
    this.versions.set(msg.id, (this.versions.get(msg.id) || 0) + 1);
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
    this.epoch++;
    this.schedule();
  }

  setShowAll(on) {
    this.showAll = on;
    this.openTurns.clear();
    localStorage.setItem("chatd.showSteps", on ? "1" : "0");
    this.renderNow();
  }

  // sorted answers the messages held, oldest first; the order is worked
  // out again only when a message was added.
  sorted() {
    if (!this.order) {
      this.order = [...this.byId.keys()].sort((a, b) => {
        const x = this.byId.get(a).inserted_at;
        const y = this.byId.get(b).inserted_at;
        return x < y ? -1 : x > y ? 1 : a < b ? -1 : 1;
      });
    }
    return this.order.map((id) => this.byId.get(id));
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

  // blockEl answers the element of one block of the list.
  blockEl(b, lastOf, lastBlock) {
    switch (b.kind) {
      case "day":
        return this.cached(`day:${b.key}`, () =>
          h("div", { class: "day", role: "separator", "aria-label": dayLabel(b.date) }, h("span", {}, dayLabel(b.date))));
      case "unread":
        return this.cached("unread", () => h("div", { class: "unread-divider", id: `unread-${this.roomId}`, role: "separator",
          "aria-label": "New since you last read" }, h("span", {}, "New")));
      case "turn": {
        const last = b.steps[b.steps.length - 1];
        const working = lastOf.get(b.sender) === b && (this.working(b.sender) ||
          (b === lastBlock && Date.now() - new Date(last.inserted_at).getTime() < liveStepMs));
        const open = this.openTurns.has(b.id) ? this.openTurns.get(b.id) : this.showAll || working;
        // A turn is made anew only when something it shows changed.
        const sig = `turn:${b.id}:${open}:${working}:${this.epoch}:${b.steps.map((m) => `${m.id}.${this.versions.get(m.id)}`).join(",")}`;
        return this.cached(sig, () => renderTurn(b, {
          open, working,
          render: (m, where) => this.messageEl(m, true, where),
          onToggle: (isOpen) => this.openTurns.set(b.id, isOpen),
        }));
      }
      default:
        return this.messageEl(b.msg, false);
    }
  }

  renderNow() {
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    // Measured (a performance entry per render), for the large-room test.
    const started = performance.now();
    const list = blocks(this.sorted(), this.firstUnread);
    const lastOf = new Map();
    for (const b of list) if (b.kind === "turn") lastOf.set(b.sender, b);
    const lastBlock = list[list.length - 1];
    const place = this.view.place(this.list, list, { stuck: this.stuck, pin: this.pin });
    this.pin = null;
    const els = list.slice(place.start, place.end).map((b) => this.blockEl(b, lastOf, lastBlock));
    this.reconcile(els);
    this.view.settle(this.list, list, place);
    this.top.replaceChildren(this.next ? this.earlier : "This is the beginning of the room.");
    performance.measure("chatd:timeline-render", { start: started, detail: { messages: this.byId.size, shown: els.length } });
    const after = this.afterRender || [];
    this.afterRender = null;
    for (const fn of after) fn();
    if (this.rendered) this.rendered();
  }

  // cached answers the element made for key, making it the first time;
  // elements not used by a render are dropped after it (reconcile).
  cached(key, make) {
    let el = this.blockEls.get(key);
    if (!el) {
      el = make();
      this.blockEls.set(key, el);
    }
    this.usedKeys.add(key);
    return el;
  }

  // reconcile makes the window's children els, touching only what
  // changed: blocks entering the window are inserted, leaving ones
  // removed, an updated one replaced where it is.
  reconcile(els) {
    const keep = new Set(els);
    let child = this.body.firstChild;
    for (const el of els) {
      while (child && !keep.has(child)) {
        const gone = child;
        child = child.nextSibling;
        gone.remove();
      }
      if (child === el) child = child.nextSibling;
      else this.body.insertBefore(el, child);
    }
    while (child) {
      const gone = child;
      child = child.nextSibling;
      gone.remove();
    }
    for (const key of this.blockEls.keys()) if (!this.usedKeys.has(key)) this.blockEls.delete(key);
    this.usedKeys.clear();
  }

  nearBottom() {
    return this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight < 120;
  }

  scrollToBottom() {
    this.stuck = true;
    if (this.view.end < this.view.count) this.renderNow();
    this.list.scrollTop = this.list.scrollHeight;
  }

  // anchor is the block at the top of the view and how far from it the
  // view starts (the room keeps it per tab). It is a message or a turn: a
  // separator's place changes as earlier pages load, a message's does not.
  anchor() {
    return this.view.anchor(this.list, (key) => key === "unread" || key.startsWith("day-"));
  }

  // restoreTo brings the view back to a saved anchor, loading earlier
  // pages until its message is held.
  async restoreTo(saved) {
    if (!saved) return;
    const id = saved.id.replace(/^turn-/, "");
    await this.loadBack(() => !this.byId.has(id));
    if (!this.byId.has(id)) return;
    this.pin = saved.id;
    this.stuck = false;
    this.renderNow();
    this.view.restore(this.list, saved);
  }

  // newestId is the newest message held, which reading the room marks.
  newestId() {
    const sorted = this.sorted();
    return sorted.length ? sorted[sorted.length - 1].id : null;
  }

  messages() {
    return this.sorted();
  }

  // isStep answers whether msg is a step of an agent's turn.
  static isStep(msg) {
    return isStep(msg);
  }

  close() {
    this.resize.disconnect();
    this.topWatch.disconnect();
    clearInterval(this.clock);
    cancelAnimationFrame(this.frame);
  }
}
