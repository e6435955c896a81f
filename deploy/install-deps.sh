#!/usr/bin/env bash
# Installs the Debian packages Inkwire builds and runs with (deploy/apt-packages.txt) and, with
# --test, those the test suite needs as well (.ci/apt-test-packages.txt, and the PyPI packages of
# .ci/pip-test-packages.txt): only the missing ones.
# Idempotent; prints what it did.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lists=("$here/apt-packages.txt")
[ "${1:-}" = "--test" ] && lists+=("$here/../.ci/apt-test-packages.txt")
# With --test, the PyPI packages the tests need (.ci/pip-test-packages.txt), into the python3 on
# PATH; the tests that need them skip with a message where python3 has no pip.
if [ "${1:-}" = "--test" ]; then
    if python3 -m pip --version >/dev/null 2>&1; then
        python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
            -r "$here/../.ci/pip-test-packages.txt" && echo "install-deps: PyPI test packages present"
    else
        echo "install-deps: python3 has no pip; PyPI test packages (.ci/pip-test-packages.txt) not installed"
    fi
fi
mapfile -t wanted < <(cat "${lists[@]}" | grep -vE '^\s*(#|$)')
missing=()
for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#wanted[@]} packages present"
    exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
# The tests only want promtool; on a host run by systemd, don't leave a Prometheus server running.
if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
    $sudo systemctl disable --now prometheus 2>/dev/null || true
    echo "install-deps: disabled the prometheus service (only promtool is used)"
fi
