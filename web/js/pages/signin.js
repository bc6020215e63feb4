// Sign-in with handle and password: the answer is a session token for the
// Human API, kept in this browser until sign-out or expiry (12 hours).

import { h, field, busy, errorBox, onSubmit } from "../dom.js";

export function mount(root, ctx) {
  const handle = h("input", { name: "handle", required: true, autocomplete: "username", autocapitalize: "none", spellcheck: "false" });
  const password = h("input", { name: "password", type: "password", required: true, autocomplete: "current-password" });
  const err = errorBox();
  const form = h("form", { class: "card stack" },
    field("Handle", handle),
    field("Password", password),
    err,
    h("button", { type: "submit" }, "Sign in"));
  onSubmit(form, err, async () => {
    const out = await busy(form, () => ctx.api.post("/api/v1/auth/sign-in",
      { handle: handle.value.trim(), password: password.value }));
    ctx.signedIn(out.access_token);
  }, () => password.select());
  root.append(h("section", { class: "narrow" },
    h("h1", {}, "Sign in to chatd"),
    form,
    h("p", { class: "muted" }, "No account yet? The first one is made with the link ", h("code", {}, "chatd serve"),
      " prints on a new database; later ones with ", h("code", {}, "chatd create-user"),
      " and a password from ", h("code", {}, "chatd set-password"), ".")));
  handle.focus();
}
