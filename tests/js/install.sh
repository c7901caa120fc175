#!/usr/bin/env bash
# Installs the pinned test-only JavaScript clients (tests/js/npm) with `npm ci`, once: skipped
# when node_modules matches the lock. Concurrent callers wait on a lock.
set -euo pipefail
npm_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/npm" && pwd)
exec 9>"$npm_dir/.install.lock"
flock 9
stamp="$npm_dir/node_modules/.ringfence-lock"
if [ -f "$stamp" ] && cmp -s "$stamp" "$npm_dir/package-lock.json"; then
  exit 0
fi
npm ci --prefix "$npm_dir" --no-audit --no-fund --ignore-scripts --loglevel=error
cp "$npm_dir/package-lock.json" "$stamp"
