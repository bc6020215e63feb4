// The organization admin's page: how long the organization's rooms keep
// their text messages, events and files (the retention every room starts
// from), and what the database holds: its size, rows per table, the largest
// rooms, messages per day. Only admins reach it (the navigation shows it to
// them alone, and the server refuses everyone else).

import { h, replace, busy, errorBox, onSubmit, showError } from "../dom.js";
import { cardTable, pageSection } from "../ui.js";
import { timeEl } from "../time.js";
import { retentionFields } from "../room/retention.js";
import { formatBytes, formatCount } from "../units.js";

export function mount(root, ctx) {
  const { api, me } = ctx;
  if (me.role !== "admin") {
    root.append(pageSection("Admin", "Only an admin of your organization may see this page."));
    return null;
  }
  const fields = retentionFields("org", { inherit: "Keep forever" });
  const saved = h("p", { class: "hint" });
  const err = errorBox();
  const form = h("form", { class: "card stack", "aria-labelledby": "retention-heading" },
    h("h2", { id: "retention-heading" }, "Retention"),
    h("p", {}, "How many days every room of the organization keeps each kind of content. Older content is deleted for good " +
      "by the server's purge, in the background: as soon as you save, then every hour (unless the server's operator runs it " +
      "by hand). A room's owner may keep less in their room, never more. Leave a field empty to keep that kind forever."),
    fields.el, err, saved,
    h("div", { class: "row" }, h("button", { type: "submit" }, "Save retention")));
  const stats = h("div", { class: "stack" }, h("p", { class: "muted" }, "Loading the statistics…"));

  const showSaved = (r) => {
    fields.set(r);
    replace(saved, r.updated_at ? ["Last set ", timeEl(r.updated_at), "."] : "Never set: everything is kept forever.");
  };
  onSubmit(form, err, async () => {
    const r = await busy(form, () => api.put("/api/v1/me/organization/retention", { retention: fields.value() }));
    showSaved(r);
    ctx.notify("Retention saved.");
    loadStats();
  }, () => fields.focus());

  // The statistics take seconds on a large database: the retention, read
  // on its own, is ready to edit before them, and they never overwrite
  // what is being typed.
  async function loadRetention() {
    try {
      showSaved(await api.get("/api/v1/me/organization/retention"));
    } catch (e) {
      showError(err, e);
    }
  }
  async function loadStats() {
    try {
      replace(stats, renderStats(await api.get("/api/v1/me/organization/stats")));
    } catch (e) {
      replace(stats, h("p", { class: "error", role: "alert" }, `The statistics could not be loaded: ${e.message}`));
    }
  }

  root.append(pageSection("Admin",
    ["Your organization's retention, and what the server's database holds. ",
      "The same figures come from ", h("code", {}, "chatd stats"), " on the server."],
    form, stats));
  loadRetention();
  loadStats();
  return null;
}

// counted is n things, one thing: "1 file", "2 files".
const counted = (n, thing) => `${formatCount(n)} ${thing}${n === 1 ? "" : "s"}`;

// roomName is a room of the statistics: a link to it when the admin reads
// it, else what can be said of it.
function roomName(r) {
  if (r.readable) return h("a", { href: `#/rooms/${encodeURIComponent(r.id)}` }, r.title || "(untitled)");
  return h("span", { class: "muted" }, r.deleted ? "(deleted room)" : "(a room you do not read)");
}

// renderStats lays out GET /me/organization/stats.
function renderStats(s) {
  const db = s.database;
  const org = s.organization;
  const rooms = (caption, list) => (list.length
    ? h("div", { class: "room-sizes" }, cardTable(caption, ["Room", "Messages", "Message bytes", "File bytes"], list.map((r) => [
      roomName(r),
      formatCount(r.messages), formatBytes(r.message_bytes), formatBytes(r.file_bytes)])))
    : h("p", { class: "empty" }, "No rooms with messages yet."));
  const busiest = Math.max(1, ...org.messages_per_day.map((d) => d.texts + d.events));
  return [
    h("section", { class: "card stack", "aria-labelledby": "db-heading" },
      h("h2", { id: "db-heading" }, "Database"),
      h("dl", { class: "facts" },
        h("dt", {}, "File"), h("dd", {}, formatBytes(db.bytes)),
        h("dt", {}, "Write-ahead log"), h("dd", {}, formatBytes(db.wal_bytes)),
        h("dt", {}, "Free inside the file"), h("dd", {}, formatBytes(db.free_bytes),
          h("small", { class: "hint" }, " (given back to the disk by chatd vacuum, with the server stopped)")),
        h("dt", {}, "Deleted by retention since the server started"),
        h("dd", {}, `${counted(db.purged.texts, "text message")}, ${counted(db.purged.events, "event")}, ` +
          `${counted(db.purged.files, "file")} (${formatBytes(db.purged.bytes)})`)),
      h("details", {}, h("summary", {}, "Rows per table"),
        cardTable("Rows per table", ["Table", "Rows"], Object.entries(db.tables).map(([name, n]) => [name, formatCount(n)])))),
    h("section", { class: "card stack", "aria-labelledby": "org-heading" },
      h("h2", { id: "org-heading" }, "Your organization"),
      h("p", {}, `${counted(org.rooms, "room")}, ${counted(org.messages, "message")}, ` +
        `${counted(org.files, "file")} (${formatBytes(org.file_bytes)}).`),
      h("h3", {}, "The largest rooms by messages"), rooms("The largest rooms by messages", org.largest_rooms_by_messages),
      h("h3", {}, "The largest rooms by bytes"), rooms("The largest rooms by bytes", org.largest_rooms_by_bytes),
      h("h3", {}, "Messages per day (UTC)"),
      h("div", { class: "day-counts" },
        cardTable("Messages per day, newest first", ["Day", "Texts", "Events", ""], org.messages_per_day.slice().reverse().map((d) => [
          d.day, formatCount(d.texts), formatCount(d.events),
          h("meter", { min: 0, max: busiest, value: d.texts + d.events, "aria-hidden": "true" })])))),
  ];
}
