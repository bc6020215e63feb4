// Human API keys: a person's own keys for scripts and tools that act as
// them (sent as X-API-Key). The server keeps only a digest, so a new key is
// shown once, and revoking one stops it at once. Below them, the apps
// signed in through OAuth (grants.js), signed out the same way.

import { h, replace, field, busy, errorBox, onSubmit } from "../dom.js";
import { cardTable, confirmDialog, pageSection, SecretSlot } from "../ui.js";
import { timeEl } from "../time.js";
import { grantsSection } from "./grants.js";

export function mount(root, ctx) {
  const { api, esc, notify } = ctx;

  const name = h("input", { name: "name", required: true, maxlength: 100, autocomplete: "off" });
  const secrets = new SecretSlot(() => name.focus());
  const err = errorBox();
  const form = h("form", { class: "card stack create-form" },
    h("h2", {}, "Create a key"),
    field("Key name", name, "What will use it, so you know which key to revoke later, e.g. “backup script”."),
    err,
    h("div", { class: "row" }, h("button", { type: "submit" }, "Create key")));
  const listHeading = h("h2", { tabindex: "-1" }, "Your keys");
  const list = h("div", {}, h("p", { class: "muted" }, "Loading keys…"));
  const apps = grantsSection(ctx);

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

  onSubmit(form, err, async () => {
    const key = await busy(form, () => api.post("/api/v1/me/keys", { key: { name: name.value.trim() } }));
    form.reset();
    secrets.show({
      title: `Copy your new key “${key.name}” now`,
      label: "Your new Human API key (send it in the X-API-Key header):",
      secret: key.api_key,
    });
    load();
  }, () => name.focus());

  root.append(pageSection("API keys",
    ["A Human API key lets a script or tool act as you on the Human API ",
      "(in the X-API-Key header). Agents have their own keys: register them on the ",
      h("a", { href: "#/agents" }, "Agents"), " page. MCP clients you signed in through OAuth are listed under the keys."],
    form,
    secrets.el,
    h("section", { class: "list-section" }, listHeading, list),
    apps.el));
  load();
  apps.load();
  return () => {
    secrets.dispose();
  };
}
