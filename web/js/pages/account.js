// The person's account: who they are, their password, and where they are
// signed in (each sign-in can be ended; ending this one signs this browser
// out); for an admin, invitations and the organization's people. Keys and
// signed-in apps are on the API keys screen.

import { h, replace, field, busy, errorBox, onSubmit } from "../dom.js";
import { cardTable, confirmDialog, pageSection } from "../ui.js";
import { invitationsSection } from "./invitations.js";
import { peopleSection } from "./people.js";
import { timeEl } from "../time.js";

export function mount(root, ctx) {
  const { me } = ctx;
  const sessions = sessionsSection(ctx);
  const admin = me.role === "admin";
  const invitations = admin ? invitationsSection(ctx) : null;
  const people = admin ? peopleSection(ctx) : null;
  root.append(pageSection("Account",
    ["You are signed in as ", h("strong", {}, me.name || me.handle), ` (@${me.handle}, ${me.role || "member"}). Your Human API keys and the apps signed in as you are on the `,
      h("a", { href: "#/keys" }, "API keys"), " screen."],
    passwordForm(ctx, sessions.load),
    sessions.el,
    invitations ? invitations.el : null,
    people ? people.el : null));
  sessions.load();
  if (!admin) return null;
  invitations.load();
  people.load();
  return () => {
    invitations.dispose();
    people.dispose();
  };
}

// passwordForm changes the person's password. Every session ends, this one
// too: the answer is this browser's new one, and changed() runs after.
function passwordForm(ctx, changed) {
  const current = h("input", { type: "password", name: "current_password", required: true, autocomplete: "current-password" });
  const next = h("input", { type: "password", name: "new_password", required: true, minlength: 12, maxlength: 256, autocomplete: "new-password" });
  const again = h("input", { type: "password", name: "new_password_again", required: true, autocomplete: "new-password" });
  const err = errorBox();
  const form = h("form", { class: "card stack create-form" },
    h("h2", {}, "Change your password"),
    field("Current password", current),
    field("New password", next, "12 to 256 characters; a few words make a good one."),
    field("New password again", again),
    err,
    h("div", { class: "row" }, h("button", { type: "submit" }, "Change password")));
  onSubmit(form, err, async () => {
    if (next.value !== again.value) throw new Error("The new password and its repetition differ.");
    ctx.changingSession(true);
    let out;
    try {
      out = await busy(form, () => ctx.api.post("/api/v1/me/password", { current_password: current.value, new_password: next.value }));
    } finally {
      if (!out) ctx.changingSession(false);
    }
    ctx.replaceSession(out.access_token);
    form.reset();
    ctx.notify("Password changed. Every other sign-in was signed out.");
    changed();
  }, () => current.select());
  return form;
}

// sessionsSection lists where the person is signed in, each with Sign out;
// signing this browser out signs the page out.
function sessionsSection(ctx) {
  const { api, esc, notify } = ctx;
  const heading = h("h2", { tabindex: "-1" }, "Where you are signed in");
  const list = h("div", {}, h("p", { class: "muted" }, "Loading sessions…"));

  async function load() {
    let items;
    try {
      items = await api.get("/api/v1/me/sessions");
    } catch (e) {
      replace(list, h("p", { class: "error", role: "alert" }, `The sessions could not be loaded: ${e.message}`));
      return;
    }
    if (!items || !items.length) {
      replace(list, h("p", { class: "empty" }, "No sign-in session: you are using an API key."));
      return;
    }
    replace(list, cardTable("Your sign-in sessions", ["Signed in", "Ends", "Where", "Actions"], items.map((s) => [
      timeEl(s.inserted_at),
      timeEl(s.expires_at),
      s.current ? h("strong", {}, "This browser") : h("span", { class: "muted" }, "Elsewhere"),
      h("button", { type: "button", class: "danger", "aria-label": s.current ? "Sign out this browser" : "Sign out the session from " + new Date(s.inserted_at).toLocaleString(),
        onclick: () => end(s) }, "Sign out"),
    ])));
  }

  async function end(s) {
    const done = await confirmDialog({
      title: s.current ? "Sign this browser out?" : "Sign this session out?",
      text: s.current ? "You will need your password to sign in again." : "Whoever uses it is signed out at once.",
      confirm: "Sign out",
      action: async () => {
        await api.del(`/api/v1/me/sessions/${esc(s.id)}`);
        return true;
      },
    });
    if (!done) return;
    if (s.current) {
      ctx.signOutLocally();
      return;
    }
    notify("Session signed out.");
    await load();
    heading.focus();
  }

  return { el: h("section", { class: "list-section" }, heading, list), load };
}
