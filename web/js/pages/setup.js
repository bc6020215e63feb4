// First run: the one-time link that `chatd serve` prints on an empty
// database carries the setup token in its fragment (#/setup/<token>), which
// never reaches the server's or a proxy's logs. The form spends it on the
// first account and signs that person in.

import { h, field, busy, errorBox, showError, onSubmit } from "../dom.js";

export function mount(root, ctx) {
  const token = ctx.params[0] || "";
  const handle = h("input", { name: "handle", required: true, autocomplete: "username", pattern: "[a-z0-9][a-z0-9_-]*",
    autocapitalize: "none", spellcheck: "false" });
  const name = h("input", { name: "name", required: true, autocomplete: "name" });
  const email = h("input", { name: "email", type: "email", autocomplete: "email" });
  const password = h("input", { name: "password", type: "password", required: true, minlength: 12, autocomplete: "new-password" });
  const again = h("input", { name: "password2", type: "password", required: true, minlength: 12, autocomplete: "new-password" });
  const tokenInput = h("input", { name: "token", required: true, value: token, autocomplete: "off", spellcheck: "false" });
  const err = errorBox();
  const form = h("form", { class: "card stack", novalidate: true },
    token ? null : field("Setup token", tokenInput, "Printed by chatd serve when the database had no users."),
    field("Handle", handle, "Lowercase letters, digits, - and _. Others mention you with @handle."),
    field("Name", name),
    field("Email (optional)", email),
    field("Password", password, "12 characters or more."),
    field("Password again", again),
    err,
    h("button", { type: "submit" }, "Create account"));
  onSubmit(form, err, async () => {
    if (password.value !== again.value) {
      showError(err, new Error("The two passwords differ."));
      again.focus();
      return;
    }
    const body = { token: token || tokenInput.value.trim(), handle: handle.value.trim(), name: name.value.trim(),
      password: password.value };
    if (email.value.trim()) body.email = email.value.trim();
    const out = await busy(form, () => ctx.api.post("/api/v1/auth/setup", body));
    ctx.notify("Your account is ready.");
    ctx.signedIn(out.access_token);
  });
  root.append(h("section", { class: "narrow" },
    h("h1", {}, "Welcome to chatd"),
    h("p", {}, "Create the first account. It administers this server; more people can be added later with ",
      h("code", {}, "chatd create-user"), "."),
    form));
  handle.focus();
}
