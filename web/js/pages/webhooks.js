// An agent's webhooks, opened from the Agents screen: the URLs chatd POSTs
// each new message that mentions the agent to, signed, each with its status
// (active, or paused and why) and its last delivery; adding one (its
// signing secret shown once), removing one after a confirmation, resuming a
// paused one, and one's delivery log, a page at a time. The log looks again
// every few seconds while a delivery in it is pending.

import { h, replace, field, busy, errorBox, onSubmit } from "../dom.js";
import { cardTable, confirmDialog, pagedList, SecretSlot } from "../ui.js";
import { timeEl } from "../time.js";

const LOG_PAGE = 20;
const POLL_MS = 3000;

const secretNotice = () => [h("strong", {}, "This secret is shown only once. "),
  "chatd keeps it to sign each request, but never shows it again: store it now, where your receiver " +
  "reads its settings. To replace it, remove the webhook and add it again."];

// WebhooksSlot is the place on the Agents screen where one agent's
// webhooks show: opening another's replaces them. changed runs when they
// open or close (the rows say which agent's are open); closed(agent) runs
// when the person closes them, to put focus back.
export class WebhooksSlot {
  constructor(ctx, { changed, closed }) {
    this.el = h("div", {});
    this.ctx = ctx;
    this.changed = changed;
    this.closed = closed;
    this.current = null;
  }

  isOpen(agentId) {
    return this.current !== null && this.current.agentId === agentId;
  }

  open(agent) {
    this.dispose();
    const panel = webhooksPanel(this.ctx, agent, () => {
      this.close();
      this.closed(agent);
    });
    this.current = { agentId: agent.id, panel };
    this.el.append(panel.el);
    this.changed();
    panel.focus();
  }

  close() {
    if (!this.current) return;
    this.dispose();
    this.changed();
  }

  dispose() {
    if (this.current) this.current.panel.dispose();
    this.current = null;
  }
}

// webhooksPanel answers {el, focus, dispose} for agent's webhooks; onClose
// runs when the person closes it.
function webhooksPanel(ctx, agent, onClose) {
  const { api, esc, notify } = ctx;
  const base = `/api/v1/me/agents/${esc(agent.id)}/webhooks`;
  const heading = h("h2", { tabindex: "-1" }, `Webhooks of ${agent.name}`);
  const listHeading = h("h3", { tabindex: "-1" }, "Endpoints");
  const list = h("div", {}, h("p", { class: "muted" }, "Loading webhooks…"));
  const logSlot = h("div", {});
  let log = null;
  let loads = 0;

  // load shows the endpoints anew; only the newest of its calls lands.
  async function load() {
    const n = ++loads;
    let shown;
    try {
      shown = await endpoints(ctx, base, agent, { openLog, resume, remove });
    } catch (e) {
      shown = h("p", { class: "error", role: "alert" }, `The webhooks could not be loaded: ${e.message}`);
    }
    if (n === loads) replace(list, shown);
  }

  async function resume(w, button) {
    try {
      await busy(button.parentElement, () => api.post(`${base}/${esc(w.id)}/resume`));
    } catch (e) {
      notify(`The webhook could not be resumed: ${e.message}`, "error");
      return;
    }
    notify(`Webhook ${w.url} resumed: what was queued for it is sent now, in order.`);
    await refresh();
    listHeading.focus();
  }

  async function remove(w) {
    const done = await confirmDialog({
      title: "Remove this webhook?",
      text: [`chatd sends ${w.url} nothing more. What was still queued for it and its delivery log go with it.`,
        "This cannot be undone."],
      confirm: "Remove webhook",
      action: () => api.del(`${base}/${esc(w.id)}`).then(() => true),
    });
    if (!done) return;
    if (log && log.webhook.id === w.id) closeLog();
    notify(`Webhook ${w.url} removed.`);
    await load();
    listHeading.focus();
  }

  function openLog(w) {
    closeLog();
    log = deliveryLog(ctx, `${base}/${esc(w.id)}/deliveries`, w, load);
    logSlot.append(log.el);
    log.load();
    log.focus();
  }

  function closeLog() {
    if (log) log.dispose();
    log = null;
  }

  const refresh = () => Promise.all([load(), log ? log.refresh() : null]);
  const add = addForm(ctx, base, load);
  const button = (label, name, onclick) =>
    h("button", { type: "button", class: "secondary", "aria-label": `${label} ${agent.name}`, onclick }, name);
  const el = h("section", { class: "card webhooks-panel stack", "aria-label": `Webhooks of ${agent.name}` },
    h("div", { class: "row panel-head" }, heading,
      button("Refresh the webhooks of", "Refresh", () => refresh()), button("Close the webhooks of", "Close", () => onClose())),
    h("p", { class: "muted" }, `chatd POSTs each new message that mentions @${agent.handle} to every URL here, `,
      "signed, one at a time and in order per URL, retrying failures for a day. A URL that fails 20 times ",
      "in a row, or answers 410 Gone, is paused until you resume it."),
    add.el,
    h("section", { class: "list-section" }, listHeading, list),
    logSlot);
  load();
  return {
    el,
    focus: () => heading.focus(),
    dispose: () => {
      closeLog();
      add.dispose();
      el.remove();
    },
  };
}

// addForm is the form that adds a webhook at base, and the place its
// secret shows once; added runs after each one added.
function addForm(ctx, base, added) {
  const { api } = ctx;
  const url = h("input", { type: "url", name: "url", required: true, maxlength: 2048, autocomplete: "off",
    placeholder: "https://agents.example.com/hooks/helper" });
  const description = h("input", { name: "description", maxlength: 500, autocomplete: "off" });
  const secrets = new SecretSlot(() => url.focus());
  const err = errorBox();
  const form = h("form", { class: "stack create-form" },
    h("h3", {}, "Add a webhook"),
    field("Webhook URL", url, "An http:// or https:// address that answers 2xx within 15 seconds."),
    field("Webhook description", description, "What it is for (optional, up to 500 characters)."),
    err,
    h("div", { class: "row" }, h("button", { type: "submit" }, "Add webhook")));
  onSubmit(form, err, async () => {
    const body = { webhook: { url: url.value.trim(), description: description.value.trim() } };
    const out = await busy(form, () => api.post(base, body));
    form.reset();
    secrets.show({
      title: "Store the signing secret of the new webhook now",
      label: `The signing secret of ${out.url}:`,
      secret: out.secret,
      notice: secretNotice(),
      extra: h("p", {}, "Your receiver checks the webhook-signature header of each request with it, as ",
        "Standard Webhooks describes: any of its libraries does it."),
    });
    added();
  }, () => url.focus());
  return { el: [form, secrets.el], dispose: () => secrets.dispose() };
}

// endpoints answers the table of the webhooks at base (all of them: an
// agent has at most 10), each with its last delivery, the newest line of
// its log; a log that cannot be read leaves that cell unknown rather than
// the table unshown.
async function endpoints(ctx, base, agent, { openLog, resume, remove }) {
  const { api, esc } = ctx;
  const hooks = await api.get(base);
  if (!hooks.length) return h("p", { class: "empty" }, `${agent.name} has no webhooks: add one above.`);
  const last = await Promise.all(hooks.map((w) =>
    api.page(`${base}/${esc(w.id)}/deliveries`, { limit: 1 }).then((p) => p.items[0] || null, () => undefined)));
  return cardTable(`Webhooks of ${agent.name}`, ["URL", "Description", "Status", "Last delivery", "Actions"],
    hooks.map((w, i) => [
      h("code", { class: "webhook-url" }, w.url),
      w.description || h("span", { class: "muted" }, "No description"),
      statusCell(w),
      lastDeliveryCell(last[i]),
      h("div", { class: "row" },
        h("button", { type: "button", class: "secondary", "aria-label": `Delivery log of ${w.url}`,
          onclick: () => openLog(w) }, "Delivery log"),
        w.status === "paused" ? h("button", { type: "button", "aria-label": `Resume webhook ${w.url}`,
          onclick: (ev) => resume(w, ev.currentTarget) }, "Resume") : null,
        h("button", { type: "button", class: "danger", "aria-label": `Remove webhook ${w.url}`,
          onclick: () => remove(w) }, "Remove")),
    ]));
}

function statusCell(w) {
  if (w.status === "paused") {
    return [h("span", { class: "status status-paused" }, "Paused"),
      h("p", { class: "pause-reason" }, "Since ", timeEl(w.paused_at), ": ", w.pause_reason)];
  }
  const failing = w.consecutive_failures;
  return [h("span", { class: "status status-active" }, "Active"),
    failing ? h("p", { class: "pause-reason" }, `${failing} failed attempt${failing === 1 ? "" : "s"} in a row`) : null];
}

const deliveryLabels = { pending: "Pending", delivered: "Delivered", failed: "Failed" };

function deliveryStatus(d) {
  return h("span", { class: `status status-${d.status}` }, deliveryLabels[d.status] || d.status);
}

function lastDeliveryCell(d) {
  if (d === undefined) return h("span", { class: "muted" }, "Unknown");
  if (d === null) return h("span", { class: "muted" }, "Nothing sent yet");
  return [deliveryStatus(d), " ", timeEl(d.last_attempt_at || d.inserted_at),
    d.last_status_code ? h("span", { class: "muted" }, ` (HTTP ${d.last_status_code})`) : null];
}

// deliveryLog is the delivery log of webhook w, newest first, paged;
// changed runs when a refresh may have changed the webhook's row.
function deliveryLog(ctx, path, w, changed) {
  const { api } = ctx;
  const heading = h("h3", { tabindex: "-1" }, `Deliveries to ${w.url}`);
  let timer = null;
  const list = pagedList({
    fetch: (at) => api.page(path, { limit: LOG_PAGE }, at),
    loading: "Loading the delivery log…",
    row: (d) => [
      timeEl(d.inserted_at),
      [deliveryStatus(d), d.status === "pending" && d.next_attempt_at
        ? h("p", { class: "pause-reason" }, "Next attempt ", timeEl(d.next_attempt_at)) : null],
      String(d.attempts),
      d.last_status_code ? String(d.last_status_code) : h("span", { class: "muted" }, "—"),
      d.last_latency_ms !== null ? `${d.last_latency_ms} ms` : h("span", { class: "muted" }, "—"),
      d.last_error ? h("span", { class: "delivery-error" }, d.last_error) : h("span", { class: "muted" }, "—"),
      timeEl(d.last_attempt_at),
    ],
    frame: (rows) => cardTable(`Deliveries to ${w.url}`,
      ["Queued", "Status", "Attempts", "HTTP status", "Latency", "Last error", "Last attempt"], rows),
    empty: () => "Nothing was sent yet: each new message that mentions the agent is.",
    failed: (e) => `The delivery log could not be loaded: ${e.message}`,
    more: "Load older deliveries",
    heading,
    rendered: (items) => {
      clearTimeout(timer);
      if (items.some((d) => d.status === "pending")) {
        timer = setTimeout(() => { list.refresh(); changed(); }, POLL_MS);
      }
    },
  });
  const el = h("section", { class: "list-section delivery-log" }, heading, ...list.el);
  return {
    el,
    webhook: w,
    load: () => list.load(),
    refresh: () => list.refresh(),
    focus: () => heading.focus(),
    dispose: () => {
      clearTimeout(timer);
      list.stop();
      el.remove();
    },
  };
}
