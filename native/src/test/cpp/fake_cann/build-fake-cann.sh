#!/usr/bin/env bash
# Builds the simulated CANN runtime (test only, never shipped): libascendcl.so, libhccl.so and
# liblcal.so laid out like CANN's lib64, for every test that runs backend hccl without an NPU.
#   OUT_DIR/lib64          the complete runtime
# with --all-variants also
#   OUT_DIR/lib64-minimal  without the optional symbols, like an old CANN
#   OUT_DIR/lib64-split    communicator management in libhcomm.so, like a newer CANN
# Built at -O0 (compile time dominates a test run); up-to-date libraries are kept.
# Usage: build-fake-cann.sh OUT_DIR [--all-variants]
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: build-fake-cann.sh OUT_DIR [--all-variants]}
variants=(lib64)
[[ ${2:-} == --all-variants ]] && variants+=(lib64-minimal lib64-split)
cxx=${CXX:-g++}
flags=(-std=c++17 -O0 -fPIC -shared -pthread -Wall -Wextra -Werror -fvisibility=hidden)

pids=()
# compile OUTPUT SOURCE [FLAGS...]: in the background, unless OUTPUT is newer than the sources.
compile() {
  local output=$1 source=$2
  shift 2
  if [[ -f $output && -z $(find "$src" \( -name '*.cc' -o -name '*.h' \) -newer "$output" -print -quit) ]]; then
    return
  fi
  "$cxx" "${flags[@]}" "$src/$source" "$@" -o "$output" &
  pids+=($!)
}
await() {
  local status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  pids=()
  [[ $status -eq 0 ]] || { echo "build-fake-cann.sh: compilation failed" >&2; exit 1; }
}

for variant in "${variants[@]}"; do
  mkdir -p "$out/$variant"
  defines=()
  [[ $variant == lib64-minimal ]] && defines=(-DFAKE_CANN_MINIMAL)
  compile "$out/$variant/libascendcl.so" fake_acl.cc "${defines[@]}"
done
await  # the collective libraries link against libascendcl.so
for variant in "${variants[@]}"; do
  dir=$out/$variant
  link=(-L"$dir" -lascendcl '-Wl,-rpath,$ORIGIN')
  case $variant in
    lib64-minimal) compile "$dir/libhccl.so" fake_hccl.cc -DFAKE_CANN_MINIMAL "${link[@]}" ;;
    lib64-split)
      compile "$dir/libhccl.so" fake_hccl.cc -DFAKE_CANN_COLLECTIVES_ONLY "${link[@]}"
      compile "$dir/libhcomm.so" fake_hccl.cc -DFAKE_CANN_COMM_MANAGEMENT_ONLY "${link[@]}" ;;
    *)
      compile "$dir/libhccl.so" fake_hccl.cc "${link[@]}"
      compile "$dir/liblcal.so" fake_lcal.cc "${link[@]}" ;;
  esac
done
await
