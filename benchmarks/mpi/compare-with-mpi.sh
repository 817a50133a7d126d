#!/usr/bin/env bash
# compare-with-mpi.sh: runs bin/allgather-perf and Open MPI's MPI_Allgather
# (mpi_allgather_perf.c) side by side on this machine and prints one table per
# rank count.
#
# Both tools sweep the same per-rank sizes with the same method (median over
# iterations of the slowest rank's time, every byte checked). Each tool runs
# --repeats times, alternating ours/MPI, and the table shows per size the
# median of the per-run medians. busbw is derived from that time. With --fresh
# every size gets a new set of processes (ours and MPI alternate per size), so
# nothing is warm from the size before.
#
# Open MPI is a benchmark reference only; the project does not depend on it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
repeats=3
ranks_list=2
min_bytes=64K
max_bytes=64M
iters=20
warmup=5
transport=auto
launch=processes
fresh=0
hosts=1
bind=auto
mpi_args=()
out_dir=""

usage() {
  cat <<'USAGE'
usage: benchmarks/mpi/compare-with-mpi.sh [options]
  --repeats R          runs of each tool, interleaved (default 3)
  --ranks N[,N...]     processes per tool, one table per count (default 2; e.g. 2,3,4,8);
                       mpirun gets --oversubscribe when N exceeds the CPUs
  --launch L           allgather-perf --launch: processes or threads (default processes;
                       MPI ranks are always processes)
  --min-bytes SIZE     smallest per-rank size (default 64K)
  --max-bytes SIZE     largest per-rank size (default 64M)
  --iters N            timed iterations per size (default 20)
  --warmup N           untimed iterations per size (default 5)
  --fresh              a new set of processes for every size and run (default: one sweep per run)
  --bind B             auto, cores or none: both tools bind each rank to its own CPU (cores) or
                       not at all (none); auto (default) does what mpirun does by default: cores
                       for up to 2 ranks, none above (one socket here) and when oversubscribed
  --hosts H            simulated hosts (network namespaces on a bridge, as the tests make; root and
                       `ip` needed): rank r on host r mod H for both tools; ours gets --hosts H
                       (tcp-hier), Open MPI one orted per namespace through an rsh agent that
                       enters it, with TCP between hosts and vader within one (default 1: none)
  --transport T        allgather-perf --transport: auto, tcp, ring, log-n or staging (default
                       auto); tcp (log-N up to 256 KiB of output from 4 ranks on, else the ring),
                       ring and log-n (either at every size) also restrict Open MPI to its TCP
                       BTL (--mca btl tcp,self)
  --mpi-arg ARG        extra mpirun argument, repeatable (e.g. --mpi-arg --bind-to --mpi-arg none)
  --out DIR            keep the raw CSV of every run in DIR
                       (default native/target/perf/compare-<time>)
Needs Open MPI (Debian: apt-get install -y openmpi-bin libopenmpi-dev).
USAGE
}

while (($#)); do
  case "$1" in
    --repeats | --ranks | --launch | --hosts | --bind | --min-bytes | --max-bytes | --iters | --warmup | --transport | --mpi-arg | --out)
      if (($# < 2)); then
        echo "compare-with-mpi: $1 needs a value" >&2
        exit 2
      fi
      ;;
  esac
  case "$1" in
    --repeats) repeats="$2"; shift ;;
    --ranks) ranks_list="$2"; shift ;;
    --launch) launch="$2"; shift ;;
    --min-bytes) min_bytes="$2"; shift ;;
    --max-bytes) max_bytes="$2"; shift ;;
    --iters) iters="$2"; shift ;;
    --warmup) warmup="$2"; shift ;;
    --fresh) fresh=1 ;;
    --hosts) hosts="$2"; shift ;;
    --bind) bind="$2"; shift ;;
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
if [[ ! "$ranks_list" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]]; then
  echo "compare-with-mpi: invalid value '$ranks_list' for --ranks: expected positive integers separated by commas" >&2
  exit 2
fi
if [[ "$launch" != processes && "$launch" != threads ]]; then
  echo "compare-with-mpi: invalid value '$launch' for --launch: expected processes or threads" >&2
  exit 2
fi
if [[ "$bind" != auto && "$bind" != cores && "$bind" != none ]]; then
  echo "compare-with-mpi: invalid value '$bind' for --bind: expected auto, cores or none" >&2
  exit 2
fi
if [[ ! "$hosts" =~ ^[1-9][0-9]*$ ]]; then
  echo "compare-with-mpi: invalid value '$hosts' for --hosts: expected a positive integer" >&2
  exit 2
fi
if ((hosts > 1)) && [[ "$launch" != processes ]]; then
  echo "compare-with-mpi: --hosts $hosts needs --launch processes (got '$launch')" >&2
  exit 2
fi
IFS=, read -r -a rank_counts <<<"$ranks_list"

# Bytes of a SIZE (K/M/G are powers of 1024), for the per-size runs of --fresh.
size_bytes() {
  local v="$1" n unit
  if [[ ! "$v" =~ ^([0-9]+)([KkMmGg]?)$ ]]; then
    echo "compare-with-mpi: invalid size '$v': expected bytes with an optional K, M or G suffix" >&2
    exit 2
  fi
  n="${BASH_REMATCH[1]}"
  unit="${BASH_REMATCH[2]}"
  case "$unit" in
    K | k) n=$((n << 10)) ;;
    M | m) n=$((n << 20)) ;;
    G | g) n=$((n << 30)) ;;
  esac
  echo "$n"
}
min_b="$(size_bytes "$min_bytes")"
max_b="$(size_bytes "$max_bytes")"

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

mpi_transport=()
if [[ "$transport" == tcp || "$transport" == ring || "$transport" == log-n ]]; then
  mpi_transport=(--mca btl tcp,self)
fi
sizes=("$min_bytes:$max_bytes")
if ((fresh)); then
  sizes=()
  for ((s = min_b; s <= max_b; s *= 2)); do sizes+=("$s:$s"); done
fi

# Simulated hosts for Open MPI: namespace i has address $subnet.(i+2) on a bridge at $subnet.1
# (allgather-perf --hosts makes its own alike). mpirun starts one orted per host through the
# rsh agent below, which enters the host's network namespace and gives it its own host name,
# so that Open MPI sees separate nodes: vader within one, TCP over the bridge between them.
mpi_hosts=()
if ((hosts > 1)); then
  if [[ "$(id -u)" != 0 ]] || ! command -v ip >/dev/null 2>&1; then
    echo "compare-with-mpi: --hosts needs root and the ip command (iproute2)" >&2
    exit 2
  fi
  tag="c$$"
  bridge="npgcb$$"
  subnet=""
  used="$(ip -4 -o addr show)"
  for ((try = 0; try < 100; try++)); do
    candidate="10.$((100 + RANDOM % 150)).$((RANDOM % 250))"
    if [[ "$used" != *" $candidate."* ]]; then subnet="$candidate"; break; fi
  done
  [[ -n "$subnet" ]] || { echo "compare-with-mpi: no free 10.x.y.0/24 subnet" >&2; exit 1; }
  remove_hosts() {
    for ((h = 0; h < hosts; h++)); do ip netns del "npg$tag-$h" 2>/dev/null || true; done
    ip link del "$bridge" 2>/dev/null || true
  }
  trap remove_hosts EXIT
  ip link add "$bridge" type bridge
  ip addr add "$subnet.1/24" dev "$bridge"
  ip link set "$bridge" up
  agent="$out_dir/enter-host.sh"
  {
    echo '#!/bin/sh'
    echo '# rsh agent of mpirun: runs the command in the network namespace of the host address $1.'
    echo 'host="$1"; shift'
    echo 'case "$host" in'
  } >"$agent"
  slots=0  # ranks per host of the largest rank count
  for r in "${rank_counts[@]}"; do slots=$((slots > (r + hosts - 1) / hosts ? slots : (r + hosts - 1) / hosts)); done
  host_list=""
  for ((h = 0; h < hosts; h++)); do
    ns="npg$tag-$h"
    ip netns add "$ns"
    ip link add "npgcv$$-$h" type veth peer name eth0 netns "$ns"
    ip link set "npgcv$$-$h" master "$bridge" up
    ip -n "$ns" addr add "$subnet.$((h + 2))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    echo "  $subnet.$((h + 2))) exec ip netns exec $ns unshare --uts sh -c \"hostname $ns; \$*\" ;;" >>"$agent"
    host_list+="${host_list:+,}$subnet.$((h + 2)):$slots"
  done
  echo '  *) echo "enter-host: unknown host $host" >&2; exit 1 ;;' >>"$agent"
  echo 'esac' >>"$agent"
  chmod +x "$agent"
  mpi_hosts=(--mca plm_rsh_agent "$agent" --host "$host_list" --map-by node --mca btl_tcp_if_include "$subnet.0/24"
    --mca oob_tcp_if_include "$subnet.0/24")
  if ((${#mpi_transport[@]} == 0)); then mpi_transport=(--mca btl tcp,vader,self); fi
fi

# Other work on the machine skews both tools; say how busy it was.
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
status=0

# Runs one tool once; $1 is the CSV name, the rest the command.
run_one() {
  local name="$1"
  shift
  echo "# $name: $*" >>"$out_dir/commands.txt"
  if ! "$@" >"$out_dir/$name.csv" 2>"$out_dir/$name.err"; then
    echo "compare-with-mpi: run $name failed:" >&2
    cat "$out_dir/$name.err" >&2
    status=1
  fi
}

for ranks in "${rank_counts[@]}"; do
  oversubscribe=()
  if ((ranks > $(nproc))); then oversubscribe=(--oversubscribe); fi
  ours_hosts=()
  if ((hosts > 1)); then ours_hosts=(--hosts "$hosts"); fi
  binding="$bind"
  if [[ "$binding" == auto ]]; then
    binding=none
    if ((ranks <= 2 && ranks <= $(nproc) && hosts == 1)); then binding=cores; fi
  fi
  mpi_bind=(--bind-to core)
  if [[ "$binding" == none ]]; then mpi_bind=(--bind-to none); fi
  for ((r = 1; r <= repeats; r++)); do
    for range in "${sizes[@]}"; do
      lo="${range%:*}"
      hi="${range#*:}"
      common=(--min-bytes "$lo" --max-bytes "$hi" --iters "$iters" --warmup "$warmup" --csv)
      echo "# ranks $ranks, run $r/$repeats, sizes $lo..$hi" >&2
      run_one "ours.n$ranks.r$r.s$lo" "$root/bin/allgather-perf" --launch "$launch" --ranks "$ranks" \
        --bind "$binding" --transport "$transport" "${ours_hosts[@]}" "${common[@]}"
      run_one "mpi.n$ranks.r$r.s$lo" mpirun -np "$ranks" "${oversubscribe[@]}" "${mpi_bind[@]}" "${mpi_hosts[@]}" \
        "${mpi_transport[@]}" "${mpi_args[@]}" "$mpi_bin" "${common[@]}"
    done
  done
done

echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
# Globs, not `ls | head`: head closing the pipe early fails the pipeline under pipefail.
ours_csvs=("$out_dir"/ours.*.csv)
mpi_csvs=("$out_dir"/mpi.*.csv)
first_ours="${ours_csvs[0]}"
first_mpi="${mpi_csvs[0]}"
grep -h '^# allgather-perf' "$first_ours" || true
grep -h '^# mpi_allgather_perf' "$first_mpi" || true
if [[ "$transport" == tcp || "$transport" == ring || "$transport" == log-n ]]; then
  echo "# Open MPI restricted to BTL tcp,self"
elif command -v ompi_info >/dev/null 2>&1; then
  mech="$(ompi_info --param btl vader --level 3 2>/dev/null |
    sed -n 's/.*btl_vader_single_copy_mechanism" (current value: "\([^"]*\)".*/\1/p')"
  echo "# Open MPI default for on-host ranks: BTL vader, single-copy mechanism ${mech:-unknown} (--mpi-arg may override)"
fi
if ((hosts > 1)); then
  within="vader within a host, TCP between hosts"
  if [[ "${mpi_transport[*]}" == *"tcp,self"* ]]; then within="TCP between every pair"; fi
  echo "# $hosts simulated hosts (network namespaces on a bridge), rank r on host r mod $hosts; Open MPI: $within"
fi
mode="one sweep per run"
if ((fresh)); then mode="new processes for every size and run"; fi
echo "# ours launched as $launch; $repeats runs per tool, interleaved, $mode; per size the median of the per-run medians"
echo "# commands: $out_dir/commands.txt; raw: $out_dir"

for ranks in "${rank_counts[@]}"; do
  echo "## ranks $ranks"
  # Joins the CSVs: per size the median time of each tool, the wrong bytes summed.
  awk -F, -v ranks="$ranks" '
    function med(list,   n, a, i, j, t) {
      n = split(list, a, " ")
      for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    FNR == 1 { tool = (FILENAME ~ /\/ours\.[^\/]*\.csv$/) ? "ours" : "mpi" }
    /^#/ || /^size/ || NF < 7 { next }
    {
      size = $1 + 0
      if (!(size in seen)) { seen[size] = 1; sizes[++ns] = size }
      t[tool, size] = t[tool, size] " " ($4 + 0)
      w[tool, size] += $7
    }
    END {
      for (i = 2; i <= ns; i++) { v = sizes[i]; for (j = i - 1; j >= 1 && sizes[j] > v; j--) sizes[j + 1] = sizes[j]; sizes[j + 1] = v }
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
  ' "$out_dir"/ours.n"$ranks".*.csv "$out_dir"/mpi.n"$ranks".*.csv || status=1
done
exit "$status"
