// What a person does to a message: reply (the composer quotes it and
// mentions its sender), react (a few emoji offered, any given one repeated
// with a click), edit their own text (a dialog), delete their own (or, as
// the room's owner, any: after a confirmation). Each change comes back to
// every reader as a message_updated push; the answer is applied at once
// here too, so the person sees it without waiting for the push.

import { h, field, busy, errorBox, onSubmit } from "../dom.js";
import { confirmDialog } from "../ui.js";
import { quickReactions } from "./message.js";

export function messageActions(ctx, roomId, { timeline, write }) {
  const base = (id) => `/api/v1/me/chats/${ctx.esc(roomId)}/messages/${ctx.esc(id)}`;
  const apply = (m) => { if (m) timeline.update(m); };
  const failed = (what) => (e) => ctx.notify(`Could not ${what}: ${e.message}`, "error");

  function pickReaction(msg, button) {
    const bar = button.closest(".actions");
    const open = bar.querySelector(".reaction-picker");
    if (open) {
      open.remove();
      return;
    }
    const close = () => {
      picker.remove();
      button.focus();
    };
    const picker = h("div", { class: "reaction-picker", role: "group", "aria-label": "Pick a reaction" },
      quickReactions.map((e) => h("button", { type: "button", class: "secondary", "aria-label": `React ${e}`,
        onclick: () => { close(); run("react", msg, e); } }, e)));
    picker.addEventListener("keydown", (ev) => { if (ev.key === "Escape") close(); });
    bar.append(picker);
    picker.querySelector("button").focus();
  }

  function edit(msg) {
    const text = h("textarea", { name: "content", rows: 5, required: true });
    text.value = msg.content || "";
    const err = errorBox();
    const cancel = h("button", { type: "button", class: "secondary" }, "Cancel");
    const form = h("form", { class: "stack" }, h("h2", { id: "edit-heading" }, "Edit your message"),
      field("Message text", text, "Its mentions stay as they were. The room's owner can read what it said before."), err,
      h("div", { class: "row dialog-actions" }, cancel, h("button", { type: "submit" }, "Save")));
    const dlg = h("dialog", { class: "confirm edit", "aria-labelledby": "edit-heading" }, form);
    cancel.addEventListener("click", () => dlg.close());
    dlg.addEventListener("close", () => dlg.remove());
    onSubmit(form, err, async () => {
      const m = await busy(form, () => ctx.api.patch(base(msg.id), { message: { content: text.value.trim() } }));
      apply(m);
      dlg.close();
    });
    text.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        form.requestSubmit();
      }
    });
    document.body.append(dlg);
    dlg.showModal();
    text.focus();
  }

  async function remove(msg) {
    const m = await confirmDialog({
      title: "Delete this message?",
      text: "It is replaced by “This message was deleted.” for everyone, its files and reactions go with it, and " +
        "agents that have not started on it yet will not. This cannot be undone.",
      confirm: "Delete message",
      action: () => ctx.api.del(base(msg.id)),
    });
    apply(m);
  }

  function run(action, msg, arg) {
    switch (action) {
      case "reply":
        return write.reply(msg);
      case "pick-reaction":
        return pickReaction(msg, arg);
      case "react":
        return ctx.api.post(`${base(msg.id)}/reactions`, { emoji: arg }).then(apply, failed("react"));
      case "unreact":
        return ctx.api.del(`${base(msg.id)}/reactions/${encodeURIComponent(arg)}`).then(apply, failed("take the reaction back"));
      case "edit":
        return edit(msg);
      case "delete":
        return remove(msg);
      case "show":
        return timeline.reveal(msg.id).then((found) => {
          if (!found) ctx.notify("That message is no longer in the room.");
        });
      default:
        return null;
    }
  }
  return { run };
}
