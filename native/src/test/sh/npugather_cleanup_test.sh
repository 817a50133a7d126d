#!/usr/bin/env bash
# Tests bin/npugather-cleanup against a scratch directory standing in for /dev/shm.
# Last line: "N passed, N failed"; exit status non-zero when any check failed.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
cleanup="$root/bin/npugather-cleanup"
passed=0
failed=0

check() {  # check DESCRIPTION COMMAND...
  local what="$1"
  shift
  if "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $what" >&2
  fi
}

scratch="$(mktemp -d)"
outside="$(mktemp -d)"
trap 'rm -rf "$scratch" "$outside"' EXIT
export NPUGATHER_SHM_DIR="$scratch"
export ATB_SHARE_MEMORY_NAME_SUFFIX="job.7/a"  # the core keeps job7a
suffix="job7a"
id="00c0ffee1a2b3c4d"

# A pid that certainly ran and has exited: our own reaped child.
sleep 0 &
dead=$!
wait "$dead"
if [[ -e "/proc/$dead" ]]; then
  echo "cannot get a dead pid (pid $dead was reused at once)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi

stale="$scratch/npugather.$dead.$id.perf.$suffix"
stale_default="$scratch/npugather.$dead.ffffffffffffffff.default.$suffix"
no_suffix="$scratch/npugather.$dead.$id.perf."
live="$scratch/npugather.$$.$id.perf.$suffix"
other_suffix="$scratch/npugather.$dead.$id.perf.someone_else"
empty_domain="$scratch/npugather.$dead.$id..$suffix"
short_id="$scratch/npugather.$dead.1a2b3c.perf.$suffix"
unrelated="$scratch/unrelated.$dead"
odd_shape="$scratch/npugather.$dead.not-hex!.perf.$suffix"
link="$scratch/npugather.$dead.0000000000000abc.perf.$suffix"
link_target="$outside/target"
dir_like="$scratch/npugather.$dead.0000000000000def.perf.$suffix"
for f in "$stale" "$stale_default" "$no_suffix" "$live" "$other_suffix" "$empty_domain" \
  "$short_id" "$unrelated" "$odd_shape" "$link_target"; do
  printf 'x' >"$f"
done
ln -s "$link_target" "$link"
mkdir "$dir_like"
# Another user's stale object; only root can create one to test with.
foreign="$scratch/npugather.$dead.000000000000abcd.perf.$suffix"
if [[ "$(id -u)" == 0 ]] && printf 'x' >"$foreign" && chown 65534 "$foreign"; then
  have_foreign=1
else
  rm -f "$foreign"
  have_foreign=0
fi

all_kept() {
  [[ -f "$stale" && -f "$stale_default" && -f "$no_suffix" && -f "$live" && -f "$other_suffix" && \
    -f "$empty_domain" && -f "$short_id" && -f "$unrelated" && -f "$odd_shape" && -L "$link" && -f "$link_target" && -d "$dir_like" ]]
}

# --help and a bad option.
check "--help exits 0" "$cleanup" --help >/dev/null
"$cleanup" --bogus >/dev/null 2>&1
check "unknown option exits 2" test $? -eq 2

# Dry run: lists the stale ones, removes nothing.
out="$("$cleanup" --dry-run)"
rc=$?
check "dry run exits 0" test "$rc" -eq 0
check "dry run lists the stale object" grep -qxF "would remove $stale" <<<"$out"
check "dry run lists the stale object of the default domain" \
  grep -qxF "would remove $stale_default" <<<"$out"
check "dry run lists nothing else" test "$(grep -c '^would remove ' <<<"$out")" -eq 2
check "dry run prints a summary" grep -q '^npugather-cleanup: would remove 2 stale object' <<<"$out"
check "dry run removes nothing" all_kept

# Another suffix via --suffix matches only that suffix's stale object.
out="$("$cleanup" --dry-run --suffix someone_else)"
check "--suffix selects the other suffix" grep -qxF "would remove $other_suffix" <<<"$out"
check "--suffix lists nothing else" test "$(grep -c '^would remove ' <<<"$out")" -eq 1

# Real run: only the stale objects of our suffix go.
out="$("$cleanup")"
rc=$?
check "real run exits 0" test "$rc" -eq 0
check "real run reports the removal" grep -qxF "removed $stale" <<<"$out"
check "stale object removed" test ! -e "$stale"
check "stale object of the default domain removed" test ! -e "$stale_default"
check "live creator kept" test -f "$live"
check "other suffix kept" test -f "$other_suffix"
check "unrelated file kept" test -f "$unrelated"
check "odd shape kept" test -f "$odd_shape"
check "empty domain (not a core name) kept" test -f "$empty_domain"
check "short comm id (not a core name) kept" test -f "$short_id"
check "object without a suffix kept" test -f "$no_suffix"
check "symlink kept" test -L "$link"
check "symlink target kept" test -f "$link_target"
check "directory kept" test -d "$dir_like"
if ((have_foreign)); then
  check "another user's object kept" test -f "$foreign"
fi
check "summary counts 2" grep -q '^npugather-cleanup: removed 2 stale object' <<<"$out"

# Second run finds nothing and still exits 0.
out="$("$cleanup")"
rc=$?
check "second run exits 0" test "$rc" -eq 0
check "second run removes nothing" grep -q '^npugather-cleanup: removed 0 stale object' <<<"$out"

# With no suffix set, the objects named with an empty suffix are the ones.
out="$(env -u ATB_SHARE_MEMORY_NAME_SUFFIX "$cleanup")"
check "empty suffix run reports the removal" grep -qxF "removed $no_suffix" <<<"$out"
check "empty suffix object removed" test ! -e "$no_suffix"
check "empty suffix run removes only it" grep -q '^npugather-cleanup: removed 1 stale object' <<<"$out"
check "live creator still kept" test -f "$live"

# A missing directory is not an error.
NPUGATHER_SHM_DIR="$scratch/missing" "$cleanup" >/dev/null
check "missing directory exits 0" test $? -eq 0

echo "$passed passed, $failed failed"
((failed == 0))
