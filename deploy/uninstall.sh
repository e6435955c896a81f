#!/usr/bin/env bash
# Removes what deploy/install.sh installed: stops and disables the units (when systemd is
# running and ROOT is /), then deletes the binaries, units, man page and /etc/default/inkwired
# when it is still the unchanged example. Keeps the room history in /var/lib/inkwired and an
# edited /etc/default/inkwired unless --purge. Idempotent; prints what it did.
#
# Options:
#   --root DIR     uninstall from under DIR instead of / (as DESTDIR; never touches systemctl)
#   --prefix DIR   as given to install.sh (default /usr/local)
#   --purge        also delete the room history and the settings file
set -euo pipefail

root=/
prefix=/usr/local
purge=no
while [[ $# -gt 0 ]]; do
    case $1 in
    --root) root=${2:?--root needs a directory}; shift 2 ;;
    --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
    --purge) purge=yes; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "uninstall.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
deploy=$(cd "$(dirname "$0")" && pwd)
root=${root%/}
units=(inkwired.service inkwired.socket inkwired-tcp.socket inkwired-metrics.socket)

if [[ -n $root ]]; then
    echo "skipped    systemctl (uninstalling under --root $root)"
elif [[ ! -d /run/systemd/system ]]; then
    echo "skipped    systemctl (systemd is not running on this machine)"
else
    for unit in "${units[@]}"; do
        if systemctl cat "$unit" >/dev/null 2>&1; then
            systemctl disable --now "$unit" && echo "ran        systemctl disable --now $unit"
        fi
    done
fi

remove() {
    if [[ -e $root$1 || -L $root$1 ]]; then
        rm -rf -- "$root$1"
        echo "removed    $1"
    fi
}

remove "$prefix/bin/inkwired"
remove "$prefix/bin/inkwire"
remove "$prefix/share/man/man8/inkwired.8"
for unit in "${units[@]}"; do remove "/etc/systemd/system/$unit"; done
settings=/etc/default/inkwired
if [[ $purge == yes ]] || { [[ -f $root$settings ]] && cmp -s "$deploy/inkwired.env" "$root$settings"; }; then
    remove "$settings"
elif [[ -e $root$settings ]]; then
    echo "kept       $settings (edited; --purge removes it)"
fi
if [[ $purge == yes ]]; then
    # DynamicUser= keeps the state in /var/lib/private/inkwired behind a /var/lib/inkwired link.
    remove /var/lib/inkwired
    remove /var/lib/private/inkwired
elif [[ -e $root/var/lib/inkwired || -e $root/var/lib/private/inkwired ]]; then
    echo "kept       /var/lib/inkwired (room history; --purge removes it)"
fi
if [[ -z $root && -d /run/systemd/system ]]; then
    systemctl daemon-reload && echo "ran        systemctl daemon-reload"
fi
