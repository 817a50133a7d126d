#!/usr/bin/env bash
# Tests benchmarks/mpi/compare-with-mpi.sh where it does not need Open MPI: every bad option
# is refused before anything runs, naming the option and the value, and a machine without
# Open MPI gets the install hint (the comparison itself is a benchmark, run by hand); and
# benchmarks/mpi/model.py's fit on runs of known cost.
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
expect 2 "invalid value 'two' for --hosts" --hosts two
expect 2 "--hosts 2 needs --launch processes (got 'threads')" --hosts 2 --launch threads
expect 2 "unknown option '--fast'" --fast
# An mpirun argument that looks like an option is taken as --mpi-arg's value (docs/performance.md
# passes "-x GLIBC_TUNABLES" this way): the error is the later bad --ranks, not "-x".
expect 2 "invalid value '0' for --ranks" --mpi-arg -x --mpi-arg GLIBC_TUNABLES --ranks 0

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

# model.py recovers the constant and the rate of runs made from a known line
# (t = 5 us + m / 1 GB/s for the shared-memory runs, 40 us + m / 0.5 GB/s over TCP).
runs="$(mktemp -d)"
trap 'rm -rf "$bare" "$runs"' EXIT
mkdir "$runs/shm" "$runs/tcp"
for ((m = 4096; m <= 64 << 20; m *= 2)); do
  for kind in shm tcp; do
    awk -v m="$m" -v kind="$kind" 'BEGIN {
      t = kind == "shm" ? 5 + m / 1000 : 40 + m / 500
      printf("size_bytes_per_rank,count,type,time_us,algbw_gbps,busbw_gbps,wrong\n%d,%d,uint8,%.3f,0,0,0\n", m, m, t)
    }' >"$runs/$kind/ours.n2.r1.s$m.csv"
  done
done
fit="$(python3 "$root/benchmarks/mpi/model.py" --shm "$runs/shm" --tcp "$runs/tcp" 2>&1)"
if [[ "$fit" == *"a_shm = 5.0 us, b_copy = 1.00 GB/s"* && "$fit" == *"a_tcp = 40.0 us, b_tcp = 0.50 GB/s"* &&
  "$fit" == *"| 1024 | 128 | 16 MiB |"* ]]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "FAIL: model.py fit: $fit" >&2
fi
expect_model() {
  local err status
  err="$(python3 "$root/benchmarks/mpi/model.py" "$@" 2>&1 >/dev/null)"
  status=$?
  if [[ "$status" != 0 && "$err" == *"--net-gbps must be > 0 (got 0)"* ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: model.py $* exited $status with: $err" >&2
  fi
}
expect_model --shm "$runs/shm" --tcp "$runs/tcp" --net-gbps 0

echo "$passed passed, $failed failed"
((failed == 0))
