// Memories: what agents stored about the person, their organization and
// the rooms they are in. Everyone sees the memories visible to them; only
// the person a memory is about may archive, restore or delete it. A server
// may have memories switched off: the listing then says so in its error.

import { h, field, busy } from "../dom.js";
import { confirmDialog, pageSection, pagedList } from "../ui.js";
import { timeEl } from "../time.js";

const PAGE_SIZE = 20;

const SCOPES = [["all", "All you can see"], ["about_me", "About you"], ["organization", "Organization-wide"],
  ["room", "From your rooms"]];
const STATUSES = [["active", "Active"], ["archived", "Archived"], ["superseded", "Superseded"], ["all", "Any status"]];
const SYSTEMS = [["", "Any system"], ["sensory", "Sensory"], ["working", "Working"], ["long_term", "Long-term"]];
const TYPES = [["", "Any type"], ["iconic", "Iconic"], ["echoic", "Echoic"], ["haptic", "Haptic"], ["episodic", "Episodic"],
  ["semantic", "Semantic"], ["procedural", "Procedural"]];
const SEGMENTS = [["", "Any segment"], ["user", "User"], ["agent", "Agent"], ["tool", "Tool"], ["guideline", "Guideline"]];

const select = (name, options, value) =>
  h("select", { name }, options.map(([v, label]) => h("option", { value: v, selected: v === value }, label)));
const words = (options, v) => (options.find(([k]) => k === v) || [v, v])[1];

// excerpt names a memory in a button's accessible name.
function excerpt(text) {
  const t = text.replace(/\s+/g, " ").trim();
  return t.length > 40 ? `${t.slice(0, 40)}…` : t;
}

export function mount(root, ctx) {
  const { api, esc, notify, me } = ctx;

  const scope = select("scope", SCOPES, "all");
  const status = select("status", STATUSES, "active");
  const system = select("system", SYSTEMS, "");
  const type = select("type", TYPES, "");
  const segment = select("segment", SEGMENTS, "");
  const search = h("input", { type: "search", name: "content_query", maxlength: 500, autocomplete: "off" });
  const filters = h("form", { class: "card filters memory-filters", role: "search", "aria-label": "Filter memories" },
    field("Show", scope),
    field("Status", status),
    field("System", system),
    field("Type", type),
    field("Segment", segment),
    h("div", { class: "search-field" },
      field("Search", search, "Every word must appear; end one with * to match words starting with it."),
      h("button", { type: "submit" }, "Search")));

  const listHeading = h("h2", { tabindex: "-1" }, "Memories found");

  const query = () => ({
    scope: scope.value, status: status.value, system: system.value, type: type.value, segment: segment.value,
    content_query: search.value.trim(),
  });
  const filtered = () => system.value || type.value || segment.value || search.value.trim() ||
    scope.value !== "all" || status.value !== "active";

  // nameOf shows who the server names in source_agent or subject; null
  // means a deleted agent (people are never deleted).
  function nameOf(p, id) {
    if (!p) return h("span", { title: id }, "A deleted agent");
    if (p.id === me.id) return "You";
    return [p.name, " ", h("code", { class: "handle" }, `@${p.handle}`)];
  }

  function about(m) {
    if (m.scope === "organization") return "Everyone in your organization";
    if (!m.subject_id) return "—";
    return nameOf(m.subject, m.subject_id);
  }

  function card(m) {
    const mine = m.subject_id === me.id;
    const actions = h("div", { class: "row memory-actions" });
    const short = excerpt(m.content);
    if (mine) {
      if (m.status === "active") {
        actions.append(h("button", { type: "button", class: "secondary", "aria-label": `Archive memory: ${short}`,
          onclick: (ev) => change(m, "archive", ev.currentTarget) }, "Archive"));
      } else if (m.status === "archived") {
        actions.append(h("button", { type: "button", class: "secondary", "aria-label": `Restore memory: ${short}`,
          onclick: (ev) => change(m, "restore", ev.currentTarget) }, "Restore"));
      }
      actions.append(h("button", { type: "button", class: "danger", "aria-label": `Delete memory: ${short}`,
        onclick: () => remove(m) }, "Delete"));
    } else {
      actions.append(h("span", { class: "muted" }, "Read-only: only the person a memory is about can change it."));
    }
    const meta = [
      ["About", about(m)],
      ["Status", h("span", { class: `status status-${m.status}` }, words(STATUSES, m.status))],
      ["Stored by", nameOf(m.source_agent, m.source_agent_id)],
      ["Stored", timeEl(m.inserted_at)],
      ["System", words(SYSTEMS, m.system)],
      ["Type", words(TYPES, m.type)],
      ["Segment", words(SEGMENTS, m.segment)],
    ];
    if (m.chat_room_id) meta.push(["Room", h("a", { href: `#/rooms/${esc(m.chat_room_id)}` }, "Open the room")]);
    if (m.updated_at && m.updated_at !== m.inserted_at) meta.push(["Changed", timeEl(m.updated_at)]);
    return h("article", { class: `card memory memory-${m.status}`, dataset: { id: m.id } },
      h("p", { class: "memory-content" }, m.content),
      m.thought ? h("p", { class: "memory-thought" }, h("span", { class: "muted" }, "Why it was stored: "), m.thought) : null,
      h("dl", { class: "memory-meta" }, meta.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v)))),
      actions);
  }

  // The filters stay usable while a listing loads (disabling them would
  // take the focus away): the listing of the newest filters wins.
  const memories = pagedList({
    fetch: (at) => api.page("/api/v1/me/memories", { ...query(), limit: PAGE_SIZE }, at),
    body: h("div", { class: "memory-list" }),
    loading: "Loading memories…",
    row: card,
    empty: () => (filtered()
      ? "No memories match these filters. Try Any status or another scope."
      : "No memories yet. Agents store memories as they work; those about you and your organization show up here."),
    failed: (e) => {
      // Switched off on this server: filtering cannot help.
      if (e.code === "feature_disabled") filters.hidden = listHeading.hidden = true;
      return `The memories could not be loaded: ${e.message}`;
    },
    more: "Load more memories",
    heading: listHeading,
  });

  // change archives or restores; the card stays in place with its new
  // status (so the other action undoes it), even where the filter would
  // no longer list it.
  async function change(m, action, button) {
    const articleEl = button.closest("article");
    try {
      const updated = await busy(articleEl, () => api.post(`/api/v1/me/memories/${esc(m.id)}/${action}`, {}));
      memories.put(updated);
      const fresh = card(updated);
      articleEl.replaceWith(fresh);
      notify(action === "archive" ? "Memory archived: agents no longer see it as active." : "Memory restored.");
      const again = fresh.querySelector(".memory-actions button");
      if (again) again.focus();
    } catch (e) {
      notify(e.message, "error");
      button.focus();
    }
  }

  async function remove(m) {
    const done = await confirmDialog({
      title: "Delete this memory?",
      text: [`“${excerpt(m.content)}” is deleted for good: no agent will see it again.`,
        "Archive it instead to keep it out of use but restorable."],
      confirm: "Delete memory",
      action: async () => {
        await api.del(`/api/v1/me/memories/${esc(m.id)}`);
        return true;
      },
    });
    if (!done) return;
    memories.remove(m.id);
    memories.render();
    notify("Memory deleted.");
    listHeading.focus();
  }

  for (const s of [scope, status, system, type, segment]) s.addEventListener("change", () => memories.load());
  filters.addEventListener("submit", (ev) => {
    ev.preventDefault();
    memories.load();
  });

  root.append(pageSection("Memories",
    ["What agents remember about you, your organization and your rooms. ",
      "You can archive, restore or delete the memories about you."],
    filters,
    h("section", { class: "list-section" }, listHeading, memories.el)));
  memories.load();
  return () => {
    memories.stop();
  };
}
