#!/usr/bin/env bash
# Builds the Debian package inkwired_VERSION_amd64.deb: inkwired and inkwire linked with the
# Swift runtime statically (they need only Debian's libraries, never /opt/swift), the man
# pages, the systemd units, /etc/default/inkwired as a conffile, the Grafana dashboard, and
# maintainer scripts that enable and start the service, keep the room history on remove and
# delete it on purge (deploy/debian/). Prints the package's path.
#
#   deploy/build-deb.sh [--out DIR] [--bin-dir DIR --version V]
#
# Options:
#   --out DIR      write the package into DIR (default: the current directory)
#   --bin-dir DIR  package the inkwired and inkwire found in DIR instead of building them
#                  (built elsewhere with the same flags; --version then says which they are)
#   --version V    the package version (default: the VERSION file); must be what
#                  `inkwired --version` prints
set -euo pipefail

out=.
bin_dir=
version=
while [[ $# -gt 0 ]]; do
    case $1 in
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --bin-dir) bin_dir=${2:?--bin-dir needs a directory}; shift 2 ;;
    --bin-dir=*) bin_dir=${1#*=}; shift ;;
    --version) version=${2:?--version needs a version}; shift 2 ;;
    --version=*) version=${1#*=}; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-deb.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
deploy=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$deploy/.." && pwd)
version=${version:-$(tr -d ' \n' <"$root/VERSION")}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [[ -z $bin_dir ]]; then
    command -v swift >/dev/null || { echo "build-deb.sh: swift is not on PATH (export PATH=/opt/swift/usr/bin:\$PATH)" >&2; exit 1; }
    # --disable-local-rpath: no RUNPATH $ORIGIN (nothing is loaded from beside the binary).
    flags=(-c release --static-swift-stdlib --disable-local-rpath)
    (cd "$root" && swift build "${flags[@]}" --product inkwired >&2 && swift build "${flags[@]}" --product inkwire >&2)
    bin_dir=$(cd "$root" && swift build "${flags[@]}" --show-bin-path)
fi
built=$("$bin_dir/inkwired" --version | awk '{print $2}')
[[ $built == "$version" ]] || { echo "build-deb.sh: $bin_dir/inkwired is $built, not $version" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg=$stage/inkwired
install -d -m 0755 "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/lib/systemd/system" "$pkg/etc/default" \
    "$pkg/usr/share/man/man1" "$pkg/usr/share/man/man8" "$pkg/usr/share/doc/inkwired" "$pkg/usr/share/inkwired"
for program in inkwired inkwire; do
    strip --strip-unneeded --remove-section=.comment --remove-section=.note -o "$pkg/usr/bin/$program" "$bin_dir/$program"
    chmod 0755 "$pkg/usr/bin/$program"
done
for unit in inkwired.service inkwired.socket inkwired-tcp.socket inkwired-metrics.socket; do
    sed 's#/usr/local/bin/inkwired#/usr/bin/inkwired#g; s#deploy/install.sh#the package#g' "$deploy/$unit" >"$pkg/lib/systemd/system/$unit"
    chmod 0644 "$pkg/lib/systemd/system/$unit"
done
install -m 0644 "$deploy/inkwired.env" "$pkg/etc/default/inkwired"
gzip -9n <"$deploy/inkwired.8" >"$pkg/usr/share/man/man8/inkwired.8.gz"
gzip -9n <"$deploy/inkwire.1" >"$pkg/usr/share/man/man1/inkwire.1.gz"
install -m 0644 "$deploy/grafana-inkwired.json" "$pkg/usr/share/inkwired/grafana-inkwired.json"
install -m 0644 "$deploy/debian/copyright.in" "$pkg/usr/share/doc/inkwired/copyright"
gzip -9n <"$root/CHANGELOG.md" >"$pkg/usr/share/doc/inkwired/changelog.gz"
# The Debian changelog: one entry per release, from CHANGELOG.md's headings.
date=$(date -u -R -d "@${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}")
{
    printf 'inkwired (%s) unstable; urgency=medium\n\n' "$version"
    printf '  * Upstream release %s; see /usr/share/doc/inkwired/changelog.gz.\n\n' "$version"
    printf ' -- Inkwire developers <inkwire@packages.invalid>  %s\n' "$date"
} | gzip -9n >"$pkg/usr/share/doc/inkwired/changelog.Debian.gz"
for script in postinst prerm postrm; do install -m 0755 "$deploy/debian/$script" "$pkg/DEBIAN/$script"; done
printf '/etc/default/inkwired\n' >"$pkg/DEBIAN/conffiles"

# Depends: what dpkg-shlibdeps finds the binaries need (versions from Debian's symbols files).
mkdir -p "$stage/debian"
printf 'Source: inkwired\n\nPackage: inkwired\nArchitecture: amd64\n' >"$stage/debian/control"
depends=$(cd "$stage" && dpkg-shlibdeps -O inkwired/usr/bin/inkwired inkwired/usr/bin/inkwire | sed -n 's/^shlibs:Depends=//p')
[[ -n $depends ]] || { echo "build-deb.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -k -s --exclude=DEBIAN "$pkg" | cut -f1)
sed "s/@VERSION@/$version/; s/@SIZE@/$size/; s/@DEPENDS@/$depends/" "$deploy/debian/control.in" >"$pkg/DEBIAN/control"
(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum >DEBIAN/md5sums)
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/conffiles" "$pkg/DEBIAN/md5sums"

deb=$out/inkwired_${version}_amd64.deb
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >&2
echo "$deb"
