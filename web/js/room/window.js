// The window of a long list: only the blocks near the view are in the
// page, between two spacers as tall as the blocks they stand for (their
// heights as measured when they were last shown, or the average of those
// measured). The timeline (timeline.js) asks where the window goes before
// each render (place) and tells it what the render showed (settle); a
// scroll past what the window holds moves it (needsMove).
//
// Where the person is reading is named by a block and how far its top is
// from the view's (an anchor), which a render keeps in place however the
// heights above it changed.

import { h } from "../dom.js";

// Blocks kept on each side of the one at the top of the view.
const BEFORE = 40;
const AFTER = 40;

export class BlockWindow {
  constructor() {
    this.before = h("div", { class: "spacer", "aria-hidden": "true" });
    this.body = h("div", { class: "timeline" });
    this.after = h("div", { class: "spacer", "aria-hidden": "true" });
    this.heights = new Map(); // block key -> px, as last measured
    this.measured = { total: 0, count: 0 };
    this.keys = []; // the keys of the last render's blocks
    this.prefix = new Float64Array(1); // prefix[i]: the height of blocks 0..i-1
    this.start = 0;
    this.end = 0;
    this.count = 0;
  }

  height(key) {
    const known = this.heights.get(key);
    if (known !== undefined) return known;
    return this.measured.count ? this.measured.total / this.measured.count : 90;
  }

  // anchor names the block at the top of the view, and how far its top is
  // below the view's (negative: above), or null for an empty list. A block
  // skip(key) refuses is passed over for the next, its offset moved down by
  // the heights between.
  anchor(list, skip = () => false) {
    const at = this.topBlock(list);
    if (!at) return null;
    let { i, offset } = at;
    while (i < this.keys.length - 1 && skip(this.keys[i])) {
      offset += this.prefix[i + 1] - this.prefix[i];
      i++;
    }
    return { id: this.keys[i], offset };
  }

  // topBlock is anchor's block by its index.
  topBlock(list) {
    if (!this.keys.length) return null;
    const view = list.getBoundingClientRect().top;
    const kids = this.body.children;
    const first = kids[0];
    const last = kids[kids.length - 1];
    if (first && first.getBoundingClientRect().top <= view && last.getBoundingClientRect().bottom > view) {
      let lo = 0;
      let hi = kids.length - 1;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (kids[mid].getBoundingClientRect().bottom <= view) lo = mid + 1;
        else hi = mid;
      }
      const el = kids[lo];
      return { i: this.start + lo, offset: el.getBoundingClientRect().top - view };
    }
    // The view is over a spacer: the heights say which block is there.
    const y = list.scrollTop - this.before.offsetTop;
    const i = Math.min(this.keys.length - 1, Math.max(0, upperBound(this.prefix, y) - 1));
    return { i, offset: this.prefix[i] - y };
  }

  // place answers which blocks the render shows, [start, end), and the
  // anchor to keep: the end of the list when the person is at it, the
  // block pin around a block to show, else around where the person reads.
  place(list, blocks, { stuck, pin }) {
    const n = blocks.length;
    const indexOf = (key) => blocks.findIndex((b) => b.key === key);
    let center = n;
    let anchor = null;
    if (pin && indexOf(pin) >= 0) {
      center = indexOf(pin);
    } else if (!stuck) {
      anchor = this.anchor(list);
      const i = anchor ? indexOf(anchor.id) : -1;
      if (i >= 0) center = i;
      else anchor = null;
    }
    if (center >= n) return { start: Math.max(0, n - BEFORE - AFTER), end: n, anchor: null };
    const start = Math.max(0, center - BEFORE);
    return { start, end: Math.min(n, Math.max(center + AFTER, start + BEFORE + AFTER)), anchor };
  }

  // settle measures the blocks the render showed, sizes the spacers for
  // the others, and puts the anchor back where it was.
  settle(list, blocks, { start, end, anchor }) {
    const kids = this.body.children;
    // A block's height is from its top to the next one's, margins and all.
    const bottom = this.body.offsetTop + this.body.offsetHeight;
    for (let i = 0; i < kids.length; i++) {
      const key = blocks[start + i].key;
      const px = (i + 1 < kids.length ? kids[i + 1].offsetTop : bottom) - kids[i].offsetTop;
      if (!this.heights.has(key)) {
        this.measured.total += px;
        this.measured.count += 1;
      }
      this.heights.set(key, px);
    }
    this.keys = blocks.map((b) => b.key);
    const guess = this.measured.count ? this.measured.total / this.measured.count : 90;
    const prefix = new Float64Array(this.keys.length + 1);
    for (let i = 0; i < this.keys.length; i++) {
      const known = this.heights.get(this.keys[i]);
      prefix[i + 1] = prefix[i] + (known === undefined ? guess : known);
    }
    this.prefix = prefix;
    this.start = start;
    this.end = end;
    this.count = blocks.length;
    this.before.style.height = `${this.prefix[start]}px`;
    this.after.style.height = `${this.prefix[blocks.length] - this.prefix[end]}px`;
    if (anchor) this.restore(list, anchor);
  }

  // restore scrolls so that the anchor's block is as far from the top of
  // the view as it was.
  restore(list, { id, offset }) {
    const i = this.keys.indexOf(id);
    if (i < this.start || i >= this.end) return;
    const el = this.body.children[i - this.start];
    if (!el) return;
    list.scrollTop += el.getBoundingClientRect().top - list.getBoundingClientRect().top - offset;
  }

  // needsMove says whether the view came within half a screen of the
  // window's edge while there are blocks beyond it.
  needsMove(list) {
    const y = list.scrollTop;
    const screen = list.clientHeight;
    const top = this.body.offsetTop;
    const bottom = top + this.body.offsetHeight;
    return (this.start > 0 && y < top + screen / 2) || (this.end < this.count && y + screen > bottom - screen / 2);
  }
}

// upperBound is the first index of sorted whose value is above y.
function upperBound(sorted, y) {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid] <= y) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
