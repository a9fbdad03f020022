#!/bin/sh
# deb.sh - make deb: the Debian package built from a copy of the tree in build-deb/, then lintian
# (fails on an error) and hardening-check on every program it ships.
#
# Usage: scripts/deb.sh   (from the top of the tree; scripts/deps.sh build deb installs the tools)
# Writes build-deb/bqos_VERSION_ARCH.deb (and .changes, .buildinfo, the build and lintian logs)
# and leaves the source tree alone: dh's clean step (make clean) runs in the copy.  Exit status:
# 0 when the package builds, lintian reports no error and every program has every hardening
# feature; 1 otherwise.
set -eu
cd "$(dirname "$0")/.."
start=$(date +%s)

# One version everywhere: common/version.h, debian/changelog's top entry and NEWS's newest.
version=$(sed -n 's/^#define BQOS_VERSION "\(.*\)"/\1/p' common/version.h)
debver=$(dpkg-parsechangelog -SVersion)
newsver=$(sed -n 's/^bqos \([0-9][0-9.]*\) .*/\1/p' NEWS | head -n 1)
if [ "$debver" != "$version" ] || [ "$newsver" != "$version" ]; then
  echo "deb: versions differ: common/version.h $version, debian/changelog $debver, NEWS $newsver" >&2
  exit 1
fi

# The copy: what git tracks plus new files it does not ignore, as they are in the working tree.
out=build-deb
src=$out/bqos-$version
rm -rf "$out"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard |
  tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$src"

echo "deb: dpkg-buildpackage -us -uc -b in $src (log: $out/build.log)"
if ! (cd "$src" && env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS nice dpkg-buildpackage -us -uc -b -J"$(nproc)") >"$out/build.log" 2>&1; then
  tail -n 30 "$out/build.log" >&2
  echo "deb: dpkg-buildpackage failed (the whole log: $out/build.log)" >&2
  exit 1
fi
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
deb=$out/bqos_${version}_$arch.deb
changes=$out/bqos_${version}_$arch.changes
echo "deb: built $deb"

rc=0
echo "deb: lintian (fails on errors; log: $out/lintian.log)"
# (stderr apart: as root lintian says it is not recommended, with no newline after it)
lintian --fail-on error --info "$changes" >"$out/lintian.log" 2>"$out/lintian.err" || rc=1
sed 's/^/  /' "$out/lintian.log"
printf 'deb: lintian tags:'
for s in E W I; do printf ' %s %s' "$s" "$(grep -c "^$s: " "$out/lintian.log" || true)"; done
echo
[ $rc -eq 0 ] || { cat "$out/lintian.err"; echo; echo "deb: lintian reports errors" >&2; }

# Control-flow protection (CET) marks a program only when every object linked into it is marked,
# the C library's start files included: Debian 12's are not, so no program built there can pass
# that check, and it is only made where they are.
scrt=$(cc -print-file-name=Scrt1.o)
if readelf -n "$scrt" 2>/dev/null | grep -q 'x86 feature: IBT'; then cfp=; else
  cfp=--nocfprotection
  echo "deb: hardening-check without the control-flow check: $scrt has no CET note"
fi
echo "deb: hardening-check on the shipped programs"
dpkg-deb -x "$deb" "$out/root"
for f in "$out"/root/usr/bin/* "$out"/root/usr/sbin/*; do
  [ -L "$f" ] && continue
  hardening-check $cfp "$f" || rc=1
done

echo "deb: done in $(( $(date +%s) - start ))s"
exit $rc
