// The web app in a real browser: headless Chromium driven by playwright-core
// through what a person does, from the first-run setup link to a room where
// an agent answers live. web_test.go runs it against a fresh `chatd serve`.
//
// Each step logs "step: <name>"; a failing step leaves failure-<name>.png
// and the page's visible text, and ends the run. Any page error, and any
// console error but an API refusal a step expected, fails the run at the end
// (a Content-Security-Policy violation is such a console error).
//
// Environment: CHATD_URL (http://host:port), SETUP_URL (the one-time link
// chatd serve printed), DEV_LINK (the signed-in link a `chatd dev` printed),
// CHROMIUM (the browser's path), SCREENSHOTS (a directory for the PNGs),
// PROFILE_DIR (an empty directory for the browser's profile; a temporary one
// when unset).

import { chromium } from "playwright-core";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { createHash, createHmac, randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { join } from "node:path";
import * as chat from "./web_chat.mjs";
import { screens } from "./web_screens.mjs";

const base = need("CHATD_URL").replace(/\/$/, "");
const setupURL = need("SETUP_URL");
const devLink = need("DEV_LINK");
const executablePath = need("CHROMIUM");
const shots = need("SCREENSHOTS");

const T = 10_000; // every wait for the page
const person = { handle: "alice", name: "Alice Example", password: "correct-horse-42" };

function need(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`web.mjs: ${name} is not set`);
    process.exit(2);
  }
  return v;
}

// Playwright colours its call logs; a test log wants plain text.
const log = (...a) => console.log(...a.map((x) => (typeof x === "string" ? x.replace(/\x1b\[[0-9;]*m/g, "") : x)));

// --- the browser -----------------------------------------------------------

const ownProfile = !process.env.PROFILE_DIR;
const profile = process.env.PROFILE_DIR || (await mkdtemp(join(tmpdir(), "chatd-web-")));
const context = await chromium.launchPersistentContext(profile, {
  executablePath,
  headless: true,
  acceptDownloads: true,
  viewport: { width: 1200, height: 800 },
  // The network here is closed: nothing in the background may try it.
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
    "--no-first-run", "--disable-component-update", "--disable-sync",
  ],
});
await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base });
const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(T);

// --- what the page reports -------------------------------------------------

let current = { name: "start", refusals: [] };
const problems = [];

const pathOf = (url) => {
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
};

// watch reports what a page of the run says: its errors, its console
// errors, and the API refusals no step expected.
function watch(page) {
page.on("pageerror", (err) => {
  problems.push(`[${current.name}] page error: ${err && err.stack ? err.stack : err}`);
});

page.on("console", (msg) => {
  if (msg.type() !== "error") return;
  const text = msg.text();
  const where = msg.location() && msg.location().url ? msg.location().url : "";
  // API refusals are judged by the response listener below, with the
  // request they answer.
  if (/^Failed to load resource/.test(text) && pathOf(where).startsWith("/api/")) return;
  problems.push(`[${current.name}] console error: ${text}${where ? ` (${where})` : ""}`);
});

page.on("response", (res) => {
  const path = pathOf(res.url());
  if (!path.startsWith("/api/") || res.status() < 400) return;
  const method = res.request().method();
  const ok = current.refusals.find((r) => r.status === res.status() && r.path.test(path) && (!r.method || r.method === method));
  if (ok) {
    ok.seen = true;
    log(`  expected refusal: ${method} ${path} ${res.status()}`);
  } else {
    problems.push(`[${current.name}] unexpected refusal: ${method} ${path} ${res.status()}`);
  }
});
}
watch(page);

// expectRefusal lets the current step's page meet one kind of API refusal.
function expectRefusal(status, path, method) {
  current.refusals.push({ status, path, method });
}

// --- steps -----------------------------------------------------------------

let shotCount = 0;
async function shot(name) {
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
  shotCount++;
  log(`  screenshot: ${name}.png`);
}

const ran = [];

async function step(name, fn) {
  current = { name, refusals: [] };
  log(`step: ${name}`);
  const started = Date.now();
  try {
    await fn();
  } catch (err) {
    log(`FAIL: ${name}: ${err && err.stack ? err.stack : err}`);
    log(`  at ${page.url()}`);
    try {
      await page.screenshot({ path: join(shots, `failure-${name}.png`), fullPage: true });
      log(`  screenshot: failure-${name}.png`);
      const text = await page.locator("body").innerText({ timeout: 2000 });
      log("  visible text:\n" + text.split("\n").map((l) => `    | ${l}`).join("\n"));
    } catch (e) {
      log(`  (could not record the page: ${e.message})`);
    }
    throw new StepFailed(name);
  }
  for (const r of current.refusals) {
    if (!r.seen) log(`  note: the expected refusal ${r.status} ${r.path} did not happen`);
  }
  ran.push(name);
  log(`ok: ${name} (${Date.now() - started} ms)`);
}

class StepFailed extends Error {}

// --- waiting and checking --------------------------------------------------

async function until(what, fn, timeout = T) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeout} ms waiting for ${what}${last ? `: ${last.message}` : ""}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

const visible = (locator) => locator.waitFor({ state: "visible", timeout: T });
const hash = () => new URL(page.url()).hash;
const atHash = (re) => until(`the address to match ${re} (it is ${page.url()})`, () => re.test(hash()));
const sessionToken = () => page.evaluate(() => localStorage.getItem("chatd.session"));

async function signedIn() {
  await visible(page.getByRole("button", { name: "Sign out" }));
  await until("a session token in localStorage", sessionToken);
}

// unreadOf answers what a room link says of its unread messages ("2
// unread"), or "" when it says nothing.
async function unreadOf(link) {
  return link.evaluate((a) => { const b = a.querySelector(".unread"); return b ? b.textContent.trim() : ""; }, null, { timeout: T });
}

async function nav(name) {
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name, exact: true }).click();
}

// The agent's side, over REST with its key, as an SDK worker would.
async function agentCall(key, method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { "X-API-Key": key, "Content-Type": "application/json", Accept: "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

// --- the flow --------------------------------------------------------------

const state = {};

// flow is the whole run, a step at a time: first run and sign-in, an
// agent, a room where it works, the room as a chat client, what a room
// holds over time, webhooks, every screen, keys and accounts, the phone,
// and the links chatd prints.
async function flow() {
  await step("setup", setupStep);
  await step("sign-out", signOutStep);
  await step("sign-in-refused", signInRefusedStep);
  await step("sign-in", signInStep);

  await step("agent-key", agentKeyStep);
  await step("agent-new-key", agentNewKeyStep);
  await step("new-room", newRoomStep);
  await step("add-agent", addAgentStep);
  await step("mention", mentionStep);
  await step("agent-replies", agentRepliesStep);
  await step("message-types", messageTypesStep);

  await richSteps();

  await step("rename-and-board", renameAndBoardStep);
  await step("attachment", attachmentStep);
  await step("offline", offlineStep);
  await step("history", historyStep);
  await step("unread", unreadStep);
  await step("search", search);

  await step("retention", retention);

  await webhookSteps();

  await step("every-screen-labelled", everyScreenLabelledStep);
  await step("screens-and-axe", screensAndAxeStep);

  await step("api-key", apiKeyStep);
  await step("oauth-consent", oauthConsent);
  await step("oauth-sign-out", oauthSignOut);
  await step("account", account);

  await step("phone-drawers", phoneDrawersStep);
  await step("delete-room", deleteRoomStep);
  await step("phone-rooms", phoneRoomsStep);
  await step("phone-agents", phoneAgentsStep);
  await step("delete-agent", deleteAgentStep);
  await step("dev-link", devLinkStep);
  await step("api-reference", apiReference);
}

async function setupStep() {
  await page.goto(setupURL);
  await page.getByLabel("Handle", { exact: true }).fill(person.handle);
  await page.getByLabel("Name", { exact: true }).fill(person.name);
  await page.getByLabel("Password", { exact: true }).fill(person.password);
  await page.getByLabel("Password again", { exact: true }).fill(person.password);
  await shot("01-setup");
  await page.getByRole("button", { name: "Create account" }).click();
  await atHash(/^#\/rooms$/);
  await signedIn();
  await visible(page.getByRole("button", { name: "New room" }));
  await shot("02-rooms-empty");
}

async function signOutStep() {
  await page.getByRole("button", { name: "Sign out" }).click();
  await visible(page.getByRole("heading", { name: "Sign in to chatd" }));
  await atHash(/^#\/sign-in$/);
  if (await sessionToken()) throw new Error("the session token is still in localStorage after signing out");
  // The socket closed on purpose: that is no outage to announce.
  await page.waitForTimeout(300);
  if (await page.locator("#offline-banner").isVisible()) throw new Error("signing out shows the offline banner");
  // The sign-in screen at each width and theme, as the other screens
  // are in screens-and-axe (which runs signed in).
  try {
    await screens({ page, shot: (name) => shot(name), log }, [{ name: "sign-in", open: async () => {} }]);
  } finally {
    await page.setViewportSize({ width: 1200, height: 800 });
    await page.emulateMedia({ colorScheme: null });
  }
}

async function signInRefusedStep() {
  expectRefusal(401, /^\/api\/v1\/auth\/sign-in$/, "POST");
  await page.getByLabel("Handle", { exact: true }).fill(person.handle);
  await page.getByLabel("Password", { exact: true }).fill("not-the-password");
  await page.getByRole("button", { name: "Sign in" }).click();
  const alert = page.getByRole("alert").filter({ hasText: /\S/ }).first();
  await visible(alert);
  log(`  the refusal reads: ${(await alert.innerText()).trim()}`);
  await shot("03-signin-error");
  if (!/^#\/sign-in$/.test(hash())) throw new Error(`a refused sign-in left the sign-in page for ${page.url()}`);
}

async function signInStep() {
  await page.getByLabel("Handle", { exact: true }).fill(person.handle);
  await page.getByLabel("Password", { exact: true }).fill(person.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await atHash(/^#\/rooms$/);
  await signedIn();
  state.me = await page.evaluate(async () => {
    const res = await fetch("/api/v1/me", { headers: { Authorization: `Bearer ${localStorage.getItem("chatd.session")}` } });
    return (await res.json()).data;
  });
  if (state.me.handle !== person.handle) throw new Error(`signed in as ${state.me.handle}, want ${person.handle}`);
}

async function agentKeyStep() {
  await nav("Agents");
  await visible(page.getByRole("heading", { name: "Agents", exact: true }));
  await page.getByLabel("Name", { exact: true }).fill("Helper");
  await page.getByLabel("Description", { exact: true }).fill("Answers questions");
  await page.getByRole("button", { name: "Register agent" }).click();
  const secret = page.locator("code.secret");
  await visible(secret);
  const key = (await secret.innerText()).trim();
  if (!/^band_a_[a-z0-9]+$/.test(key)) throw new Error(`the shown key ${JSON.stringify(key)} is not an agent key`);
  await visible(page.getByText(/shown only once/));
  const copy = page.getByRole("button", { name: "Copy" }).first();
  await visible(copy);
  await page.getByText("alice/helper").first().waitFor({ state: "visible" });
  await shot("04-agent-key");

  await copy.click();
  await visible(page.getByRole("button", { name: /^(Copied|Selected)/ }).first());
  const copied = await page.evaluate(() => navigator.clipboard.readText()).catch(() => null);
  if (copied !== null && copied !== key) throw new Error(`the clipboard holds ${JSON.stringify(copied)}, not the key`);
  log(copied === null ? "  (the clipboard could not be read back)" : "  Copy put the key on the clipboard");

  const agent = (await agentCall(key, "GET", "/api/v1/agent/me")).data;
  if (agent.handle !== "alice/helper") throw new Error(`the agent's handle is ${agent.handle}, want alice/helper`);
  state.agent = { key, id: agent.id, handle: agent.handle };

  await page.getByRole("button", { name: "Done, I stored it" }).click();
  await until("the key to be gone from the page", async () => (await page.locator("code.secret").count()) === 0);
  const stillThere = await page.evaluate((k) => document.documentElement.outerHTML.includes(k) ||
    [...document.querySelectorAll("input, textarea")].some((el) => el.value.includes(k)), key);
  if (stillThere) throw new Error("the key is still somewhere in the page after Done");
  await visible(page.getByText("Helper", { exact: true }).first());
}

async function agentNewKeyStep() {
  // A new key for the agent, after a confirmation: shown once, it works
  // at once and the old one is refused.
  const oldKey = state.agent.key;
  await page.getByRole("button", { name: "New key for Helper" }).click();
  const dialog = page.getByRole("dialog");
  await visible(dialog.getByRole("heading", { name: "Replace the key of Helper?" }));
  await visible(dialog.getByText(/stops working at once/));
  await shot("04b-agent-new-key-confirm");
  await dialog.getByRole("button", { name: "Replace key" }).click();
  const secret = page.locator("code.secret");
  await visible(secret);
  const key = (await secret.innerText()).trim();
  if (!/^band_a_[a-z0-9]+$/.test(key)) throw new Error(`the shown key ${JSON.stringify(key)} is not an agent key`);
  if (key === oldKey) throw new Error("the new key is the old one");
  await visible(page.getByText(/shown only once/));
  await visible(page.getByRole("button", { name: "Copy" }).first());
  await shot("04c-agent-new-key");
  const status = async (k) => (await fetch(`${base}/api/v1/agent/me`, { headers: { "X-API-Key": k } })).status;
  if ((await status(oldKey)) !== 401) throw new Error("the old key still works after its replacement");
  if ((await status(key)) !== 200) throw new Error("the new key is refused");
  await page.getByRole("button", { name: "Done, I stored it" }).click();
  await until("the key to be gone from the page", async () => (await page.locator("code.secret").count()) === 0);
  await until("focus back on the button that asked", () =>
    page.evaluate(() => document.activeElement && document.activeElement.getAttribute("aria-label") === "New key for Helper"));
  state.agent.key = key;
}

async function newRoomStep() {
  await nav("Rooms");
  await page.getByRole("button", { name: "New room" }).click();
  await page.getByLabel("Title", { exact: true }).fill("Launch plan");
  await page.getByRole("button", { name: "Create room" }).click();
  await atHash(/^#\/rooms\/[^/]+$/);
  state.room = decodeURIComponent(hash().split("/")[2]);
  await visible(page.getByRole("heading", { name: "Launch plan" }));
  await shot("05-room");
}

async function addAgentStep() {
  const picker = page.getByLabel("Add participant");
  await visible(picker);
  if ((await picker.evaluate((el) => el.tagName)) === "SELECT") {
    const labels = (await picker.locator("option").allInnerTexts()).map((s) => s.trim());
    if (labels.some((l) => l.includes(person.name))) throw new Error(`the picker offers ${person.name}, who is in the room: ${labels}`);
    const helper = labels.find((l) => l.includes("Helper"));
    if (!helper) throw new Error(`the picker does not offer Helper: ${labels}`);
    await picker.selectOption({ label: helper });
  } else {
    await picker.fill("Helper");
    await page.getByRole("option", { name: /Helper/ }).first().click();
  }
  await page.getByRole("button", { name: "Add", exact: true }).click();
  await visible(page.getByRole("listitem").filter({ hasText: "Helper" }).first());
}

async function mentionStep() {
  const box = page.getByLabel("Message", { exact: true });
  await box.click();
  await box.pressSequentially("@hel");
  const option = page.getByRole("option", { name: /Helper/ }).first();
  await visible(option);
  await box.press("Enter");
  await until("the mention to be completed", async () => (await box.inputValue()).startsWith("@alice/helper"));
  if (!(await box.inputValue()).endsWith(" ")) await box.pressSequentially(" ");
  await box.pressSequentially("please summarise");
  const text = await box.inputValue();
  if (text !== "@alice/helper please summarise") throw new Error(`the message box holds ${JSON.stringify(text)}`);
  await page.getByRole("button", { name: "Send", exact: true }).click();
  await until("the message box to be emptied", async () => (await box.inputValue()) === "");
  state.sent = page.locator("li, article").filter({ hasText: "please summarise" }).last();
  await visible(state.sent);
  await visible(state.sent.getByText(/Helper/).first());
  // Until the agent takes it, the room says the message waits for it.
  await until("the agent to show one message waiting", async () =>
    /1 message waiting/.test(await page.locator(`.agent-chip[data-agent="${state.agent.id}"]`).innerText()));
}

async function agentRepliesStep() {
  const { key } = state.agent;
  const room = state.room;
  const next = (await agentCall(key, "GET", `/api/v1/agent/chats/${room}/messages/next`)).data;
  if (!next || !String(next.content).includes("please summarise")) throw new Error(`next message: ${JSON.stringify(next)}`);
  await agentCall(key, "POST", `/api/v1/agent/chats/${room}/messages/${next.id}/processing`);
  const people = (await agentCall(key, "GET", `/api/v1/agent/chats/${room}/participants`)).data;
  const alice = people.find((p) => p.type === "User");
  if (!alice) throw new Error(`no User among the participants: ${JSON.stringify(people)}`);
  await agentCall(key, "POST", `/api/v1/agent/chats/${room}/messages`,
    { message: { content: "Here is the summary", mentions: [{ id: alice.id }] } });
  await agentCall(key, "POST", `/api/v1/agent/chats/${room}/messages/${next.id}/processed`, {});
  // No reload: the page hears both over its socket.
  await visible(page.getByText("Here is the summary"));
  await visible(state.sent.getByText(/processed/i).first());
  // Times read as a chat's do, with the exact time on hover, under a
  // separator for the day.
  const time = await page.locator("article.msg").filter({ hasText: "Here is the summary" }).locator("time").first()
    .evaluate((el) => ({ text: el.textContent, title: el.title, year: String(new Date(el.dateTime).getFullYear()) }));
  if (time.text !== "just now" || !time.title.includes(time.year)) throw new Error(`the message's time reads ${JSON.stringify(time)}`);
  await visible(page.getByRole("separator", { name: "Today" }));
  await shot("06-room-live");
}

async function messageTypesStep() {
  // What an agent does besides talking shows in the room, each kind its
  // own way; a request for attention stands out.
  const { key } = state.agent;
  const events = [
    ["thought", "weighing the options", {}],
    ["tool_call", "search(\"launch\")", {}],
    ["tool_result", "3 results", {}],
    ["error", "the index timed out", {}],
    ["attention", "may I publish the summary?", { kind: "question" }],
  ];
  for (const [type, content, metadata] of events) {
    await agentCall(key, "POST", `/api/v1/agent/chats/${state.room}/events`, { event: { content, message_type: type, metadata } });
  }
  // The agent's steps fold into one block, its error showing all the
  // same; unfolded, every step shows, each its own way.
  const turn = page.locator("section.turn").last();
  await visible(turn.locator("summary").filter({ hasText: /4 steps/ }));
  await visible(turn.locator(".turn-errors article.msg.type-error").filter({ hasText: "the index timed out" }));
  await turn.locator("summary").click();
  for (const [type, content] of events.slice(0, 4)) {
    await visible(turn.locator(`.steps article.msg.type-${type}`).filter({ hasText: content }));
  }
  const attention = page.locator("article.msg.type-attention");
  await visible(attention.filter({ hasText: "may I publish the summary?" }));
  const look = await attention.evaluate((el) => ({ bg: getComputedStyle(el).backgroundColor,
    plain: getComputedStyle(document.querySelector("article.msg.type-text")).backgroundColor }));
  if (look.bg === look.plain) throw new Error(`an attention message looks like the others (${look.bg})`);
  await shot("06b-message-types");
}

async function renameAndBoardStep() {
  await page.getByLabel("Room actions").click();
  await page.getByRole("button", { name: "Rename" }).click();
  await page.getByLabel("Room title").fill("Launch plan v2");
  await page.getByRole("button", { name: "Save title" }).click();
  await visible(page.getByRole("heading", { name: "Launch plan v2", exact: true }));
  await visible(page.getByRole("link", { name: /^Launch plan v2/ }));
  await page.getByRole("button", { name: "Edit goal" }).click();
  await page.getByLabel("Goal", { exact: true }).fill("Ship on Friday");
  await page.getByLabel("Summary", { exact: true }).fill("Everything merged by Thursday");
  await page.getByRole("button", { name: "Save goal" }).click();
  await visible(page.getByText("Ship on Friday", { exact: true }));
  await page.getByRole("button", { name: "Edit goal" }).click();
  await page.getByLabel("Goal", { exact: true }).fill("Ship on Monday");
  await page.getByRole("button", { name: "Save goal" }).click();
  await visible(page.getByText("Ship on Monday", { exact: true }));
  await page.getByText(/^History \(2\)$/).click();
  await visible(page.getByText(/set the goal to “Ship on Monday”/));
}

async function attachmentStep() {
  // The SHA-256 the page falls back to without WebCrypto (plain http on a
  // LAN address) agrees with WebCrypto on sizes around the block edges.
  const mismatches = await page.evaluate(async () => {
    const { digestForTest } = await import("/js/sha256.js");
    const bad = [];
    for (const n of [0, 1, 55, 56, 63, 64, 65, 1000, 100000]) {
      const bytes = new Uint8Array(n).map((_, i) => (i * 31 + 7) & 255);
      const want = [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))]
        .map((b) => b.toString(16).padStart(2, "0")).join("");
      if (digestForTest(bytes) !== want) bad.push(n);
    }
    return bad;
  });
  if (mismatches.length) throw new Error(`the fallback SHA-256 differs from WebCrypto at sizes ${mismatches}`);
  // A file with a name beyond ASCII goes up with the message and comes
  // back byte for byte.
  const file = join(profile, "notes résumé.txt");
  await writeFile(file, "launch notes\nline two\n");
  await page.getByLabel("Attach files").setInputFiles(file);
  await page.getByLabel("Message", { exact: true }).fill("@alice/helper the notes");
  await page.getByRole("button", { name: "Send", exact: true }).click();
  const button = page.getByRole("button", { name: /^Download notes résumé\.txt/ });
  await visible(button);
  const [download] = await Promise.all([page.waitForEvent("download"), button.click()]);
  const got = await readFile(await download.path(), "utf8");
  if (download.suggestedFilename() !== "notes résumé.txt" || got !== "launch notes\nline two\n") {
    throw new Error(`downloaded ${download.suggestedFilename()}: ${JSON.stringify(got)}`);
  }
}

async function offlineStep() {
  // The network goes away: the header says so at once. What the agent
  // says meanwhile is not pushed; the page loads it when it is back.
  await page.context().setOffline(true);
  await visible(page.getByRole("status").filter({ hasText: /^Offline/ }));
  await shot("07-offline");
  const { key } = state.agent;
  await agentCall(key, "POST", `/api/v1/agent/chats/${state.room}/messages`,
    { message: { content: "@alice said while you were away", mentions: [{ id: state.me.id }] } });
  await visible(page.locator("#offline-banner"));
  await page.context().setOffline(false);
  await visible(page.getByRole("status").filter({ hasText: /^Live$/ }));
  await visible(page.getByText("said while you were away"));
  // Back and caught up, nothing of the outage stays on the screen.
  await until("the offline banner to clear", async () => !(await page.locator("#offline-banner").isVisible()));
  if (await page.locator(".toast.error").count()) throw new Error("an error from the outage stays on the screen");
  // What the catch-up brought is on the screen, so the room is read.
  await until("the open room to be read after the catch-up", async () =>
    (await unreadOf(page.getByRole("link", { name: /^Launch plan/ }))) === "");
}

async function historyStep() {
  // Older messages load as the person scrolls up, a page at a time.
  const { key } = state.agent;
  const room = (await agentCall(key, "POST", "/api/v1/agent/chats", { chat: { title: "Long history" } })).data.id;
  await agentCall(key, "POST", `/api/v1/agent/chats/${room}/participants`, { participant: { participant_id: state.me.id } });
  for (let i = 1; i <= 70; i++) {
    await agentCall(key, "POST", `/api/v1/agent/chats/${room}/messages`,
      { message: { content: `@alice entry ${i}`, mentions: [{ id: state.me.id }] } });
  }
  await page.getByRole("link", { name: /^Long history/ }).click();
  await visible(page.getByText("@alice entry 70", { exact: true }));
  if (await page.getByText("@alice entry 1", { exact: true }).count()) throw new Error("the whole history loaded at once");
  // All 70 are new, so the New divider belongs above entry 1, which is
  // not loaded yet: Jump to first unread loads back to it.
  const jump = page.getByRole("button", { name: "Jump to first unread" });
  await visible(jump);
  await shot("07b-jump-to-unread");
  await jump.click();
  const divider = page.getByRole("separator", { name: "New since you last read" });
  await until("the New divider in view, right above entry 1", async () => (await inView(divider)) &&
    (await divider.evaluate((d) => d.nextElementSibling && d.nextElementSibling.textContent.includes("@alice entry 1"))));
  if (await jump.isVisible()) throw new Error("Jump to first unread is still offered at the divider");
  await shot("07c-first-unread");
  const log = page.getByRole("log", { name: "Messages" });
  await until("the first entry after scrolling up", async () => {
    await log.evaluate((el) => { el.scrollTop = 0; });
    return (await page.getByText("@alice entry 1", { exact: true }).count()) === 1;
  });
  await visible(page.getByText("This is the beginning of the room."));
  const entries = await log.locator("article").count();
  if (entries !== 70) throw new Error(`${entries} messages shown after scrolling back, want 70`);
  // Where the person was is kept per room: back in it (by Back, too) the
  // view is at the beginning again, earlier pages loaded for it.
  await page.getByRole("link", { name: "Launch plan" }).click();
  await visible(page.getByRole("heading", { name: "Launch plan" }));
  await page.goBack();
  await visible(page.getByRole("heading", { name: "Long history" }));
  await until("the view back at entry 1", () => inView(page.getByText("@alice entry 1", { exact: true })));
  await page.getByRole("link", { name: "Launch plan" }).click();
  await visible(page.getByRole("heading", { name: "Launch plan" }));
}

async function unreadStep() {
  // An agent opens a room with alice in it and writes there: the list
  // counts it live, opening the room reads it, and the count stays read.
  const { key } = state.agent;
  const room = (await agentCall(key, "POST", "/api/v1/agent/chats", { chat: { title: "Agent news" } })).data.id;
  await agentCall(key, "POST", `/api/v1/agent/chats/${room}/participants`, { participant: { participant_id: state.me.id } });
  const link = page.getByRole("link", { name: /^Agent news/ });
  await visible(link);
  for (const n of [1, 2]) {
    await agentCall(key, "POST", `/api/v1/agent/chats/${room}/messages`,
      { message: { content: `@alice news ${n}`, mentions: [{ id: state.me.id }] } });
    await until(`the list to count ${n} unread`, async () => (await unreadOf(link)) === `${n} unread`);
  }
  await shot("08-unread");
  // A second tab of the same person sees the count drop when the first
  // one reads the room.
  const other = await page.context().newPage();
  await other.goto(`${base}/#/rooms`);
  const otherLink = other.getByRole("link", { name: /^Agent news/ });
  await until("the second tab to count 2 unread", async () => (await unreadOf(otherLink)) === "2 unread");
  await link.click();
  await visible(page.getByText("news 2"));
  await until("the second tab to see the room read", async () => (await unreadOf(otherLink)) === "");
  await other.close();
  await page.getByRole("link", { name: "Launch plan" }).click();
  await visible(page.getByRole("heading", { name: "Launch plan" }));
  await page.reload();
  await visible(page.getByRole("heading", { name: "Launch plan" }));
  const label = await unreadOf(page.getByRole("link", { name: /^Agent news/ }));
  if (label !== "") throw new Error(`after reading it the room is listed with ${JSON.stringify(label)}`);
}

async function everyScreenLabelledStep() {
  // Each screen renders without errors, and every control has a name a
  // screen reader can say.
  for (const [hash, heading, name] of [["#/rooms/" + state.room, "Launch plan v2"], ["#/agents", "Agents"],
    ["#/contacts", "Contacts", "screen-contacts"], ["#/memories", "Memories", "screen-memories"],
    ["#/keys", "API keys", "screen-keys"], ["#/search/entry", "Search", "screen-search"], ["#/admin", "Admin"]]) {
    await page.goto(`${base}/${hash}`);
    await visible(page.getByRole("heading", { name: heading, exact: true }));
    await allNamed(hash);
    if (name) await shot(name);
  }
}

// In a tab of its own: the many screens would fill the main tab's
// history, which a later step counts.
async function screensAndAxeStep() {
  const tab = await context.newPage();
  tab.setDefaultTimeout(T);
  watch(tab);
  const tabShot = async (name) => {
    await tab.screenshot({ path: join(shots, `${name}.png`), fullPage: false });
    shotCount++;
  };
  const seen = (locator) => locator.waitFor({ state: "visible", timeout: T });
  try {
    await screens({ page: tab, shot: tabShot, log }, screenList(seen));
  } finally {
    await tab.close();
  }
}

async function apiKeyStep() {
  // A Human API key minted on the page works at once, shows once, and
  // stops working when revoked.
  await nav("API keys");
  await page.getByLabel("Key name").fill("backup script");
  await page.getByRole("button", { name: "Create key" }).click();
  const secret = page.locator("code.secret");
  await visible(secret);
  const key = (await secret.innerText()).trim();
  const me = async () => (await fetch(`${base}/api/v1/me`, { headers: { "X-API-Key": key } })).status;
  if ((await me()) !== 200) throw new Error("the new key is refused");
  await page.getByRole("button", { name: "Done, I stored it" }).click();
  await until("the key to be gone from the page", async () => (await page.locator("code.secret").count()) === 0);
  await page.getByRole("button", { name: "Revoke key backup script" }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Revoke key" }).click();
  await until("the revoked key to be refused", async () => (await me()) === 401);
  await until("the list to drop the key", async () => (await page.getByRole("button", { name: "Revoke key backup script" }).count()) === 0);
}

async function phoneDrawersStep() {
  // At a phone's width the room list and the details are drawers over
  // the room: each closes from its own × button, and focus goes back to
  // the button that opened it.
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    await page.goto(`${base}/#/rooms/${state.room}`);
    await visible(page.getByRole("heading", { name: "Launch plan" }));
    const details = page.getByRole("button", { name: "Details", exact: true });
    await details.click();
    const side = page.getByRole("complementary", { name: "Room details" });
    await visible(side.getByRole("heading", { name: "Attention" }));
    await side.getByRole("button", { name: "Close the details" }).click();
    await until("the details drawer to close", async () => !(await side.isVisible()));
    if ((await details.getAttribute("aria-expanded")) !== "false") throw new Error("Details still says it is expanded");
    await until("focus back on Details", () => details.evaluate((b) => document.activeElement === b));
    await page.getByRole("button", { name: "Rooms", exact: true }).click();
    const list = page.getByRole("heading", { name: "Rooms", exact: true });
    await visible(list);
    await page.getByRole("button", { name: "Close the room list" }).click();
    await until("the room list to close", async () => !(await list.isVisible()));
    await fitsWidth();
  } finally {
    await page.setViewportSize({ width: 1200, height: 800 });
  }
}

async function deleteRoomStep() {
  await page.goto(`${base}/#/rooms/${state.room}`);
  await visible(page.getByRole("heading", { name: "Launch plan" }));
  await page.getByLabel("Room actions").click();
  await page.getByRole("button", { name: "Delete room" }).click();
  const dialog = page.getByRole("dialog");
  await visible(dialog);
  await dialog.getByRole("button", { name: "Delete", exact: true }).click();
  await until("the room to leave the address", async () => !hash().startsWith(`#/rooms/${state.room}`));
  await until("the room to leave the list", async () => (await page.getByRole("link", { name: /Launch plan/ }).count()) === 0);
  // The deletion comes back as pushes too; the person is told once.
  await page.waitForTimeout(500);
  const told = await page.locator(".toast").filter({ hasText: /deleted|no longer in this room/ }).count();
  if (told !== 1) throw new Error(`the deletion was announced ${told} times, want once`);
  await shot("09-room-deleted");
}

async function phoneRoomsStep() {
  await page.setViewportSize({ width: 375, height: 800 });
  await page.goto(`${base}/#/rooms`);
  await visible(page.getByRole("button", { name: "New room" }));
  await fitsWidth();
  await shot("10-phone-rooms");
}

async function phoneAgentsStep() {
  await page.setViewportSize({ width: 375, height: 800 });
  await page.goto(`${base}/#/agents`);
  await visible(page.getByRole("heading", { name: "Agents", exact: true }));
  await fitsWidth();
  await shot("11-phone-agents");
}

async function deleteAgentStep() {
  // The agent has processed a message, so its deletion asks again before
  // taking that history with it; then its key stops working.
  await page.setViewportSize({ width: 1200, height: 800 });
  expectRefusal(422, /^\/api\/v1\/me\/agents\/[^/]+$/, "DELETE");
  await page.getByRole("button", { name: "Delete agent Helper" }).click();
  const dialog = page.getByRole("dialog");
  await dialog.getByRole("button", { name: "Delete agent", exact: true }).click();
  await dialog.getByRole("button", { name: "Delete agent and its history" }).click();
  await visible(page.getByText("No agents yet: register one above."));
  const status = (await fetch(`${base}/api/v1/agent/me`, { headers: { "X-API-Key": state.agent.key } })).status;
  if (status !== 401) throw new Error(`the deleted agent's key answers ${status}, want 401`);
}

async function devLinkStep() {
  // The link chatd dev prints (another server, so another origin with a
  // localStorage of its own) opens the rooms signed in as @dev, and
  // leaves its token neither in the address bar nor in the history.
  const { hash: fragment } = new URL(devLink);
  const token = decodeURIComponent(fragment.replace(/^#\/session\//, ""));
  await page.goto(devLink);
  await atHash(/^#\/rooms$/);
  await signedIn();
  await visible(page.getByRole("link", { name: /^Dev room/ }));
  await visible(page.locator("#who").getByText("Dev", { exact: true }));
  await shot("12-dev-link");
  if ((await sessionToken()) !== token) throw new Error("the stored session is not the link's");
  if (page.url().includes(token)) throw new Error(`the token is still in the address bar: ${page.url()}`);
  // The link followed again in the open page: its history entry is
  // rewritten rather than followed by another, so Back never shows it.
  const entries = await page.evaluate(() => history.length);
  await page.evaluate((h) => { location.hash = h; }, fragment);
  await atHash(/^#\/rooms$/);
  await signedIn();
  await visible(page.getByRole("link", { name: /^Dev room/ }));
  const added = (await page.evaluate(() => history.length)) - entries;
  if (added !== 1) throw new Error(`following the link added ${added} history entries, want 1`);
}

// screenList is every main screen, for screens-and-axe: how to open each
// (at either width) and what shows that it is there.
function screenList(visible) {
  return [
    { name: "rooms", open: async (p) => {
      await p.goto(`${base}/#/rooms`);
      await visible(p.getByRole("button", { name: "New room" }));
    } },
    { name: "room", open: async (p) => {
      await p.goto(`${base}/#/rooms/${state.room}`);
      await visible(p.getByRole("heading", { name: "Launch plan v2" }));
      await visible(p.locator("article.msg").first());
    } },
    { name: "room-details", open: async (p, width) => {
      await p.goto(`${base}/#/rooms/${state.room}`);
      await visible(p.getByRole("heading", { name: "Launch plan v2" }));
      if (width === "phone") await p.getByRole("button", { name: "Details" }).click();
      await visible(p.getByRole("heading", { name: "Attention" }));
    } },
    { name: "rooms-drawer", open: async (p, width) => {
      await p.goto(`${base}/#/rooms/${state.room}`);
      await visible(p.getByRole("heading", { name: "Launch plan v2" }));
      if (width === "phone") await p.getByRole("button", { name: "Rooms", exact: true }).click();
      await visible(p.getByRole("heading", { name: "Rooms", exact: true }));
    } },
    { name: "menu", open: async (p, width) => {
      await p.goto(`${base}/#/search/entry`);
      await visible(p.locator("li.search-result").first());
      if (width === "phone") await p.getByRole("button", { name: "Menu" }).click();
      await visible(p.getByRole("link", { name: "Agents", exact: true }));
    } },
    { name: "search", open: async (p) => {
      await p.goto(`${base}/#/search/entry`);
      await visible(p.locator("li.search-result").first());
    } },
    { name: "agents", open: async (p) => {
      await p.goto(`${base}/#/agents`);
      await visible(p.getByRole("heading", { name: "Your agents" }));
    } },
    { name: "contacts", open: async (p) => {
      await p.goto(`${base}/#/contacts`);
      await visible(p.getByRole("heading", { name: "Contacts", exact: true }));
    } },
    { name: "memories", open: async (p) => {
      await p.goto(`${base}/#/memories`);
      await visible(p.getByRole("heading", { name: "Memories", exact: true }));
    } },
    { name: "keys", open: async (p) => {
      await p.goto(`${base}/#/keys`);
      await visible(p.getByRole("heading", { name: "Your keys" }));
    } },
    { name: "account", open: async (p) => {
      await p.goto(`${base}/#/account`);
      await visible(p.getByRole("heading", { name: "Account", exact: true }));
    } },
    { name: "admin", open: async (p) => {
      await p.goto(`${base}/#/admin`);
      await visible(p.getByRole("heading", { name: "Database" }));
    } },
  ];
}

// richSteps: the room as a chat client (web_chat.mjs).
async function richSteps() {
  const t = {
    page, base, state, visible, until, shot, log, agentCall, expectRefusal,
    // processed has the agent take a message and finish it.
    processed: async (id) => {
      await agentCall(state.agent.key, "POST", `/api/v1/agent/chats/${state.room}/messages/${id}/processing`);
      await agentCall(state.agent.key, "POST", `/api/v1/agent/chats/${state.room}/messages/${id}/processed`, {});
    },
    // agentSays posts a text message as the agent, mentioning alice.
    agentSays: (content) => agentCall(state.agent.key, "POST", `/api/v1/agent/chats/${state.room}/messages`,
      { message: { content, mentions: [{ id: state.me.id }] } }),
    // personSays posts as alice, mentioning the agent, and answers its id.
    personSays: (content) => page.evaluate(async ({ room, agent, content }) => {
      const res = await fetch(`/api/v1/me/chats/${room}/messages`, {
        method: "POST",
        headers: { Authorization: `Bearer ${localStorage.getItem("chatd.session")}`, "Content-Type": "application/json" },
        body: JSON.stringify({ message: { content, mentions: [{ id: agent }] } }),
      });
      if (res.status !== 201) throw new Error(`posting answered ${res.status}: ${await res.text()}`);
      return (await res.json()).data.id;
    }, { room: state.room, agent: state.agent.id, content }),
  };
  await step("markdown", () => chat.markdown(t));
  await step("xss-corpus", () => chat.xss(t));
  await step("agent-turn", () => chat.agentTurn(t));
  await step("presence", () => chat.presence(t));
  await step("default-mention", () => chat.defaultMention(t));
  await step("reply-react-edit-delete", () => chat.replyReactEditDelete(t));
  await step("attention", () => chat.attention(t));
  await step("tasks", () => chat.tasks(t));
  await step("images", () => chat.images(t));
  await step("notifications", () => chat.notifications(t));
}

// apiReference opens the readable API reference the navigation links to:
// Swagger UI, vendored, rendering chatd's own document under the web app's
// strict Content-Security-Policy (a violation is a console error, which
// fails the run). It checks that an operation renders with the error codes
// the document lists for it.
// search finds messages by their words, shows each snippet as text with
// the matches marked (never as markup), and opens a result's room at the
// message, loading earlier pages when it is further back.
async function search() {
  const { key } = state.agent;
  await agentCall(key, "POST", `/api/v1/agent/chats/${state.room}/messages`,
    { message: { content: "@alice <img src=x onerror=alert(1)> findme «quoted»", mentions: [{ id: state.me.id }] } });
  await nav("Search");
  const box = page.getByLabel("Search", { exact: true });
  await box.fill("findme");
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await atHash(/^#\/search\/findme$/);
  const hit = page.locator("li.search-result").filter({ hasText: "findme" });
  await visible(hit);
  if (await page.locator(".search-results img").count()) throw new Error("a snippet became markup");
  const marks = await hit.locator("mark").allInnerTexts();
  if (marks.join("|") !== "findme") throw new Error(`the marked matches are ${JSON.stringify(marks)}`);
  const text = await hit.locator(".snippet").innerText();
  if (!text.includes("<img src=x onerror=alert(1)>") || !text.includes("‹quoted›")) throw new Error(`the snippet reads ${JSON.stringify(text)}`);
  await visible(hit.getByText("Launch plan v2"));
  await shot("08b-search");
  // "entry 3" is older than the newest page of its room.
  await box.fill('"entry 3"');
  await page.getByRole("button", { name: "Search", exact: true }).click();
  const entry = page.locator("li.search-result").filter({ hasText: "entry 3" });
  await visible(entry);
  if ((await entry.count()) !== 1) throw new Error(`"entry 3" found ${await entry.count()} results`);
  await entry.getByRole("link", { name: "Open in the room" }).click();
  await atHash(/^#\/rooms\/[^/]+\/[^/]+$/);
  const found = page.locator("article.msg.found");
  await visible(found);
  const said = await found.innerText();
  if (!said.includes("@alice entry 3")) throw new Error(`the room opened at ${JSON.stringify(said)}`);
  await shot("08c-search-opened");
  // The room's own search box looks in that room alone.
  await page.getByRole("searchbox", { name: "Search this room" }).fill('"entry 7"');
  await page.getByRole("searchbox", { name: "Search this room" }).press("Enter");
  await atHash(/^#\/search\/[^/]+\/[^/]+$/);
  await visible(page.getByText(/only\. Search every room/));
  const inRoom = page.locator("li.search-result");
  await visible(inRoom.filter({ hasText: "entry 7" }).first());
  const rooms = await inRoom.locator(".room-name").allInnerTexts();
  if (!rooms.length || rooms.some((r) => r !== "Long history")) throw new Error(`the room's search found results in ${rooms}`);
  await inRoom.first().getByRole("link", { name: "Open in the room" }).click();
  await visible(page.locator("article.msg.found"));
  await page.getByRole("link", { name: "Launch plan" }).click();
  await visible(page.getByRole("heading", { name: "Launch plan" }));
}

// retention: the room's owner keeps events for less in the room's side
// panel; the organization's admin sets the default and reads the
// statistics on the Admin page, and the room then shows both.
async function retention() {
  await page.goto(`${base}/#/rooms/${state.room}`);
  const side = page.getByRole("complementary", { name: "Room details" });
  await visible(side.getByRole("heading", { name: "Retention" }));
  await visible(side.getByText("kept forever").first());
  await side.getByRole("button", { name: "Edit retention" }).click();
  await side.getByLabel(/^Events .*, days$/).fill("7");
  await side.getByRole("button", { name: "Save retention" }).click();
  await visible(side.getByText("7 days (this room's)"));
  await visible(side.getByRole("button", { name: "Edit retention" }));

  await nav("Admin");
  await visible(page.getByRole("heading", { name: "Admin", exact: true }));
  await visible(page.getByRole("heading", { name: "Database" }));
  await visible(page.getByRole("link", { name: "Launch plan v2" }).first());
  await page.getByLabel("Text messages, days").fill("365");
  await page.getByRole("button", { name: "Save retention" }).click();
  await visible(page.getByText("Retention saved."));
  await visible(page.getByText(/^Last set /));
  await dismissNotices();
  await shot("08d-admin");
  await page.setViewportSize({ width: 375, height: 800 });
  await fitsWidth();
  await shot("08e-phone-admin");
  await page.setViewportSize({ width: 1200, height: 800 });

  await page.goto(`${base}/#/rooms/${state.room}`);
  await visible(side.getByText("365 days"));
  await visible(side.getByText("7 days (this room's)"));
  await side.getByRole("button", { name: "Edit retention" }).click();
  await visible(side.getByLabel(/^Events .*, days$/));
  if (await side.getByLabel(/^Events .*, days$/).inputValue() !== "7") throw new Error("the room's own period is not in its form");
  await dismissNotices();
  await shot("08f-room-retention");
  await side.getByRole("button", { name: "Cancel" }).click();
}

// dismissNotices closes the notices still showing, with their own buttons,
// so that a screenshot shows what they would cover.
async function dismissNotices() {
  await page.evaluate(() => document.querySelectorAll(".toast button").forEach((b) => b.click()));
  await page.locator(".toast").first().waitFor({ state: "detached" });
}

async function apiReference() {
  await page.setViewportSize({ width: 1200, height: 800 });
  await page.goto(`${base}/#/rooms`);
  await page.getByRole("link", { name: "API reference" }).click();
  await until("the address to be /docs/api", () => pathOf(page.url()) === "/docs/api");
  // The viewer parses a 1.7 MB bundle and the whole document before it
  // shows anything: on two busy cores that can take longer than a step of
  // the app.
  const slow = { state: "visible", timeout: 4 * T };
  await page.getByRole("heading", { name: /chatd API/ }).waitFor(slow);
  await page.locator("#operations-tag-Messages_and_delivery").click();
  const send = page.locator("#operations-Messages_and_delivery-sendAgentMessage");
  await send.getByText("Send a text message").waitFor(slow);
  await send.locator(".opblock-summary").click();
  await send.getByText("mentions_required").first().waitFor(slow);
  await shot("13-api-reference");
}

// --- OAuth sign-in of an MCP client ------------------------------------------

// oauthConsent is what a person sees when an MCP client (here, one the
// script registers as Claude Code would) opens the authorization URL in
// their browser while they are signed out: the sign-in, then the consent
// screen, where they pick their agent and allow; the browser goes back to
// the client's redirect URI with a code (the script catches that hop), and
// the code's token opens an MCP session.
async function oauthConsent() {
  // A port of no server, whose every request (the page, then its favicon)
  // the script answers: Chromium would refuse an "unsafe" port such as 9.
  const clientOrigin = "http://127.0.0.1:39417";
  const redirect = `${clientOrigin}/callback`;
  const client = await (await fetch(`${base}/oauth/register`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ client_name: "Claude Code", redirect_uris: [redirect], token_endpoint_auth_method: "none" }),
  })).json();
  const verifier = randomBytes(32).toString("base64url");
  const challenge = createHash("sha256").update(verifier).digest("base64url");
  let landed = null;
  await page.route(`${clientOrigin}/**`, (route) => {
    if (route.request().url().startsWith(redirect)) landed = new URL(route.request().url());
    route.fulfill({ status: 200, contentType: "text/html", body: "<!doctype html><title>Signed in</title><p>You may close this tab.</p>" });
  });
  const q = new URLSearchParams({ client_id: client.client_id, redirect_uri: redirect, response_type: "code",
    code_challenge: challenge, code_challenge_method: "S256", state: "from-the-client", resource: `${base}/mcp` });

  await page.evaluate(() => localStorage.removeItem("chatd.session"));
  await page.goto(`${base}/oauth/authorize?${q}`);
  await atHash(/^#\/sign-in$/);
  await page.getByLabel("Handle", { exact: true }).fill(person.handle);
  await page.getByLabel("Password", { exact: true }).fill(person.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await visible(page.getByRole("heading", { name: "Sign Claude Code in to chatd" }));
  await atHash(/^#\/oauth\//);
  await page.getByLabel("Helper (alice/helper)").check();
  await shot("08b-oauth-consent");
  await page.getByRole("button", { name: "Allow" }).click();
  await until("the browser to reach the client's redirect URI", () => landed);
  // The page there must finish loading, or the next step's navigation is
  // interrupted by it.
  await page.waitForURL((u) => u.href.startsWith(redirect));
  if (landed.searchParams.get("state") !== "from-the-client" || landed.searchParams.get("iss") !== base) {
    throw new Error(`the client got ${landed}`);
  }
  const tokens = await (await fetch(`${base}/oauth/token`, {
    method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "authorization_code", code: landed.searchParams.get("code"), redirect_uri: redirect,
      code_verifier: verifier, client_id: client.client_id }),
  })).json();
  if (!tokens.access_token) throw new Error(`the code was refused: ${JSON.stringify(tokens)}`);
  state.oauthToken = tokens.access_token;
  if ((await mcpInitialize(state.oauthToken)) !== 200) throw new Error("the signed-in client cannot open an MCP session");
}

// oauthSignOut signs the client out from the API keys screen, where it is
// listed with the agent it acts as; its token stops working.
async function oauthSignOut() {
  await page.goto(`${base}/#/keys`);
  await visible(page.getByRole("heading", { name: "Apps signed in" }));
  const row = page.getByRole("row").filter({ hasText: "Claude Code" });
  await visible(row.getByText("Helper (alice/helper)"));
  await shot("08c-oauth-apps");
  await page.getByRole("button", { name: "Sign out Claude Code acting as Helper (alice/helper)" }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Sign out" }).click();
  await visible(page.getByText(/No app is signed in/));
  await until("the client's token to be refused", async () => (await mcpInitialize(state.oauthToken)) === 401);
}

// account: the person sees where they are signed in, signs another
// session out (its token is refused at once), and changes their password:
// this browser stays signed in and live, the old password stops working.
async function account() {
  const signIn = (password) => fetch(`${base}/api/v1/auth/sign-in`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ handle: person.handle, password }),
  });
  const elsewhere = (await (await signIn(person.password)).json()).data.access_token;
  const meWith = async (tok) => (await fetch(`${base}/api/v1/me`, { headers: { Authorization: `Bearer ${tok}` } })).status;
  await page.goto(`${base}/#/account`);
  await visible(page.getByRole("heading", { name: "Where you are signed in" }));
  await visible(page.getByRole("cell", { name: "This browser", exact: true }));
  await shot("19-account");
  await page.getByRole("row").filter({ hasText: "Elsewhere" }).first().getByRole("button", { name: /^Sign out the session/ }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Sign out" }).click();
  await until("the other session's token to be refused", async () => (await meWith(elsewhere)) === 401);

  const newPassword = "a whole new passphrase";
  expectRefusal(422, /^\/api\/v1\/me\/password$/, "POST");
  await page.getByLabel("Current password").fill("not it at all, sorry");
  await page.getByLabel("New password", { exact: true }).fill(newPassword);
  await page.getByLabel("New password again").fill(newPassword);
  await page.getByRole("button", { name: "Change password" }).click();
  await visible(page.getByRole("alert").filter({ hasText: /is not your password/ }));
  await page.getByLabel("Current password").fill(person.password);
  await page.getByLabel("New password", { exact: true }).fill(newPassword);
  await page.getByLabel("New password again").fill(newPassword);
  await page.getByRole("button", { name: "Change password" }).click();
  await visible(page.getByText(/Password changed/));
  await nav("Rooms");
  await visible(page.getByRole("button", { name: "New room" }));
  await visible(page.getByRole("status").filter({ hasText: /^Live$/ }));
  if ((await signIn(person.password)).status !== 401) throw new Error("the old password still signs in");
  if ((await signIn(newPassword)).status !== 200) throw new Error("the new password does not sign in");
  person.password = newPassword;

  // As the organization's admin, alice invites someone: the link is shown
  // once; opened (in another tab), it makes an account that is signed in.
  await nav("Account");
  await visible(page.getByRole("heading", { name: "Invitations" }));
  await page.getByRole("button", { name: "Create invitation link" }).click();
  const link = (await page.locator("code.secret").innerText()).trim();
  if (!/\/#\/invite\/band_i_[a-z0-9]+$/.test(link)) throw new Error(`the invitation link is ${link}`);
  await shot("20-invitation");
  await page.getByRole("button", { name: "Done, I stored it" }).click();
  await visible(page.getByRole("row").filter({ hasText: "Member" }).first());
  const mine = await sessionToken();
  const tab = await context.newPage();
  watch(tab);
  try {
    await tab.goto(link);
    await tab.getByLabel("Handle", { exact: true }).fill("newcomer");
    await tab.getByLabel("Name", { exact: true }).fill("New Comer");
    await tab.getByLabel("Password", { exact: true }).fill("the newcomer's passphrase");
    await tab.getByLabel("Password again").fill("the newcomer's passphrase");
    await tab.getByRole("button", { name: "Join" }).click();
    await tab.locator("#who").getByText("New Comer").waitFor({ timeout: T });
    state.newcomerToken = await tab.evaluate(() => localStorage.getItem("chatd.session"));
  } finally {
    await tab.close();
  }
  // The tabs share the browser's storage: alice's session goes back.
  await page.evaluate((tok) => localStorage.setItem("chatd.session", tok), mine);
  await page.reload();
  await visible(page.getByRole("heading", { name: "Invitations" }));
  await visible(page.getByText("No open invitation."));
  // A second invitation, revoked: its link is refused.
  await page.getByRole("button", { name: "Create invitation link" }).click();
  const second = (await page.locator("code.secret").innerText()).trim();
  await page.getByRole("button", { name: "Done, I stored it" }).click();
  await page.getByRole("button", { name: /^Revoke the invitation/ }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Revoke" }).click();
  await visible(page.getByText("No open invitation."));
  const res = await fetch(`${base}/api/v1/auth/accept-invitation`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ token: second.split("/").pop(), handle: "latecomer", name: "Late", password: "the latecomer's passphrase" }),
  });
  if (res.status !== 401) throw new Error(`a revoked invitation answered ${res.status}`);
  await removePerson();
}

// removePerson: the admin removes the newcomer from the People list, after
// a confirmation that says what goes with them; their session ends at once.
async function removePerson() {
  const row = page.getByRole("row").filter({ hasText: "@newcomer" });
  await visible(row.getByRole("cell", { name: "Member" }));
  if (await page.getByRole("row").filter({ hasText: "@alice" }).getByRole("button", { name: /^Remove/ }).count()) {
    throw new Error("the admin is offered to remove herself");
  }
  await shot("21-people");
  await row.getByRole("button", { name: "Remove New Comer" }).click();
  const dialog = page.getByRole("dialog");
  await visible(dialog.getByText(/signed out everywhere/));
  await dialog.getByRole("button", { name: "Remove", exact: true }).click();
  await until("the row to leave the list", async () => (await row.count()) === 0);
  const status = (await fetch(`${base}/api/v1/me`, { headers: { Authorization: `Bearer ${state.newcomerToken}` } })).status;
  if (status !== 401) throw new Error(`the removed person's session answers ${status}, want 401`);
}

// mcpInitialize opens an MCP session with an OAuth access token and answers
// the status.
async function mcpInitialize(token) {
  const res = await fetch(`${base}/mcp`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "web-e2e", version: "1" } } }),
  });
  await res.body?.cancel();
  return res.status;
}

// --- an agent's webhooks -----------------------------------------------------

// startReceiver listens on a free loopback port for webhook requests: it
// keeps each (headers and raw body) and answers with its status of the
// moment.
async function startReceiver() {
  const r = { status: 204, requests: [] };
  r.server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      r.requests.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(r.status).end();
    });
  });
  await new Promise((ok) => r.server.listen(0, "127.0.0.1", ok));
  r.url = `http://127.0.0.1:${r.server.address().port}/hook`;
  return r;
}

// checkSigned fails unless a request carries the signature Standard
// Webhooks makes of it with secret.
function checkSigned(secret, { headers, body }) {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const signed = Buffer.concat([Buffer.from(`${headers["webhook-id"]}.${headers["webhook-timestamp"]}.`), body]);
  const want = `v1,${createHmac("sha256", key).update(signed).digest("base64")}`;
  if (!headers["webhook-signature"].split(" ").includes(want)) {
    throw new Error(`webhook-signature ${headers["webhook-signature"]}, want ${want}`);
  }
}

// mentionHelper posts, as the person, a message to the room that mentions
// the agent: what a webhook of the agent is sent.
async function mentionHelper(content) {
  await page.evaluate(async ({ room, agent, content }) => {
    const res = await fetch(`/api/v1/me/chats/${room}/messages`, {
      method: "POST",
      headers: { Authorization: `Bearer ${localStorage.getItem("chatd.session")}`, "Content-Type": "application/json" },
      body: JSON.stringify({ message: { content: `@alice/helper ${content}`, mentions: [{ id: agent }] } }),
    });
    if (res.status !== 201) throw new Error(`posting answered ${res.status}: ${await res.text()}`);
  }, { room: state.room, agent: state.agent.id, content });
}

// webhookSteps: the owner gives the agent a webhook on the Agents screen,
// sees an address refused in the server's words, stores the secret shown
// once, sees a delivery the receiver refused with 410 pause the webhook,
// resumes it and sees the delivery arrive in the log, then removes it.
async function webhookSteps() {
  const receiver = await startReceiver();
  try {
    await step("webhook-refused", webhookRefused);
    await step("webhook-add", () => webhookAdd(receiver));
    await step("webhook-paused", () => webhookPaused(receiver));
    await step("webhook-resumed", () => webhookResumed(receiver));
    await step("webhook-remove", () => webhookRemove(receiver));
  } finally {
    receiver.server.close();
  }
}

async function webhookRefused() {
  await page.setViewportSize({ width: 1200, height: 800 });
  await nav("Agents");
  await page.getByRole("button", { name: "Webhooks of Helper" }).click();
  await visible(page.getByRole("heading", { name: "Webhooks of Helper" }));
  await visible(page.getByText("Helper has no webhooks: add one above."));
  expectRefusal(422, /^\/api\/v1\/me\/agents\/[^/]+\/webhooks$/, "POST");
  await page.getByLabel("Webhook URL").fill("http://169.254.169.254/latest/meta-data");
  await page.getByRole("button", { name: "Add webhook" }).click();
  const alert = page.getByRole("alert").filter({ hasText: /169\.254\.169\.254, a cloud metadata address/ });
  await visible(alert);
  log(`  the refusal reads: ${(await alert.innerText()).trim()}`);
  await shot("14-webhook-refused");
}

async function webhookAdd(receiver) {
  await page.getByLabel("Webhook URL").fill(receiver.url);
  await page.getByLabel("Webhook description").fill("the test's receiver");
  await page.getByRole("button", { name: "Add webhook" }).click();
  const secret = page.locator("code.secret");
  await visible(secret);
  state.webhookSecret = (await secret.innerText()).trim();
  if (!/^whsec_[A-Za-z0-9+/]+=*$/.test(state.webhookSecret)) throw new Error(`the shown secret ${state.webhookSecret} is not one`);
  await visible(page.getByText(/This secret is shown only once/));
  await visible(page.getByRole("button", { name: "Copy" }).first());
  await shot("15-webhook-secret");
  await page.getByRole("button", { name: "Done, I stored it" }).click();
  await until("the secret to be gone from the page", async () =>
    !(await page.evaluate((k) => document.documentElement.outerHTML.includes(k), state.webhookSecret)));
  await visible(page.getByRole("cell").filter({ hasText: receiver.url }));
  await visible(page.getByText("Active", { exact: true }));
  await visible(page.getByText("Nothing sent yet"));
  await allNamed("the webhooks of Helper");
}

async function webhookPaused(receiver) {
  // The receiver answers 410 Gone: the webhook is paused, with the reason.
  receiver.status = 410;
  await mentionHelper("ping for the webhook");
  await until("the receiver to be sent the message", () => receiver.requests.length === 1);
  checkSigned(state.webhookSecret, receiver.requests[0]);
  if (!receiver.requests[0].body.toString().includes("ping for the webhook")) throw new Error("the request lacks the message");
  await until("the webhook to show paused", async () => {
    await page.getByRole("button", { name: "Refresh the webhooks of Helper" }).click();
    return (await page.getByText("Paused", { exact: true }).count()) === 1;
  });
  await visible(page.getByText(/410 Gone/).first());
  await page.getByRole("button", { name: `Delivery log of ${receiver.url}` }).click();
  await visible(page.getByRole("heading", { name: `Deliveries to ${receiver.url}` }));
  const row = page.locator(".delivery-log tbody tr").first();
  await visible(row.getByText("Pending", { exact: true }));
  await visible(row.getByText("410", { exact: true }));
  await shot("16-webhook-paused");
}

async function webhookResumed(receiver) {
  // Resumed, the webhook is sent the same delivery again, and the log,
  // which looks again while a delivery is pending, shows it delivered.
  receiver.status = 204;
  await page.getByRole("button", { name: `Resume webhook ${receiver.url}` }).click();
  await until("the receiver to be sent the message again", () => receiver.requests.length === 2);
  const [first, again] = receiver.requests;
  if (again.headers["webhook-id"] !== first.headers["webhook-id"]) throw new Error("the retry has another webhook-id");
  checkSigned(state.webhookSecret, again);
  const row = page.locator(".delivery-log tbody tr").first();
  await visible(row.getByText("Delivered", { exact: true }));
  await visible(row.getByText("204", { exact: true }));
  await visible(row.getByText("2", { exact: true }));
  await visible(page.getByText("Active", { exact: true }));
  await shot("17-webhook-log");
  await page.setViewportSize({ width: 375, height: 800 });
  await fitsWidth();
  await shot("18-phone-webhooks");
  await page.setViewportSize({ width: 1200, height: 800 });
}

async function webhookRemove(receiver) {
  await page.getByRole("button", { name: `Remove webhook ${receiver.url}` }).click();
  const dialog = page.getByRole("dialog");
  await visible(dialog.getByText(/nothing more/));
  await dialog.getByRole("button", { name: "Remove webhook" }).click();
  await visible(page.getByText("Helper has no webhooks: add one above."));
  if (await page.locator(".delivery-log").count()) throw new Error("the removed webhook's log is still shown");
  await mentionHelper("after the removal");
  await page.waitForTimeout(500);
  if (receiver.requests.length !== 2) throw new Error(`the receiver got ${receiver.requests.length} requests, want 2`);
  await page.getByRole("button", { name: "Close the webhooks of Helper" }).click();
  await until("focus back on the row's Webhooks button", () =>
    page.evaluate(() => document.activeElement && document.activeElement.getAttribute("aria-label") === "Webhooks of Helper"));
}

// allNamed fails when a control on the page has no name a screen reader
// can say.
async function allNamed(where) {
  const unnamed = await page.evaluate(() => [...document.querySelectorAll("input, select, textarea, button, a[href]")]
    .filter((el) => !el.closest("[hidden]") && el.type !== "hidden")
    .filter((el) => !(el.getAttribute("aria-label") || el.getAttribute("aria-labelledby") ||
      (el.labels && el.labels.length) || el.textContent.trim()))
    .map((el) => el.outerHTML.slice(0, 120)));
  if (unnamed.length) throw new Error(`${where}: controls without a name: ${unnamed.join(" | ")}`);
}

// inView says whether the element's top is in its message list's view.
function inView(locator) {
  return locator.evaluate((el) => {
    const view = el.closest("[role=log]").getBoundingClientRect();
    const r = el.getBoundingClientRect();
    return r.top >= view.top - 1 && r.top < view.bottom;
  });
}

// fitsWidth fails when the page scrolls sideways at its viewport's width.
async function fitsWidth() {
  const { scroll, width } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: window.innerWidth }));
  if (scroll > width) throw new Error(`the page is ${scroll}px wide in a ${width}px viewport`);
}

// --- run -------------------------------------------------------------------

let failed = false;
const started = Date.now();
try {
  await flow();
} catch (err) {
  failed = true;
  if (!(err instanceof StepFailed)) log(`FAIL: ${err && err.stack ? err.stack : err}`);
} finally {
  await context.close().catch(() => {});
  if (ownProfile) await rm(profile, { recursive: true, force: true });
}

for (const p of problems) log(`problem: ${p}`);
log(`ran ${ran.length} steps (${ran.join(", ")}); ` +
  `${shotCount} screenshots in ${shots}; ${Date.now() - started} ms`);
if (failed || problems.length) {
  log(problems.length ? `FAIL: ${problems.length} page or console errors` : "FAIL");
  process.exit(1);
}
log("PASS");
