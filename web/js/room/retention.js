// Retention in the web app: the three periods (text messages, events,
// files) as form fields, shared by the admin page (the organization's) and
// the room's side panel (the room's own, for its owner), and that panel.

import { h, replace, field, busy, errorBox, onSubmit } from "../dom.js";

const kinds = [
  ["text_days", "Text messages"],
  ["event_days", "Events (thoughts, tool calls and results, errors, …)"],
  ["file_days", "Files"],
];

// retentionFields are the three periods as number fields, in days; an
// empty one is null (placeholder says what null means there). It answers
// el, value(), set(periods) and focus().
export function retentionFields(prefix, { inherit }) {
  const inputs = kinds.map(([name]) => h("input", {
    type: "number", name: `${prefix}-${name}`, min: 1, max: 36500, step: 1, inputmode: "numeric", placeholder: inherit,
  }));
  return {
    el: h("div", { class: "stack" }, kinds.map(([, label], i) => field(`${label}, days`, inputs[i]))),
    value: () => Object.fromEntries(kinds.map(([name], i) => [name, inputs[i].value === "" ? null : Number(inputs[i].value)])),
    set: (p) => kinds.forEach(([name], i) => { inputs[i].value = p[name] === null || p[name] === undefined ? "" : String(p[name]); }),
    focus: () => inputs[0].focus(),
  };
}

// describeDays puts one period into words.
export function describeDays(days) {
  if (days === null || days === undefined) return "kept forever";
  return days === 1 ? "1 day" : `${days.toLocaleString()} days`;
}

// RoomRetention is the room's retention in its side panel: what applies
// to everyone in it, and, for the room's owner, an Edit button that opens
// the room's own periods, as the board's goal opens.
export class RoomRetention {
  constructor(ctx, roomId) {
    this.ctx = ctx;
    this.path = `/api/v1/me/chats/${ctx.esc(roomId)}/retention`;
    this.view = h("ul", { "aria-label": "What this room keeps" });
    this.fields = retentionFields(`room-${roomId}`, { inherit: "As the organization" });
    this.err = errorBox();
    this.form = h("form", { class: "stack", hidden: true },
      h("p", { class: "hint" }, "As the room's owner you may keep less here than the organization does, never more. " +
        "Older messages, events and files are deleted for good."),
      this.fields.el, this.err,
      h("div", { class: "row" }, h("button", { type: "submit" }, "Save retention"),
        h("button", { type: "button", class: "secondary", onclick: () => this.close() }, "Cancel")));
    onSubmit(this.form, this.err, async () => {
      this.show(await busy(this.form, () => ctx.api.put(this.path, { retention: this.fields.value() })));
      this.close();
      ctx.notify("The room's retention is saved.");
    }, () => this.fields.focus());
    this.edit = h("button", { type: "button", class: "secondary", hidden: true, onclick: () => this.open() }, "Edit retention");
    this.el = h("section", { "aria-labelledby": `r-${roomId}` },
      h("h2", { id: `r-${roomId}` }, "Retention"), this.view, this.edit, this.form);
  }

  async load() {
    this.show(await this.ctx.api.get(this.path));
  }

  show(r) {
    this.retention = r;
    replace(this.view, kinds.map(([name, label]) => {
      const own = r[name] !== null && r[name] !== undefined && r[name] === r.effective[name];
      return h("li", {}, h("span", {}, label.replace(/ \(.*/, "")),
        h("span", { class: "muted" }, `${describeDays(r.effective[name])}${own ? " (this room's)" : ""}`));
    }));
  }

  open() {
    this.fields.set(this.retention);
    this.form.hidden = false;
    this.edit.hidden = true;
    this.fields.focus();
  }

  close() {
    this.form.hidden = true;
    this.edit.hidden = !this.owner;
  }

  // owns says whether the person owns the room (themselves, or through an
  // agent of theirs, whose handle starts with theirs), which offers the
  // Edit button; the server refuses anyone else.
  owns(participants) {
    const me = this.ctx.me;
    this.owner = participants.some((p) => p.role === "owner" &&
      (p.id === me.id || (p.type === "Agent" && p.handle.startsWith(`${me.handle}/`))));
    if (this.form.hidden) this.edit.hidden = !this.owner;
    else if (!this.owner) this.close();
  }
}
