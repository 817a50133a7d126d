#!/usr/bin/env bash
# Tests benchmarks/mpi/compare-with-mpi.sh where it does not need Open MPI: every bad option
# is refused before anything runs, naming the option and the value, and a machine without
# Open MPI gets the install hint. (The comparison itself is a benchmark, run by hand.)
# Last line: "N passed, N failed"; exit status non-zero when any check failed.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
script="$root/benchmarks/mpi/compare-with-mpi.sh"
passed=0
failed=0

# expect STATUS TEXT ARGS...: the script exits with STATUS and its stderr contains TEXT.
expect() {
  local want="$1" text="$2"
  shift 2
  local err status
  err="$(bash "$script" "$@" 2>&1 >/dev/null)"
  status=$?
  if [[ "$status" == "$want" && "$err" == *"$text"* ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $* exited $status (expected $want) with: $err" >&2
  fi
}

expect 2 "invalid value '0' for --ranks" --ranks 0
expect 2 "invalid value '2,,8' for --ranks" --ranks 2,,8
expect 2 "invalid value 'x' for --repeats" --repeats x
expect 2 "invalid value 'cpus' for --bind" --bind cpus
expect 2 "invalid value 'fibers' for --launch" --launch fibers
expect 2 "invalid size '64Q'" --fresh --min-bytes 64Q
expect 2 "--ranks needs a value" --ranks
expect 2 "unknown option '--fast'" --fast

# Without mpicc/mpirun on PATH: the hint, and exit 3.
bare="$(mktemp -d)"
trap 'rm -rf "$bare"' EXIT
for tool in dirname cat; do ln -s "$(command -v "$tool")" "$bare/$tool"; done
err="$(PATH="$bare" "$(command -v bash)" "$script" 2>&1 >/dev/null)"
status=$?
if [[ "$status" == 3 && "$err" == *"apt-get install -y openmpi-bin libopenmpi-dev"* ]]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "FAIL: without Open MPI the script exited $status with: $err" >&2
fi

echo "$passed passed, $failed failed"
((failed == 0))
