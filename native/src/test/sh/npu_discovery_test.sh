#!/usr/bin/env bash
# Tests bin/npugather-npu-discovery: the JSON it prints for Spark's resource discovery.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)
script="$root/bin/npugather-npu-discovery"
passed=0
failed=0
expect() {
  local name=$1 want=$2 got=$3
  if [[ $got == "$want" ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL $name: got '$got', want '$want'"
  fi
}
expect "visible devices are reported in order" '{"name": "npu", "addresses": ["0","2","3"]}' \
  "$(ASCEND_RT_VISIBLE_DEVICES=0,2,3 "$script")"
expect "spaces in the list are ignored" '{"name": "npu", "addresses": ["4","5"]}' \
  "$(ASCEND_RT_VISIBLE_DEVICES='4, 5' "$script")"
expect "the resource name is the first argument" '{"name": "ascend", "addresses": ["1"]}' \
  "$(ASCEND_RT_VISIBLE_DEVICES=1 "$script" ascend)"
if ASCEND_RT_VISIBLE_DEVICES=0,x "$script" > /dev/null 2>&1; then
  failed=$((failed + 1)); echo "FAIL a non-numeric id must be an error"
else
  passed=$((passed + 1))
fi
# Without the variable, npu-smi or /dev/davinci* decide; on a machine with neither: no devices.
if ! command -v npu-smi > /dev/null 2>&1 && ! compgen -G '/dev/davinci[0-9]*' > /dev/null; then
  expect "no NPU, no addresses" '{"name": "npu", "addresses": []}' "$(env -u ASCEND_RT_VISIBLE_DEVICES "$script")"
fi
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
