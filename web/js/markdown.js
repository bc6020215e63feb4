// Message text as its writer meant it: CommonMark and GitHub's additions
// (tables, task lists, strikethrough, autolinks) through marked, then
// through DOMPurify before anything reaches the page. Agents write what a
// model produced, so the text is treated as hostile:
//
//   * raw HTML in a message is shown as the text it is, never as markup
//     (as chat clients do); DOMPurify, with a short list of tags and
//     attributes, is the second line should marked ever let some through;
//   * links go to http(s) and mailto only, open in a new tab, and carry
//     rel="noopener noreferrer";
//   * images written in Markdown become links: the page loads images from
//     its own origin only (its Content-Security-Policy), and a remote image
//     would tell a third party who read the message;
//   * classes are kept only where marked names a code block's language
//     and on a task list's box.
//
// Fenced code is highlighted by highlight.js, loaded the first time a
// message holds a block in a language it knows (see highlight.js here).

import { Marked } from "../vendor/marked/marked.esm.js";
import DOMPurify from "../vendor/dompurify/purify.es.mjs";
import { highlightWithin } from "./highlight.js";

const escapeHTML = (s) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const md = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    // Raw HTML blocks and inline tags are text.
    html: ({ text }) => escapeHTML(text),
    image: ({ href, text }) => `<a href="${escapeHTML(href || "")}">${escapeHTML(text || href || "image")}</a>`,
    // A task list's box is a sign, not a control nobody can use.
    checkbox: ({ checked }) => `<span class="task" role="img" aria-label="${checked ? "done" : "to do"}">${checked ? "☑" : "☐"}</span> `,
    // Headings inside a message sit under the page's own (h1 the room,
    // h2 its panels).
    heading({ tokens, depth }) {
      const level = Math.min(depth + 2, 6);
      return `<h${level}>${this.parser.parseInline(tokens)}</h${level}>\n`;
    },
  },
});

const purifyConfig = {
  ALLOWED_TAGS: ["a", "b", "strong", "i", "em", "del", "s", "code", "pre", "p", "br", "hr", "ul", "ol", "li",
    "blockquote", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "span", "sup", "sub", "kbd"],
  ALLOWED_ATTR: ["href", "title", "class", "align", "start", "role", "aria-label"],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:)/i,
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

DOMPurify.addHook("uponSanitizeAttribute", (node, data) => {
  if (data.attrName === "class" && !((node.nodeName === "CODE" && /^language-[\w+#-]+$/.test(data.attrValue)) ||
    (node.nodeName === "SPAN" && data.attrValue === "task"))) {
    data.keepAttr = false;
  }
});
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.nodeName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

// plainText matches text with no character Markdown, HTML or an autolink
// gives a meaning to: no line break (a <br>), no list number or indent at
// its start.
const plainText = /^(?!.*(?:https?:|www\.|mailto:))(?!\d+[.)])(?![ \t])[^*_`#<>|~[\]!\\&\n\r=+:-]*$/is;

// render answers a fragment of content as safe nodes. mention(handle)
// answers whether an @handle is a real mention of the message, to mark it.
export function render(content, mention = () => false) {
  // Most chat messages are a plain sentence: one with nothing Markdown or
  // HTML could make anything of is a paragraph of text, without the cost
  // of parsing and sanitizing it (which a long history pays per message).
  if (plainText.test(content || "")) {
    const frag = document.createDocumentFragment();
    const p = document.createElement("p");
    p.textContent = content;
    frag.append(p);
    markMentions(frag, mention);
    return frag;
  }
  const frag = DOMPurify.sanitize(md.parse(content || ""), purifyConfig);
  // A link whose address was refused is its text.
  for (const a of frag.querySelectorAll("a:not([href])")) a.replaceWith(...a.childNodes);
  // A wide table scrolls inside the message, not the page.
  for (const table of frag.querySelectorAll("table")) {
    const wrap = document.createElement("div");
    wrap.className = "table-wrap";
    table.replaceWith(wrap);
    wrap.append(table);
  }
  markMentions(frag, mention);
  if (frag.querySelector("pre code")) highlightWithin(frag);
  return frag;
}

// markMentions wraps each @handle the message mentions in text outside
// code and links.
function markMentions(root, mention) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: (n) => (n.parentElement && n.parentElement.closest("code, a") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
  });
  const texts = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) if (n.nodeValue.includes("@")) texts.push(n);
  for (const node of texts) {
    const text = node.nodeValue;
    const parts = [];
    let last = 0;
    for (const m of text.matchAll(/@([\w./-]*[\w])/g)) {
      if (!mention(m[1])) continue;
      parts.push(text.slice(last, m.index));
      const span = document.createElement("span");
      span.className = "mention";
      span.textContent = m[0];
      parts.push(span);
      last = m.index + m[0].length;
    }
    if (!parts.length) continue;
    parts.push(text.slice(last));
    node.replaceWith(...parts);
  }
}

// plain is text without Markdown's marks, for a room title or a
// notification: what a person would read aloud.
export function plain(content) {
  const frag = DOMPurify.sanitize(md.parse(content || ""), purifyConfig);
  return (frag.textContent || "").replace(/\s+/g, " ").trim();
}
