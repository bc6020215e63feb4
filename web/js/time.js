// Dates and times as people see them, wherever the app shows one: a short
// form for lists and messages (the time if it is today, else the date), the
// full date and time for hovering, and the <time> element that carries both.
// Every format follows the browser's locale.

import { h } from "./dom.js";

// when is the short form of an API timestamp.
export function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  const now = new Date();
  if (d.toDateString() === now.toDateString()) {
    return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }
  return d.toLocaleDateString([], { year: "numeric", month: "short", day: "numeric" });
}

// exactly is the full date and time, for title attributes.
export function exactly(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

// timeEl is a timestamp for people, with the exact time on hover; a missing
// one (a key never used) says so.
export function timeEl(iso, attrs = {}) {
  if (!iso) return h("span", { class: "muted" }, "never");
  return h("time", { ...attrs, datetime: iso, title: exactly(iso) }, when(iso));
}

const rtf = new Intl.RelativeTimeFormat([], { numeric: "auto" });

// ago is a message's time as a chat shows it: "now" and minutes for the
// last hour, the time of day for today, else the short date (the timeline's
// day separators carry the day).
export function ago(iso, now = Date.now()) {
  const t = new Date(iso).getTime();
  const s = Math.round((now - t) / 1000);
  if (s < 45) return "just now";
  if (s < 3600) return rtf.format(-Math.round(s / 60), "minute");
  return when(iso);
}

// relTimeEl is a message's <time>: ago() with the exact time on hover,
// kept fresh by refreshTimes.
export function relTimeEl(iso) {
  return h("time", { datetime: iso, title: exactly(iso), dataset: { relative: "" } }, ago(iso));
}

// refreshTimes brings every relTimeEl under root up to date.
export function refreshTimes(root) {
  const now = Date.now();
  for (const t of root.querySelectorAll("time[data-relative]")) {
    const text = ago(t.dateTime, now);
    if (t.textContent !== text) t.textContent = text;
  }
}

// dayLabel names a day for a separator: Today, Yesterday, or the date.
export function dayLabel(iso) {
  const d = new Date(iso);
  const today = new Date();
  const yesterday = new Date(today.getFullYear(), today.getMonth(), today.getDate() - 1);
  if (d.toDateString() === today.toDateString()) return "Today";
  if (d.toDateString() === yesterday.toDateString()) return "Yesterday";
  return d.toLocaleDateString([], { weekday: "long", year: "numeric", month: "long", day: "numeric" });
}
