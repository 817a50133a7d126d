#!/usr/bin/env bash
# Builds the simulated CANN runtime (src/test/cpp/fake_cann: test-only libascendcl.so and
# libhccl.so on host memory) into OUT_DIR, laid out like a CANN lib64 folder. Tests outside
# the native module use it to run backend hccl without an NPU; it proves the binding only.
# Usage: build-simulated-cann.sh OUT_DIR
set -euo pipefail
out=${1:?usage: build-simulated-cann.sh OUT_DIR}
sources=$(cd "$(dirname "${BASH_SOURCE[0]}")/../cpp/fake_cann" && pwd)
mkdir -p "$out"
flags=(-std=c++17 -O1 -fPIC -shared -pthread -fvisibility=hidden -Wall -Wextra -Werror)
g++ "${flags[@]}" "$sources/fake_acl.cc" -o "$out/libascendcl.so"
g++ "${flags[@]}" "$sources/fake_hccl.cc" -L"$out" -lascendcl -Wl,-rpath,'$ORIGIN' -o "$out/libhccl.so"
