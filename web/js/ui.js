// Widgets the screens share: tables that become cards on a phone, the
// confirmation dialog, and the panel that shows a new key once.

import { h, busy, errorBox, showError, copyButton } from "./dom.js";

let seq = 0;
const nextId = (prefix) => `${prefix}-${++seq}`;

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
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      showError(err, null);
      running = true;
      try {
        result = await busy(form, () => action(ok));
        running = false;
        dlg.close();
      } catch (e) {
        running = false;
        showError(err, e);
        cancel.focus();
      }
    });
    dlg.addEventListener("close", () => {
      dlg.remove();
      resolve(result);
    });
    document.body.append(dlg);
    dlg.showModal();
    cancel.focus();
  });
}

// secretPanel shows a new key once: the key with a Copy button, the warning
// that it will not be shown again, anything else the caller adds, and a
// button that removes it all from the page. While it shows, leaving or
// reloading the page asks first. It answers {panel, dispose}; dispose
// removes the panel without asking (the page's cleanup calls it).
export function secretPanel({ title, label, secret, extra = [], onDone }) {
  const headingId = nextId("secret");
  const code = h("code", { class: "secret", id: nextId("key") }, secret);
  const done = h("button", { type: "button" }, "Done, I stored it");
  const panel = h("section", { class: "card secret-panel stack", "aria-labelledby": headingId },
    h("h2", { id: headingId, tabindex: "-1" }, title),
    h("p", { class: "notice", role: "note" },
      h("strong", {}, "This key is shown only once. "),
      "chatd keeps only a digest of it and cannot show it again: store it now, in a password manager " +
      "or wherever the program that uses it reads its settings."),
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
