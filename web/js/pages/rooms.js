// Rooms: the list (unread counts, last activity, newest first) beside the
// open room. The list stays live: rooms added to or removed from the
// person arrive on user_rooms, and each listed room's chat_room channel
// counts what arrives in rooms that are not open.

import { h, replace, field, busy, errorBox, onSubmit } from "../dom.js";
import { pagedList } from "../ui.js";
import { timeEl } from "../time.js";
import { openRoom } from "../room/view.js";
import { plain } from "../markdown.js";
import { notifications, maybeNotify } from "../notify.js";

// watchLimit bounds the rooms whose messages are counted live; older rooms
// show the count from their last listing.
const watchLimit = 100;

// unreadTypes are the types the server counts as unread (store/reads.go):
// an agent's thoughts and tool calls show in the room but are not news.
const unreadTypes = new Set(["text", "attention", "error"]);

export async function mount(root, ctx) {
  const current = ctx.params[0] || null;
  // A search result opens its room at the message: #/rooms/<room>/<message>.
  const at = ctx.params[1] || null;
  const watched = new Map(); // id -> {ch, off}
  let opened = null;

  const titleInput = h("input", { name: "title", maxlength: 120, placeholder: "Optional: taken from the first message" });
  const createErr = errorBox();
  const createForm = h("form", { class: "card stack", hidden: true, "aria-label": "New room" },
    field("Title", titleInput), createErr,
    h("div", { class: "row" }, h("button", { type: "submit" }, "Create room"),
      h("button", { type: "button", class: "secondary", onclick: () => { createForm.hidden = true; } }, "Cancel")));
  const newButton = h("button", { type: "button", onclick: () => {
    createForm.hidden = false;
    titleInput.focus();
  } }, "New room");
  // The rooms a person's agents are in without them are left out unless
  // asked for; the choice is kept in this browser.
  const agentRooms = h("input", { type: "checkbox", name: "agent_rooms",
    checked: localStorage.getItem("chatd.agentRooms") === "1" });
  agentRooms.addEventListener("change", () => {
    localStorage.setItem("chatd.agentRooms", agentRooms.checked ? "1" : "0");
    rooms.load();
  });
  const activity = (r) => r.last_message_at || r.inserted_at;
  // The listing comes newest first, but rooms that arrive live, and the
  // messages that move a room up, are placed by the same rule.
  const rooms = pagedList({
    fetch: (at) => ctx.api.page("/api/v1/me/chats", { limit: 50, include: agentRooms.checked ? "agent_rooms" : null }, at),
    body: h("ul", {}),
    order: (items) => items.sort((a, b) => (activity(b) || "").localeCompare(activity(a) || "")),
    // A row is made anew only when what it shows changed (rowEl).
    row: (r) => rowEl(r),
    empty: () => h("li", { class: "muted" }, "No rooms yet. Create one to start talking with your agents."),
    // The list sits beside the open room: a refusal is told in a message
    // rather than in the list's place.
    onError: (e) => ctx.notify(`Could not load rooms: ${e.message}`, "error"),
    more: "Load more rooms",
    linkMore: true,
    rendered: (items) => {
      for (const r of items) if (watched.size < watchLimit) watch(r.id);
      ctx.setUnread(items.reduce((n, r) => n + (r.id === current ? 0 : r.unread_count || 0), 0));
    },
  });
  const rows = new Map(); // room id -> {sig, el}
  function rowEl(r) {
    const sig = JSON.stringify([r.title, r.id === current ? 0 : r.unread_count || 0, activity(r)]);
    const held = rows.get(r.id);
    if (held && held.sig === sig) return held.el;
    const el = makeRow(r);
    rows.set(r.id, { sig, el });
    return el;
  }
  function makeRow(r) {
    const unread = r.id === current ? 0 : r.unread_count || 0;
    const title = plain(r.title || "") || "Untitled room";
    // The link's name is what it shows: the title, the count (with the
    // word a screen reader needs), the time.
    return h("li", {}, h("a", { href: `#/rooms/${r.id}`, "aria-current": r.id === current ? "page" : null,
      class: unread ? "has-unread" : null, dataset: { room: r.id } },
      h("span", { class: "title" }, title),
      h("span", { class: "row" },
        unread ? h("span", { class: "unread" }, unread > 99 ? "99+" : String(unread), h("span", { class: "visually-hidden" }, " unread")) : null,
        timeEl(activity(r), { class: "meta" }))));
  }
  const roomPane = h("section", { class: "room-pane", "aria-live": "off" });
  const layout = h("div", { class: `rooms${current ? " has-room" : ""}` },
    h("nav", { class: "room-list", "aria-labelledby": "rooms-heading" },
      h("div", { class: "row" }, h("h1", { id: "rooms-heading" }, "Rooms"), newButton,
        h("button", { type: "button", class: "secondary drawer-close", "aria-label": "Close the room list",
          onclick: () => document.body.classList.remove("rooms-open") }, "×")),
      createForm,
      notifications(ctx),
      h("label", { class: "check" }, agentRooms, " Include my agents' rooms"),
      rooms.el),
    roomPane,
    h("div", { class: "scrim rooms-scrim", "aria-hidden": "true", onclick: () => document.body.classList.remove("rooms-open") }));
  document.body.classList.remove("rooms-open");
  root.append(layout);

  onSubmit(createForm, createErr, async () => {
    const title = titleInput.value.trim();
    const room = await busy(createForm, () => ctx.api.post("/api/v1/me/chats", title ? { chat: { title } } : {}));
    createForm.hidden = true;
    titleInput.value = "";
    rooms.put(room);
    rooms.render();
    ctx.navigate(`/rooms/${room.id}`);
  });

  // watch counts new messages of a listed room that is not open. A room
  // that arrived live may have had messages before its channel was joined:
  // once joined, its count is read again (counts only grow while a room is
  // not open, so the larger one is right).
  function watch(id, { recount = false } = {}) {
    if (watched.has(id)) return;
    const ch = ctx.socket.channel(`chat_room:${id}`);
    const offJoined = recount ? ch.on("joined", async () => {
      try {
        const fresh = await ctx.api.get(`/api/v1/me/chats/${ctx.esc(id)}`);
        const r = rooms.get(id);
        if (!r) return;
        rooms.put({ ...r, ...fresh, unread_count: Math.max(r.unread_count || 0, fresh.unread_count || 0) });
        rooms.render();
      } catch {
        // The listing shows what it had; the next reload corrects it.
      }
    }) : () => {};
    const offMessages = ch.on("message_created", (m) => {
      const r = rooms.get(id);
      if (!r) return;
      maybeNotify(ctx, m, r);
      // A message the room's last reading already counted (its push came
      // after that read) is not counted twice.
      const counted = r.last_message_at && m.inserted_at <= r.last_message_at;
      if (!counted) r.last_message_at = m.inserted_at;
      if (!counted && id !== current && m.sender_id !== ctx.me.id && unreadTypes.has(m.message_type)) r.unread_count = (r.unread_count || 0) + 1;
      rooms.render();
    });
    watched.set(id, { ch, off: () => { offJoined(); offMessages(); } });
  }

  function unwatch(id) {
    const w = watched.get(id);
    if (!w) return;
    w.off();
    w.ch.leave();
    watched.delete(id);
  }

  const userRooms = ctx.socket.channel(`user_rooms:${ctx.me.id}`);
  // A room leaves by several roads at once (the person's own delete, then
  // room_deleted and room_removed pushes): only the first one counts.
  const left = new Set();
  const gone = (id, message) => {
    if (left.has(id)) return;
    left.add(id);
    rooms.remove(id);
    unwatch(id);
    rooms.render();
    if (id === current) {
      if (opened) opened.abandon();
      if (message && !(opened && opened.deleting())) ctx.notify(message);
      ctx.navigate("/rooms");
    }
  };
  const offs = [
    userRooms.on("room_added", (r) => {
      rooms.put({ unread_count: 0, ...r });
      if (watched.size < watchLimit) watch(r.id, { recount: true });
      rooms.render();
    }),
    userRooms.on("room_updated", (r) => {
      const held = rooms.get(r.id);
      rooms.put({ ...held, ...r, unread_count: held ? held.unread_count : 0 });
      if (r.id === current && opened) opened.renamed(r);
      rooms.render();
    }),
    userRooms.on("room_removed", (r) => gone(r.id, "You are no longer in this room.")),
    // Read in another tab or on another device.
    userRooms.on("room_read", (r) => {
      const held = rooms.get(r.id);
      if (!held) return;
      rooms.put({ ...held, unread_count: r.unread_count });
      rooms.render();
    }),
    ctx.socket.onReconnect(() => rooms.load()),
  ];

  await rooms.load();

  if (current) {
    try {
      opened = await openRoom(ctx, roomPane, current, {
        at,
        onRead: (r) => {
          const held = rooms.get(current);
          if (held && r) rooms.put({ ...held, ...r, unread_count: 0 });
          rooms.render();
        },
        onGone: (id, message) => gone(id, message),
        // The answer to a rename updates the list at once; the push that
        // follows (or came first) carries the same title.
        onRenamed: (r) => {
          const held = rooms.get(r.id);
          if (held) rooms.put({ ...held, title: r.title, title_locked: r.title_locked });
          rooms.render();
        },
      });
    } catch (e) {
      replace(roomPane, h("p", { class: "error", role: "alert" },
        e.status === 404 ? "This room does not exist, or you are not in it." : e.message));
    }
  } else {
    replace(roomPane, h("div", { class: "card" }, h("h2", {}, "Pick a room"),
      h("p", {}, "Choose a room on the left, or press New room. Add your agents to a room and mention them with @ to give them work.")));
  }

  return () => {
    ctx.setUnread(0);
    rooms.stop();
    if (opened) opened.close();
    offs.forEach((off) => off());
    userRooms.leave();
    for (const id of [...watched.keys()]) unwatch(id);
  };
}
