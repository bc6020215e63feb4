// An invitation link (#/invite/<token>, from an admin's Account screen):
// the token rides in the fragment, which never reaches a log; the invited
// person picks a handle, a name and a password, joins the organization and
// is signed in.

import { h, field, busy, errorBox, showError, onSubmit } from "../dom.js";

export function mount(root, ctx) {
  const token = ctx.params[0] || "";
  const handle = h("input", { name: "handle", required: true, autocomplete: "username", autocapitalize: "none", spellcheck: "false" });
  const name = h("input", { name: "name", required: true, autocomplete: "name" });
  const email = h("input", { name: "email", type: "email", autocomplete: "email" });
  const password = h("input", { name: "password", type: "password", required: true, minlength: 12, autocomplete: "new-password" });
  const again = h("input", { name: "password2", type: "password", required: true, minlength: 12, autocomplete: "new-password" });
  const err = errorBox();
  const form = h("form", { class: "card stack", novalidate: true },
    field("Handle", handle, "Lowercase letters, digits, - and _. Others mention you with @handle."),
    field("Name", name),
    field("Email (optional)", email),
    field("Password", password, "12 characters or more."),
    field("Password again", again),
    err,
    h("button", { type: "submit" }, "Join"));
  onSubmit(form, err, async () => {
    if (password.value !== again.value) {
      showError(err, new Error("The two passwords differ."));
      again.focus();
      return;
    }
    const body = { token, handle: handle.value.trim(), name: name.value.trim(), password: password.value };
    if (email.value.trim()) body.email = email.value.trim();
    const out = await busy(form, () => ctx.api.post("/api/v1/auth/accept-invitation", body));
    ctx.notify("Welcome: your account is ready.");
    ctx.signedIn(out.access_token);
  });
  root.append(h("section", { class: "narrow" },
    h("h1", {}, "You are invited to chatd"),
    h("p", {}, "Pick how others will know you, and a password. The link works once."),
    form));
  handle.focus();
}
