#!/usr/bin/env bash
# Builds the core with clang's libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer
# and runs every *_fuzzer.cc here for SECONDS each, starting from the seeds in corpus/.
# CI runs it for a few seconds per target; a longer run (docs/operations.md):
#   native/src/test/fuzz/run-fuzzers.sh 600
# Usage: run-fuzzers.sh [SECONDS] [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../../main/cpp" && pwd)
seconds=${1:-10}
out=${2:-$here/../../../target/fuzz}
cxx=${FUZZ_CXX:-clang++}
command -v "$cxx" > /dev/null || { echo "run-fuzzers.sh: $cxx not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
flags=(-std=c++17 -O1 -g -pthread -fsanitize=address,undefined -fno-sanitize-recover=undefined
  -Wall -Wextra -Werror -I"$src/include" -I"$src")
mkdir -p "$out/obj"

# The whole core (the backend registry reaches every backend), instrumented.
objs=()
pids=()
for file in "$src"/*/*.cc; do
  obj="$out/obj/$(basename "$(dirname "$file")")_$(basename "${file%.cc}").o"
  if [[ ! -f $obj || $file -nt $obj ]] || [[ -n $(find "$src" -name '*.h' -newer "$obj" -print -quit) ]]; then
    "$cxx" "${flags[@]}" -fsanitize=fuzzer-no-link -c "$file" -o "$obj" &
    pids+=($!)
  fi
  objs+=("$obj")
done
built=0
for pid in "${pids[@]}"; do wait "$pid" || built=1; done
[[ $built -eq 0 ]] || { echo "run-fuzzers.sh: compilation failed" >&2; exit 1; }

status=0
for target in "$here"/*_fuzzer.cc; do
  name=$(basename "${target%.cc}")
  "$cxx" "${flags[@]}" -fsanitize=fuzzer "$target" "${objs[@]}" -o "$out/$name"
  corpus="$out/corpus/$name"
  mkdir -p "$corpus"
  seeds=()
  [[ -d $here/corpus/$name ]] && seeds=("$here/corpus/$name")
  echo "run-fuzzers.sh: $name for ${seconds}s"
  # Crashes are written to $out as crash-*; the exit status says whether one was found.
  if ! (cd "$out" && ASAN_OPTIONS=detect_leaks=1 "./$name" -max_total_time="$seconds" -max_len=4096 \
      -rss_limit_mb=1024 -print_final_stats=1 "$corpus" "${seeds[@]}" 2>&1 | tail -n 12); then
    status=1
  fi
done
exit $status
