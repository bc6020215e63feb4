// confirmDialog asks before anything that cannot be undone. The native
// <dialog> traps focus and closes on Escape; Cancel has the focus, so a
// stray Enter never confirms.

import { h } from "./dom.js";

export function confirmDialog(question, detail, action) {
  return new Promise((resolve) => {
    const cancel = h("button", { type: "button", class: "secondary", autofocus: true }, "Cancel");
    const confirm = h("button", { type: "button", class: "danger" }, action);
    const titleId = `dlg-${Date.now()}`;
    const dlg = h("dialog", { "aria-labelledby": titleId },
      h("h2", { id: titleId }, question), detail ? h("p", {}, detail) : null,
      h("div", { class: "row" }, cancel, confirm));
    const done = (v) => {
      dlg.close();
      dlg.remove();
      resolve(v);
    };
    cancel.addEventListener("click", () => done(false));
    confirm.addEventListener("click", () => done(true));
    dlg.addEventListener("cancel", (ev) => {
      ev.preventDefault();
      done(false);
    });
    document.body.append(dlg);
    dlg.showModal();
    cancel.focus();
  });
}
