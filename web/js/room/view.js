// One open room: its header (title, what each agent is doing, the room's
// actions), the message timeline, the composer, and the side panel
// (participants, board, attention, retention). Live updates come from the room's
// three channels; after a reconnection everything shown is reloaded, since
// pushes sent while the socket was away are lost.

import { h, replace, field, busy, errorBox, onSubmit } from "../dom.js";
import { confirmDialog } from "../ui.js";
import { plain } from "../markdown.js";
import { Timeline } from "./timeline.js";
import { composer } from "./composer.js";
import { Participants, Board } from "./side.js";
import { AttentionList } from "./attention.js";
import { AgentStates } from "./agents.js";
import { FileLoader } from "./attachments.js";
import { messageActions } from "./actions.js";
import { RoomRetention } from "./retention.js";

const scrollKey = "chatd.scroll";

export async function openRoom(ctx, root, roomId, { at, onRead, onGone, onRenamed }) {
  const path = `/api/v1/me/chats/${ctx.esc(roomId)}`;
  const r = { ctx, roomId, path, room: await ctx.api.get(path), people: [], names: new Map(), states: new AgentStates() };
  const files = new FileLoader(ctx, roomId);
  const title = roomTitle(r, onRenamed);
  const removal = roomDeletion(r, title.heading, onGone);
  const agentLine = h("div", { class: "agent-line", "aria-label": "Agents in this room" });
  let timeline = null;
  const reader = roomReader(r, () => timeline.newestId(), removal.deleting, onRead);
  const parts = roomParts(r, { files, reader, agentLine });
  timeline = parts.timeline;
  const { participants, attention, board, retention, write } = parts;
  const side = sidePanel(roomId, [participants.el, attention.el, board.el, retention.el]);
  const jump = jumpToUnread(timeline);
  timeline.rendered = () => {
    parts.updateStates();
    jump.update();
  };
  const scroll = scrollMemory(roomId, timeline);
  const main = h("div", { class: "room-main" },
    h("div", { class: "room-head" },
      h("button", { type: "button", class: "secondary drawer-button", "aria-label": "Rooms", onclick: () => document.body.classList.add("rooms-open") }, "☰"),
      title.heading, roomSearch(ctx, roomId), side.button, roomMenu(timeline, { rename: title.startRename, remove: removal.deleteRoom })),
    agentLine, title.renameForm, jump.button, timeline.list, write.form);
  replace(root, h("div", { class: "room" }, main, side.el, side.scrim));
  acceptDrops(main, write);

  const loadPresence = () => ctx.api.get(`${path}/presence`).then((list) => {
    r.states.setPresence(list || []);
    parts.updateStates();
  });
  const live = liveChannels(r, { ...parts, loadPresence, reader, deleting: removal.deleting, onGone });
  await Promise.all([timeline.loadNewest(r.room.unread_count || 0), participants.load(), board.load(), attention.load(),
    retention.load(), loadPresence().catch(() => {})]);
  live.loaded();
  if (!at) await scroll.restore();
  jump.update();
  reader.markRead();
  // Agents' "working…" and the times of the agent line age by themselves.
  const tick = setInterval(parts.updateStates, 15000);
  title.heading.focus();
  if (at && !(await timeline.reveal(at))) {
    ctx.notify("That message is further back than the room shows at once: load earlier messages to reach it.");
  }

  return {
    renamed(changed) {
      r.room = { ...r.room, ...changed };
      title.show();
    },
    // deleting says whether the person is deleting the room here: its
    // removal pushes then need no announcement of their own.
    deleting: removal.deleting,
    // abandon drops a pending read: the room is gone, or the person is
    // no longer in it.
    abandon: reader.abandon,
    reveal: (id) => timeline.reveal(id),
    close() {
      scroll.close();
      clearInterval(tick);
      reader.close();
      document.body.classList.remove("side-open");
      live.close();
      timeline.close();
      files.close();
    },
  };
}

// roomParts makes the room's timeline, composer, message actions and side
// panel parts, wired to each other, and updateStates, which brings the
// agent line (what each agent is doing) up to date with them.
function roomParts(r, { files, reader, agentLine }) {
  const { ctx, roomId, states } = r;
  const isOwner = () => r.room.participant_role === "owner" || r.people.some((p) => p.id === ctx.me.id && p.role === "owner");
  const parts = {};
  const timeline = new Timeline(ctx, roomId, {
    names: r.names, files, owner: isOwner,
    act: (...args) => parts.actions.run(...args),
    working: (id) => states.working(id),
    onNew: (m) => {
      reader.markRead();
      if (m.message_type === "attention") parts.attention.add(m);
    },
  });
  const write = composer(ctx, roomId, { participants: () => r.people });
  const updateStates = () => {
    const before = timeline.messages().length ? agentLine.textContent : null;
    states.compute(timeline.messages(), r.people);
    replace(agentLine, states.chips());
    parts.participants.decorate(states);
    if (before !== agentLine.textContent) timeline.schedule();
  };
  const participants = new Participants(ctx, roomId, (items) => {
    r.people = items;
    parts.retention.owns(items);
    r.names.clear();
    for (const p of items) r.names.set(p.id, p.name);
    timeline.refresh();
    write.refresh();
    updateStates();
  });
  return Object.assign(parts, {
    timeline, write, participants, updateStates,
    actions: messageActions(ctx, roomId, { timeline, write }),
    board: new Board(ctx, roomId),
    retention: new RoomRetention(ctx, roomId),
    attention: new AttentionList(ctx, roomId, { reveal: (id) => timeline.reveal(id) }),
  });
}

// roomTitle is the room's heading and the form that renames it.
function roomTitle(r, onRenamed) {
  const heading = h("h1", { id: "room-title", tabindex: "-1" });
  const show = () => replace(heading, plain(r.room.title || "") || "Untitled room");
  show();
  const input = h("input", { name: "title", maxlength: 120, required: true });
  const err = errorBox();
  const renameForm = h("form", { class: "row rename", hidden: true }, field("Room title", input), err,
    h("button", { type: "submit" }, "Save title"),
    h("button", { type: "button", class: "secondary", onclick: () => { renameForm.hidden = true; } }, "Cancel"));
  onSubmit(renameForm, err, async () => {
    r.room = await busy(renameForm, () => r.ctx.api.patch(r.path, { chat: { title: input.value.trim() } }));
    show();
    onRenamed(r.room);
    renameForm.hidden = true;
    heading.focus();
  });
  const startRename = () => {
    input.value = r.room.title || "";
    renameForm.hidden = false;
    input.focus();
  };
  return { heading, renameForm, show, startRename };
}

// roomDeletion deletes the room after a confirmation; deleting() says
// whether that is under way here.
function roomDeletion(r, heading, onGone) {
  let deleting = false;
  async function deleteRoom() {
    const deleted = await confirmDialog({
      title: `Delete “${heading.textContent}”?`,
      text: "The room and its messages disappear for everyone in it. This cannot be undone.",
      confirm: "Delete",
      action: async () => {
        deleting = true;
        try {
          await r.ctx.api.del(r.path);
        } catch (e) {
          deleting = false;
          throw e;
        }
        return true;
      },
    });
    if (!deleted) return;
    r.ctx.notify("Room deleted.");
    onGone(r.roomId, null);
  }
  return { deleteRoom, deleting: () => deleting };
}

// roomReader marks the room read: while the page is visible, what arrives
// is read at once (a burst of messages is one request). A read still
// waiting when the person leaves the room is sent on the way out.
function roomReader(r, newestId, deleting, onRead) {
  let timer = null;
  let pending = false;
  const send = async () => {
    pending = false;
    // A room being deleted here has nothing left to mark read: the read
    // would only race the deletion and be refused.
    if (deleting()) return;
    const newest = newestId();
    try {
      onRead(await r.ctx.api.post(`${r.path}/read`, newest ? { message_id: newest } : {}));
    } catch (e) {
      if (e.status !== 404) r.ctx.notify(`Could not mark the room read: ${e.message}`, "error");
    }
  };
  const markRead = () => {
    if (document.visibilityState !== "visible") return;
    pending = true;
    clearTimeout(timer);
    timer = setTimeout(send, 300);
  };
  document.addEventListener("visibilitychange", markRead);
  const abandon = () => {
    pending = false;
    clearTimeout(timer);
  };
  return {
    markRead,
    abandon,
    close() {
      document.removeEventListener("visibilitychange", markRead);
      clearTimeout(timer);
      if (pending) send();
    },
  };
}

// sidePanel holds the room's details: a column on a wide screen and a
// drawer on a narrow one; either way its button says whether it is open.
function sidePanel(roomId, sections) {
  const el = h("aside", { class: "room-side", id: `side-${roomId}`, "aria-label": "Room details" },
    h("button", { type: "button", class: "secondary side-close", "aria-label": "Close the details", onclick: () => toggle(false) }, "×"),
    ...sections);
  const button = h("button", { type: "button", class: "secondary", "aria-controls": el.id, "aria-expanded": "false",
    onclick: () => toggle() }, "Details");
  function toggle(open = !document.body.classList.contains("side-open")) {
    document.body.classList.toggle("side-open", open);
    button.setAttribute("aria-expanded", String(open));
    if (open) el.querySelector("h2").focus();
    else button.focus();
  }
  const scrim = h("div", { class: "scrim", "aria-hidden": "true", onclick: () => toggle(false) });
  return { el, button, scrim };
}

// jumpToUnread is the button that shows while the New divider is out of
// view, and goes there.
function jumpToUnread(timeline) {
  const button = h("button", { type: "button", class: "jump", hidden: true, onclick: async () => {
    button.hidden = true;
    await timeline.revealUnread();
  } }, "Jump to first unread");
  timeline.onScroll = () => {
    if (!button.hidden && timeline.unreadShown()) button.hidden = true;
  };
  return { button, update: () => { button.hidden = timeline.unreadShown(); } };
}

// roomSearch opens the Search screen on this room's messages; a result
// opens here, at the message.
function roomSearch(ctx, roomId) {
  const box = h("input", { type: "search", name: "q", placeholder: "Search this room", "aria-label": "Search this room", maxlength: 256 });
  return h("form", { class: "room-search", role: "search", onsubmit: (ev) => {
    ev.preventDefault();
    const words = box.value.trim();
    if (words) ctx.navigate(`/search/${ctx.esc(words)}/${ctx.esc(roomId)}`);
  } }, box);
}

// roomMenu holds the room's less frequent actions.
function roomMenu(timeline, { rename, remove }) {
  const showAll = h("input", { type: "checkbox", name: "show_steps", checked: timeline.showAll });
  showAll.addEventListener("change", () => timeline.setShowAll(showAll.checked));
  const menu = h("details", { class: "menu" }, h("summary", { "aria-label": "Room actions" }, "⋯"),
    h("div", { class: "menu-items" },
      h("label", { class: "check" }, showAll, " Show every step"),
      h("button", { type: "button", class: "secondary", onclick: () => { menu.open = false; rename(); } }, "Rename"),
      h("button", { type: "button", class: "danger", onclick: () => { menu.open = false; remove(); } }, "Delete room")));
  return menu;
}

// acceptDrops attaches a file dropped anywhere on the room to the next
// message.
function acceptDrops(main, write) {
  main.addEventListener("dragover", (ev) => {
    if (ev.dataTransfer && [...ev.dataTransfer.types].includes("Files")) {
      ev.preventDefault();
      main.classList.add("dropping");
    }
  });
  main.addEventListener("dragleave", (ev) => { if (ev.target === main) main.classList.remove("dropping"); });
  main.addEventListener("drop", (ev) => {
    main.classList.remove("dropping");
    if (!ev.dataTransfer || !ev.dataTransfer.files.length) return;
    ev.preventDefault();
    write.addFiles([...ev.dataTransfer.files]);
    write.focus();
  });
}

// scrollMemory keeps where the person was in each room for this tab: the
// message at the top of the view, unless they were at the end. It is
// written when the person leaves the room (or the page), not on every
// scroll.
function scrollMemory(roomId, timeline) {
  const save = () => {
    const all = JSON.parse(sessionStorage.getItem(scrollKey) || "{}");
    all[roomId] = timeline.nearBottom() ? null : timeline.anchor();
    sessionStorage.setItem(scrollKey, JSON.stringify(all));
  };
  window.addEventListener("pagehide", save);
  return {
    restore: () => timeline.restoreTo(JSON.parse(sessionStorage.getItem(scrollKey) || "{}")[roomId]),
    close() {
      save();
      window.removeEventListener("pagehide", save);
    },
  };
}

// liveChannels joins the room's three channels and keeps the parts up to
// date with what they push. The channels are joined while the room loads.
// What is pushed before a join is lost, so a join that completes after the
// first load (the load may have missed what happened in between) reloads
// what its channel carries; loaded() says the first load is done.
function liveChannels(r, { timeline, attention, participants, board, updateStates, loadPresence, reader, deleting, onGone }) {
  const { ctx, roomId } = r;
  const chat = ctx.socket.channel(`chat_room:${roomId}`);
  const members = ctx.socket.channel(`room_participants:${roomId}`);
  const tasks = ctx.socket.channel(`room_tasks:${roomId}`);
  const quietly = (p) => p.catch((e) => ctx.notify(e.message, "error"));
  let loaded = false;
  const afterLoad = (fn) => () => { if (loaded) quietly(fn()); };
  const offs = [
    // What the catch-up brings is on the screen: it is read, as a push is.
    chat.on("joined", afterLoad(() => Promise.all([timeline.loadNewest(), attention.load()]).then(reader.markRead))),
    members.on("joined", afterLoad(() => Promise.all([participants.load(), loadPresence()]))),
    tasks.on("joined", afterLoad(() => board.load())),
    chat.on("message_created", (m) => timeline.upsert(m, { live: true })),
    chat.on("message_updated", (m) => {
      timeline.update(m);
      attention.update(m);
    }),
    members.on("participant_added", () => quietly(participants.load())),
    members.on("participant_removed", () => quietly(participants.load())),
    members.on("presence", (p) => {
      r.states.setPresence([p]);
      updateStates();
    }),
    // The person's own deletion may be pushed back before its answer
    // arrives: that one is announced by the answer, not here.
    members.on("room_deleted", () => onGone(roomId, deleting() ? null : "This room was deleted.")),
    tasks.on("board_updated", () => quietly(board.load())),
    tasks.on("task_created", () => quietly(board.loadTasks())),
    tasks.on("task_updated", () => quietly(board.loadTasks())),
  ];
  return {
    loaded: () => { loaded = true; },
    close() {
      offs.forEach((off) => off());
      chat.leave();
      members.leave();
      tasks.leave();
    },
  };
}
