// The web app as a chat client, for web.mjs: agent output rendered as its
// writer meant it (Markdown, code) and never as script, an agent's turn
// folded into one block, presence and what each agent is doing, the
// composer's default mention, replies, reactions, edits and deletions, and
// the attention list. Each function is one step, run by web.mjs's step()
// with the helpers it passes in t.

import WebSocket from "ws";

// The XSS corpus an agent posts: each must render as inert text or safe
// markup; none may run, open a dialog, or leave a node or attribute that
// could.
export const xssCorpus = [
  "<script>alert('script')</script>",
  "<img src=x onerror=alert('img')>",
  "<svg onload=alert('svg')><circle r=1></svg>",
  "<svg><script>alert('svg-script')</script></svg>",
  "[click me](javascript:alert('link'))",
  "[data](data:text/html,<script>alert('data')</script>)",
  "![pic](javascript:alert('image'))",
  "<a href=\"javascript:alert('a')\">a</a>",
  "<iframe src=\"javascript:alert('iframe')\"></iframe>",
  "<div onclick=\"alert('div')\" style=\"position:fixed;inset:0\">overlay</div>",
  "<b onmouseover=alert('b')>bold</b",
  "<<script>alert('nested')//<</script>",
  "<math><mtext><table><mglyph><style><img src=x onerror=alert('mxss')>",
  "<form action=\"javascript:alert('form')\"><input type=submit></form>",
  "<details open ontoggle=alert('details')>",
  "`<img src=x onerror=alert('code')>`",
  "[x](JaVaScRiPt:alert('case'))",
  "[x](&#106;avascript:alert('entity'))",
  "<style>body{display:none}</style>",
  "<object data=\"javascript:alert('object')\"></object>",
];

// markdown: an agent's answer in Markdown shows as formatted text: bold,
// a table, a task list, a link that opens safely, highlighted Go.
export async function markdown(t) {
  const { page, visible, until } = t;
  const content = "@alice Here is **the plan**, with `inline code`, a [link](https://example.com/docs) and https://example.com/auto bare.\n\n" +
    "| step | owner |\n|---|---|\n| build | Helper |\n| ship | Alice |\n\n- [x] tests pass\n- [ ] release notes\n\n" +
    "```go\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n```";
  await t.agentSays(content);
  const msg = page.locator("article.msg").filter({ hasText: "Here is the plan" });
  await visible(msg.locator(".md strong").filter({ hasText: "the plan" }));
  await visible(msg.locator(".md code").filter({ hasText: "inline code" }).first());
  await visible(msg.locator(".md table td").filter({ hasText: "Helper" }));
  await visible(msg.locator('.md .task[aria-label="done"]'));
  const link = msg.locator(".md a").filter({ hasText: "link" });
  const attrs = await link.evaluate((a) => ({ href: a.getAttribute("href"), target: a.target, rel: a.rel }));
  if (attrs.href !== "https://example.com/docs" || attrs.target !== "_blank" || attrs.rel !== "noopener noreferrer") {
    throw new Error(`the link is ${JSON.stringify(attrs)}`);
  }
  // A bare address becomes a link too (GFM's autolinks), as safe.
  const auto = await msg.locator('.md a[href="https://example.com/auto"]').evaluate((a) => a.rel);
  if (auto !== "noopener noreferrer") throw new Error(`the autolink's rel is ${auto}`);
  // The highlighter loads on first use and colours the keywords.
  await until("the Go code to be highlighted", async () =>
    (await msg.locator("pre code.hljs .hljs-keyword").filter({ hasText: "func" }).count()) === 1);
  await t.shot("06c-markdown");
}

// xss: an agent posts the corpus; nothing runs (no dialog, no CSP report,
// which web.mjs counts as a console error), and no element or attribute
// that could run lands in the page.
export async function xss(t) {
  const { page, until } = t;
  const dialogs = [];
  const onDialog = (d) => {
    dialogs.push(d.message());
    d.dismiss().catch(() => {});
  };
  page.on("dialog", onDialog);
  try {
    for (const [i, payload] of xssCorpus.entries()) await t.agentSays(`@alice xss ${i}: ${payload}`);
    await until("every payload to be shown", async () =>
      (await page.locator("article.msg").filter({ hasText: /xss \d+:/ }).count()) === xssCorpus.length);
    // Hover and click across the payloads, as a reader would.
    for (const el of await page.locator("article.msg").filter({ hasText: /xss \d+:/ }).all()) {
      await el.hover();
      await el.locator(".body").click({ position: { x: 2, y: 2 } });
    }
    await page.waitForTimeout(500);
    const injected = await page.evaluate(() => {
      const bad = [];
      for (const body of document.querySelectorAll("article.msg .body")) {
        for (const el of body.querySelectorAll("*")) {
          if (/^(SCRIPT|IMG|SVG|IFRAME|OBJECT|EMBED|STYLE|FORM|INPUT|MATH|DETAILS|LINK|META|BASE)$/i.test(el.tagName)) bad.push(el.outerHTML);
          for (const a of el.attributes) {
            if (/^on/i.test(a.name) || a.name === "style" || a.name === "srcdoc" ||
              ((a.name === "href" || a.name === "src" || a.name === "action") && !/^(https?:|mailto:)/i.test(a.value))) bad.push(`${el.tagName} ${a.name}=${a.value}`);
          }
        }
      }
      return bad;
    });
    if (injected.length) throw new Error(`payloads left live markup: ${injected.join(" | ")}`);
    if (dialogs.length) throw new Error(`dialogs opened: ${dialogs.join(", ")}`);
    const shown = await page.locator("article.msg").filter({ hasText: "xss 0:" }).innerText();
    if (!shown.includes("<script>alert('script')</script>")) throw new Error(`the script tag is not shown as text: ${shown}`);
    await t.shot("06d-xss-corpus");
  } finally {
    page.off("dialog", onDialog);
  }
}

// agentTurn: alice asks, the agent works through a thought, a tool call
// and its result while the block shows unfolded and live, then answers:
// the block folds to one line that says what happened, and unfolds on a
// click.
export async function agentTurn(t) {
  const { page, visible, until, state } = t;
  const asked = await t.personSays("@alice/helper check the release");
  const { key } = state.agent;
  const room = state.room;
  const call = (method, path, body) => t.agentCall(key, method, path, body);
  await call("POST", `/api/v1/agent/chats/${room}/messages/${asked}/processing`);
  await until("the agent to show working", async () =>
    /working/.test(await page.locator(`.agent-chip[data-agent="${state.agent.id}"]`).innerText()));
  const event = (message_type, content, metadata = {}) =>
    call("POST", `/api/v1/agent/chats/${room}/events`, { event: { message_type, content, metadata } });
  await event("thought", "Reading the changelog first");
  await event("tool_call", JSON.stringify({ name: "git_log", args: { range: "v1..HEAD" } }), { function: { name: "git_log" } });
  await event("tool_result", "12 commits");
  const turn = page.locator("section.turn").last();
  await visible(turn.locator(".spinner"));
  if (!(await turn.locator("details").evaluate((d) => d.open))) throw new Error("a live turn is folded");
  await visible(turn.locator(".steps").getByText("Reading the changelog first"));
  await t.shot("06e-turn-live");
  await t.agentSays("@alice The release is ready: 12 commits since v1.");
  await call("POST", `/api/v1/agent/chats/${room}/messages/${asked}/processed`, {});
  await until("the turn to fold", async () => !(await turn.locator("details").evaluate((d) => d.open)));
  const line = (await turn.locator("summary").innerText()).trim();
  if (!/Helper worked: 3 steps · tools: git_log/.test(line)) throw new Error(`the folded turn reads ${JSON.stringify(line)}`);
  if (await turn.locator(".steps").isVisible()) throw new Error("the folded turn shows its steps");
  await t.shot("06f-turn-folded");
  await turn.locator("summary").click();
  await visible(turn.locator(".steps").getByText("12 commits"));
  await turn.locator("summary").click();
  // Show every step (in the room's menu) unfolds every turn, and folds
  // them again when it is turned off.
  const steps = page.getByLabel("Show every step");
  await page.getByLabel("Room actions").click();
  await steps.check();
  await until("every turn to unfold", () => page.locator("section.turn details").evaluateAll((ds) => ds.length > 1 && ds.every((d) => d.open)));
  await steps.uncheck();
  await until("the turns to fold again", () => page.locator("section.turn details").evaluateAll((ds) => ds.every((d) => !d.open)));
  await page.getByLabel("Room actions").click();
  await until("the agent to show idle", async () =>
    /idle/.test(await page.locator(`.agent-chip[data-agent="${state.agent.id}"]`).innerText()));
}

// presence: the agent's socket connects and the room shows it connected;
// it closes, and the room shows when it was last seen.
export async function presence(t) {
  const { page, until, state, base } = t;
  const chip = page.locator(`.agent-chip[data-agent="${state.agent.id}"]`);
  const online = () => chip.evaluate((el) => el.classList.contains("online"));
  if (await online()) throw new Error("the agent shows connected before it connected");
  const url = `${base.replace(/^http/, "ws")}/api/v1/socket/websocket?vsn=2.0.0&api_key=${encodeURIComponent(state.agent.key)}`;
  const ws = new WebSocket(url);
  await new Promise((ok, fail) => { ws.once("open", ok); ws.once("error", fail); });
  try {
    await until("the agent to show connected", online);
    if (!/connected/.test(await chip.getAttribute("aria-label"))) throw new Error(`the chip says ${await chip.getAttribute("aria-label")}`);
    await t.shot("06g-presence-connected");
  } finally {
    ws.close();
  }
  await until("the agent to show last seen", async () => !(await online()) && /last seen/.test(await chip.getAttribute("aria-label")));
  // The agents page says when each agent was last seen.
  await page.goto(`${base}/#/agents`);
  const row = page.getByRole("row").filter({ hasText: "alice/helper" });
  await t.visible(row.locator('td[data-label="Last seen"] time'));
  await page.goto(`${base}/#/rooms/${state.room}`);
  await t.visible(page.getByRole("heading", { name: "Launch plan" }));
}

// defaultMention: in a room with one agent, the agent is mentioned by
// default as a chip; a message without a typed mention reaches it (Shift+
// Enter adds a line, Enter sends); with the chip removed and no mention,
// the composer says what is missing.
export async function defaultMention(t) {
  const { page, visible, until, state } = t;
  const chip = page.locator(".composer .mention-chip");
  await visible(chip.filter({ hasText: "@alice/helper" }));
  const box = page.getByLabel("Message", { exact: true });
  await box.fill("status");
  await box.press("Shift+Enter");
  await box.pressSequentially("please");
  if ((await box.inputValue()) !== "status\nplease") throw new Error(`Shift+Enter left ${JSON.stringify(await box.inputValue())}`);
  await box.press("Enter");
  await until("the message box to be emptied", async () => (await box.inputValue()) === "");
  const next = (await t.agentCall(state.agent.key, "GET", `/api/v1/agent/chats/${state.room}/messages/next`)).data;
  if (!next || !next.content.includes("status\nplease")) throw new Error(`the agent got ${JSON.stringify(next)}`);
  // The agent fails it: the room says so, and the message says why on hover.
  await t.agentCall(state.agent.key, "POST", `/api/v1/agent/chats/${state.room}/messages/${next.id}/processing`);
  await t.agentCall(state.agent.key, "POST", `/api/v1/agent/chats/${state.room}/messages/${next.id}/failed`, { error: "the status page is down" });
  const agentChip = page.locator(`.agent-chip[data-agent="${state.agent.id}"]`);
  await until("the agent to show failed", async () => /failed on its last message/.test(await agentChip.innerText()));
  const failed = page.locator(`article.msg[data-id="${next.id}"] .delivery.failed`);
  await visible(failed);
  if ((await failed.getAttribute("title")) !== "the status page is down") throw new Error(`the failure reads ${await failed.getAttribute("title")}`);
  // A failed message is the agent's to try again: the second attempt works.
  await t.processed(next.id);
  await visible(page.locator(`article.msg[data-id="${next.id}"] .delivery.processed`).filter({ hasText: "attempt 2" }));
  // A draft survives leaving the room and coming back.
  await box.fill("a draft to keep");
  await page.getByRole("button", { name: "Do not mention Helper" }).click();
  await box.press("Enter");
  await visible(page.getByRole("alert").filter({ hasText: /Mention someone/ }));
  await page.reload();
  await visible(page.getByRole("heading", { name: "Launch plan" }));
  if ((await page.getByLabel("Message", { exact: true }).inputValue()) !== "a draft to keep") throw new Error("the draft was lost");
  await visible(chip.filter({ hasText: "@alice/helper" }));
  await page.getByLabel("Message", { exact: true }).fill("");
}

// replyReactEditDelete: alice replies to the agent's answer (quoted, the
// agent mentioned), reacts to it, edits her reply and deletes it; each
// shows at once and reaches the agent's side.
export async function replyReactEditDelete(t) {
  const { page, visible, until, state } = t;
  // The answer itself, not a reply that quotes it.
  const answer = page.locator("article.msg").filter({ has: page.locator(".body", { hasText: "The release is ready" }) }).last();
  await answer.hover();
  await answer.getByRole("button", { name: "Reply", exact: true }).click();
  await visible(page.locator(".composer .reply-chip").filter({ hasText: "Replying to Helper" }));
  const box = page.getByLabel("Message", { exact: true });
  await box.fill("thanks, ship it");
  await box.press("Enter");
  const reply = page.locator("article.msg").filter({ hasText: "thanks, ship it" }).last();
  await visible(reply.locator(".quote").filter({ hasText: "The release is ready" }));
  const sent = (await t.agentCall(state.agent.key, "GET", `/api/v1/agent/chats/${state.room}/messages/next`)).data;
  if (!sent.reply_to_id || !sent.content.includes("thanks, ship it")) throw new Error(`the agent got ${JSON.stringify(sent)}`);
  await t.processed(sent.id);

  await answer.hover();
  await answer.getByRole("button", { name: "React", exact: true }).click();
  await page.getByRole("button", { name: "React 🎉" }).click();
  await visible(answer.getByRole("button", { name: /^🎉 1, yours/ }));
  // The agent reacts the same: the count grows live.
  await t.agentCall(state.agent.key, "POST", `/api/v1/agent/chats/${state.room}/messages/${await answer.getAttribute("data-id")}/reactions`, { emoji: "🎉" });
  await visible(answer.getByRole("button", { name: /^🎉 2, yours/ }));

  await reply.hover();
  await reply.getByRole("button", { name: "Edit", exact: true }).click();
  const dialog = page.getByRole("dialog");
  await dialog.getByLabel("Message text").fill("thanks, ship it today");
  await dialog.getByRole("button", { name: "Save" }).click();
  await visible(page.locator("article.msg").filter({ hasText: "ship it today" }).getByText("(edited)"));
  await t.shot("06h-reply-react-edit");

  const edited = page.locator("article.msg").filter({ hasText: "ship it today" });
  await edited.hover();
  await edited.getByRole("button", { name: "Delete", exact: true }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Delete message" }).click();
  await until("the reply to be a tombstone", async () =>
    (await page.locator("article.msg.deleted").filter({ hasText: "This message was deleted." }).count()) >= 1);
}

// attention: an agent's request for attention is listed in the side panel;
// Open shows it in the room, Mark done puts it away.
export async function attention(t) {
  const { page, visible, until, state } = t;
  await t.agentCall(state.agent.key, "POST", `/api/v1/agent/chats/${state.room}/events`,
    { event: { message_type: "attention", content: "Approve the **release**?", metadata: { kind: "review" } } });
  const panel = page.locator("section.attention-panel");
  const item = panel.locator("li.attention-item").filter({ hasText: "Approve the release?" });
  await visible(item);
  await item.getByRole("button", { name: "Open" }).click();
  await visible(page.locator("article.msg.found").filter({ hasText: "Approve the release?" }));
  await t.shot("06i-attention");
  await item.getByRole("button", { name: "Mark done" }).click();
  await until("the item to leave the open list", async () => (await item.count()) === 0);
  await panel.getByRole("button", { name: "Show done" }).click();
  await visible(panel.locator("li.attention-item.done").filter({ hasText: "Approve the release?" }));
  await panel.getByRole("button", { name: "Hide done" }).click();
  // The mark is the person's own, kept by the server: it holds after a reload.
  await page.reload();
  await visible(page.getByRole("heading", { name: "Launch plan" }));
  await visible(page.locator("section.attention-panel").getByRole("button", { name: "Show done" }));
  if (await page.locator("section.attention-panel li.attention-item").filter({ hasText: "Approve the release?" }).count()) {
    throw new Error("the item marked done is open again after a reload");
  }
}

// tasks: an agent's tasks show on the board panel, live, with their state
// and where each assignee is with them.
export async function tasks(t) {
  const { page, visible, state } = t;
  const created = (await t.agentCall(state.agent.key, "POST", `/api/v1/agent/chats/${state.room}/tasks`,
    { subject: "Draft the release notes" })).data;
  const item = page.locator("section ul.tasks li.task-item").filter({ hasText: "Draft the release notes" });
  await visible(item.getByText(`#${created.number}`));
  await t.agentCall(state.agent.key, "POST", `/api/v1/agent/chats/${state.room}/tasks/${created.id}`, { status: "in_progress" });
  await visible(item.locator(".task-state").filter({ hasText: /in progress/ }));
  await t.shot("06j-tasks");
}

// images: a PNG attached from the picker shows as a thumbnail that opens
// a viewer; a file dropped on the room, and one pasted into the message
// box, are attached to the next message.
export async function images(t) {
  const { page, visible, until } = t;
  // A 2×2 PNG, red.
  const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEUlEQVR4nGP4z8DAwMDAwMAAAA0aAgHbkQ8KAAAAAElFTkSuQmCC", "base64");
  await page.getByLabel("Attach files").setInputFiles({ name: "chart.png", mimeType: "image/png", buffer: png });
  await visible(page.locator(".composer .chip.file").filter({ hasText: "chart.png" }));
  // Dropped on the room, a second file joins it.
  await page.locator(".room-main").evaluate((el) => {
    const dt = new DataTransfer();
    dt.items.add(new File(["dropped notes"], "dropped.txt", { type: "text/plain" }));
    el.dispatchEvent(new DragEvent("dragover", { dataTransfer: dt, bubbles: true, cancelable: true }));
    el.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  await visible(page.locator(".composer .chip.file").filter({ hasText: "dropped.txt" }));
  await page.getByLabel("Message", { exact: true }).evaluate((el) => {
    const dt = new DataTransfer();
    dt.items.add(new File(["pasted notes"], "pasted.txt", { type: "text/plain" }));
    el.dispatchEvent(new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true }));
  });
  await visible(page.locator(".composer .chip.file").filter({ hasText: "pasted.txt" }));
  await page.getByLabel("Message", { exact: true }).fill("@alice/helper the chart");
  await page.getByRole("button", { name: "Send", exact: true }).click();
  const msg = page.locator("article.msg").filter({ hasText: "the chart" }).last();
  const thumb = msg.getByRole("button", { name: /^View chart\.png/ });
  await visible(thumb);
  await until("the thumbnail to load", () => thumb.locator("img").evaluate((img) => img.complete && img.naturalWidth === 2));
  await visible(msg.getByRole("button", { name: /^Download dropped\.txt/ }));
  await visible(msg.getByRole("button", { name: /^Download pasted\.txt/ }));
  await thumb.click();
  const viewer = page.getByRole("dialog", { name: "chart.png" });
  await visible(viewer.locator("img"));
  await t.shot("06k-image-viewer");
  await viewer.getByRole("button", { name: "Close" }).click();
}

// notifications: with the person's permission and the tab hidden, a
// mention notifies, and so does a request for attention; while the tab is
// visible nothing does. The tab's title counts what is unread elsewhere.
export async function notifications(t) {
  const { page, until, state } = t;
  await page.evaluate(() => {
    window.__notified = [];
    window.Notification = class {
      static permission = "granted";
      constructor(title, opts) { window.__notified.push({ title, body: opts.body }); }
      close() {}
    };
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "hidden" });
  });
  await t.agentSays("@alice a question for you while you are away");
  await until("a notification", async () => (await page.evaluate(() => window.__notified.length)) === 1);
  const n = await page.evaluate(() => window.__notified[0]);
  if (!/^Helper in Launch plan/.test(n.title) || !n.body.includes("a question for you")) throw new Error(`notified ${JSON.stringify(n)}`);
  await t.agentCall(state.agent.key, "POST", `/api/v1/agent/chats/${state.room}/events`,
    { event: { message_type: "attention", content: "Can I deploy **now**?", metadata: { kind: "question" } } });
  await until("a notification of the attention request", async () => (await page.evaluate(() => window.__notified.length)) === 2);
  const a = await page.evaluate(() => window.__notified[1]);
  if (!/^Helper needs your attention in Launch plan/.test(a.title) || a.body !== "Can I deploy now?") throw new Error(`notified ${JSON.stringify(a)}`);
  // Seen while visible, nothing notifies.
  await page.evaluate(() => { delete document.visibilityState; });
  await t.agentSays("@alice and one you see");
  await t.agentCall(state.agent.key, "POST", `/api/v1/agent/chats/${state.room}/events`,
    { event: { message_type: "attention", content: "and one more", metadata: { kind: "question" } } });
  await page.waitForTimeout(500);
  if ((await page.evaluate(() => window.__notified.length)) !== 2) throw new Error("a visible tab was notified");
  // Another room's news counts in the title.
  const other = (await t.agentCall(state.agent.key, "POST", "/api/v1/agent/chats", { chat: { title: "Side room" } })).data.id;
  await t.agentCall(state.agent.key, "POST", `/api/v1/agent/chats/${other}/participants`, { participant: { participant_id: state.me.id } });
  await page.getByRole("link", { name: /^Side room/ }).waitFor();
  await t.agentCall(state.agent.key, "POST", `/api/v1/agent/chats/${other}/messages`,
    { message: { content: "@alice news elsewhere", mentions: [{ id: state.me.id }] } });
  await until("the title to count it", async () => /^\(1\) /.test(await page.title()));
}
