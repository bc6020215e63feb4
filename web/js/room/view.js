// One open room: its header (title, what each agent is doing, the room's
// actions), the message timeline, the composer, and the side panel
// (participants, board, attention). Live updates come from the room's
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

const scrollKey = "chatd.scroll";

export async function openRoom(ctx, root, roomId, { at, onRead, onGone, onRenamed }) {
  const path = `/api/v1/me/chats/${ctx.esc(roomId)}`;
  let room = await ctx.api.get(path);
  const names = new Map();
  let people = [];
  const states = new AgentStates();
  const files = new FileLoader(ctx, roomId);

  const heading = h("h1", { id: "room-title", tabindex: "-1" });
  const showTitle = () => replace(heading, plain(room.title || "") || "Untitled room");
  showTitle();
  const agentLine = h("div", { class: "agent-line", "aria-label": "Agents in this room" });

  const renameInput = h("input", { name: "title", maxlength: 120, required: true });
  const renameErr = errorBox();
  const renameForm = h("form", { class: "row rename", hidden: true }, field("Room title", renameInput), renameErr,
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
  async function deleteRoom() {
    const deleted = await confirmDialog({
      title: `Delete “${heading.textContent}”?`,
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
  }

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

  const isOwner = () => room.participant_role === "owner" || people.some((p) => p.id === ctx.me.id && p.role === "owner");
  const act = (...args) => actions.run(...args);
  const timeline = new Timeline(ctx, roomId, {
    names, files, act, owner: isOwner,
    working: (id) => states.working(id),
    onNew: (m) => {
      markRead();
      if (m.message_type === "attention") attention.add(m);
    },
  });
  const write = composer(ctx, roomId, { participants: () => people });
  const actions = messageActions(ctx, roomId, { timeline, write });

  const updateStates = () => {
    const before = timeline.messages().length ? agentLine.textContent : null;
    states.compute(timeline.messages(), people);
    replace(agentLine, states.chips());
    participants.decorate(states);
    if (before !== agentLine.textContent) timeline.schedule();
  };
  timeline.rendered = () => {
    updateStates();
    jumpButton.hidden = !unreadOffscreen();
  };

  const participants = new Participants(ctx, roomId, (items) => {
    people = items;
    names.clear();
    for (const p of items) names.set(p.id, p.name);
    timeline.refresh();
    write.refresh();
    updateStates();
  });
  const board = new Board(ctx, roomId);
  const attention = new AttentionList(ctx, roomId, { reveal: (id) => timeline.reveal(id) });

  // The side panel is a column on a wide screen and a drawer on a narrow
  // one; either way its button says whether it is open.
  const side = h("aside", { class: "room-side", id: `side-${roomId}`, "aria-label": "Room details" },
    h("button", { type: "button", class: "secondary side-close", "aria-label": "Close the details", onclick: () => toggleSide(false) }, "×"),
    participants.el, attention.el, board.el);
  const sideButton = h("button", { type: "button", class: "secondary", "aria-controls": side.id, "aria-expanded": "false",
    onclick: () => toggleSide() }, "Details");
  function toggleSide(open = !document.body.classList.contains("side-open")) {
    document.body.classList.toggle("side-open", open);
    sideButton.setAttribute("aria-expanded", String(open));
    if (open) side.querySelector("h2").focus();
    else sideButton.focus();
  }
  const showAll = h("input", { type: "checkbox", name: "show_steps", checked: timeline.showAll });
  showAll.addEventListener("change", () => timeline.setShowAll(showAll.checked));

  const jumpButton = h("button", { type: "button", class: "jump", hidden: true, onclick: async () => {
    jumpButton.hidden = true;
    await timeline.revealUnread();
  } }, "Jump to first unread");
  const unreadOffscreen = () => !timeline.unreadShown();
  timeline.onScroll = () => {
    if (!jumpButton.hidden && !unreadOffscreen()) jumpButton.hidden = true;
  };
  window.addEventListener("pagehide", saveScroll);

  // Searching the room opens the Search screen on this room's messages;
  // a result opens here, at the message.
  const searchBox = h("input", { type: "search", name: "q", placeholder: "Search this room", "aria-label": "Search this room", maxlength: 256 });
  const searchForm = h("form", { class: "room-search", role: "search", onsubmit: (ev) => {
    ev.preventDefault();
    const words = searchBox.value.trim();
    if (words) ctx.navigate(`/search/${ctx.esc(words)}/${ctx.esc(roomId)}`);
  } }, searchBox);
  const menu = h("details", { class: "menu" }, h("summary", { "aria-label": "Room actions" }, "⋯"),
    h("div", { class: "menu-items" },
      h("label", { class: "check" }, showAll, " Show every step"),
      h("button", { type: "button", class: "secondary", onclick: () => {
        menu.open = false;
        renameInput.value = room.title || "";
        renameForm.hidden = false;
        renameInput.focus();
      } }, "Rename"),
      h("button", { type: "button", class: "danger", onclick: () => { menu.open = false; deleteRoom(); } }, "Delete room")));

  const main = h("div", { class: "room-main" },
    h("div", { class: "room-head" },
      h("button", { type: "button", class: "secondary drawer-button", "aria-label": "Rooms", onclick: () => document.body.classList.add("rooms-open") }, "☰"),
      heading, searchForm, sideButton, menu),
    agentLine,
    renameForm,
    jumpButton,
    timeline.list,
    write.form);
  replace(root, h("div", { class: "room" }, main, side,
    h("div", { class: "scrim", "aria-hidden": "true", onclick: () => toggleSide(false) })));

  // A file dropped anywhere on the room is attached to the next message.
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

  // Where the person was in each room is kept for this tab: the message at
  // the top of the view, unless they were at the end.
  // It is written when the person leaves the room (or the page), not on
  // every scroll.
  function saveScroll() {
    const all = JSON.parse(sessionStorage.getItem(scrollKey) || "{}");
    all[roomId] = timeline.nearBottom() ? null : timeline.anchor();
    sessionStorage.setItem(scrollKey, JSON.stringify(all));
  }
  function restoreScroll() {
    return timeline.restoreTo(JSON.parse(sessionStorage.getItem(scrollKey) || "{}")[roomId]);
  }

  const loadPresence = () => ctx.api.get(`${path}/presence`).then((list) => {
    states.setPresence(list || []);
    updateStates();
  });
  // The channels are joined while the room loads. What is pushed before
  // a join is lost, so a join that completes after the first load (the
  // load may have missed what happened in between) reloads what its
  // channel carries.
  const chat = ctx.socket.channel(`chat_room:${roomId}`);
  const members = ctx.socket.channel(`room_participants:${roomId}`);
  const tasks = ctx.socket.channel(`room_tasks:${roomId}`);
  const quietly = (p) => p.catch((e) => ctx.notify(e.message, "error"));
  let loaded = false;
  const afterLoad = (fn) => () => { if (loaded) quietly(fn()); };
  const joins = [
    // What the catch-up brings is on the screen: it is read, as a push is.
    chat.on("joined", afterLoad(() => Promise.all([timeline.loadNewest(), attention.load()]).then(markRead))),
    members.on("joined", afterLoad(() => Promise.all([participants.load(), loadPresence()]))),
    tasks.on("joined", afterLoad(() => board.load())),
  ];
  await Promise.all([timeline.loadNewest(room.unread_count || 0), participants.load(), board.load(), attention.load(),
    loadPresence().catch(() => {})]);
  loaded = true;
  if (!at) await restoreScroll();
  jumpButton.hidden = !unreadOffscreen();
  markRead();

  const offs = [
    ...joins,
    chat.on("message_created", (m) => timeline.upsert(m, { live: true })),
    chat.on("message_updated", (m) => {
      timeline.update(m);
      attention.update(m);
    }),
    members.on("participant_added", () => quietly(participants.load())),
    members.on("participant_removed", () => quietly(participants.load())),
    members.on("presence", (p) => {
      states.setPresence([p]);
      updateStates();
    }),
    // The person's own deletion may be pushed back before its answer
    // arrives: that one is announced by the answer, not here.
    members.on("room_deleted", () => onGone(roomId, deleting ? null : "This room was deleted.")),
    tasks.on("board_updated", () => quietly(board.load())),
    tasks.on("task_created", () => quietly(board.loadTasks())),
    tasks.on("task_updated", () => quietly(board.loadTasks())),
    // After a reconnection each channel's join reloads what it carries.
  ];
  // Agents' "working…" and the times of the agent line age by themselves.
  const tick = setInterval(updateStates, 15000);
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
    reveal: (id) => timeline.reveal(id),
    close() {
      saveScroll();
      window.removeEventListener("pagehide", saveScroll);
      clearTimeout(readTimer);
      clearInterval(tick);
      if (readPending) sendRead();
      document.removeEventListener("visibilitychange", visible);
      document.body.classList.remove("side-open");
      offs.forEach((off) => off());
      chat.leave();
      members.leave();
      tasks.leave();
      timeline.close();
      files.close();
    },
  };
}
