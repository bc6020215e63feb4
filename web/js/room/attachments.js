// A message's files: images as thumbnails (fetched with the session's
// credentials when they come near the screen, shown from a blob: URL, which
// the page's Content-Security-Policy allows), opening a viewer on click;
// other files as chips with their name and size that download on click.

import { h } from "../dom.js";

// Images a browser shows; anything else (an SVG among them: it may carry
// script, and is offered as a download) is a file chip.
const previewable = new Set(["image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp"]);
// Bigger images are not fetched for a thumbnail (there are no server-side
// thumbnails): a chip says how big they are.
const previewLimit = 8 << 20;

export function size(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / (1 << 20)).toFixed(1)} MB`;
}

export const isImage = (a) => previewable.has(a.content_type) && (a.size ?? a.bytes ?? 0) <= previewLimit;

// FileLoader fetches attachments once per page and keeps their blob: URLs
// (released by close) for thumbnails and the viewer.
export class FileLoader {
  constructor(ctx, roomId) {
    this.ctx = ctx;
    this.roomId = roomId;
    this.urls = new Map(); // id -> Promise<url>
    this.observer = new IntersectionObserver((entries) => {
      for (const e of entries) {
        if (!e.isIntersecting) continue;
        this.observer.unobserve(e.target);
        this.fill(e.target);
      }
    }, { rootMargin: "400px" });
  }

  path(a) {
    return `/api/v1/me/chats/${this.ctx.esc(this.roomId)}/files/${this.ctx.esc(a.id)}`;
  }

  url(a) {
    if (!this.urls.has(a.id)) {
      this.urls.set(a.id, this.ctx.api.blob(this.path(a)).then((b) => URL.createObjectURL(b)));
    }
    return this.urls.get(a.id);
  }

  async fill(img) {
    try {
      img.src = await this.url({ id: img.dataset.file });
    } catch {
      img.alt = `${img.alt} (could not be loaded)`;
    }
  }

  // download hands the file to the browser with its name.
  async download(a) {
    try {
      const url = await this.url(a);
      const link = h("a", { href: url, download: a.name, hidden: true });
      document.body.append(link);
      link.click();
      link.remove();
    } catch (err) {
      this.ctx.notify(`Could not download ${a.name}: ${err.message}`, "error");
    }
  }

  // view shows an image whole, in a dialog that Escape or a click closes.
  async view(a) {
    const img = h("img", { alt: a.name });
    const close = h("button", { type: "button", class: "secondary" }, "Close");
    const dlg = h("dialog", { class: "viewer", "aria-label": a.name },
      h("div", { class: "row" }, h("strong", {}, a.name), h("span", { class: "muted" }, size(a.size ?? a.bytes ?? 0)),
        h("button", { type: "button", class: "secondary", onclick: () => this.download(a) }, "Download"), close),
      img);
    close.addEventListener("click", () => dlg.close());
    dlg.addEventListener("click", (ev) => { if (ev.target === dlg) dlg.close(); });
    dlg.addEventListener("close", () => dlg.remove());
    document.body.append(dlg);
    dlg.showModal();
    close.focus();
    try {
      img.src = await this.url(a);
    } catch (err) {
      img.replaceWith(h("p", { class: "error" }, err.message));
    }
  }

  close() {
    this.observer.disconnect();
    for (const p of this.urls.values()) p.then((u) => URL.revokeObjectURL(u), () => {});
    this.urls.clear();
  }
}

// attachmentsOf answers the attachments row of msg, or null.
export function attachmentsOf(msg, files) {
  const list = msg.attachments || [];
  if (!list.length) return null;
  return h("div", { class: "attachments" }, list.map((a) => {
    const bytes = size(a.size ?? a.bytes ?? 0);
    if (isImage(a)) {
      const img = h("img", { alt: a.name, dataset: { file: a.id }, width: 160, height: 120 });
      files.observer.observe(img);
      return h("button", { type: "button", class: "thumb", "aria-label": `View ${a.name} (${bytes})`,
        onclick: () => files.view(a) }, img);
    }
    return h("button", { type: "button", class: "file-chip", onclick: () => files.download(a) },
      h("span", { class: "visually-hidden" }, "Download "), h("span", { class: "file-name" }, a.name), " ",
      h("span", { class: "muted" }, `(${bytes})`));
  }));
}
