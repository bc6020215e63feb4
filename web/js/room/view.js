// One open room: its title (rename, delete), the message timeline, the
// composer, and the side panel. Live updates come from the room's three
// channels; after a reconnection everything shown is reloaded, since pushes
// sent while the socket was away are lost.

import { h, replace, field, busy, errorBox, onSubmit } from "../dom.js";
import { confirmDialog } from "../ui.js";
import { Timeline } from "./timeline.js";
import { composer } from "./composer.js";
import { Participants, Board } from "./side.js";
import { RoomRetention } from "./retention.js";

export async function openRoom(ctx, root, roomId, { at, onRead, onGone, onRenamed }) {
  const path = `/api/v1/me/chats/${ctx.esc(roomId)}`;
  let room = await ctx.api.get(path);
  const names = new Map();
  let people = [];

  const heading = h("h1", { id: "room-title", tabindex: "-1" });
  const showTitle = () => replace(heading, room.title || "Untitled room");
  showTitle();

  const renameInput = h("input", { name: "title", maxlength: 120, required: true });
  const renameErr = errorBox();
  const renameForm = h("form", { class: "row", hidden: true }, field("Room title", renameInput), renameErr,
    h("button", { type: "submit" }, "Save title"),
    h("button", { type: "button", class: "secondary", onclick: () => { renameForm.hidden = true; } }, "Cancel"));
  onSubmit(renameForm, renameErr, async () => {
    room = await busy(renameForm, () => ctx.api.patch(path, { chat: { title: renameInput.value.trim() } }));
    showTitle();
    onRenamed(room);
    renameForm.hidden = true;
    heading.focus();
  });

  let deleting = false;
  const actions = h("div", { class: "row" },
    h("button", { type: "button", class: "secondary", onclick: () => {
      renameInput.value = room.title || "";
      renameForm.hidden = false;
      renameInput.focus();
    } }, "Rename"),
    h("button", { type: "button", class: "danger", onclick: async () => {
      const deleted = await confirmDialog({
        title: `Delete “${room.title || "Untitled room"}”?`,
        text: "The room and its messages disappear for everyone in it. This cannot be undone.",
        confirm: "Delete",
        action: async () => {
          deleting = true;
          try {
            await ctx.api.del(path);
          } catch (e) {
            deleting = false;
            throw e;
          }
          return true;
        },
      });
      if (!deleted) return;
      ctx.notify("Room deleted.");
      onGone(roomId, null);
    } }, "Delete room"));

  // Reading: while the page is visible, what arrives is read at once (a
  // burst of messages is one request). A read still waiting when the person
  // leaves the room is sent on the way out.
  let readTimer = null;
  let readPending = false;
  const sendRead = async () => {
    readPending = false;
    // A room being deleted here has nothing left to mark read: the read
    // would only race the deletion and be refused.
    if (deleting) return;
    const newest = timeline.newestId();
    try {
      const r = await ctx.api.post(`${path}/read`, newest ? { message_id: newest } : {});
      onRead(r);
    } catch (e) {
      if (e.status !== 404) ctx.notify(`Could not mark the room read: ${e.message}`, "error");
    }
  };
  const markRead = () => {
    if (document.visibilityState !== "visible") return;
    readPending = true;
    clearTimeout(readTimer);
    readTimer = setTimeout(sendRead, 300);
  };

  const timeline = new Timeline(ctx, roomId, { names, onNew: markRead });
  const retention = new RoomRetention(ctx, roomId);
  const participants = new Participants(ctx, roomId, (items) => {
    people = items;
    retention.owns(items);
    names.clear();
    for (const p of items) names.set(p.id, p.name);
    timeline.refreshNames();
  });
  const board = new Board(ctx, roomId);
  const write = composer(ctx, roomId, () => people);

  replace(root,
    h("div", { class: "room" },
      h("div", { class: "room-main" },
        h("div", { class: "row" }, h("a", { href: "#/rooms", class: "back" }, "← Rooms"), heading, actions),
        renameForm,
        timeline.list,
        write.form),
      h("aside", { class: "room-side", "aria-label": "Room details" }, participants.el, board.el, retention.el)));

  await Promise.all([timeline.loadNewest(), participants.load(), board.load(), retention.load()]);
  markRead();

  const chat = ctx.socket.channel(`chat_room:${roomId}`);
  const members = ctx.socket.channel(`room_participants:${roomId}`);
  const tasks = ctx.socket.channel(`room_tasks:${roomId}`);
  const quietly = (p) => p.catch((e) => ctx.notify(e.message, "error"));
  const offs = [
    chat.on("message_created", (m) => timeline.upsert(m, { live: true })),
    chat.on("event_created", (m) => timeline.upsert(m, { live: true })),
    chat.on("message_updated", (m) => timeline.update(m)),
    members.on("participant_added", () => quietly(participants.load())),
    members.on("participant_removed", () => quietly(participants.load())),
    // The person's own deletion may be pushed back before its answer
    // arrives: that one is announced by the answer, not here.
    members.on("room_deleted", () => onGone(roomId, deleting ? null : "This room was deleted.")),
    tasks.on("board_updated", () => quietly(board.load())),
    ctx.socket.onReconnect(() => quietly(Promise.all([timeline.loadNewest(), participants.load(), board.load()]))),
  ];
  const visible = () => markRead();
  document.addEventListener("visibilitychange", visible);
  heading.focus();
  if (at && !(await timeline.reveal(at))) {
    ctx.notify("That message is further back than the room shows at once: load earlier messages to reach it.");
  }

  return {
    renamed(r) {
      room = { ...room, ...r };
      showTitle();
    },
    // deleting says whether the person is deleting the room here: its
    // removal pushes then need no announcement of their own.
    deleting: () => deleting,
    // abandon drops a pending read: the room is gone, or the person is
    // no longer in it.
    abandon() {
      readPending = false;
      clearTimeout(readTimer);
    },
    close() {
      clearTimeout(readTimer);
      if (readPending) sendRead();
      document.removeEventListener("visibilitychange", visible);
      offs.forEach((off) => off());
      chat.leave();
      members.leave();
      tasks.leave();
    },
  };
}
