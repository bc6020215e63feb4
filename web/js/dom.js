// Small DOM helpers. Every piece of text from the API goes in through
// textContent (h's string children), never innerHTML, so a message can
// never become markup; the Content-Security-Policy forbids inline script
// besides.

// h builds an element: h("button", {class: "x", onclick: fn}, "label", child).
// Attributes starting with "on" become listeners; true/false toggle boolean
// attributes; null and undefined children are skipped; arrays are flattened.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// replace empties el and fills it with children.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// field is a labelled form control: the label's for= ties them together
// for screen readers and for clicking the label.
let fieldSeq = 0;
export function field(label, control, hint) {
  const id = control.id || `f${++fieldSeq}`;
  control.id = id;
  const hintEl = hint ? h("small", { id: `${id}-hint`, class: "hint" }, hint) : null;
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hintEl);
}

// busy disables a form's controls while work is under way, so a slow
// request cannot be sent twice, and re-enables them afterwards.
export async function busy(form, work) {
  const controls = [...form.querySelectorAll("button, input, textarea, select")];
  const before = controls.map((c) => c.disabled);
  controls.forEach((c) => { c.disabled = true; });
  form.setAttribute("aria-busy", "true");
  try {
    return await work();
  } finally {
    controls.forEach((c, i) => { c.disabled = before[i]; });
    form.removeAttribute("aria-busy");
  }
}

// errorBox shows what went wrong inside a form, announced by screen readers.
export function errorBox() {
  return h("p", { class: "error", role: "alert", hidden: true });
}

export function showError(box, err) {
  if (!err) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  box.hidden = false;
  box.textContent = err.message || String(err);
}

// onSubmit handles a form's submission in the page instead of the
// browser: it clears the form's error box and runs submit, and shows what
// submit throws in the box, then calls refocus (when given) to put focus
// where the person can put it right.
export function onSubmit(form, err, submit, refocus = null) {
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    showError(err, null);
    try {
      await submit();
    } catch (e) {
      showError(err, e);
      if (refocus) refocus();
    }
  });
}

// copyButton copies text to the clipboard, falling back to selecting it
// where the Clipboard API is unavailable (plain http on a non-local host).
export function copyButton(text, target) {
  const btn = h("button", { type: "button", class: "secondary" }, "Copy");
  btn.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      btn.textContent = "Copied";
    } catch {
      if (target) {
        const range = document.createRange();
        range.selectNodeContents(target);
        const sel = window.getSelection();
        sel.removeAllRanges();
        sel.addRange(range);
      }
      btn.textContent = "Selected: press Ctrl+C";
    }
    setTimeout(() => { btn.textContent = "Copy"; }, 3000);
  });
  return btn;
}
