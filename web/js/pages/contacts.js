// Contacts: who the person is connected to, the requests waiting for their
// answer, the requests they sent, and a form to ask someone by handle. The
// lists follow the person's user_contacts channel, so a request from
// someone else, or an answer to one of theirs, shows up by itself.

import { h, field, busy, errorBox, showError, onSubmit } from "../dom.js";
import { cardTable, confirmDialog, pageSection, pagedList } from "../ui.js";
import { timeEl } from "../time.js";

// The contact listings page by page and page_size (at most 100).
const PAGE_SIZE = 100;
const EVENTS = ["contact_request_received", "contact_request_updated", "contact_added", "contact_removed"];

const kindOf = (type) => (type === "Agent" ? "agent" : "person");
const who = (p) => [h("strong", {}, p.name || p.handle), " ", h("code", { class: "handle" }, `@${p.handle}`)];
const messageCell = (m) => (m ? h("span", { class: "message" }, m) : h("span", { class: "muted" }, "No message"));
// A person without an email is reported as <handle>@noreply.invalid, an
// address that never delivers (see docs/api/differences.md): shown as none, not as a link.
const emailCell = (e) => (e && !/@noreply\.invalid$/i.test(e)
  ? h("a", { href: `mailto:${e}` }, e) : h("span", { class: "muted" }, "—"));

export function mount(root, ctx) {
  const { api, esc, notify } = ctx;

  // section is one listing with its heading. A change anywhere (an answer,
  // a push) loads again the pages it shows; a new filter, the first alone.
  function section({ title, more, path, query = () => ({}), columns, row, empty, controls = null }) {
    const heading = h("h2", { tabindex: "-1" }, title);
    const list = pagedList({
      fetch: (at) => api.page(path, { ...query(), page_size: PAGE_SIZE }, at),
      first: { page: 1 },
      loading: "Loading…",
      row,
      frame: (rows) => cardTable(title, columns, rows),
      empty: () => empty,
      failed: (e) => `${title} could not be loaded: ${e.message}`,
      more,
      heading,
    });
    const el = h("section", { class: "list-section" }, heading, controls, list.el);
    return { el, heading, load: list.load, refresh: list.refresh, stop: list.stop };
  }

  // act runs one action of a row, with that row's buttons disabled; a
  // refusal is told in a message, since a row has no room for it.
  async function act(button, work) {
    try {
      await busy(button.closest("td") || button, work);
      return true;
    } catch (e) {
      notify(e.message, "error");
      button.focus();
      return false;
    }
  }

  const received = section({
    title: "Requests to you",
    more: "Load more requests to you",
    path: "/api/v1/me/contacts/requests",
    columns: ["From", "Message", "Received", "Actions"],
    empty: "No requests are waiting for your answer.",
    row: (r) => {
      const from = r.requester.name || r.requester.handle;
      const approve = h("button", { type: "button", "aria-label": `Approve request from ${from}` }, "Approve");
      const reject = h("button", { type: "button", class: "secondary", "aria-label": `Reject request from ${from}` }, "Reject");
      approve.addEventListener("click", async () => {
        if (await act(approve, () => api.post(`/api/v1/me/contacts/requests/${esc(r.id)}/approve`, {}))) {
          notify(`You and ${from} are now contacts.`);
          refresh();
          received.heading.focus();
        }
      });
      reject.addEventListener("click", async () => {
        if (await act(reject, () => api.post(`/api/v1/me/contacts/requests/${esc(r.id)}/reject`, {}))) {
          notify(`Request from ${from} rejected.`);
          refresh();
          received.heading.focus();
        }
      });
      return [who(r.requester), messageCell(r.message), timeEl(r.inserted_at), h("div", { class: "row" }, approve, reject)];
    },
  });

  const sentStatus = h("select", { name: "status" },
    h("option", { value: "pending" }, "Waiting for an answer"),
    h("option", { value: "all" }, "All"),
    h("option", { value: "approved" }, "Approved"),
    h("option", { value: "rejected" }, "Rejected"),
    h("option", { value: "cancelled" }, "Cancelled"));
  const statusWords = { pending: "Waiting", approved: "Approved", rejected: "Rejected", cancelled: "Cancelled" };
  const sent = section({
    title: "Requests you sent",
    more: "Load more sent requests",
    path: "/api/v1/me/contacts/requests/sent",
    query: () => ({ status: sentStatus.value }),
    controls: h("div", { class: "filters" }, field("Show sent requests", sentStatus)),
    columns: ["To", "Message", "Status", "Sent", "Actions"],
    empty: "No sent requests here. Ask someone with the form above.",
    row: (r) => {
      const to = r.recipient.name || r.recipient.handle;
      let action = h("span", { class: "muted" }, "—");
      if (r.status === "pending") {
        action = h("button", { type: "button", class: "secondary", "aria-label": `Cancel request to ${to}` }, "Cancel request");
        action.addEventListener("click", async () => {
          if (await act(action, () => api.del(`/api/v1/me/contacts/requests/${esc(r.id)}`))) {
            notify(`Request to ${to} cancelled.`);
            refresh();
            sent.heading.focus();
          }
        });
      }
      return [who(r.recipient), messageCell(r.message),
        h("span", { class: `status status-${r.status}` }, statusWords[r.status] || r.status),
        timeEl(r.inserted_at), action];
    },
  });
  sentStatus.addEventListener("change", () => sent.load());

  const contacts = section({
    title: "Your contacts",
    more: "Load more contacts",
    path: "/api/v1/me/contacts",
    columns: ["Name", "Type", "Email", "Since", "Actions"],
    empty: "No contacts yet: send a request above, or approve one sent to you.",
    row: (c) => {
      const u = c.user;
      const label = u.name || u.handle;
      const remove = h("button", { type: "button", class: "danger", "aria-label": `Remove contact ${label}` }, "Remove");
      remove.addEventListener("click", async () => {
        const done = await confirmDialog({
          title: `Remove ${label} from your contacts?`,
          text: `You and @${u.handle} stop being contacts, on both sides. To be contacts again, one of you sends a new request.`,
          confirm: "Remove contact",
          action: async () => {
            await api.post("/api/v1/me/contacts/remove", { contact_id: c.contact_id });
            return true;
          },
        });
        if (!done) return;
        notify(`${label} removed from your contacts.`);
        refresh();
        contacts.heading.focus();
      });
      return [who(u), c.contact_type === "Agent" ? "Agent" : "Person",
        emailCell(u.email),
        timeEl(c.inserted_at), remove];
    },
  });

  // The form to ask someone: Look up says who a handle is before sending.
  const handle = h("input", { name: "handle", required: true, autocomplete: "off", autocapitalize: "none",
    spellcheck: "false", maxlength: 201 });
  const message = h("textarea", { name: "message", rows: 2, maxlength: 500 });
  const err = errorBox();
  const found = h("p", { class: "lookup", role: "status" });
  const lookup = h("button", { type: "button", class: "secondary" }, "Look up");
  const form = h("form", { class: "card stack create-form" },
    h("h2", {}, "Add a contact"),
    field("Handle", handle, "A person's @handle, or an agent's @owner/agent."),
    found,
    field("Message (optional)", message, "Up to 500 characters, shown with your request."),
    err,
    h("div", { class: "row" }, lookup, h("button", { type: "submit" }, "Send request")));
  handle.addEventListener("input", () => {
    found.textContent = "";
    showError(err, null);
  });
  lookup.addEventListener("click", async () => {
    showError(err, null);
    found.textContent = "";
    if (!handle.value.trim()) {
      showError(err, new Error("Type a handle to look up first."));
      handle.focus();
      return;
    }
    try {
      const p = await busy(form, () => api.post("/api/v1/me/contacts/resolve", { handle: handle.value.trim() }));
      found.textContent = `@${p.handle} is ${p.name || p.handle}, ${p.type === "Agent" ? "an agent" : "a person"}.`;
    } catch (e) {
      showError(err, e);
      handle.focus();
    }
  });
  onSubmit(form, err, async () => {
    const body = { contact_request: { recipient_handle: handle.value.trim() } };
    if (message.value.trim()) body.contact_request.message = message.value;
    const r = await busy(form, () => api.post("/api/v1/me/contacts/requests", body));
    const to = r.recipient.name || r.recipient.handle;
    form.reset();
    found.textContent = "";
    if (r.status === "approved") notify(`${to} had already asked you: you are now contacts.`);
    else notify(`Request sent to ${to} (@${r.recipient.handle}).`);
    refresh();
  }, () => handle.focus());

  const all = [received, sent, contacts];
  function refresh() {
    for (const s of all) s.refresh();
  }
  // Pushes come in bursts (an approval is an update and an addition): one
  // reload after the burst is enough.
  let timer = null;
  const soon = () => {
    clearTimeout(timer);
    timer = setTimeout(refresh, 150);
  };

  root.append(pageSection("Contacts",
    ["Contacts are the people and agents you have agreed to be connected with: ",
      "either of you sends a request, and the other approves it."],
    form,
    received.el,
    sent.el,
    contacts.el));
  refresh();

  const offs = [];
  if (ctx.socket) {
    const ch = ctx.socket.channel(`user_contacts:${ctx.me.id}`);
    for (const ev of EVENTS) offs.push(ch.on(ev, soon));
    // joined comes after every (re)connection: pushes missed while away
    // are caught up by reloading.
    offs.push(ch.on("joined", soon));
    offs.push(() => ch.leave());
  }
  return () => {
    clearTimeout(timer);
    for (const s of all) s.stop();
    for (const off of offs) off();
  };
}
