// An admin's invitations, on the Account screen: invite a person (the link
// is shown once, with a Copy button: chatd keeps only its digest), see the
// open invitations, revoke one.

import { h, replace, field, busy, errorBox, onSubmit } from "../dom.js";
import { cardTable, confirmDialog, SecretSlot } from "../ui.js";
import { timeEl } from "../time.js";

export function invitationsSection({ api, esc, notify }) {
  const role = h("select", { name: "role" }, h("option", { value: "user" }, "Member"), h("option", { value: "admin" }, "Admin"));
  const err = errorBox();
  const form = h("form", { class: "card stack create-form" },
    h("h3", {}, "Invite someone"),
    field("They join as", role),
    err,
    h("div", { class: "row" }, h("button", { type: "submit" }, "Create invitation link")));
  const secrets = new SecretSlot(() => role.focus());
  const heading = h("h2", { tabindex: "-1" }, "Invitations");
  const list = h("div", {}, h("p", { class: "muted" }, "Loading invitations…"));

  async function load() {
    let items;
    try {
      items = await api.get("/api/v1/me/invitations");
    } catch (e) {
      replace(list, h("p", { class: "error", role: "alert" }, `The invitations could not be loaded: ${e.message}`));
      return;
    }
    if (!items || !items.length) {
      replace(list, h("p", { class: "empty" }, "No open invitation."));
      return;
    }
    replace(list, cardTable("Open invitations", ["Made", "By", "Role", "Ends", "Actions"], items.map((inv) => [
      timeEl(inv.inserted_at), inv.invited_by || "—", inv.role === "admin" ? "Admin" : "Member", timeEl(inv.expires_at),
      h("button", { type: "button", class: "danger", "aria-label": `Revoke the invitation made ${new Date(inv.inserted_at).toLocaleString()}`,
        onclick: () => revoke(inv) }, "Revoke"),
    ])));
  }

  async function revoke(inv) {
    const done = await confirmDialog({
      title: "Revoke this invitation?",
      text: "Its link stops working at once.",
      confirm: "Revoke",
      action: async () => {
        await api.del(`/api/v1/me/invitations/${esc(inv.id)}`);
        return true;
      },
    });
    if (!done) return;
    notify("Invitation revoked.");
    await load();
    heading.focus();
  }

  onSubmit(form, err, async () => {
    const inv = await busy(form, () => api.post("/api/v1/me/invitations", { invitation: { role: role.value } }));
    secrets.show({
      title: "Send this invitation link now",
      label: `The link (it works once, until ${new Date(inv.expires_at).toLocaleString()}):`,
      secret: `${location.origin}/#/invite/${inv.token}`,
      notice: [h("strong", {}, "This link is shown only once. "), "chatd keeps only a digest of it: send it to the person you invite, privately."],
    });
    load();
  }, () => role.focus());

  return {
    el: h("section", { class: "list-section" }, heading,
      h("p", { class: "page-intro" }, "As an admin you invite people to your organization with a one-time link."),
      form, secrets.el, list),
    load,
    dispose: () => secrets.dispose(),
  };
}
