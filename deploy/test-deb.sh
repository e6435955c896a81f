#!/usr/bin/env bash
# Installs, runs, upgrades, removes and purges the inkwired package, checking each step, on
# this machine or in a Debian root made with mmdebstrap or debootstrap (no Swift toolchain in
# it). Run as root. Prints one line per check; exits non-zero at the first failure.
#
#   deploy/test-deb.sh [--root DIR] [--from OLD.deb] NEW.deb
#
#   --root DIR      work inside the root DIR (chroot; /proc is mounted for the run), whose apt
#                   fetches the package's dependencies; default: this machine
#   --from OLD.deb  install OLD.deb first and write rooms with it, then upgrade to NEW.deb
#                   (default: NEW.deb is installed, then installed again as the upgrade)
#
# Without systemd as PID 1 the service cannot be started: the daemon runs from the installed
# paths with the installed settings file, as an unprivileged user, the way the unit runs it.
set -euo pipefail

root=/
old=
while [[ $# -gt 1 ]]; do
    case $1 in
    --root) root=${2:?}; shift 2 ;;
    --from) old=${2:?}; shift 2 ;;
    *) echo "test-deb.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
new=${1:?usage: test-deb.sh [--root DIR] [--from OLD.deb] NEW.deb}
[[ $(id -u) -eq 0 ]] || { echo "test-deb.sh: run as root" >&2; exit 1; }
root=$(cd "$root" && pwd)
work=/tmp/inkwired-test-deb-$$
uid=61184  # the first uid systemd gives a DynamicUser=

in_root() { if [[ $root == / ]]; then "$@"; else chroot "$root" "$@"; fi; }
clean_env() { in_root env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }
check() { echo "ok   $*"; }
fail() { echo "FAIL $*" >&2; exit 1; }
pid=
cleanup() {
    [[ -n $pid ]] && kill "$pid" 2>/dev/null || true
    rm -rf "$root$work"
    if [[ $root != / ]]; then umount "$root/proc" 2>/dev/null || true; fi
}
trap cleanup EXIT
if [[ $root != / ]]; then
    mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
fi
mkdir -p "$root$work"
cp "$new" "$root$work/new.deb"
[[ -n $old ]] && cp "$old" "$root$work/old.deb"
version_of() { dpkg-deb -f "$1" Version; }
if [[ $root != / ]]; then
    clean_env apt-get update -q >"$root$work/apt.log" 2>&1 || { cat "$root$work/apt.log" >&2; fail "apt-get update in $root"; }
    clean_env sh -c 'command -v swift' >/dev/null && fail "$root has a Swift toolchain"
    check "$root: a Debian root without a Swift toolchain ($(clean_env cat /etc/debian_version))"
fi

apt_install() {
    clean_env apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confold "$@" >"$root$work/apt.log" 2>&1 \
        || { cat "$root$work/apt.log" >&2; fail "apt-get install $*"; }
}

# install PACKAGE: installs and checks the binaries run with Debian's libraries only.
install_and_check() {
    local deb=$1 version=$2
    apt_install ${3:-} "$work/$deb"
    [[ $(clean_env dpkg-query -W -f='${Version}' inkwired) == "$version" ]] || fail "dpkg says $(clean_env dpkg-query -W -f='${Version}' inkwired)"
    local printed
    printed=$(clean_env inkwired --version)
    [[ $printed == "inkwired $version"* ]] || fail "inkwired --version printed '$printed', the package is $version"
    check "installed $deb: inkwired --version is '$printed' (PATH=/usr/bin:/bin, no toolchain)"
    clean_env inkwire --help >/dev/null || fail "inkwire --help"
    if clean_env ldd /usr/bin/inkwired /usr/bin/inkwire | grep -E 'not found|/opt/swift|swift' >&2; then fail "a library outside Debian"; fi
    check "ldd: every library of inkwired and inkwire is Debian's"
}

# start: the daemon from /usr/bin with /etc/default/inkwired, as an unprivileged user, on
# loopback; sets pid, udp.
starts=0
start_daemon() {
    starts=$((starts + 1))
    log=$root$work/daemon-$starts.log
    chown -R "$uid:$uid" "$root/var/lib/inkwired"
    local run=(setpriv --reuid="$uid" --regid="$uid" --clear-groups --no-new-privs
        env -i PATH=/usr/bin:/bin /usr/bin/inkwired --config /etc/default/inkwired --data-dir /var/lib/inkwired
        --udp 127.0.0.1:0 --tcp 127.0.0.1:0)
    [[ $root == / ]] || run=(chroot "$root" "${run[@]}")
    # exec: $! is the daemon itself (chroot, setpriv and env exec it).
    (exec "${run[@]}" 2>"$log") &
    pid=$!
    for _ in $(seq 100); do grep -q 'msg="ready"' "$log" 2>/dev/null && break; sleep 0.1; done
    udp=$(sed -n 's/.*msg="ready" udp=\([^ ]*\) .*/\1/p' "$log")
    [[ -n $udp ]] || { cat "$log" >&2; fail "the daemon did not start"; }
}
stop_daemon() { kill -TERM "$pid"; wait "$pid" || fail "the daemon's exit code"; pid=; }
digest_of() {  # "synced through roomSeq N, board digest D" as a late joiner of room $1 sees it
    clean_env inkwire watch --server "udp://$udp" --room "$1" --idle-exit 0.5 2>"$root$work/watch.log" >/dev/null \
        || { cat "$root$work/watch.log" >&2; fail "inkwire watch --room $1"; }
    sed -n 's/.*synced through roomSeq \([0-9]*\), board digest \([0-9a-f]*\) matches.*/\1:\2/p' "$root$work/watch.log"
}

clean_env dpkg-query -W inkwired >/dev/null 2>&1 && fail "inkwired is installed already: start from a machine or root without it"
[[ -e $root/var/lib/inkwired ]] && fail "$root/var/lib/inkwired exists: start from a machine or root without it"
first=new.deb
first_version=$(version_of "$new")
if [[ -n $old ]]; then first=old.deb; first_version=$(version_of "$old"); fi
install_and_check "$first" "$first_version"
[[ -f $root/etc/default/inkwired ]] || fail "no /etc/default/inkwired"
clean_env dpkg-query -W -f='${Conffiles}\n' inkwired | grep -q '/etc/default/inkwired' || fail "/etc/default/inkwired is not a conffile"
check "/etc/default/inkwired is a conffile"
if [[ -x $root/usr/bin/systemd-analyze ]]; then
    clean_env systemd-analyze verify --man=no /lib/systemd/system/inkwired.service >"$root$work/verify.log" 2>&1 \
        || { cat "$root$work/verify.log" >&2; fail "systemd-analyze verify"; }
    check "systemd-analyze verify of the installed unit"
fi

# Rooms written by the first version.
mkdir -p "$root/var/lib/inkwired"
# The lesson, from the new package's inkwire demo-trace (the old one may not have it).
dpkg-deb -x "$new" "$root$work/unpacked"
"$root$work/unpacked/usr/bin/inkwire" demo-trace --seconds 20 >"$root$work/lesson.csv"
start_daemon
for room in maths art; do
    clean_env inkwire send --server "udp://$udp" --room "$room" --user teacher --trace "$work/lesson.csv" --speed 50 2>>"$root$work/send.log" \
        || { cat "$root$work/send.log" >&2; fail "inkwire send"; }
done
before_maths=$(digest_of maths)
before_art=$(digest_of art)
[[ -n $before_maths && -n $before_art ]] || fail "no digests before the upgrade"
# With the new release's inkwired (an old one may have no backup command), as before an upgrade.
clean_env "$work/unpacked/usr/bin/inkwired" backup --data-dir /var/lib/inkwired --to "$work/before-upgrade.sqlite" \
    || fail "inkwired backup while the daemon runs"
check "rooms maths and art written with $first_version; inkwired backup while it runs"
stop_daemon
echo "# edited by test-deb.sh" >>"$root/etc/default/inkwired"

# Upgrade: the settings file keeps the edit, every room is still there.
[[ -z $old ]] && reinstall=--reinstall || reinstall=
install_and_check new.deb "$(version_of "$new")" $reinstall
grep -q 'edited by test-deb.sh' "$root/etc/default/inkwired" || fail "the upgrade replaced the edited /etc/default/inkwired"
check "the upgrade kept the edited /etc/default/inkwired"
start_daemon
after_maths=$(digest_of maths)
after_art=$(digest_of art)
[[ $after_maths == "$before_maths" && $after_art == "$before_art" ]] || fail "a room changed in the upgrade: maths $before_maths -> $after_maths, art $before_art -> $after_art"
check "after the upgrade every room has its board (digests $before_maths, $before_art)"
if grep -q 'msg="room log migrated' "$log"; then
    check "the room log was migrated: $(sed -n 's/.*\(from_schema.*\)/\1/p' "$log")"
fi
stop_daemon
start_daemon
stop_daemon
grep -q 'msg="room log migrated' "$log" && fail "migrated again at the next start"
check "the next start migrated nothing"

# Remove keeps the history and the settings; purge deletes them.
clean_env apt-get remove -y -q inkwired >"$root$work/apt.log" 2>&1 || { cat "$root$work/apt.log" >&2; fail "apt-get remove"; }
[[ ! -e $root/usr/bin/inkwired && -f $root/etc/default/inkwired && -f $root/var/lib/inkwired/rooms.sqlite ]] || fail "remove"
check "remove: the binaries are gone, /etc/default/inkwired and /var/lib/inkwired/rooms.sqlite are kept"
clean_env apt-get purge -y -q inkwired >"$root$work/apt.log" 2>&1 || { cat "$root$work/apt.log" >&2; fail "apt-get purge"; }
[[ ! -e $root/etc/default/inkwired && ! -e $root/var/lib/inkwired && ! -e $root/var/lib/private/inkwired ]] || fail "purge left files"
clean_env dpkg-query -W inkwired >/dev/null 2>&1 && fail "dpkg still knows inkwired"
check "purge: /etc/default/inkwired and /var/lib/inkwired are gone"
