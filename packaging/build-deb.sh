#!/usr/bin/env bash
# Build the .deb: dpkg-buildpackage wants debian/ at the top of the source
# tree, so the tree is exported (as git has it) to a scratch directory with
# packaging/debian moved into place.  The .deb lands in $1 (default: ./debian-build),
# with the build's log beside it (build.log), for its compiler warnings.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/debian-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/traced-probes" "$out"
git -C "$top" ls-files -z | (cd "$top" && xargs -0 cp --parents -t "$work/traced-probes")
cp -r "$top/packaging/debian" "$work/traced-probes/debian"
cp "$top/packaging/traced-probes.service" "$work/traced-probes/debian/traced-probes.service"
cp "$top/packaging/traced-probes.tmpfiles" "$work/traced-probes/debian/traced-probes.tmpfiles"
(cd "$work/traced-probes" && dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1) || {
	tail -n 40 "$work/build.log"; exit 1; }
cp "$work"/*.deb "$out"/
cp "$work/build.log" "$out/build.log"
ls "$out"/*.deb
