#!/usr/bin/env bash
# Builds inkwired and inkwire in release mode and installs them as a systemd service:
#   binaries   PREFIX/bin/inkwired, PREFIX/bin/inkwire              (PREFIX: /usr/local)
#   units      /etc/systemd/system/inkwired.service, inkwired{,-tcp,-metrics}.socket
#   settings   /etc/default/inkwired  (the example deploy/inkwired.env; an existing one is kept)
#   man page   PREFIX/share/man/man8/inkwired.8
# then, when systemd is running and ROOT is /, daemon-reload, enable and (re)start inkwired.service.
# Idempotent: running it again upgrades in place. deploy/uninstall.sh undoes it.
#
# Options:
#   --root DIR     install under DIR instead of / (as DESTDIR; never touches systemctl)
#   --prefix DIR   binaries and man page under DIR (default /usr/local)
#   --bin-dir DIR  take inkwired and inkwire from DIR instead of building them
set -euo pipefail

root=/
prefix=/usr/local
bin_dir=
while [[ $# -gt 0 ]]; do
    case $1 in
    --root) root=${2:?--root needs a directory}; shift 2 ;;
    --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
    --bin-dir) bin_dir=${2:?--bin-dir needs a directory}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
deploy=$(cd "$(dirname "$0")" && pwd)
root=${root%/}
units=(inkwired.service inkwired.socket inkwired-tcp.socket inkwired-metrics.socket)

if [[ -z $bin_dir ]]; then
    if ! command -v swift >/dev/null; then
        echo "install.sh: swift is not on PATH (sudo resets PATH): build as yourself, then" >&2
        echo "  sudo $0 --bin-dir \"\$(swift build -c release --show-bin-path)\"" >&2
        exit 1
    fi
    echo "building release binaries (swift build -c release)"
    (cd "$deploy/.." && swift build -c release --product inkwired && swift build -c release --product inkwire)
    bin_dir=$(cd "$deploy/.." && swift build -c release --show-bin-path)
fi
for program in inkwired inkwire; do
    [[ -x $bin_dir/$program ]] || { echo "install.sh: $bin_dir/$program is missing" >&2; exit 1; }
done

# install MODE SOURCE TARGET: copies when the content differs and says what it did.
put() {
    local mode=$1 source=$2 target=$root$3
    if [[ -f $target ]] && cmp -s "$source" "$target"; then
        echo "unchanged  $3"
    else
        install -D -m "$mode" "$source" "$target"
        echo "installed  $3"
    fi
}

put 0755 "$bin_dir/inkwired" "$prefix/bin/inkwired"
put 0755 "$bin_dir/inkwire" "$prefix/bin/inkwire"
put 0644 "$deploy/inkwired.8" "$prefix/share/man/man8/inkwired.8"
staged=$(mktemp -d)
trap 'rm -rf "$staged"' EXIT
for unit in "${units[@]}"; do
    # The units name /usr/local/bin/inkwired; follow --prefix.
    sed "s#/usr/local/bin/inkwired#$prefix/bin/inkwired#g" "$deploy/$unit" >"$staged/$unit"
    put 0644 "$staged/$unit" "/etc/systemd/system/$unit"
done
if [[ -e $root/etc/default/inkwired ]]; then
    echo "kept       /etc/default/inkwired (exists; the example is $deploy/inkwired.env)"
else
    put 0644 "$deploy/inkwired.env" /etc/default/inkwired
fi

if [[ -n $root ]]; then
    echo "skipped    systemctl (installed under --root $root)"
elif [[ ! -d /run/systemd/system ]]; then
    echo "skipped    systemctl (systemd is not running on this machine; start inkwired by hand or on a systemd host)"
else
    systemctl daemon-reload && echo "ran        systemctl daemon-reload"
    systemctl enable inkwired.service && echo "ran        systemctl enable inkwired.service"
    systemctl restart inkwired.service && echo "ran        systemctl restart inkwired.service"
    echo "optional   socket activation: systemctl enable --now inkwired.socket"
fi
