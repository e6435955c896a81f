#!/usr/bin/env bash
# Builds each decoder's libFuzzer target with `swiftc -sanitize=fuzzer` and runs it for a
# bounded time (FUZZ_SECONDS, default 10 per target; FUZZ_JOBS at once, default one per core).
# Any crash fails the run.
#
# A target is one file Fuzz/targets/NAME.swift defining `@_cdecl("LLVMFuzzerTestOneInput")`.
# It uses the pure modules' sources (`modules` below) as one module, without an `import` (their
# imports of each other are dropped in a temporary copy). A target that needs InkRelay, InkWeb
# or InkLegacy too says so on a line `// fuzz-modules: InkRelay` (only those targets pay for
# compiling it). Seeds, if any, live in Fuzz/seeds/NAME/. Run some targets with
# `Fuzz/run.sh NAME...`. Crash inputs are kept in Fuzz/bin/NAME-crashes/.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${FUZZ_SECONDS:-10}"
if [ "$#" -gt 0 ]; then targets=(); for name in "$@"; do targets+=("targets/$name.swift"); done
else targets=(targets/*.swift); fi
[ -e "${targets[0]}" ] || { echo "fuzz: no targets yet"; exit 0; }
mkdir -p bin
modules=(InkCodec InkProtocol)
optional=(InkRelay InkWeb InkLegacy)
src="$(mktemp -d)"  # per run, so two runs cannot rewrite each other's sources
trap 'rm -rf "$src"' EXIT
all=("${modules[@]}" "${optional[@]}")
for module in "${all[@]}"; do
    dir="$src"; [[ " ${optional[*]} " == *" $module "* ]] && { dir="$src/$module"; mkdir -p "$dir"; }
    for file in ../Sources/"$module"/*.swift; do
        sed -E "/^[[:space:]]*(@[A-Za-z_]+[[:space:]]+)*import[[:space:]]+($(IFS='|'; echo "${all[*]}"))[[:space:]]*$/d" \
            "$file" > "$dir/${module}_$(basename "$file")"
    done
done
# The MQTT chaos proxy's pure parts (framer, chaos session) import nothing; they ride along.
for file in ../Benchmarks/MQTTChaos/*.swift; do cp "$file" "$src/MQTTChaos_$(basename "$file")"; done
failed=()
# Compiling the modules is most of a target's build, so each distinct module set is compiled once
# per run into a static library (with -enable-testing); a target is then its one file with a
# `@testable import` of that library, so it still reaches internal declarations.
library_for() {  # $@: extra module names; prints the library's name, building it the first time
    local key="FuzzCore" module
    for module in "$@"; do key+="_$module"; done
    if [ ! -e "$lib/lib$key.a" ]; then
        local sources=("$src"/*.swift)
        for module in "$@"; do sources+=("$src/$module"/*.swift); done
        echo "fuzz: building the modules of $key" >&2
        if ! swiftc -sanitize=fuzzer,address -parse-as-library -O -enable-testing -module-name "$key" \
            -emit-module -emit-module-path "$lib/$key.swiftmodule" -emit-library -static \
            -o "$lib/lib$key.a" "${sources[@]}" > "bin/$key.build.log" 2>&1; then
            cat "bin/$key.build.log" >&2; return 1
        fi
    fi
    echo "$key"
}
lib="$src/lib"; mkdir -p "$lib"
built=()
for target in "${targets[@]}"; do
    name="$(basename "$target" .swift)"
    extra=($(sed -n -E 's|^// fuzz-modules:(.*)$|\1|p' "$target"))
    if ! core=$(library_for "${extra[@]}"); then failed+=("$name (modules)"); continue; fi
    echo "fuzz: building $name"
    { echo "@testable import $core"; cat "$target"; } > "$lib/target_$name.swift"
    if ! swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name "Fuzz_${name//-/_}" \
        -I "$lib" -L "$lib" -l"$core" "$lib/target_$name.swift" -o "bin/$name" > "bin/$name.build.log" 2>&1; then
        cat "bin/$name.build.log"; failed+=("$name (build)"); continue
    fi
    built+=("$name")
done
# Each fuzzer is single-threaded: run as many at once as there are cores (FUZZ_JOBS).
run_one() {  # $1: target name; its status is the fuzzer's
    local name="$1" corpus="bin/$1-corpus" crashes="bin/$1-crashes"
    mkdir -p "$corpus" "$crashes"
    [ -d "seeds/$name" ] && cp -n seeds/"$name"/* "$corpus"/ 2>/dev/null || true
    "bin/$name" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=4096 \
        -artifact_prefix="$crashes/" -print_final_stats=1 "$corpus" > "bin/$name.log" 2>&1
}
jobs_max="${FUZZ_JOBS:-$(nproc)}"
declare -A running=()  # pid -> target name
report() {  # $1: name, $2: status
    if [ "$2" -eq 0 ]; then
        grep -a -E '^stat::number_of_executed_units|^Done' "bin/$1.log" | sed "s/^/fuzz: $1: /" || true
    else
        tail -40 "bin/$1.log"; failed+=("$1")
    fi
}
reap_one() {  # waits for any running fuzzer and reports it
    local pid status=0
    wait -n -p pid "${!running[@]}" || status=$?
    report "${running[$pid]}" "$status"
    unset "running[$pid]"
}
for name in "${built[@]}"; do
    while [ "${#running[@]}" -ge "$jobs_max" ]; do reap_one; done
    echo "fuzz: running $name for ${seconds}s"
    run_one "$name" & running[$!]="$name"
done
while [ "${#running[@]}" -gt 0 ]; do reap_one; done
if [ "${#failed[@]}" -gt 0 ]; then echo "fuzz: FAILED: ${failed[*]}"; exit 1; fi
echo "fuzz: all targets ran ${seconds}s without a crash"
