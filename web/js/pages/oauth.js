// The OAuth consent screen: an MCP client (Claude Code, an IDE, …) sent
// the person's browser to /oauth/authorize, which sent it here with the
// request in the link (#/oauth/<the request's query>). The person chooses
// whom the client acts as on /mcp, one of their agents or themselves, and
// allows or denies; either way the browser goes back to the client, with a
// one-time code or with access_denied. The server checks the request
// again on each call; this page only shows it and passes it on.

import { h, replace, busy, errorBox, showError, onSubmit } from "../dom.js";

const PARAMS = ["client_id", "redirect_uri", "response_type", "code_challenge", "code_challenge_method", "state", "scope", "resource"];

export async function mount(root, ctx) {
  const { api, me } = ctx;
  const query = new URLSearchParams(ctx.params[0] || "");
  const request = {};
  for (const name of PARAMS) if (query.has(name)) request[name] = query.get(name);

  let described;
  try {
    described = await api.get(`/api/v1/me/oauth/authorization?${query.toString()}`);
  } catch (e) {
    root.append(h("section", { class: "narrow" },
      h("h1", {}, "This sign-in link does not work"),
      h("p", { class: "error", role: "alert" }, e.message),
      h("p", { class: "muted" }, "Start the sign-in again from the app that sent you here.")));
    return;
  }
  const agents = await ownedAgents(api);
  const appName = described.client.name || "An unnamed app";
  const returnsTo = new URL(described.redirect_uri);

  const choices = [{ id: "", label: `Myself, ${me.name || me.handle}`, hint: "with the tools a person has: rooms, messages, agents" }]
    .concat(agents.map((a) => ({ id: a.id, label: `${a.name} (${a.handle})`, hint: "with the agent's tools: its messages, rooms, memories" })));
  const radios = choices.map((c, i) => h("input", { type: "radio", name: "acts-as", value: c.id, id: `acts-as-${i}`, checked: i === (agents.length ? 1 : 0) }));
  const err = errorBox();
  const allow = h("button", { type: "submit" }, "Allow");
  const deny = h("button", { type: "button", class: "secondary" }, "Deny");
  const form = h("form", { class: "card stack" },
    h("fieldset", { class: "choices" },
      h("legend", {}, `Let ${appName} use chatd's MCP tools as`),
      choices.map((c, i) => h("div", { class: "choice" },
        radios[i], h("label", { for: radios[i].id }, c.label), h("small", { class: "hint" }, c.hint)))),
    err,
    h("div", { class: "row" }, allow, deny));

  async function answer(approve) {
    const chosen = radios.find((r) => r.checked);
    const body = { ...request, approve };
    if (approve && chosen && chosen.value) body.agent_id = chosen.value;
    const out = await busy(form, () => api.post("/api/v1/me/oauth/authorization", { authorization: body }));
    replace(form, h("p", { role: "status" }, approve ? `Signed in: returning to ${appName}…` : `Denied: returning to ${appName}…`));
    window.location.assign(out.redirect_to);
  }
  onSubmit(form, err, () => answer(true));
  deny.addEventListener("click", () => answer(false).catch((e) => showError(err, e)));

  root.append(h("section", { class: "narrow" },
    h("h1", {}, `Sign ${appName} in to chatd`),
    h("p", {}, `${appName} asks to use chatd's MCP endpoint on your behalf. It will return to `,
      h("code", {}, returnsTo.origin), ". Allow it only if you started this sign-in."),
    form,
    h("p", { class: "muted" }, "You can sign it out at any time under ", h("a", { href: "#/keys" }, "API keys"), ".")));
}

// ownedAgents lists the person's agents (the first hundred), for the choice.
async function ownedAgents(api) {
  try {
    return (await api.page("/api/v1/me/agents", { limit: 100 })).items;
  } catch {
    return [];
  }
}
