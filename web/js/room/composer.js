// Writing a message: a text box with @-mention completion from the room's
// participants, files attached before sending, Enter to send and
// Shift+Enter for a new line. Mentions are taken from the text as sent:
// every @handle of a participant in it is a mention, whether completed or
// typed out.

import { h, field, busy, errorBox, showError, onSubmit } from "../dom.js";
import { sha256Hex } from "../sha256.js";
import { size } from "./message.js";

let listSeq = 0;

export function composer(ctx, roomId, participants) {
  const listId = `mentions-${++listSeq}`;
  const text = h("textarea", {
    name: "message", rows: 3, role: "combobox", "aria-autocomplete": "list", "aria-expanded": "false",
    "aria-controls": listId, placeholder: "Write a message. @ mentions a participant.",
  });
  const suggestions = h("ul", { class: "suggestions", id: listId, role: "listbox", "aria-label": "Participants to mention", hidden: true });
  const files = h("input", { type: "file", name: "files", multiple: true });
  const chosen = h("div", { class: "hint" });
  const err = errorBox();
  const send = h("button", { type: "submit" }, "Send");
  const form = h("form", { class: "composer", "aria-label": "New message" },
    suggestions,
    field("Message", text, "Mention at least one participant with @: the message is for them. Enter sends, Shift+Enter adds a line."),
    h("div", { class: "row" }, field("Attach files", files), chosen, send),
    err);

  let options = [];
  let active = -1;

  files.addEventListener("change", () => {
    const list = [...files.files];
    chosen.textContent = list.length ? list.map((f) => `${f.name} (${size(f.size)})`).join(", ") : "";
  });

  // query is the @word being typed at the caret, if any.
  function query() {
    const before = text.value.slice(0, text.selectionStart);
    const m = before.match(/(^|\s)@([\w./-]*)$/);
    return m ? { term: m[2].toLowerCase(), start: before.length - m[2].length - 1 } : null;
  }

  function close() {
    suggestions.hidden = true;
    text.setAttribute("aria-expanded", "false");
    text.removeAttribute("aria-activedescendant");
    options = [];
    active = -1;
  }

  function show() {
    const q = query();
    if (!q) return close();
    options = participants().filter((p) => p.id !== ctx.me.id &&
      (p.handle.toLowerCase().includes(q.term) || p.name.toLowerCase().includes(q.term))).slice(0, 8);
    if (!options.length) return close();
    active = Math.min(Math.max(active, 0), options.length - 1);
    suggestions.replaceChildren(...options.map((p, i) => h("li", {
      id: `${listId}-${i}`, role: "option", "aria-selected": i === active ? "true" : "false",
      onmousedown: (ev) => { ev.preventDefault(); pick(i); },
    }, p.name, " ", h("span", { class: "muted" }, `@${p.handle}`))));
    suggestions.hidden = false;
    text.setAttribute("aria-expanded", "true");
    text.setAttribute("aria-activedescendant", `${listId}-${active}`);
  }

  function pick(i) {
    const q = query();
    const p = options[i];
    if (!q || !p) return close();
    const after = text.value.slice(text.selectionStart);
    const insert = `@${p.handle} `;
    text.value = text.value.slice(0, q.start) + insert + after;
    const caret = q.start + insert.length;
    text.setSelectionRange(caret, caret);
    close();
    text.focus();
  }

  text.addEventListener("input", show);
  text.addEventListener("blur", () => setTimeout(close, 100));
  text.addEventListener("keydown", (ev) => {
    if (!suggestions.hidden) {
      if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
        ev.preventDefault();
        active = (active + (ev.key === "ArrowDown" ? 1 : options.length - 1)) % options.length;
        show();
        return;
      }
      if (ev.key === "Enter" || ev.key === "Tab") {
        ev.preventDefault();
        pick(active);
        return;
      }
      if (ev.key === "Escape") {
        ev.preventDefault();
        close();
        return;
      }
    }
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });

  // mentionsIn answers the participants the text mentions by @handle.
  function mentionsIn(content) {
    return participants().filter((p) => p.id !== ctx.me.id &&
      new RegExp(`(^|[^\\w/])@${p.handle.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?![\\w/-])`).test(content))
      .map((p) => ({ id: p.id }));
  }

  async function upload(file) {
    const digest = await sha256Hex(file);
    // Header values travel as bytes: the name's UTF-8 bytes, one per char.
    const name = unescape(encodeURIComponent(file.name));
    return ctx.api.upload(`/api/v1/me/chats/${ctx.esc(roomId)}/files`, file, {
      "Content-Type": file.type || "application/octet-stream", "X-File-Name": name, "X-File-Sha256": digest,
    });
  }

  onSubmit(form, err, async () => {
    const list = [...files.files];
    let content = text.value.trim();
    if (!content && !list.length) {
      showError(err, new Error("Write a message or attach a file first."));
      text.focus();
      return;
    }
    if (!content) content = `Shared ${list.map((f) => f.name).join(", ")}`;
    await busy(form, async () => {
      const ids = [];
      for (const f of list) ids.push((await upload(f)).id);
      const message = { content, mentions: mentionsIn(content) };
      if (ids.length) message.attachment_ids = ids;
      await ctx.api.post(`/api/v1/me/chats/${ctx.esc(roomId)}/messages`, { message });
    });
    text.value = "";
    files.value = "";
    chosen.textContent = "";
    text.focus();
  });

  return { form, focus: () => text.focus() };
}
