// The chatd web app: a hash-routed page per screen, all on the Human API.
//
// Every page module exports mount(root, ctx) and may answer a function that
// undoes what it set up (socket listeners, timers) when the person moves
// on. ctx carries what pages share: the API client, the signed-in person,
// the live socket, notify() for messages and navigate().

import { api, esc, session, ApiError } from "./api.js";
import { Socket } from "./socket.js";
import { h, replace } from "./dom.js";

const pages = {
  setup: () => import("./pages/setup.js"),
  "sign-in": () => import("./pages/signin.js"),
  rooms: () => import("./pages/rooms.js"),
  search: () => import("./pages/search.js"),
  agents: () => import("./pages/agents.js"),
  contacts: () => import("./pages/contacts.js"),
  memories: () => import("./pages/memories.js"),
  keys: () => import("./pages/keys.js"),
  account: () => import("./pages/account.js"),
  invite: () => import("./pages/invite.js"),
  admin: () => import("./pages/admin.js"),
  oauth: () => import("./pages/oauth.js"),
};
// A consent link opened signed out is where sign-in leads back to.
const RETURN_KEY = "chatd.returnTo";
const publicPages = new Set(["setup", "sign-in", "invite"]);

const main = document.getElementById("main");
const top = document.getElementById("top");
const conn = document.getElementById("conn");
const who = document.getElementById("who");
const toasts = document.getElementById("toasts");

let me = null;
let socket = null;
let cleanup = null;
let routing = 0;

// notify shows a short message; errors stay until dismissed, so none is
// missed.
function notify(message, kind = "info") {
  const close = h("button", { type: "button", class: "link", "aria-label": "Dismiss" }, "×");
  // An error raised while the connection is down is the outage's, and
  // leaves with it.
  const network = kind === "error" && socket && socket.status !== "online";
  const toast = h("div", { class: `toast ${kind}`, role: kind === "error" ? "alert" : "status", dataset: network ? { network: "" } : null },
    h("span", {}, message), close);
  close.addEventListener("click", () => toast.remove());
  toasts.appendChild(toast);
  if (kind !== "error") setTimeout(() => toast.remove(), 5000);
}

// The tab's title carries the unread count of the rooms list.
let unreadTotal = 0;
let baseTitle = "chatd";
function showTitle() {
  document.title = unreadTotal ? `(${unreadTotal > 99 ? "99+" : unreadTotal}) ${baseTitle}` : baseTitle;
}
function setUnread(n) {
  unreadTotal = n;
  showTitle();
}

// On a narrow screen the navigation folds behind the Menu button.
const navToggle = document.getElementById("nav-toggle");
function toggleNav(open = navToggle.getAttribute("aria-expanded") !== "true") {
  navToggle.setAttribute("aria-expanded", String(open));
  top.classList.toggle("nav-open", open);
}
navToggle.addEventListener("click", () => toggleNav());
// Escape closes whatever drawer is open (a dialog closes itself first).
document.addEventListener("keydown", (ev) => {
  if (ev.key !== "Escape" || document.querySelector("dialog[open]")) return;
  if (document.body.classList.contains("side-open") || document.body.classList.contains("rooms-open")) {
    document.body.classList.remove("side-open", "rooms-open");
    for (const b of document.querySelectorAll("[aria-expanded='true'][aria-controls^='side-']")) b.setAttribute("aria-expanded", "false");
  }
  if (navToggle.getAttribute("aria-expanded") === "true") toggleNav(false);
});

function navigate(path) {
  if (location.hash === `#${path}`) route();
  else location.hash = path;
}

const statusText = {
  connecting: "Connecting…",
  online: "Live",
  reconnecting: "Reconnecting…",
  offline: "Offline: reconnecting…",
  stopped: "",
};

// The banner says when the live connection is down; it goes away by
// itself once the socket is back and the screens have caught up, and takes
// with it the errors that the outage caused.
const banner = document.getElementById("offline-banner");
function showConnection(status) {
  conn.textContent = statusText[status] || status;
  conn.dataset.status = status;
  document.body.classList.toggle("is-offline", status === "offline" || status === "reconnecting");
  if (status === "offline" || status === "reconnecting") {
    banner.textContent = status === "offline"
      ? "You are offline. chatd reconnects by itself and then loads what you missed."
      : "Reconnecting…";
    banner.hidden = false;
  } else if (status === "online" || status === "stopped") {
    banner.hidden = true;
    for (const t of toasts.querySelectorAll(".toast[data-network]")) t.remove();
  }
}

function startSocket() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  socket = new Socket(`${proto}//${location.host}/api/v1/socket/websocket`, () => session.token);
  socket.onStatus(showConnection);
  // A socket that keeps failing may be refused for an ended session: a
  // REST call tells, and a 401 there signs the page out.
  socket.onFailure = (n) => {
    if (changingSession) return;
    if (n === 1 || n % 3 === 0) api.get("/api/v1/me").catch(() => {});
  };
  socket.connect();
}

function signedOut(message) {
  session.clear();
  me = null;
  if (socket) socket.disconnect();
  socket = null;
  top.hidden = true;
  if (message) notify(message, "error");
  navigate("/sign-in");
}

// A password change ends this browser's session too, and answers a new one
// (account.js): meanwhile a refusal of the old one signs nothing out.
let changingSession = false;
session.onUnauthorized(() => {
  if (!changingSession) signedOut("Your session has ended. Sign in again.");
});

document.getElementById("sign-out").addEventListener("click", async () => {
  // The socket goes first: ending the session drops it on the server's
  // side, and a drop seen before the answer would have the socket check
  // the session, find it ended, and tell the person it ended by itself.
  if (socket) socket.disconnect();
  socket = null;
  try {
    await api.post("/api/v1/auth/sign-out", {});
  } catch (err) {
    // The session may already be gone; signing out locally is what matters.
    if (!(err instanceof ApiError) || err.status !== 401) notify(err.message, "error");
  }
  signedOut();
});

// ensureSignedIn loads the person behind the stored token once.
async function ensureSignedIn() {
  if (me) return true;
  if (!session.token) return false;
  try {
    me = await api.get("/api/v1/me");
  } catch (err) {
    if (err.status !== 401) notify(err.message, "error");
    return false;
  }
  who.textContent = me.name || me.handle;
  // The admin page is for the organization's admins; the server refuses
  // its routes to anyone else.
  document.getElementById("nav-admin").hidden = me.role !== "admin";
  top.hidden = false;
  startSocket();
  return true;
}

// adoptSessionLink signs the page in with the session a `chatd dev` link
// carries in its fragment (#/session/<token>): browsers never send a
// fragment, so the token stays out of every log. It is stored as a sign-in's
// token is, and taken out of the address bar and the history at once.
function adoptSessionLink() {
  const link = /^#\/session\/([^/]+)$/.exec(location.hash);
  if (!link) return;
  history.replaceState(null, "", `${location.pathname}${location.search}#/rooms`);
  if (socket) socket.disconnect();
  socket = null;
  me = null;
  session.set(decodeURIComponent(link[1]));
}

// pageContext is what a screen is given: see the top of this file.
function pageContext(params) {
  return {
    api, esc, me, socket, notify, navigate, params, setUnread,
    // A password change ended every session and answered a new one for
    // this browser: the socket, closed with the old one, reconnects with it.
    // While the change is under way the old session's end (the socket
    // closing, a request refused) is expected, not a sign-out.
    changingSession: (on) => { changingSession = on; },
    replaceSession: (token) => {
      session.set(token);
      changingSession = false;
    },
    // This browser's session was ended from the account screen.
    signOutLocally: () => {
      signedOut();
      notify("You signed this browser out.");
    },
    // A screen that changes the person (their name) says so here.
    meChanged: (m) => {
      me = m;
      who.textContent = me.name || me.handle;
    },
    signedIn: (token) => {
      session.set(token);
      me = null;
      const back = sessionStorage.getItem(RETURN_KEY);
      sessionStorage.removeItem(RETURN_KEY);
      navigate(back || "/rooms");
    },
  };
}

async function route() {
  const n = ++routing;
  adoptSessionLink();
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  let name = parts[0] || "rooms";
  if (!pages[name]) name = "rooms";
  const params = parts.slice(1);

  if (!publicPages.has(name) && !(await ensureSignedIn())) {
    if (name === "oauth") sessionStorage.setItem(RETURN_KEY, location.hash.slice(1));
    navigate("/sign-in");
    return;
  }
  if (publicPages.has(name) && name === "sign-in" && me) {
    navigate("/rooms");
    return;
  }
  let mod;
  try {
    mod = await pages[name]();
  } catch {
    // The module did not load: the server is down, or was upgraded under
    // the page. Say so instead of leaving the last screen up.
    if (n !== routing) return;
    if (cleanup) cleanup();
    cleanup = null;
    replace(main, h("p", { class: "error", role: "alert" },
      "This screen could not be loaded. Check that chatd is running, then reload the page."));
    return;
  }
  if (n !== routing) return;
  if (cleanup) cleanup();
  cleanup = null;
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  replace(main);
  toggleNav(false);
  document.body.classList.remove("side-open", "rooms-open");
  const ctx = pageContext(params);
  try {
    cleanup = (await mod.mount(main, ctx)) || null;
  } catch (err) {
    replace(main, h("p", { class: "error", role: "alert" }, err.message || String(err)));
  }
  // A new screen is announced by its heading: focus moves there unless the
  // page put it somewhere on purpose (a form's first field).
  const heading = main.querySelector("h1");
  baseTitle = heading ? `${heading.textContent} · chatd` : "chatd";
  showTitle();
  if (heading && (document.activeElement === document.body || !main.contains(document.activeElement))) {
    heading.tabIndex = -1;
    heading.focus();
  }
}

window.addEventListener("hashchange", route);
route();
