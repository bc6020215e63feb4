#!/usr/bin/env sh
# Refreshes what the web app renders messages with, from npm: marked (the
# Markdown parser, CommonMark and GFM), DOMPurify (which sanitizes the HTML
# marked makes before it reaches the page) and highlight.js's core with a
# few languages (loaded only when a message holds a fenced code block).
# Each keeps its licence beside it and its version in VERSION. The versions
# are pinned here: change one, run this script, then run the web test (it
# renders Markdown and code and checks an XSS corpus).
#
#   sh web/vendor/refresh-markdown.sh
set -eu
marked=18.2.1
dompurify=3.4.18
highlight=11.12.0
languages="bash diff go javascript json python rust shell sql typescript xml yaml"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unpack() { # unpack NAME VERSION DIR
  mkdir -p "$work/$3"
  (cd "$work/$3" && npm pack --silent "$1@$2" >/dev/null && tar xzf ./*.tgz)
}
unpack marked "$marked" marked
unpack dompurify "$dompurify" dompurify
unpack @highlightjs/cdn-assets "$highlight" highlight

rm -rf "$here/marked" "$here/dompurify" "$here/highlight"
mkdir -p "$here/marked" "$here/dompurify" "$here/highlight/languages"
cp "$work/marked/package/lib/marked.esm.js" "$work/marked/package/LICENSE" "$here/marked/"
cp "$work/dompurify/package/dist/purify.es.mjs" "$work/dompurify/package/LICENSE" "$here/dompurify/"
cp "$work/highlight/package/es/core.min.js" "$work/highlight/package/LICENSE" "$here/highlight/"
for l in $languages; do
  cp "$work/highlight/package/es/languages/$l.min.js" "$here/highlight/languages/"
done
# The files name source maps the binary does not carry; without the
# comment browsers' developer tools do not ask for them.
for f in "$here/marked/marked.esm.js" "$here/dompurify/purify.es.mjs" "$here/highlight/core.min.js" "$here"/highlight/languages/*.js; do
  sed -i '/^\/\/# sourceMappingURL=/d' "$f"
done
echo "marked@$marked" > "$here/marked/VERSION"
echo "dompurify@$dompurify" > "$here/dompurify/VERSION"
echo "@highlightjs/cdn-assets@$highlight" > "$here/highlight/VERSION"
echo "vendored marked@$marked, dompurify@$dompurify and highlight.js@$highlight ($languages) into $here"
