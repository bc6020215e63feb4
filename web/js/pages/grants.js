// The apps signed in through OAuth (MCP clients such as Claude Code), on
// the API keys screen: each acts on /mcp as one of the person's agents or
// as the person, like a key would, and is signed out the same way. The
// server keeps only digests of their tokens, so there is nothing to show
// but who, as whom, and when.

import { h, replace } from "../dom.js";
import { cardTable, confirmDialog } from "../ui.js";
import { timeEl } from "../time.js";

export function grantsSection({ api, esc, notify }) {
  const heading = h("h2", { tabindex: "-1" }, "Apps signed in");
  const list = h("div", {}, h("p", { class: "muted" }, "Loading apps…"));

  const appName = (g) => g.client_name || "An unnamed app";
  const actsAs = (g) => (g.agent_handle ? `${g.agent_name} (${g.agent_handle})` : "You");

  async function load() {
    let grants;
    try {
      grants = await api.get("/api/v1/me/oauth/grants");
    } catch (e) {
      replace(list, h("p", { class: "error", role: "alert" }, `The apps could not be loaded: ${e.message}`));
      return;
    }
    if (!grants || grants.length === 0) {
      replace(list, h("p", { class: "empty" }, "No app is signed in. An MCP client signs in by sending you here from its own sign-in."));
      return;
    }
    replace(list, cardTable("Apps signed in with OAuth", ["App", "Acts as", "Signed in", "Last used", "Actions"],
      grants.map((g) => [
        appName(g),
        actsAs(g),
        timeEl(g.inserted_at),
        timeEl(g.last_used_at),
        h("button", { type: "button", class: "danger", "aria-label": `Sign out ${appName(g)} acting as ${actsAs(g)}`,
          onclick: () => signOut(g) }, "Sign out"),
      ])));
  }

  async function signOut(g) {
    const done = await confirmDialog({
      title: "Sign this app out?",
      text: [`${appName(g)} stops acting as ${actsAs(g)} at once: its tokens stop working and its MCP sessions end.`,
        "It can sign in again only through a new consent."],
      confirm: "Sign out",
      action: async () => {
        await api.del(`/api/v1/me/oauth/grants/${esc(g.id)}`);
        return true;
      },
    });
    if (!done) return;
    notify(`${appName(g)} signed out.`);
    await load();
    heading.focus();
  }

  return { el: h("section", { class: "list-section" }, heading, list), load };
}
