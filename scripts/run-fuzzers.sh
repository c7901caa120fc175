#!/usr/bin/env bash
# Runs every fuzzer in a build dir for N seconds each, from a seed corpus, as
# many at once as there are cores (FUZZ_JOBS to change): each is one process,
# so a 2-core CI machine fuzzes two at a time. A crash fails the run and its
# reproducer stays in the build dir (crash-*); the output of each fuzzer is
# printed whole when it fails, its last lines when it passes.
set -euo pipefail
dir=$(realpath "$1")
seconds=${2:-30}
jobs=${FUZZ_JOBS:-$(nproc)}
logs="$dir/fuzz-logs"
mkdir -p "$logs"

run_one() {
  local f=$1 seconds=$2 dir=$3 logs=$4
  local name corpus
  name=$(basename "$f")
  corpus="$dir/corpus/$name"
  mkdir -p "$corpus"
  [ -d "fuzz/corpus/$name" ] && cp -n fuzz/corpus/"$name"/* "$corpus"/ 2>/dev/null || true
  if (cd "$dir" && "$f" -max_total_time="$seconds" -print_final_stats=0 "$corpus") \
      >"$logs/$name.log" 2>&1; then
    echo "fuzzed $name for ${seconds}s: $(tail -n 1 "$logs/$name.log")"
  else
    echo "FAILED: $name (${seconds}s)"
    cat "$logs/$name.log"
    return 1
  fi
}
export -f run_one

fuzzers=()
for f in "$dir"/fuzz/*_fuzz; do
  [ -x "$f" ] && fuzzers+=("$(realpath "$f")")
done
[ ${#fuzzers[@]} -gt 0 ] || { echo "no fuzzers in $dir/fuzz" >&2; exit 1; }
printf '%s\n' "${fuzzers[@]}" |
  xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {} "$seconds" "$dir" "$logs"
