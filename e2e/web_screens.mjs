// Every main screen at a laptop's width and a phone's, for web.mjs: a
// screenshot of each (kept in SCREENSHOTS, to look at) and an axe-core scan
// of each, which fails on any serious or critical violation and logs the
// rest.

import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const axeSource = await readFile(require.resolve("axe-core/axe.min.js"), "utf8");

// Each screen at a laptop's width and a phone's, in the light theme, and at
// the laptop's width in the dark one (the system's choice, emulated).
export const widths = [["desktop", 1280, 800, "light"], ["phone", 390, 844, "light"], ["dark", 1280, 800, "dark"]];

// scan runs axe-core on the page as it is and answers its violations. The
// script is evaluated through the browser's debugging protocol, which the
// page's Content-Security-Policy does not govern.
export async function scan(page) {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.evaluate(axeSource);
  return page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ")) }));
  });
}

// screens visits each screen at each width: open(page) shows it; name
// names the screenshots. It fails on a serious or critical violation, and
// when a screen looks the same in the dark theme as in the light one (the
// app follows the system's choice).
export async function screens(t, list) {
  const { page, shot, log } = t;
  const serious = [];
  const counts = {};
  const looks = {};
  for (const [label, w, h, scheme] of widths) {
    await page.setViewportSize({ width: w, height: h });
    await page.emulateMedia({ colorScheme: scheme });
    for (const s of list) {
      await s.open(page, label);
      await page.waitForTimeout(300);
      await shot(`screen-${s.name}-${label}`);
      looks[`${s.name}-${label}`] = await page.evaluate(() => getComputedStyle(document.body).backgroundColor +
        " " + getComputedStyle(document.body).color);
      const found = await scan(page);
      // A drawer opened for the screen closes, as Escape closes it.
      await page.keyboard.press("Escape");
      counts[`${s.name}-${label}`] = found.length;
      for (const v of found) {
        const line = `${s.name} (${label}): ${v.impact} ${v.id}: ${v.help} at ${v.nodes.join(", ")}`;
        if (v.impact === "serious" || v.impact === "critical") serious.push(line);
        else log(`  axe: ${line}`);
      }
    }
  }
  log(`  axe violations per screen: ${JSON.stringify(counts)}`);
  const undarkened = list.filter((s) => looks[`${s.name}-dark`] === looks[`${s.name}-desktop`]).map((s) => s.name);
  if (undarkened.length) throw new Error(`these screens ignore the dark theme: ${undarkened.join(", ")}`);
  if (serious.length) throw new Error(`axe found serious or critical violations:\n${serious.join("\n")}`);
}
