// Syntax highlighting of fenced code, loaded on first use: highlight.js's
// core and a dozen languages are most of a message renderer's weight, and
// most rooms never show code. A block whose language is not one of these
// (or that names none) stays plain, as it was written.
//
// highlight.js builds its output by escaping the code itself; it is put in
// the element that held the same code as text.

const languages = {
  bash: "bash", sh: "bash", zsh: "bash", shell: "shell", console: "shell",
  diff: "diff", patch: "diff",
  go: "go", golang: "go",
  javascript: "javascript", js: "javascript", mjs: "javascript", jsx: "javascript",
  typescript: "typescript", ts: "typescript", tsx: "typescript",
  json: "json", jsonc: "json",
  python: "python", py: "python",
  rust: "rust", rs: "rust",
  sql: "sql",
  html: "xml", xml: "xml", svg: "xml",
  yaml: "yaml", yml: "yaml",
};

let loading = null;

// load answers highlight.js with the languages registered, importing each
// once.
function load() {
  if (!loading) {
    loading = (async () => {
      const { default: hljs } = await import("../vendor/highlight/core.min.js");
      const names = [...new Set(Object.values(languages))];
      const grammars = await Promise.all(names.map((n) => import(`../vendor/highlight/languages/${n}.min.js`)));
      names.forEach((n, i) => hljs.registerLanguage(n, grammars[i].default));
      return hljs;
    })();
  }
  return loading;
}

// languageOf answers the registered language a code element names
// (class="language-x"), or null.
function languageOf(code) {
  const m = /(?:^|\s)language-([\w+#-]+)/.exec(code.className);
  return m ? languages[m[1].toLowerCase()] || null : null;
}

// highlightWithin highlights the code blocks under root once the
// highlighter is loaded (at once when it is).
export function highlightWithin(root) {
  const blocks = [...root.querySelectorAll("pre code")].filter(languageOf);
  if (!blocks.length) return;
  load().then((hljs) => {
    for (const code of blocks) {
      const language = languageOf(code);
      const { value } = hljs.highlight(code.textContent, { language, ignoreIllegals: true });
      code.innerHTML = value;
      code.classList.add("hljs");
    }
  }, () => {
    // Without the highlighter the code stays plain text, which it is.
  });
}
