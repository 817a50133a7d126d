#!/usr/bin/env python3
"""Fits the host backend's all-gather cost model to compare-with-mpi.sh runs and predicts
larger shapes.

Model (Hockney form, as in Thakur, Rabenseifner and Gropp, "Optimization of Collective
Communication Operations in MPICH", 2005), per-rank block m bytes, N ranks, H hosts of
k = N / H ranks each:

  2 ranks on one host (shared memory):  a_shm + m / b_copy      (each rank copies m)
  2 ranks over TCP (loopback):          a_tcp + m / b_tcp       (each rank sends and receives m)
  flat ring over all N ranks:    (N-1) a_net + S,  S = max(k (N-1) m / B_net, (N-1) m / b_tcp)
  log-N (Bruck, ranks as peers): ceil(log2 N) a_net + S
  flat TCP as built ("tcp"):     log-N while the output N m is at most 256 KiB, else
                                 ceil(log2 N) a_net (the log-N header steps) + the ring
  hierarchical as built ("tcp-hier": k flat TCP transports of H ranks, one per local index,
  then one shared-memory round per host in which each rank copies the k-1 blocks it lacks):
                                 L + max(k (H-1) m / B_net, (H-1) m / b_tcp)
                                 + H a_shm + k (N-H) m / B_host,
                                 L = ceil(log2 H) a_net while H m <= 256 KiB (H >= 4), else
                                 (H-1 + ceil(log2 H)) a_net (the ring after the header steps)

a_shm, b_copy, a_tcp and b_tcp are fitted to the medians of the given runs (two ranks, ours):
the constant from the sizes up to 256 KiB, the rate from 4 MiB up (least squares each), because
small blocks copy from cache and large ones from memory.
B_host, the copy rate of a whole host, is 2 b_copy (the two ranks here copy at once) unless
given. a_net = a_tcp + the assumed wire latency and B_net the assumed link bandwidth: this
machine has no network. In the flat ring every byte passes through every rank's socket, and
the k ranks of a host share its link; the hierarchical line does not overlap the within-host
copies with the network, so it is an upper bound.

Usage: benchmarks/mpi/model.py (--shm DIR... --tcp DIR... | --fitted A_SHM B_COPY A_TCP B_TCP)
                               [--net-gbps 25] [--wire-us 10] [--host-copy-gbs G]
Each DIR is a compare-with-mpi.sh --out directory of a 2-rank run (ours.n2.*.csv); runs of
small and of large sizes may be given together. --fitted takes the four constants (us, GB/s,
us, GB/s) of an earlier fit instead.
"""
import argparse
import glob
import math
import os
import statistics
import sys

LOG_N_MAX_BYTES = 256 << 10  # FlatTcp::kLogNMaxBytes: the flat TCP transport's log-N limit


def medians(directories):
    """Per size, the median over all runs in the directories of ours' per-run median time (us)."""
    times = {}
    files = []
    for directory in directories:
        found = glob.glob(os.path.join(directory, "ours.n2.*.csv"))
        if not found:
            sys.exit(f"model.py: no ours.n2.*.csv in {directory} (a 2-rank compare-with-mpi.sh --out directory)")
        files += found
    for path in files:
        with open(path) as f:
            for line in f:
                fields = line.strip().split(",")
                if line.startswith("#") or line.startswith("size") or len(fields) < 7:
                    continue
                times.setdefault(int(fields[0]), []).append(float(fields[3]))
    return {size: statistics.median(ts) for size, ts in sorted(times.items())}


def line(points):
    """Least squares t = a + s m over (m, t); returns (a, s)."""
    n = len(points)
    mx = sum(m for m, _ in points) / n
    my = sum(t for _, t in points) / n
    sxx = sum((m - mx) ** 2 for m, _ in points)
    if n < 2 or sxx == 0:
        sys.exit("model.py: need at least two sizes in each range to fit")
    slope = sum((m - mx) * (t - my) for m, t in points) / sxx
    return my - slope * mx, slope


def fit(times):
    """Fits t = a + m / b: a from sizes up to 256 KiB, b from 4 MiB up; returns (a in us, b in GB/s)."""
    a, _ = line([(m, t) for m, t in times.items() if m <= 256 << 10])
    _, slope = line([(m, t) for m, t in times.items() if m >= 4 << 20])
    if slope <= 0:
        sys.exit("model.py: time does not grow with size in these runs; nothing to fit")
    return max(0.0, a), 1e-3 / slope


def predict(n, h, m, p):
    k = n // h
    a_net = p["a_tcp"] + p["wire_us"]
    b_net = p["net_gbps"] / 8 * 1e3  # bytes per us
    b_host = p["b_host"] * 1e3
    b_tcp = p["b_tcp"] * 1e3
    streamed = max(k * (n - 1) * m / b_net, (n - 1) * m / b_tcp)
    flat = (n - 1) * a_net + streamed
    steps = math.ceil(math.log2(n))
    bruck = steps * a_net + streamed
    built = bruck if n * m <= LOG_N_MAX_BYTES else steps * a_net + flat
    h_steps = math.ceil(math.log2(h))
    across = h_steps * a_net if h >= 4 and h * m <= LOG_N_MAX_BYTES else (h - 1 + h_steps) * a_net
    hier = across + max(k * (h - 1) * m / b_net, (h - 1) * m / b_tcp) + h * p["a_shm"] + k * (n - h) * m / b_host
    return flat, bruck, built, hier


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shm", nargs="+", metavar="DIR",
                    help="compare-with-mpi.sh --out dirs of 2-rank shared-memory runs")
    ap.add_argument("--tcp", nargs="+", metavar="DIR",
                    help="compare-with-mpi.sh --out dirs of 2-rank --transport tcp runs")
    ap.add_argument("--fitted", nargs=4, type=float, metavar=("A_SHM", "B_COPY", "A_TCP", "B_TCP"),
                    help="constants of an earlier fit instead of --shm and --tcp")
    ap.add_argument("--net-gbps", type=float, default=25.0, help="assumed link bandwidth, Gbit/s (default 25)")
    ap.add_argument("--wire-us", type=float, default=10.0, help="assumed wire and switch latency per hop, us (default 10)")
    ap.add_argument("--host-copy-gbs", type=float, default=0.0,
                    help="copy rate of one host, GB/s (default: twice the fitted per-rank rate)")
    args = ap.parse_args()
    if args.net_gbps <= 0 or args.wire_us < 0 or args.host_copy_gbs < 0:
        sys.exit(f"model.py: --net-gbps must be > 0 (got {args.net_gbps:g}), --wire-us >= 0 (got {args.wire_us:g}) "
                 f"and --host-copy-gbs >= 0 (got {args.host_copy_gbs:g})")

    if args.fitted:
        a_shm, b_copy, a_tcp, b_tcp = args.fitted
        if b_copy <= 0 or b_tcp <= 0:
            sys.exit("model.py: --fitted rates must be > 0")
        shm = tcp = {}
    elif args.shm and args.tcp:
        shm = medians(args.shm)
        tcp = medians(args.tcp)
        a_shm, b_copy = fit(shm)
        a_tcp, b_tcp = fit(tcp)
    else:
        sys.exit("model.py: give --shm and --tcp run directories, or --fitted")
    p = {"a_shm": a_shm, "b_copy": b_copy, "a_tcp": a_tcp, "b_tcp": b_tcp,
         "net_gbps": args.net_gbps, "wire_us": args.wire_us, "b_host": args.host_copy_gbs or 2 * b_copy}
    source = "given" if args.fitted else "fitted"
    print(f"{source}: a_shm = {a_shm:.1f} us, b_copy = {b_copy:.2f} GB/s (shared memory, {len(shm)} sizes)")
    print(f"{source}: a_tcp = {a_tcp:.1f} us, b_tcp = {b_tcp:.2f} GB/s (loopback TCP, {len(tcp)} sizes)")
    print(f"assumed: link {args.net_gbps:g} Gbit/s, wire latency {args.wire_us:g} us per hop, "
          f"host copy rate {p['b_host']:.2f} GB/s, {8} ranks per host")
    print()
    print("| ranks | hosts | block | flat ring (ms) | log-N (ms) | flat TCP as built (ms) | hierarchical (ms) "
          "| flat ring / hierarchical |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for m, label in ((1 << 10, "1 KiB"), (64 << 10, "64 KiB"), (16 << 20, "16 MiB")):
        for n, h in ((64, 8), (128, 16), (256, 32), (512, 64), (1024, 128)):
            flat, bruck, built, hier = predict(n, h, m, p)
            print(f"| {n} | {h} | {label} | {flat / 1e3:.2f} | {bruck / 1e3:.2f} | {built / 1e3:.2f} "
                  f"| {hier / 1e3:.2f} | {flat / hier:.1f} |")


if __name__ == "__main__":
    main()
