#!/usr/bin/env bash
# Builds the C++ collective core (every .cc under core/ and the backend folders) into
# OUT_DIR/libnpugather_core.a with the project's strict flags. The JNI library, the
# perf tool and the C++ tests all link this one archive.
#   build-core.sh OUT_DIR                      for this machine, with $CXX (default g++)
#   build-core.sh OUT_DIR linux-arm64 [required]
#                                              cross-compiled with aarch64-linux-gnu-g++ (Debian's
#                                              g++-aarch64-linux-gnu); without that compiler it says
#                                              so and builds nothing, or fails if "required"
set -euo pipefail
shopt -s nullglob
src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: build-core.sh OUT_DIR [linux-arm64 [required]]}
cxx=${CXX:-g++}
case ${2:-} in
  '') ;;
  linux-arm64)
    cxx=aarch64-linux-gnu-g++
    if ! command -v "$cxx" > /dev/null 2>&1; then
      message="$cxx not found: the jar carries no linux-arm64 library (install g++-aarch64-linux-gnu)"
      if [[ ${3:-} == required ]]; then
        echo "build-core.sh: $message" >&2
        exit 1
      fi
      echo "build-core.sh: linux-arm64 skipped, $message" >&2
      rm -rf "$out"
      exit 0
    fi ;;
  *) echo "build-core.sh: unknown platform '$2' (allowed: linux-arm64)" >&2; exit 1 ;;
esac
flags=(-std=c++17 -O2 -fPIC -pthread -Wall -Wextra -Werror -I"$src/include" -I"$src")
mkdir -p "$out/obj"

objs=()
pids=()
for file in "$src"/*/*.cc; do
  obj="$out/obj/$(basename "$(dirname "$file")")_$(basename "${file%.cc}").o"
  objs+=("$obj")
  # Rebuild when the source or any header is newer than the object.
  if [[ ! -f $obj || $file -nt $obj ]] || [[ -n $(find "$src" -name '*.h' -newer "$obj" -print -quit) ]]; then
    "$cxx" "${flags[@]}" -c "$file" -o "$obj" &
    pids+=($!)
  fi
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
[[ $status -eq 0 ]] || { echo "build-core.sh: compilation failed" >&2; exit 1; }
# Drop objects of deleted sources so the archive never carries stale code.
rm -f "$out/libnpugather_core.a"
ar rcs "$out/libnpugather_core.a" "${objs[@]}"
