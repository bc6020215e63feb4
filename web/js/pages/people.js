// An admin's people, on the Account screen: everyone in the organization,
// with their role and since when, and Remove for anyone but oneself. A
// removal cannot be undone: the confirmation says what goes with it.

import { h } from "../dom.js";
import { cardTable, confirmDialog, pagedList } from "../ui.js";
import { timeEl } from "../time.js";

const PAGE_SIZE = 50;

export function peopleSection({ api, esc, me, notify }) {
  const heading = h("h2", { tabindex: "-1" }, "People");
  const list = pagedList({
    fetch: (at) => api.page("/api/v1/me/people", { limit: PAGE_SIZE }, at),
    loading: "Loading people…",
    row: (p) => [
      h("strong", {}, p.name || p.handle),
      h("code", {}, `@${p.handle}`),
      p.role === "admin" ? "Admin" : "Member",
      timeEl(p.inserted_at),
      p.id === me.id ? h("span", { class: "muted" }, "You")
        : h("button", { type: "button", class: "danger", "aria-label": `Remove ${p.name || p.handle}`, onclick: () => remove(p) }, "Remove"),
    ],
    frame: (rows) => cardTable("The organization's people", ["Name", "Handle", "Role", "Joined", "Actions"], rows),
    empty: () => "Nobody yet.",
    failed: (e) => `The people could not be loaded: ${e.message}`,
    more: "Load more people",
    heading,
  });

  async function remove(p) {
    const done = await confirmDialog({
      title: `Remove ${p.name || p.handle}?`,
      text: [
        `@${p.handle} is signed out everywhere at once and can no longer sign in: their password, sessions and ` +
          "API keys stop working, their agents are deleted, and they leave every room. Rooms only they owned become yours.",
        "What they wrote stays in the rooms, under their name. This cannot be undone.",
      ],
      confirm: "Remove",
      action: async () => {
        await api.del(`/api/v1/me/people/${esc(p.id)}`);
        return true;
      },
    });
    if (!done) return;
    notify(`${p.name || p.handle} was removed.`);
    list.remove(p.id);
    list.render();
    heading.focus();
  }

  return {
    el: h("section", { class: "list-section" }, heading,
      h("p", { class: "page-intro" }, "Everyone in your organization. Removing someone signs them out for good."),
      ...list.el),
    load: list.load,
    dispose: list.stop,
  };
}
