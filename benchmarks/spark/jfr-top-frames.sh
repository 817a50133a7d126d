#!/usr/bin/env bash
# Summarises the execution samples of a JFR recording taken in Spark task threads: the methods
# most often on top of the stack (self time) and most often anywhere on it (inclusive time),
# each with its share of the task threads' samples.
#   benchmarks/spark/jfr-top-frames.sh recording.jfr [how many rows, default 25]
set -euo pipefail
recording=${1:?usage: jfr-top-frames.sh recording.jfr [rows]}
rows=${2:-25}
counts=$(jfr print --events jdk.ExecutionSample --stack-depth 128 "$recording" | awk '
  /^jdk.ExecutionSample/ { task = 0; in_stack = 0; depth = 0; split("", seen); next }
  /sampledThread = "Executor task launch/ { task = 1; next }
  /stackTrace = \[/ { in_stack = task; if (task) samples++; next }
  in_stack && /^[[:space:]]*\]/ { in_stack = 0; next }
  in_stack {
    frame = $0
    sub(/^[[:space:]]+/, "", frame); sub(/[[:space:]]+line:.*$/, "", frame); sub(/\(.*$/, "", frame)
    if (frame == "..." || frame == "") next
    if (depth++ == 0) self[frame]++
    if (!(frame in seen)) { seen[frame] = 1; inclusive[frame]++ }
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
echo "$samples samples in Spark task threads"
echo
echo "self (top of stack):"
table S
echo
echo "inclusive (anywhere on the stack):"
table I
