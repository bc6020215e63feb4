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
