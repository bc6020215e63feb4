// The person's own agents: the list, registering a new one (whose API key
// is shown once, with the settings a Band SDK needs to reach this server),
// replacing an agent's key (the new one shown the same way) and deleting
// one, each after a confirmation, and an agent's webhooks (webhooks.js),
// opened under the list.

import { h, field, busy, errorBox, copyButton, onSubmit } from "../dom.js";
import { cardTable, confirmDialog, pageSection, pagedList, SecretSlot } from "../ui.js";
import { timeEl } from "../time.js";
import { WebhooksSlot } from "./webhooks.js";

const PAGE_SIZE = 50;

export function mount(root, ctx) {
  const { api, esc, notify } = ctx;

  const name = h("input", { name: "name", required: true, maxlength: 100, autocomplete: "off" });
  const secrets = new SecretSlot(() => name.focus());
  const description = h("textarea", { name: "description", rows: 2, required: true, maxlength: 500 });
  const err = errorBox();
  const form = h("form", { class: "card stack create-form" },
    h("h2", {}, "Register an agent"),
    field("Name", name, "3 to 100 characters. The agent's handle is made from it: @you/name."),
    field("Description", description, "Required: what it does, for the people who meet it (a Band SDK will not start an agent without one). One line, up to 500 characters."),
    err,
    h("div", { class: "row" }, h("button", { type: "submit" }, "Register agent")));
  const listHeading = h("h2", { tabindex: "-1" }, "Your agents");
  // One agent's webhooks show at a time, under the list; the row's button
  // says whether they are open, and has the focus back when they close.
  const hooks = new WebhooksSlot(ctx, {
    changed: () => agents.render(),
    closed: (a) => (root.querySelector(`[data-webhooks="${CSS.escape(a.id)}"]`) || listHeading).focus(),
  });
  // Whether each agent is connected now, or when it was last seen
  // (chatd's presence: its socket, or its key's last use).
  const seen = new Map();
  const lastSeen = (a) => {
    const p = seen.get(a.id);
    if (p && p.connected) return h("span", { class: "online" }, h("span", { class: "dot", "aria-hidden": "true" }), "Connected");
    return p && p.last_seen_at ? timeEl(p.last_seen_at) : h("span", { class: "muted" }, "never");
  };
  const agents = pagedList({
    fetch: async (at) => {
      const [page, presence] = await Promise.all([api.page("/api/v1/me/agents", { limit: PAGE_SIZE }, at),
        api.get("/api/v1/me/presence").catch(() => [])]);
      for (const p of presence || []) seen.set(p.id, p);
      return page;
    },
    loading: "Loading agents…",
    row: (a) => [
      h("strong", {}, a.name),
      h("code", {}, `@${a.handle}`),
      a.description ? a.description : h("span", { class: "muted" }, "No description"),
      timeEl(a.inserted_at),
      lastSeen(a),
      h("div", { class: "row" },
        h("button", { type: "button", class: "secondary", "aria-label": `New key for ${a.name}`,
          onclick: (ev) => rotate(a, ev.currentTarget) }, "New key"),
        h("button", { type: "button", class: "secondary", "aria-label": `Webhooks of ${a.name}`,
          "aria-expanded": String(hooks.isOpen(a.id)), dataset: { webhooks: a.id },
          onclick: () => hooks.open(a) }, "Webhooks"),
        h("button", { type: "button", class: "danger", "aria-label": `Delete agent ${a.name}`,
          onclick: () => remove(a) }, "Delete")),
    ],
    frame: (rows) => cardTable("Your agents", ["Name", "Handle", "Description", "Created", "Last seen", "Actions"], rows),
    empty: () => "No agents yet: register one above.",
    failed: (e) => `The agents could not be loaded: ${e.message}`,
    more: "Load more agents",
    heading: listHeading,
  });

  async function remove(a) {
    let force = false;
    const out = await confirmDialog({
      title: `Delete the agent ${a.name}?`,
      text: [
        `@${a.handle} stops working at once: its API key is revoked, it leaves every room, ` +
          "its contacts and the memories it stored are deleted, and its handle becomes free.",
        "What it wrote stays in the rooms. This cannot be undone.",
      ],
      confirm: "Delete agent",
      action: async (ok) => {
        try {
          return await api.del(`/api/v1/me/agents/${esc(a.id)}${force ? "?force=true" : ""}`);
        } catch (e) {
          if (e.code !== "execution_history_exists" || force) throw e;
          force = true;
          ok.textContent = "Delete agent and its history";
          throw new Error(`${a.name} has processed messages. Deleting it also deletes the record of that ` +
            "processing (which messages it handled and how). Press “Delete agent and its history” to go ahead.");
        }
      },
    });
    if (!out) return;
    const n = out.executions_deleted;
    const gone = n ? ` ${n} processing record${n === 1 ? "" : "s"} went with it.` : "";
    if (hooks.isOpen(a.id)) hooks.close();
    notify(`Agent ${a.name} deleted.${gone}`);
    await agents.load();
    listHeading.focus();
  }

  // rotate replaces an agent's key, after a confirmation, and shows the new
  // one once; focus goes back to the button once it is stored.
  async function rotate(a, button) {
    const out = await confirmDialog({
      title: `Replace the key of ${a.name}?`,
      text: [
        `@${a.handle} gets a new API key, shown once. The old key stops working at once, and ` +
          "connected agents using it are disconnected: give the agent the new key to bring it back.",
        "Delegated tokens it got with the old key end too. Its rooms, contacts and history stay.",
      ],
      confirm: "Replace key",
      action: () => api.post(`/api/v1/me/agents/${esc(a.id)}/rotate-key`),
    });
    if (!out) return;
    secrets.show({
      title: `Store the new API key of ${out.agent.name} now`,
      label: `The new API key of @${out.agent.handle}:`,
      secret: out.credentials.api_key,
      extra: sdkSettings(out.agent),
      afterDone: () => (button.isConnected ? button : listHeading).focus(),
    });
  }

  function sdkSettings(agent) {
    const wsProto = location.protocol === "https:" ? "wss:" : "ws:";
    const env = `BAND_REST_URL=${location.origin}\nBAND_WS_URL=${wsProto}//${location.host}/api/v1/socket/websocket`;
    const pre = h("pre", { class: "secret env" }, env);
    const copy = copyButton(env, pre);
    copy.setAttribute("aria-label", "Copy SDK settings");
    return [
      h("p", {}, "To run it with a Band SDK, point the SDK at this server with these environment variables:"),
      h("div", { class: "secret-row" }, pre, copy),
      h("p", {}, "and give the SDK the key above as the agent's API key (it is sent in the X-API-Key header). ",
        "The agent's id is ", h("code", {}, agent.id), "."),
    ];
  }

  onSubmit(form, err, async () => {
    const body = { agent: { name: name.value.trim(), description: description.value.trim() } };
    const out = await busy(form, () => api.post("/api/v1/me/agents/register", body));
    form.reset();
    secrets.show({
      title: `Store the API key of ${out.agent.name} now`,
      label: `The API key of @${out.agent.handle}:`,
      secret: out.credentials.api_key,
      extra: sdkSettings(out.agent),
    });
    agents.load();
  }, () => name.focus());

  root.append(pageSection("Agents",
    ["Your agents run elsewhere and talk to chatd through the Agent API with their ",
      "own key. Register one here, then start it with a Band SDK pointed at this server, ",
      "or give it webhooks: URLs chatd sends its new messages to."],
    form,
    secrets.el,
    h("section", { class: "list-section" }, listHeading, agents.el),
    hooks.el));
  agents.load();
  return () => {
    agents.stop();
    secrets.dispose();
    hooks.dispose();
  };
}
