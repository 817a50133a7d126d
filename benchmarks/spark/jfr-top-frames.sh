#!/usr/bin/env bash
# Summarises the execution samples of a JFR recording taken in Spark task threads: the methods
# most often on top of the stack (self time) and most often anywhere on it (inclusive time),
# each with its share of the samples counted. With a pattern (an awk regular expression), only
# the samples with a frame matching it count, e.g. 'NpuMethod|NpuAllGatherExec' for the npu
# method's tasks without the benchmark's set-up.
#   benchmarks/spark/jfr-top-frames.sh recording.jfr [rows, default 25] [pattern]
set -euo pipefail
recording=${1:?usage: jfr-top-frames.sh recording.jfr [rows] [pattern]}
rows=${2:-25}
pattern=${3:-.}
counts=$(jfr print --events jdk.ExecutionSample --stack-depth 128 "$recording" | awk -v pattern="$pattern" '
  /^jdk.ExecutionSample/ { task = 0; in_stack = 0; n = 0; next }
  /sampledThread = "Executor task launch/ { task = 1; next }
  /stackTrace = \[/ { in_stack = task; next }
  in_stack && /^[[:space:]]*\]/ {
    in_stack = 0
    keep = 0
    for (i = 1; i <= n; i++) if (frames[i] ~ pattern) keep = 1
    if (!keep || n == 0) next
    samples++
    self[frames[1]]++
    split("", seen)
    for (i = 1; i <= n; i++) if (!(frames[i] in seen)) { seen[frames[i]] = 1; inclusive[frames[i]]++ }
    next
  }
  in_stack {
    frame = $0
    sub(/^[[:space:]]+/, "", frame); sub(/[[:space:]]+line:.*$/, "", frame); sub(/\(.*$/, "", frame)
    if (frame != "..." && frame != "") frames[++n] = frame
  }
  END {
    print "N", samples
    for (f in self) print "S", self[f], f
    for (f in inclusive) print "I", inclusive[f], f
  }')
samples=$(awk '$1 == "N" { print $2 }' <<<"$counts")
if [[ -z $samples || $samples == 0 ]]; then
  echo "no samples from Spark task threads in $recording" >&2
  exit 1
fi
table() {
  awk -v kind="$1" '$1 == kind { print $2, $3 }' <<<"$counts" | sort -k1,1nr | head -n "$rows" \
    | awk -v n="$samples" '{ printf "%6.1f%%  %s\n", 100 * $1 / n, $2 }'
}
echo "$samples samples in Spark task threads (with a frame matching '$pattern')"
echo
echo "self (top of stack):"
table S
echo
echo "inclusive (anywhere on the stack):"
table I
