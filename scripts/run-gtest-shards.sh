#!/usr/bin/env bash
# Runs a googletest binary as N shards at once (GTEST_TOTAL_SHARDS), each one
# process running its share of the tests, instead of one process per test as
# ctest does. For the sanitizer builds: a 300 MB ASAN test binary takes ~1.5 s
# just to start, which one process per test paid 460 times (8 of the 15
# minutes its unit tests took in CI). Each shard's output is printed whole
# when it fails, its summary when it passes; any failure fails the run.
#   run-gtest-shards.sh BINARY [SHARDS] [TIMEOUT_SECONDS] [-- GTEST_ARGS...]
# RF_SHARD_WRAPPER: a command each shard runs under (the TSAN build's
# `setarch x86_64 -R`, as ctest's emulator does for it).
set -euo pipefail
bin=$(realpath "$1")
shards=${2:-$(nproc)}
limit=${3:-1800}
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
logs=$(mktemp -d)
pids=()
for ((i = 0; i < shards; i++)); do
  # shellcheck disable=SC2086 # the wrapper is words
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout --kill-after=10 "$limit" \
    ${RF_SHARD_WRAPPER:-} "$bin" --gtest_brief=1 "$@" >"$logs/$i.log" 2>&1 &
  pids+=($!)
done
failed=0
for ((i = 0; i < shards; i++)); do
  if wait "${pids[$i]}"; then
    echo "$(basename "$bin") shard $((i + 1))/$shards: $(grep -E '^\[  PASSED  \]' "$logs/$i.log" || echo passed)"
  else
    rc=$?
    echo "FAILED: $(basename "$bin") shard $((i + 1))/$shards (exit $rc$([ $rc = 124 ] && echo ", timed out after ${limit}s"))"
    cat "$logs/$i.log"
    failed=1
  fi
done
rm -rf "$logs"
exit $failed
