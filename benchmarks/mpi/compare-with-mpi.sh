#!/usr/bin/env bash
# compare-with-mpi.sh: runs bin/allgather-perf and Open MPI's MPI_Allgather
# (mpi_allgather_perf.c) side by side on this machine and prints one table.
#
# Both tools sweep the same per-rank sizes with the same method (median over
# iterations of the slowest rank's time, every byte checked). Each tool runs
# --repeats times, alternating ours/MPI, and the table shows per size the
# median of the per-run medians. busbw is derived from that time.
#
# Open MPI is a benchmark reference only; the project does not depend on it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
repeats=3
ranks=2
min_bytes=64K
max_bytes=64M
iters=20
warmup=5
transport=auto
mpi_args=()
out_dir=""

usage() {
  cat <<'USAGE'
usage: benchmarks/mpi/compare-with-mpi.sh [options]
  --repeats R          runs of each tool, interleaved (default 3)
  --ranks N            processes per tool (default 2)
  --min-bytes SIZE     smallest per-rank size (default 64K)
  --max-bytes SIZE     largest per-rank size (default 64M)
  --iters N            timed iterations per size (default 20)
  --warmup N           untimed iterations per size (default 5)
  --transport T        allgather-perf --transport: auto, tcp or staging (default auto)
  --mpi-arg ARG        extra mpirun argument, repeatable (e.g. --mpi-arg --bind-to --mpi-arg none)
  --out DIR            keep the raw CSV of every run in DIR
                       (default native/target/perf/compare-<time>)
Needs Open MPI (Debian: apt-get install -y openmpi-bin libopenmpi-dev).
USAGE
}

while (($#)); do
  case "$1" in
    --repeats | --ranks | --min-bytes | --max-bytes | --iters | --warmup | --transport | --mpi-arg | --out)
      if (($# < 2)); then
        echo "compare-with-mpi: $1 needs a value" >&2
        exit 2
      fi
      ;;
  esac
  case "$1" in
    --repeats) repeats="$2"; shift ;;
    --ranks) ranks="$2"; shift ;;
    --min-bytes) min_bytes="$2"; shift ;;
    --max-bytes) max_bytes="$2"; shift ;;
    --iters) iters="$2"; shift ;;
    --warmup) warmup="$2"; shift ;;
    --transport) transport="$2"; shift ;;
    --mpi-arg) mpi_args+=("$2"); shift ;;
    --out) out_dir="$2"; shift ;;
    --help | -h) usage; exit 0 ;;
    *) echo "compare-with-mpi: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
if [[ ! "$repeats" =~ ^[1-9][0-9]*$ ]]; then
  echo "compare-with-mpi: invalid value '$repeats' for --repeats: expected a positive integer" >&2
  exit 2
fi

if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
  cat >&2 <<'MSG'
compare-with-mpi: Open MPI is not installed (mpicc/mpirun not found), so there is
nothing to compare with. It is a benchmark reference only; the project does not
depend on it. To install it on Debian/Ubuntu (as root):
    apt-get update && apt-get install -y openmpi-bin libopenmpi-dev
MSG
  exit 3
fi

if [[ "$(id -u)" == 0 ]]; then
  # Open MPI refuses to run as root unless told twice.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

perf_dir="$root/native/target/perf"
mkdir -p "$perf_dir"
out_dir="${out_dir:-$perf_dir/compare-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out_dir"

mpi_bin="$perf_dir/mpi_allgather_perf"
mpi_src="$root/benchmarks/mpi/mpi_allgather_perf.c"
if [[ ! -x "$mpi_bin" || "$mpi_src" -nt "$mpi_bin" ]]; then
  echo "compare-with-mpi: building $mpi_bin" >&2
  mpicc -O2 -Wall -Wextra -Werror -o "$mpi_bin" "$mpi_src"
fi
"$root/bin/allgather-perf" --help >/dev/null  # builds it if needed

common=(--min-bytes "$min_bytes" --max-bytes "$max_bytes" --iters "$iters" --warmup "$warmup" --csv)
ours_cmd=("$root/bin/allgather-perf" --launch processes --ranks "$ranks" --transport "$transport"
  "${common[@]}")
mpi_cmd=(mpirun -np "$ranks" "${mpi_args[@]}" "$mpi_bin" "${common[@]}")

# Other work on the machine skews both tools; say how busy it was.
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
echo "# ours: ${ours_cmd[*]}"
echo "# mpi:  ${mpi_cmd[*]}"
status=0
for ((r = 1; r <= repeats; r++)); do
  echo "# run $r/$repeats: allgather-perf" >&2
  if ! "${ours_cmd[@]}" >"$out_dir/ours.$r.csv" 2>"$out_dir/ours.$r.err"; then
    echo "compare-with-mpi: allgather-perf run $r failed:" >&2
    cat "$out_dir/ours.$r.err" >&2
    status=1
  fi
  echo "# run $r/$repeats: mpi_allgather_perf" >&2
  if ! "${mpi_cmd[@]}" >"$out_dir/mpi.$r.csv" 2>"$out_dir/mpi.$r.err"; then
    echo "compare-with-mpi: mpi_allgather_perf run $r failed:" >&2
    cat "$out_dir/mpi.$r.err" >&2
    status=1
  fi
done

echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -h '^# allgather-perf' "$out_dir/ours.1.csv" || true
grep -h '^# mpi_allgather_perf' "$out_dir/mpi.1.csv" || true
if command -v ompi_info >/dev/null 2>&1; then
  mech="$(ompi_info --param btl vader --level 3 2>/dev/null |
    sed -n 's/.*btl_vader_single_copy_mechanism" (current value: "\([^"]*\)".*/\1/p')"
  echo "# Open MPI default for on-host ranks: BTL vader, single-copy mechanism ${mech:-unknown} (--mpi-arg may override)"
fi
echo "# $repeats runs per tool, interleaved; per size the median of the per-run medians; raw: $out_dir"

# Joins the CSVs: per size the median time of each tool, the wrong bytes summed.
awk -F, -v ranks="$ranks" '
  function med(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  FNR == 1 { tool = (FILENAME ~ /\/ours\.[0-9]+\.csv$/) ? "ours" : "mpi" }
  /^#/ || /^size/ || NF < 7 { next }
  {
    size = $1 + 0
    if (!(size in seen)) { seen[size] = 1; sizes[++ns] = size }
    t[tool, size] = t[tool, size] " " ($4 + 0)
    w[tool, size] += $7
  }
  END {
    printf("%12s %12s %12s %11s %11s %11s %11s %8s %8s\n", "size(B/rank)", "ours(us)", "mpi(us)",
      "ours_busbw", "mpi_busbw", "busbw o/m", "time o/m", "wrong_o", "wrong_m")
    for (i = 1; i <= ns; i++) {
      s = sizes[i]
      ko = "ours" SUBSEP s; km = "mpi" SUBSEP s
      to = (ko in t) ? med(t[ko]) : 0
      tm = (km in t) ? med(t[km]) : 0
      bo = to > 0 ? s * ranks / (to * 1e3) * (ranks - 1) / ranks : 0
      bm = tm > 0 ? s * ranks / (tm * 1e3) * (ranks - 1) / ranks : 0
      rb = (bm > 0) ? bo / bm : 0
      rt = (tm > 0) ? to / tm : 0
      printf("%12d %12.2f %12.2f %11.3f %11.3f %11.2f %11.2f %8d %8d\n", s, to, tm, bo, bm, rb, rt,
        w[ko], w[km])
      if (s == 65536 && tm > 0) t64 = sprintf("%.2f", to / tm)
      if (w[ko] + w[km] > 0) bad = 1
    }
    if (t64 != "") printf("# time ratio ours/MPI at 64 KiB: %s (below 1 means ours is faster)\n", t64)
    printf("# busbw o/m above 1 means ours is faster\n")
    exit bad
  }
' "$out_dir"/ours.*.csv "$out_dir"/mpi.*.csv || status=1
exit "$status"
