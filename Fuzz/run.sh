#!/usr/bin/env bash
# Builds each decoder's libFuzzer target with `swiftc -sanitize=fuzzer` and runs it for a
# bounded time (FUZZ_SECONDS, default 10 per target). Any crash fails the run.
set -euo pipefail
cd "$(dirname "$0")"
targets=(targets/*.swift)
[ -e "${targets[0]}" ] || { echo "fuzz: no targets yet"; exit 0; }
