// Human API keys: a person's own keys for scripts and tools that act as
// them (sent as X-API-Key). The server keeps only a digest, so a new key is
// shown once, and revoking one stops it at once.
//
// This module also exports what the agents, contacts and memories pages
// share with it: the one-time secret panel, the confirmation dialog, and a
// table that becomes stacked cards on a narrow screen.

import { h, replace, field, busy, errorBox, showError, copyButton, when, exactly } from "../dom.js";

let seq = 0;
const nextId = (prefix) => `${prefix}-${++seq}`;

// timeEl is a timestamp for people, with the exact time on hover.
export function timeEl(iso) {
  if (!iso) return h("span", { class: "muted" }, "never");
  return h("time", { datetime: iso, title: exactly(iso) }, when(iso));
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

export function mount(root, ctx) {
  const { api, esc, notify } = ctx;
  let secret = null;

  const name = h("input", { name: "name", required: true, maxlength: 100, autocomplete: "off" });
  const err = errorBox();
  const form = h("form", { class: "card stack create-form" },
    h("h2", {}, "Create a key"),
    field("Key name", name, "What will use it, so you know which key to revoke later, e.g. “backup script”."),
    err,
    h("div", { class: "row" }, h("button", { type: "submit" }, "Create key")));
  const secretSlot = h("div", {});
  const listHeading = h("h2", { tabindex: "-1" }, "Your keys");
  const list = h("div", {}, h("p", { class: "muted" }, "Loading keys…"));

  async function load() {
    let keys;
    try {
      keys = await api.get("/api/v1/me/keys");
    } catch (e) {
      replace(list, h("p", { class: "error", role: "alert" }, `The keys could not be loaded: ${e.message}`));
      return;
    }
    if (!keys || keys.length === 0) {
      replace(list, h("p", { class: "empty" }, "No API keys yet: create one above."));
      return;
    }
    replace(list, cardTable("Your API keys", ["Name", "Prefix", "Created", "Last used", "Actions"],
      keys.map((k) => [
        k.name || h("span", { class: "muted" }, "(no name)"),
        h("code", {}, `${k.prefix}…`),
        timeEl(k.inserted_at),
        timeEl(k.last_used_at),
        h("button", { type: "button", class: "danger", "aria-label": `Revoke key ${k.name || k.prefix}`,
          onclick: () => revoke(k) }, "Revoke"),
      ])));
  }

  async function revoke(k) {
    const label = k.name ? `“${k.name}”` : `starting ${k.prefix}`;
    const done = await confirmDialog({
      title: "Revoke this key?",
      text: [`The key ${label} stops working at once: anything that uses it will be refused.`, "This cannot be undone."],
      confirm: "Revoke key",
      action: async () => {
        await api.del(`/api/v1/me/keys/${esc(k.id)}`);
        return true;
      },
    });
    if (!done) return;
    notify(`Key ${label} revoked.`);
    await load();
    listHeading.focus();
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    showError(err, null);
    try {
      const key = await busy(form, () => api.post("/api/v1/me/keys", { key: { name: name.value.trim() } }));
      form.reset();
      if (secret) secret.dispose();
      secret = secretPanel({
        title: `Copy your new key “${key.name}” now`,
        label: "Your new Human API key (send it in the X-API-Key header):",
        secret: key.api_key,
        onDone: () => {
          secret = null;
          name.focus();
        },
      });
      secretSlot.append(secret.panel);
      secret.focus();
      load();
    } catch (e) {
      showError(err, e);
      name.focus();
    }
  });

  root.append(h("section", { class: "page" },
    h("h1", {}, "API keys"),
    h("p", { class: "page-intro" }, "A Human API key lets a script or tool act as you on the Human API ",
      "(in the X-API-Key header). Agents have their own keys: register them on the ",
      h("a", { href: "#/agents" }, "Agents"), " page."),
    form,
    secretSlot,
    h("section", { class: "list-section" }, listHeading, list)));
  load();
  return () => {
    if (secret) secret.dispose();
  };
}
