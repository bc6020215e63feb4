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
  const saveDraft = () => localStorage.setItem(draftKey(roomId), text.value);
  const others = () => participants().filter((p) => p.id !== ctx.me.id);
  const complete = mentionCompleter(text, listId, others, saveDraft);
  const picker = h("input", { type: "file", name: "files", multiple: true, class: "visually-hidden" });
  const chips = new Chips(text, others);
  const err = errorBox();
  // On a phone the button is a +, its words kept for screen readers.
  const attach = h("label", { class: "button secondary attach" }, picker,
    h("span", { class: "attach-icon", "aria-hidden": "true" }, "+"), h("span", { class: "attach-text" }, "Attach files"));
  const form = h("form", { class: "composer", "aria-label": "New message" },
    complete.list, chips.el,
    h("div", { class: "compose-row" },
      field("Message", text, "Mention at least one participant with @: the message is for them."),
      attach, h("button", { type: "submit" }, "Send")),
    err);

  picker.addEventListener("change", () => {
    chips.addFiles([...picker.files]);
    picker.value = "";
  });
  text.addEventListener("paste", (ev) => {
    const pasted = [...(ev.clipboardData ? ev.clipboardData.files : [])];
    if (!pasted.length) return;
    ev.preventDefault();
    chips.addFiles(pasted.map(pastedName));
  });
  text.addEventListener("input", () => {
    saveDraft();
    complete.show();
  });
  text.addEventListener("keydown", (ev) => {
    if (complete.key(ev)) return;
    if (ev.key === "Escape" && chips.replyTo) {
      chips.setReply(null);
      return;
    }
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  onSubmit(form, err, async () => {
    if (!(await sendMessage(ctx, roomId, { form, err, text, chips, others }))) return;
    text.value = "";
    localStorage.removeItem(draftKey(roomId));
    chips.clear();
    text.focus();
  });

  chips.render();
  return {
    form,
    refresh: () => chips.refresh(),
    addFiles: (list) => chips.addFiles(list),
    focus: () => text.focus(),
    // reply quotes msg and mentions its sender (when it is not the person).
    reply(msg) {
      chips.setReply(msg, others().find((x) => x.id === msg.sender_id));
    },
  };
}

// pastedName names a pasted file that has no name of its own (a browser
// calls every pasted image image.png) after the time it was pasted.
function pastedName(f, i) {
  if (f.name && f.name !== "image.png") return f;
  const when = new Date().toISOString().replace(/[:.]/g, "-");
  return new File([f], `pasted-${when}${i ? `-${i}` : ""}.${(f.type.split("/")[1] || "bin")}`, { type: f.type });
}

// Chips shows, above the message box, what goes with the message besides
// its text: the message replied to, the mentions by chip (the room's only
// agent by default, a reply's sender) and the files.
class Chips {
  constructor(text, others) {
    this.text = text;
    this.others = others;
    this.el = h("div", { class: "chips", "aria-label": "Mentioned and attached", role: "group" });
    this.files = [];
    this.replyTo = null; // the message replied to
    this.defaultMention = null; // the one agent, unless removed
    this.removedDefault = false;
    this.extra = new Map(); // id -> participant mentioned by chip (a reply's sender)
  }

  render() {
    const items = [];
    if (this.replyTo) {
      items.push(h("span", { class: "chip reply-chip" }, `Replying to ${this.replyTo.sender_name}: `,
        h("span", { class: "quote-text" }, (this.replyTo.content || "").slice(0, 80)),
        this.removeButton("Cancel the reply", () => { this.replyTo = null; })));
    }
    for (const p of this.mentions()) {
      items.push(h("span", { class: "chip mention-chip", dataset: { mention: p.id } }, `@${p.handle}`,
        this.removeButton(`Do not mention ${p.name}`, () => {
          if (this.defaultMention && p.id === this.defaultMention.id) this.removedDefault = true;
          this.extra.delete(p.id);
        })));
    }
    this.files.forEach((f, i) => items.push(h("span", { class: "chip file" }, `${f.name} (${size(f.size)})`,
      this.removeButton(`Remove ${f.name}`, () => { this.files.splice(i, 1); }))));
    this.el.replaceChildren(...items);
    this.el.hidden = !items.length;
  }

  // removeButton is a chip's ×: it runs drop, shows the chips again and
  // gives the message box the focus back.
  removeButton(label, drop) {
    return h("button", { type: "button", class: "link", "aria-label": label, onclick: () => {
      drop();
      this.render();
      this.text.focus();
    } }, "×");
  }

  // mentions are the participants mentioned by chip.
  mentions() {
    const list = [...this.extra.values()];
    const d = this.defaultMention;
    if (d && !this.removedDefault && !this.extra.has(d.id)) list.unshift(d);
    return list;
  }

  // refresh follows the room's participants: the default mention is the
  // room's only agent.
  refresh() {
    const agents = this.others().filter((p) => p.type === "Agent");
    const one = agents.length === 1 ? agents[0] : null;
    if (!one || !this.defaultMention || one.id !== this.defaultMention.id) this.removedDefault = false;
    this.defaultMention = one;
    this.render();
  }

  addFiles(list) {
    this.files.push(...list);
    this.render();
  }

  // setReply quotes msg (null: none), mentioning sender when there is one.
  setReply(msg, sender) {
    this.replyTo = msg;
    if (sender) this.extra.set(sender.id, sender);
    this.render();
    this.text.focus();
  }

  // clear forgets what went with the message just sent.
  clear() {
    this.files = [];
    this.replyTo = null;
    this.extra.clear();
    this.render();
  }
}

// sendMessage sends what the composer holds: the files first, then the
// message with its mentions (from the text and the chips), reply and
// attachments. It answers false when there was nothing to send or nobody
// to send it to, having said so.
async function sendMessage(ctx, roomId, { form, err, text, chips, others }) {
  const refuse = (why) => {
    showError(err, new Error(why));
    text.focus();
    return false;
  };
  let content = text.value.trim();
  if (!content && !chips.files.length) return refuse("Write a message or attach a file first.");
  if (!content) content = `Shared ${chips.files.map((f) => f.name).join(", ")}`;
  const mentioned = new Map(mentionsIn(others(), content).map((p) => [p.id, p]));
  for (const p of chips.mentions()) mentioned.set(p.id, p);
  if (!mentioned.size) return refuse("Mention someone with @: every message is for someone in the room.");
  await busy(form, async () => {
    const ids = [];
    for (const f of chips.files) ids.push((await upload(ctx, roomId, f)).id);
    const message = { content, mentions: [...mentioned.keys()].map((id) => ({ id })) };
    if (ids.length) message.attachment_ids = ids;
    if (chips.replyTo) message.reply_to_id = chips.replyTo.id;
    await ctx.api.post(`/api/v1/me/chats/${ctx.esc(roomId)}/messages`, { message });
  });
  return true;
}

// mentionsIn answers the participants the text mentions by @handle.
function mentionsIn(people, content) {
  return people.filter((p) => new RegExp(`(^|[^\\w/])@${escRe(p.handle)}(?![\\w/-])`).test(content));
}

async function upload(ctx, roomId, file) {
  const digest = await sha256Hex(file);
  // Header values travel as bytes: the name's UTF-8 bytes, one per char.
  const name = unescape(encodeURIComponent(file.name));
  return ctx.api.upload(`/api/v1/me/chats/${ctx.esc(roomId)}/files`, file, {
    "Content-Type": file.type || "application/octet-stream", "X-File-Name": name, "X-File-Sha256": digest,
  });
}

// mentionCompleter offers, under an @word being typed in text, the
// participants (others()) whose handle or name holds it; the arrows move
// through them, Enter or Tab picks one, Escape closes the list. picked()
// runs after a pick changed the text. key(ev) answers whether the list
// took the key.
function mentionCompleter(text, listId, others, picked) {
  const list = h("ul", { class: "suggestions", id: listId, role: "listbox", "aria-label": "Participants to mention", hidden: true });
  let options = [];
  let active = -1;

  // query is the @word being typed at the caret, if any.
  function query() {
    const before = text.value.slice(0, text.selectionStart);
    const m = before.match(/(^|\s)@([\w./-]*)$/);
    return m ? { term: m[2].toLowerCase(), start: before.length - m[2].length - 1 } : null;
  }

  function close() {
    list.hidden = true;
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
    list.replaceChildren(...options.map((p, i) => h("li", {
      id: `${listId}-${i}`, role: "option", "aria-selected": i === active ? "true" : "false",
      onmousedown: (ev) => { ev.preventDefault(); pick(i); },
    }, p.name, " ", h("span", { class: "muted" }, `@${p.handle}`))));
    list.hidden = false;
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
    picked();
    close();
    text.focus();
  }

  function key(ev) {
    if (list.hidden) return false;
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      active = (active + (ev.key === "ArrowDown" ? 1 : options.length - 1)) % options.length;
      show();
    } else if (ev.key === "Enter" || ev.key === "Tab") {
      pick(active);
    } else if (ev.key === "Escape") {
      close();
    } else {
      return false;
    }
    ev.preventDefault();
    return true;
  }

  text.addEventListener("blur", () => setTimeout(close, 100));
  return { list, show, key };
}
