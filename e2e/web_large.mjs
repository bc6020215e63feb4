// A room of many messages in Chromium, measured (web_large_test.go seeds
// it): what the first load of the app fetches (JavaScript and CSS, as sent,
// gzipped), the time from asking for the room to its messages painted, the
// long tasks (over 50 ms, the main thread blocked) while it opens, and
// while the person scrolls back through a few thousand messages, with the
// longest frame. It prints "figure:" lines and fails past generous bounds.
//
// Environment: CHATD_URL, TOKEN (a session token), ROOM, CHROMIUM,
// SCREENSHOTS, PROFILE_DIR, MESSAGES (how many the room holds).

import { chromium } from "playwright-core";
import { join } from "node:path";

const base = process.env.CHATD_URL.replace(/\/$/, "");
const { TOKEN: token, ROOM: room, CHROMIUM: executablePath, SCREENSHOTS: shots, PROFILE_DIR: profile } = process.env;
const total = Number(process.env.MESSAGES);
const budget = 200 * 1024;
const log = (...a) => console.log(...a);
const figure = (name, value) => log(`figure: ${name}: ${value}`);
const problems = [];

const context = await chromium.launchPersistentContext(profile, {
  executablePath, headless: true, viewport: { width: 1280, height: 800 },
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
});
const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(30000);
page.on("pageerror", (e) => problems.push(`page error: ${e}`));
page.on("console", (m) => { if (m.type() === "error") problems.push(`console error: ${m.text()}`); });

// What the first load fetches: each script and stylesheet as sent.
const fetched = new Map();
page.on("response", async (res) => {
  const url = new URL(res.url());
  if (!/\.(m?js|css)$/.test(url.pathname) || res.status() !== 200) return;
  const h = await res.allHeaders();
  fetched.set(url.pathname, { sent: Number(h["content-length"] || 0), gzip: h["content-encoding"] === "gzip" });
});

try {
  // Sign in with the session (as chatd dev's link does), on the rooms list.
  await page.goto(`${base}/#/session/${encodeURIComponent(token)}`);
  const link = page.getByRole("link", { name: /^Ten thousand/ });
  await link.waitFor();

  // Open the room, watching for long tasks and for its messages to paint.
  await page.evaluate(() => {
    window.__long = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__long.push(e.duration);
    }).observe({ type: "longtask" });
    window.__painted = new Promise((resolve) => {
      const seen = () => {
        if (!document.querySelector(".timeline article.msg")) return false;
        // The frame after the one that laid them out has painted them.
        requestAnimationFrame(() => requestAnimationFrame(() => resolve(performance.now())));
        return true;
      };
      const mo = new MutationObserver(() => { if (seen()) mo.disconnect(); });
      mo.observe(document.body, { childList: true, subtree: true });
    });
    window.__asked = performance.now();
  });
  await link.click();
  const openMs = await page.evaluate(async () => (await window.__painted) - window.__asked);
  await page.waitForTimeout(500);
  const openLong = await page.evaluate(() => window.__long.splice(0));
  figure("room of messages", total);
  figure("asked to painted, ms", openMs.toFixed(0));
  figure("long tasks while opening", `${openLong.length}, longest ${Math.max(0, ...openLong).toFixed(0)} ms, total ${openLong.reduce((a, b) => a + b, 0).toFixed(0)} ms`);
  await page.screenshot({ path: join(shots, "large-room-open.png") });

  let js = 0; let css = 0;
  for (const [path, f] of fetched) {
    if (!f.gzip) problems.push(`${path} was not sent gzipped`);
    if (path.endsWith(".css")) css += f.sent; else js += f.sent;
  }
  const raw = await rawSizes([...fetched.keys()]);
  figure("first load, files", [...fetched.keys()].join(" "));
  figure("first load, JS bytes as sent (gzip)", js);
  figure("first load, CSS bytes as sent (gzip)", css);
  figure("first load, JS+CSS KB as sent", ((js + css) / 1024).toFixed(1));
  figure("first load, JS and CSS bytes uncompressed", `${raw.js} + ${raw.css} = ${((raw.js + raw.css) / 1024).toFixed(1)} KB`);
  if (js + css > budget) problems.push(`the first load fetched ${js + css} bytes of JS and CSS, over the ${budget} budget`);

  // Scroll back through the history: each time the top is reached the
  // next page loads; a rAF loop records the longest frame meanwhile.
  await page.evaluate(() => {
    window.__frames = [];
    let last = performance.now();
    const tick = (now) => {
      window.__frames.push(now - last);
      last = now;
      if (!window.__stopFrames) requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  await page.evaluate(() => performance.clearMeasures());
  const log$ = page.getByRole("log", { name: "Messages" });
  const started = Date.now();
  let shown = 0;
  for (let i = 0; i < 60; i++) {
    await log$.evaluate((el) => { el.scrollTop = Math.max(0, el.scrollTop - el.clientHeight * 3); });
    await page.waitForTimeout(50);
    await log$.evaluate((el) => { el.scrollTop = 0; });
    await page.waitForTimeout(150);
  }
  await page.waitForTimeout(500);
  shown = await page.locator(".timeline > *").count();
  const loaded = await page.evaluate(() => {
    const all = performance.getEntriesByName("chatd:timeline-render");
    return all.length ? all[all.length - 1].detail.messages : 0;
  });
  figure("messages loaded by scrolling back", loaded);
  const held = await page.evaluate(() => document.querySelectorAll(".timeline article.msg, .timeline section.turn").length);
  const scroll = await page.evaluate(() => {
    window.__stopFrames = true;
    return { long: window.__long.splice(0), frames: window.__frames };
  });
  const renders = await page.evaluate(() => performance.getEntriesByName("chatd:timeline-render").map((e) => e.duration));
  figure("timeline renders while scrolling", `${renders.length}, longest ${Math.max(0, ...renders).toFixed(0)} ms, total ${renders.reduce((a, b) => a + b, 0).toFixed(0)} ms`);
  const frames = scroll.frames.slice(1);
  frames.sort((a, b) => a - b);
  figure("scrolled back, seconds", ((Date.now() - started) / 1000).toFixed(1));
  figure("blocks in the timeline after scrolling", `${shown} (${held} messages or turns)`);
  figure("long tasks while scrolling", `${scroll.long.length}, longest ${Math.max(0, ...scroll.long).toFixed(0)} ms, total ${scroll.long.reduce((a, b) => a + b, 0).toFixed(0)} ms`);
  figure("frames while scrolling", `${frames.length}, median ${frames[Math.floor(frames.length / 2)].toFixed(1)} ms, 95th ${frames[Math.floor(frames.length * 0.95)].toFixed(1)} ms, longest ${frames[frames.length - 1].toFixed(0)} ms`);
  await page.screenshot({ path: join(shots, "large-room-scrolled.png") });
  if (openMs > 5000) problems.push(`the room took ${openMs.toFixed(0)} ms to paint`);
  if (fetched.size === 0) problems.push("no script or stylesheet was seen loading");
} finally {
  await context.close().catch(() => {});
}
// rawSizes asks again for each of paths as a client that takes no gzip,
// and answers the bytes of the JavaScript and of the CSS.
async function rawSizes(paths) {
  const out = { js: 0, css: 0 };
  for (const path of paths) {
    const res = await fetch(base + path, { headers: { "Accept-Encoding": "identity" } });
    if (res.headers.get("content-encoding")) problems.push(`${path} was sent ${res.headers.get("content-encoding")} to a client that takes none`);
    const n = (await res.arrayBuffer()).byteLength;
    if (path.endsWith(".css")) out.css += n; else out.js += n;
  }
  return out;
}

for (const p of problems) log(`problem: ${p}`);
if (problems.length) {
  log("FAIL");
  process.exit(1);
}
log("PASS");
