#!/usr/bin/env bash
# Boots a fresh Debian 12 root with systemd as PID 1 (systemd-nspawn, private network) and
# checks the package as a service there: install OLD.deb (enabled and started by postinst),
# write two rooms, upgrade to NEW.deb (restarted, migrated once, rooms kept, settings kept),
# reload, a bad setting (exit 2, not restarted), remove (history kept), purge (gone). Needs
# root, mmdebstrap and systemd-container; takes a few minutes. Prints the check's log.
#
#   deploy/test-deb-systemd.sh OLD.deb NEW.deb
set -euo pipefail
old=${1:?usage: test-deb-systemd.sh OLD.deb NEW.deb}
new=${2:?usage: test-deb-systemd.sh OLD.deb NEW.deb}
root=$(mktemp -d /tmp/inkwired-systemd-root-XXXXXX)
trap 'rm -rf "$root"' EXIT
mmdebstrap --quiet --variant=apt --include=systemd,systemd-sysv,dbus,libuv1,libsqlite3-0,libssl3,libsodium23,libmosquitto1,libpng16-16,libturbojpeg0 bookworm "$root"
cp "$old" "$root/root/old.deb"
cp "$new" "$root/root/new.deb"
dpkg-deb -x "$new" "$root/root/unpacked"
"$root/root/unpacked/usr/bin/inkwire" demo-trace --seconds 20 >"$root/root/lesson.csv"
cat >"$root/root/check.sh" <<'CHECK'
#!/bin/sh
exec >/root/check.out 2>&1
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; systemctl poweroff; exit 1; }
digests() { for room in maths art; do inkwire watch --server udp://127.0.0.1:7420 --room $room --idle-exit 0.5 2>&1 >/dev/null | sed -n 's/.*board digest \([0-9a-f]*\) matches.*/\1/p'; done | tr '\n' ' '; }
dpkg -i /root/old.deb >/root/dpkg.log 2>&1 || fail "dpkg -i old.deb"
sleep 2
[ "$(systemctl is-active inkwired.service)" = active ] && [ "$(systemctl is-enabled inkwired.service)" = enabled ] || fail "not enabled and running after install"
ok "installed $(inkwired --version): enabled and active under systemd $(systemctl --version | head -1 | cut -d' ' -f2)"
for room in maths art; do inkwire send --server udp://127.0.0.1:7420 --room $room --user teacher --trace /root/lesson.csv --speed 50 2>/dev/null || fail "send"; done
before=$(digests)
echo "# kept across the upgrade" >>/etc/default/inkwired
apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confold /root/new.deb >/root/apt.log 2>&1 || fail "upgrade"
sleep 3
[ "$(systemctl is-active inkwired.service)" = active ] || fail "not active after the upgrade"
ok "upgraded to $(inkwired --version), active; settings edit kept: $(tail -1 /etc/default/inkwired)"
[ "$(digests)" = "$before" ] || fail "rooms changed: $before -> $(digests)"
ok "every room kept its board: $before"
journalctl -u inkwired --no-pager | grep 'room log migrated' | sed 's/.*msg=/ok   /'
systemctl restart inkwired.service; sleep 2
[ "$(journalctl -u inkwired --no-pager | grep -c 'room log migrated')" -le 1 ] || fail "migrated twice"
systemctl reload inkwired.service && sleep 1 && journalctl -u inkwired --no-pager | grep -q 'msg="reloaded"' || fail "reload"
ok "restart migrates nothing; systemctl reload works"
ok "user $(stat -c %u /var/lib/private/inkwired) (DynamicUser), $(systemd-analyze security inkwired.service --no-pager | tail -1 | sed 's/.*level for //')"
echo INKWIRE_MAX_SESIONS=9 >>/etc/default/inkwired
systemctl restart inkwired.service 2>/dev/null; sleep 4
status=$(systemctl show inkwired.service -p ExecMainStatus --value)
restarts=$(systemctl show inkwired.service -p NRestarts --value)
[ "$status" = 2 ] && [ "$restarts" = 0 ] || fail "bad setting: status $status, restarts $restarts"
ok "a bad setting: exit 2, not restarted ($(journalctl -u inkwired --no-pager | grep 'unknown setting' | tail -1 | sed 's/.*inkwired\[[0-9]*\]: //'))"
sed -i '/INKWIRE_MAX_SESIONS/d' /etc/default/inkwired
apt-get remove -y -q inkwired >/root/apt.log 2>&1 || fail "remove"
[ ! -e /usr/bin/inkwired ] && [ -f /var/lib/inkwired/rooms.sqlite ] && [ -f /etc/default/inkwired ] || fail "remove"
ok "remove: service gone, /var/lib/inkwired and /etc/default/inkwired kept"
apt-get purge -y -q inkwired >/root/apt.log 2>&1 || fail "purge"
[ ! -e /var/lib/inkwired ] && [ ! -e /var/lib/private/inkwired ] && [ ! -e /etc/default/inkwired ] || fail "purge left files"
ok "purge: history and settings gone"
echo done
systemctl poweroff
CHECK
chmod +x "$root/root/check.sh"
printf '[Unit]\nAfter=multi-user.target\n[Service]\nType=oneshot\nExecStart=/root/check.sh\nTimeoutStartSec=300\n[Install]\nWantedBy=multi-user.target\n' \
    >"$root/etc/systemd/system/inkwire-check.service"
ln -s /etc/systemd/system/inkwire-check.service "$root/etc/systemd/system/multi-user.target.wants/inkwire-check.service"
timeout 400 systemd-nspawn --quiet --register=no --keep-unit --private-network --boot --directory "$root" >"$root.boot.log" 2>&1 || true
cat "$root/root/check.out"
rm -f "$root.boot.log"
grep -q '^done$' "$root/root/check.out"
