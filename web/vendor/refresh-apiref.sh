#!/usr/bin/env sh
# Refreshes the vendored API reference viewer (Swagger UI's prebuilt
# distribution, swagger-ui-dist) from npm: the bundle, its stylesheet and
# their licences, nothing else. The version is pinned here; change it,
# run this script, then check /docs/api (the web test opens it).
#
#   sh web/vendor/refresh-apiref.sh
set -eu
version=5.35.0
here=$(cd "$(dirname "$0")" && pwd)
dest="$here/swagger-ui"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "swagger-ui-dist@$version" >/dev/null && tar xzf "swagger-ui-dist-$version.tgz")
rm -rf "$dest"
mkdir -p "$dest"
for f in swagger-ui-bundle.js swagger-ui-bundle.js.LICENSE.txt swagger-ui.css LICENSE NOTICE; do
  cp "$work/package/$f" "$dest/$f"
done
# The bundle names a source map the binary does not carry; without the
# comment browsers' developer tools do not ask for it.
sed -i '/^\/\/# sourceMappingURL=/d' "$dest/swagger-ui-bundle.js"
sed -i 's#/\*\# sourceMappingURL=[^*]*\*/##' "$dest/swagger-ui.css"
echo "swagger-ui-dist@$version" > "$dest/VERSION"
echo "vendored swagger-ui-dist@$version into $dest"
