// Widgets the screens share: the paged list, tables that become cards on a
// phone, the confirmation dialog, and the panel that shows a new key once.

import { h, replace, busy, errorBox, showError, onSubmit, copyButton } from "./dom.js";

let seq = 0;
const nextId = (prefix) => `${prefix}-${++seq}`;

// pageSection is a screen of the signed-in app: its heading, the paragraph that
// says what the screen is for (intro: its text and elements), and then
// content.
export function pageSection(title, intro, ...content) {
  return h("section", { class: "page" }, h("h1", {}, title), h("p", { class: "page-intro" }, intro), ...content);
}

// pagedList is a listing shown a page at a time, with a Load more button
// under it. It holds what it loaded by id (so pages that overlap, or a
// push that races a page, never show an item twice), renders it through
// row, and says so when the listing is empty or could not load. Only the
// newest of its requests lands: a slow answer never overwrites a newer one.
//
// fetch(at) answers one page, {items, next}, as api.page does; first is the
// first page's position there ({} for a cursor listing, {page: 1} for a
// numbered one). row(item) is an item's row; frame(rows) puts the rows in
// their container (a cardTable), order(items) sorts them when the listing's
// own order is not the one shown. empty() answers the words (or element) for
// an empty listing, failed(e) the words for one that could not load; with
// onError(e) instead, a refusal is told there and what is shown stays. The
// list goes in body (a div unless given), with loading in it until the
// first page arrives. After Load more, focus stays on the button, or goes to
// heading when there is nothing more. linkMore makes the button a link under
// the list, for a sidebar whose rows are links; rendered(items) runs after
// each render.
//
// It answers el (the nodes to place), load() (the first page, anew: after a
// filter changed, or a change that may move items between pages),
// refresh() (the pages shown, anew), render(), stop() (for the page's
// cleanup: answers still on their way are dropped), and get, put and
// remove to keep what is shown up to date with what the page does and what
// is pushed.
export function pagedList({
  fetch, first = {}, row, frame = (rows) => rows, order = (items) => items, empty, failed, onError = null,
  body = h("div", {}), loading = null, more: moreLabel, linkMore = false, heading = null, rendered = () => {},
}) {
  const byId = new Map();
  let next = null;
  let pages = 0;
  let latest = 0;

  const more = h("button", { type: "button", class: linkMore ? "link" : "secondary", hidden: true }, moreLabel);
  const moreRow = linkMore ? more : h("div", { class: "row more" }, more);
  const moreErr = onError ? null : errorBox();
  if (loading) replace(body, h("p", { class: "muted" }, loading));

  function render() {
    const items = order([...byId.values()]);
    if (items.length) {
      const framed = frame(items.map(row));
      // Rows a list keeps (the same elements, in the same order) are left
      // alone: a click under way on one of them is not lost to a render.
      const same = Array.isArray(framed) && framed.length === body.children.length && framed.every((el, i) => body.children[i] === el);
      if (!same) replace(body, framed);
    } else {
      const e = empty();
      replace(body, typeof e === "string" ? h("p", { class: "empty" }, e) : e);
    }
    more.hidden = !next;
    rendered(items);
  }

  // walk fetches up to count pages, starting at the position from.
  async function walk(from, count) {
    const items = [];
    let at = from;
    let n = 0;
    do {
      const page = await fetch(at);
      items.push(...page.items);
      at = page.next;
      n++;
    } while (at && n < count);
    return { items, next: at, pages: n };
  }

  // run makes one request of the list: count pages from the first (anew),
  // or, adding, from next (after what is shown). A refusal of Load more is
  // shown under its button, and what is shown stays. Load more is disabled
  // while any request runs, and enabled again by the newest one alone,
  // however they end.
  async function run(count, { adding = false, forMore = adding } = {}) {
    const n = ++latest;
    if (moreErr) showError(moreErr, null);
    body.setAttribute("aria-busy", "true");
    more.disabled = true;
    try {
      const got = await walk(adding ? next : first, count);
      if (n !== latest) return;
      if (!adding) byId.clear();
      for (const item of got.items) byId.set(item.id, item);
      next = got.next;
      pages = adding ? pages + got.pages : got.pages;
      render();
    } catch (e) {
      if (n !== latest) return;
      if (onError) {
        onError(e);
      } else if (forMore) {
        showError(moreErr, e);
      } else {
        byId.clear();
        next = null;
        pages = 0;
        more.hidden = true;
        replace(body, h("p", { class: "error", role: "alert" }, failed(e)));
      }
    } finally {
      if (n === latest) {
        body.removeAttribute("aria-busy");
        more.disabled = false;
      }
    }
  }

  // A numbered listing shifts under its page numbers as items come and go,
  // so the page after the last one shown may repeat or skip some: it loads
  // every page shown again, and one more. A cursor goes on where it was.
  const numbered = first.page !== undefined;
  const loadMore = () => (numbered ? run(pages + 1, { forMore: true }) : run(1, { adding: true }));

  more.addEventListener("click", async () => {
    if (!next) return;
    await loadMore();
    // Disabling the button while it loaded took the focus from it.
    if (!more.hidden) more.focus();
    else if (heading) heading.focus();
  });

  return {
    el: [body, moreRow, moreErr],
    load: () => run(1),
    refresh: () => run(Math.max(pages, 1)),
    render,
    stop: () => { latest++; },
    get: (id) => byId.get(id),
    put: (item) => { byId.set(item.id, item); },
    remove: (id) => { byId.delete(id); },
  };
}

// cardTable is a table whose rows become cards below 760px: each cell
// carries its column's name, which the narrow layout shows before it.
// rows are arrays of cells (strings or nodes), one per column.
export function cardTable(caption, columns, rows) {
  return h("table", { class: "cards" },
    h("caption", { class: "visually-hidden" }, caption),
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.map((cells) => h("tr", {},
      cells.map((c, i) => h("td", { dataset: { label: columns[i] } }, h("div", { class: "cell" }, c)))))));
}

// confirmDialog asks before something that cannot be undone. Cancel has the
// focus, so Enter alone never confirms; while action runs the dialog stays
// open (Escape does nothing), and a refusal is shown inside it. It answers
// what action answered, or null when the person cancelled. action receives
// the confirm button, should it need to change its words.
export function confirmDialog({ title, text, confirm, action }) {
  return new Promise((resolve) => {
    const headingId = nextId("dlg");
    const err = errorBox();
    const cancel = h("button", { type: "button", class: "secondary" }, "Cancel");
    const ok = h("button", { type: "submit", class: "danger" }, confirm);
    const form = h("form", { class: "stack" },
      h("h2", { id: headingId }, title),
      (Array.isArray(text) ? text : [text]).map((t) => h("p", {}, t)),
      err,
      h("div", { class: "row dialog-actions" }, cancel, ok));
    const dlg = h("dialog", { class: "confirm", "aria-labelledby": headingId }, form);
    let result = null;
    let running = false;
    cancel.addEventListener("click", () => dlg.close());
    dlg.addEventListener("cancel", (ev) => {
      if (running) ev.preventDefault();
    });
    onSubmit(form, err, async () => {
      running = true;
      try {
        result = await busy(form, () => action(ok));
      } finally {
        running = false;
      }
      dlg.close();
    }, () => cancel.focus());
    dlg.addEventListener("close", () => {
      dlg.remove();
      resolve(result);
    });
    document.body.append(dlg);
    dlg.showModal();
    cancel.focus();
  });
}

// keyNotice is the warning a new API key is shown with.
const keyNotice = () => [h("strong", {}, "This key is shown only once. "),
  "chatd keeps only a digest of it and cannot show it again: store it now, in a password manager " +
  "or wherever the program that uses it reads its settings."];

// secretPanel shows a new key once: the key with a Copy button, the warning
// that it will not be shown again (notice, for a secret that is not an API
// key), anything else the caller adds, and a button that removes it all
// from the page. While it shows, leaving or reloading the page asks first.
// It answers {panel, dispose}; dispose removes the panel without asking
// (the page's cleanup calls it).
export function secretPanel({ title, label, secret, notice = keyNotice(), extra = [], onDone }) {
  const headingId = nextId("secret");
  const code = h("code", { class: "secret", id: nextId("key") }, secret);
  const done = h("button", { type: "button" }, "Done, I stored it");
  const panel = h("section", { class: "card secret-panel stack", "aria-labelledby": headingId },
    h("h2", { id: headingId, tabindex: "-1" }, title),
    h("p", { class: "notice", role: "note" }, notice),
    h("p", { class: "secret-label" }, label),
    h("div", { class: "secret-row" }, code, copyButton(secret, code)),
    extra,
    h("div", { class: "row" }, done));
  const warn = (ev) => {
    ev.preventDefault();
    ev.returnValue = "";
  };
  window.addEventListener("beforeunload", warn);
  const dispose = () => {
    window.removeEventListener("beforeunload", warn);
    panel.remove();
  };
  done.addEventListener("click", () => {
    dispose();
    if (onDone) onDone();
  });
  return { panel, dispose, focus: () => panel.querySelector("h2").focus() };
}

// SecretSlot is the place on a page where a new key shows once: showing
// another replaces it, and the page's cleanup disposes of it. afterDone
// runs when the person says they stored it (to put focus back); show may
// name another for one key (put focus back where that one was asked for).
export class SecretSlot {
  constructor(afterDone) {
    this.el = h("div", {});
    this.current = null;
    this.afterDone = afterDone;
  }

  show({ afterDone = this.afterDone, ...opts }) {
    this.dispose();
    this.current = secretPanel({
      ...opts,
      onDone: () => {
        this.current = null;
        afterDone();
      },
    });
    this.el.append(this.current.panel);
    this.current.focus();
  }

  dispose() {
    if (this.current) this.current.dispose();
    this.current = null;
  }
}
