#!/usr/bin/env bash
# Builds the C++ collective core (every .cc under core/ and the backend folders) into
# OUT_DIR/libnpugather_core.a with the project's strict flags. The JNI library, the
# perf tool and the C++ tests all link this one archive.
# Usage: build-core.sh OUT_DIR
set -euo pipefail
shopt -s nullglob
src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: build-core.sh OUT_DIR}
cxx=${CXX:-g++}
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
