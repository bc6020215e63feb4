// Browser notifications, when the person allowed them: a message that
// mentions them, and an agent's request for attention, arriving while the
// tab is hidden (a visible tab shows it already). The rooms list offers to
// turn them on; the browser asks the person.

import { h } from "./dom.js";
import { plain } from "./markdown.js";

const supported = () => typeof Notification !== "undefined";

// notifications answers the rooms list's offer to turn them on, or null
// when there is nothing to offer (unsupported, granted or refused).
export function notifications(ctx) {
  if (!supported() || Notification.permission !== "default") return null;
  const button = h("button", { type: "button", class: "link", onclick: async () => {
    const answer = await Notification.requestPermission();
    button.remove();
    if (answer === "granted") ctx.notify("Notifications are on: mentions and attention requests, while this tab is hidden.");
  } }, "Turn on notifications");
  return h("p", { class: "hint notify-offer" }, button);
}

// wanted says whether m calls for a notification for the person: it
// mentions them, or asks for attention, and someone else sent it.
export function wanted(m, meId) {
  if (m.sender_id === meId) return false;
  if (m.message_type === "attention") return true;
  const mentions = (m.metadata && m.metadata.mentions) || [];
  return m.message_type === "text" && mentions.some((x) => x.id === meId);
}

// maybeNotify notifies of m, a message of room r, when it is wanted, the
// person allowed it and the tab is hidden. Clicking it opens the room at
// the message.
export function maybeNotify(ctx, m, r) {
  if (!supported() || Notification.permission !== "granted" || document.visibilityState !== "hidden") return;
  if (!wanted(m, ctx.me.id)) return;
  const title = `${m.sender_name || "Someone"}${m.message_type === "attention" ? " needs your attention" : ""} in ${plain(r.title || "") || "a room"}`;
  const n = new Notification(title, { body: plain(m.content).slice(0, 200), tag: m.id, icon: "/favicon.svg" });
  n.onclick = () => {
    window.focus();
    ctx.navigate(`/rooms/${r.id}/${m.id}`);
    n.close();
  };
}
