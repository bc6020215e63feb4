// Search: the messages of every room the person reads that hold some
// words, most relevant or newest first. Each result shows its snippet with
// the matches highlighted and opens its room at the message. The query
// lives in the address (#/search/<words>), so Back returns to the results.

import { h, field, replace } from "../dom.js";
import { pageSection, pagedList } from "../ui.js";
import { timeEl } from "../time.js";

const PAGE_SIZE = 20;

const TYPES = [["", "Any kind"], ["text", "Messages"], ["thought", "Thoughts"], ["tool_call", "Tool calls"],
  ["tool_result", "Tool results"], ["error", "Errors"], ["task", "Task updates"], ["attention", "Attention"]];
const SORTS = [["relevance", "Best match"], ["newest", "Newest first"]];

const select = (name, options) =>
  h("select", { name }, options.map(([v, label]) => h("option", { value: v }, label)));

// highlighted renders a snippet as text with each match in a <mark>: the
// server puts every match between « and », and shows a « or » of the text
// itself as ‹ or ›, so the odd pieces of a split are the matches. Only text
// nodes are made: a snippet is never markup.
export function highlighted(snippet) {
  return snippet.split(/[«»]/).map((piece, i) => (i % 2 ? h("mark", {}, piece) : piece));
}

export function mount(root, ctx) {
  const { api, esc } = ctx;
  const q = h("input", { type: "search", name: "q", maxlength: 256, autocomplete: "off", required: true,
    value: ctx.params[0] || "" });
  const type = select("message_type", TYPES);
  const sort = select("sort", SORTS);
  const form = h("form", { class: "card filters search-form", role: "search", "aria-label": "Search messages" },
    h("div", { class: "search-field" },
      field("Search", q, "Every word must appear; \"quote a phrase\"; end a word with * to match words starting with it."),
      h("button", { type: "submit" }, "Search")),
    field("Kind", type),
    field("Order", sort));
  const heading = h("h2", { tabindex: "-1" }, "Results");
  const status = h("p", { class: "muted", role: "status" });

  // Rooms are named by their titles, read once per room.
  const titles = new Map();
  function roomTitle(id) {
    const el = h("span", { class: "room-name" }, "a room");
    let title = titles.get(id);
    if (!title) {
      title = api.get(`/api/v1/me/chats/${esc(id)}`).then((r) => r.title || "Untitled room", () => "a room");
      titles.set(id, title);
    }
    title.then((t) => replace(el, t));
    return el;
  }

  function result(m) {
    return h("li", { class: "card search-result", dataset: { id: m.id } },
      h("p", { class: "snippet" }, highlighted(m.snippet || m.content)),
      h("p", { class: "row meta" },
        h("span", { class: "sender" }, m.sender_name || "unknown"),
        m.message_type !== "text" ? h("span", { class: "kind" }, (TYPES.find(([v]) => v === m.message_type) || [0, m.message_type])[1]) : null,
        "in", roomTitle(m.chat_room_id),
        timeEl(m.inserted_at),
        h("a", { href: `#/rooms/${esc(m.chat_room_id)}/${esc(m.id)}`, class: "open" }, "Open in the room")));
  }

  let asked = "";
  const results = pagedList({
    fetch: (at) => api.page("/api/v1/me/search", { q: asked, chat_id: inRoom, message_type: type.value, sort: sort.value, limit: PAGE_SIZE }, at),
    body: h("ol", { class: "search-results" }),
    row: result,
    empty: () => (asked ? `Nothing found for “${asked}”.` : "Type some words to search every room you read."),
    failed: (e) => `The search could not run: ${e.message}`,
    more: "More results",
    heading,
    rendered: (items) => {
      replace(status, asked && items.length ? `Results for “${asked}”` : "");
    },
  });

  const run = () => {
    asked = q.value.trim();
    if (asked) results.load();
  };
  // #/search/<words>/<room> searches one room (the room's own search box).
  const inRoom = ctx.params[1] || null;
  const scope = h("p", { class: "hint" });
  if (inRoom) {
    replace(scope, "In ", roomTitle(inRoom), " only. ", h("a", { href: `#/search/${esc(ctx.params[0] || "")}` }, "Search every room"));
  }
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const words = q.value.trim();
    // The words go into the address, so that Back comes back to them.
    if (words && words !== (ctx.params[0] || "")) ctx.navigate(`/search/${esc(words)}${inRoom ? `/${esc(inRoom)}` : ""}`);
    else run();
  });
  type.addEventListener("change", run);
  sort.addEventListener("change", run);

  root.append(pageSection("Search",
    "Find messages in every room you read, your agents' rooms included: text, thoughts, tool calls and their results.",
    form, scope, heading, status, results.el));
  if (q.value) run();
  else results.render();
  q.focus();
  return () => results.stop();
}
