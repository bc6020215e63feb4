// Writing a message. Every message must mention someone (Band's rule), so
// the composer helps: in a room with exactly one agent, that agent is
// mentioned by default, as a chip the person may remove; "Reply" on a
// message quotes it and mentions its sender; "@" completes participants'
// handles by keyboard. Enter sends, Shift+Enter adds a line. The draft is
// kept per room in this browser. Files come from the picker, a drop on the
// room or a paste, and go up with the message.
//
// Mentions are taken from the text as sent (every @handle of a participant
// in it), plus the chips; the server puts a chip's @handle in front of the
// text when the text lacks it.

import { h, field, busy, errorBox, showError, onSubmit } from "../dom.js";
import { sha256Hex } from "../sha256.js";
import { size } from "./attachments.js";

let listSeq = 0;
const draftKey = (roomId) => `chatd.draft.${roomId}`;
const escRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

export function composer(ctx, roomId, { participants }) {
  const listId = `mentions-${++listSeq}`;
  const text = h("textarea", {
    name: "message", rows: 2, role: "combobox", "aria-autocomplete": "list", "aria-expanded": "false",
    "aria-controls": listId,
    // A phone's box is too narrow for the keys; its keyboard says them.
    placeholder: matchMedia("(max-width: 760px)").matches ? "Write a message…" : "Write a message… (@ mentions, Enter sends, Shift+Enter new line)",
  });
  text.value = localStorage.getItem(draftKey(roomId)) || "";
  const suggestions = h("ul", { class: "suggestions", id: listId, role: "listbox", "aria-label": "Participants to mention", hidden: true });
  const picker = h("input", { type: "file", name: "files", multiple: true, class: "visually-hidden" });
  const chips = h("div", { class: "chips", "aria-label": "Mentioned and attached", role: "group" });
  const err = errorBox();
  const send = h("button", { type: "submit" }, "Send");
  // On a phone the button is a +, its words kept for screen readers.
  const attach = h("label", { class: "button secondary attach" }, picker,
    h("span", { class: "attach-icon", "aria-hidden": "true" }, "+"), h("span", { class: "attach-text" }, "Attach files"));
  const form = h("form", { class: "composer", "aria-label": "New message" },
    suggestions, chips,
    h("div", { class: "compose-row" },
      field("Message", text, "Mention at least one participant with @: the message is for them."),
      attach, send),
    err);

  let options = [];
  let active = -1;
  let files = [];
  let replyTo = null; // the message replied to
  let defaultMention = null; // the one agent, unless removed
  let removedDefault = false;
  const extra = new Map(); // id -> participant mentioned by chip (a reply's sender)

  const others = () => participants().filter((p) => p.id !== ctx.me.id);

  // renderChips shows the reply, the mentions by chip and the files.
  function renderChips() {
    const items = [];
    if (replyTo) {
      items.push(h("span", { class: "chip reply-chip" }, `Replying to ${replyTo.sender_name}: `,
        h("span", { class: "quote-text" }, (replyTo.content || "").slice(0, 80)),
        h("button", { type: "button", class: "link", "aria-label": "Cancel the reply", onclick: () => { replyTo = null; renderChips(); text.focus(); } }, "×")));
    }
    for (const p of mentionChips()) {
      items.push(h("span", { class: "chip mention-chip", dataset: { mention: p.id } }, `@${p.handle}`,
        h("button", { type: "button", class: "link", "aria-label": `Do not mention ${p.name}`, onclick: () => {
          if (defaultMention && p.id === defaultMention.id) removedDefault = true;
          extra.delete(p.id);
          renderChips();
          text.focus();
        } }, "×")));
    }
    files.forEach((f, i) => items.push(h("span", { class: "chip file" }, `${f.name} (${size(f.size)})`,
      h("button", { type: "button", class: "link", "aria-label": `Remove ${f.name}`, onclick: () => { files.splice(i, 1); renderChips(); } }, "×"))));
    chips.replaceChildren(...items);
    chips.hidden = !items.length;
  }

  function mentionChips() {
    const list = [...extra.values()];
    if (defaultMention && !removedDefault && !extra.has(defaultMention.id)) list.unshift(defaultMention);
    return list;
  }

  // refresh follows the room's participants: the default mention is the
  // room's only agent.
  function refresh() {
    const agents = others().filter((p) => p.type === "Agent");
    const one = agents.length === 1 ? agents[0] : null;
    if (!one || !defaultMention || one.id !== defaultMention.id) removedDefault = false;
    defaultMention = one;
    renderChips();
  }

  function addFiles(list) {
    for (const f of list) files.push(f);
    renderChips();
  }

  picker.addEventListener("change", () => {
    addFiles([...picker.files]);
    picker.value = "";
  });
  text.addEventListener("paste", (ev) => {
    const pasted = [...(ev.clipboardData ? ev.clipboardData.files : [])];
    if (!pasted.length) return;
    ev.preventDefault();
    addFiles(pasted.map((f, i) => (f.name && f.name !== "image.png" ? f
      : new File([f], `pasted-${new Date().toISOString().replace(/[:.]/g, "-")}${i ? `-${i}` : ""}.${(f.type.split("/")[1] || "bin")}`, { type: f.type }))));
  });
  text.addEventListener("input", () => {
    localStorage.setItem(draftKey(roomId), text.value);
    show();
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
    options = others().filter((p) => p.handle.toLowerCase().includes(q.term) || p.name.toLowerCase().includes(q.term)).slice(0, 8);
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
    localStorage.setItem(draftKey(roomId), text.value);
    close();
    text.focus();
  }

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
    if (ev.key === "Escape" && replyTo) {
      replyTo = null;
      renderChips();
      return;
    }
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });

  // mentionsIn answers the participants the text mentions by @handle.
  function mentionsIn(content) {
    return others().filter((p) => new RegExp(`(^|[^\\w/])@${escRe(p.handle)}(?![\\w/-])`).test(content));
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
    let content = text.value.trim();
    if (!content && !files.length) {
      showError(err, new Error("Write a message or attach a file first."));
      text.focus();
      return;
    }
    if (!content) content = `Shared ${files.map((f) => f.name).join(", ")}`;
    const mentioned = new Map(mentionsIn(content).map((p) => [p.id, p]));
    for (const p of mentionChips()) mentioned.set(p.id, p);
    if (!mentioned.size) {
      showError(err, new Error("Mention someone with @: every message is for someone in the room."));
      text.focus();
      return;
    }
    await busy(form, async () => {
      const ids = [];
      for (const f of files) ids.push((await upload(f)).id);
      const message = { content, mentions: [...mentioned.keys()].map((id) => ({ id })) };
      if (ids.length) message.attachment_ids = ids;
      if (replyTo) message.reply_to_id = replyTo.id;
      await ctx.api.post(`/api/v1/me/chats/${ctx.esc(roomId)}/messages`, { message });
    });
    text.value = "";
    localStorage.removeItem(draftKey(roomId));
    files = [];
    replyTo = null;
    extra.clear();
    renderChips();
    text.focus();
  });

  renderChips();
  return {
    form,
    refresh,
    addFiles,
    focus: () => text.focus(),
    // reply quotes msg and mentions its sender (when it is not the person).
    reply(msg) {
      replyTo = msg;
      const p = others().find((x) => x.id === msg.sender_id);
      if (p) extra.set(p.id, p);
      renderChips();
      text.focus();
    },
  };
}
