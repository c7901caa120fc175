#!/usr/bin/env bash
# A sandbox that lives (issue 41, docs/api.md): through `ringfence serve` and
# a worker on this machine, a sandbox with a lifetime runs a web server in
# the background, which chromium opens through a port URL of serve (a token
# for that port alone); a watch sees the page change; a build's output is
# followed, left, and followed again from its start; the sandbox is given two
# seconds more and expires, ending what ran in it, with an audit event
# saying why. Exits non-zero when something does not happen as shown (ctest
# runs it).
set -uo pipefail
build=${1:-build}
rf="$(cd "$(dirname "$build/ringfence")" && pwd)/ringfence"
js="$(cd "$(dirname "$0")/../tests/js" && pwd)"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { step "$*"; "$@"; echo "(exit $?)"; }
die() { echo "demo-session: $*" >&2; exit 1; }

dir=$(mktemp -d /tmp/ringfence-session-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT

"$js/install.sh" >"$dir/npm.log" 2>&1 || die "npm ci of the test clients failed: $(tail -5 "$dir/npm.log")"
export RINGFENCE_TOKEN=$("$rf" token create --project demo --state-dir "$dir" 2>/dev/null)
"$rf" worker start --state-dir "$dir" --sandbox-mode per_run >"$dir/worker.log" 2>&1 &
pids+=($!)
"$rf" serve --listen 127.0.0.1:0 --state-dir "$dir" >"$dir/serve.out" 2>"$dir/serve.log" &
pids+=($!)
for _ in $(seq 100); do grep -q listening "$dir/serve.out" 2>/dev/null && break; sleep 0.1; done
export RINGFENCE_API=$(sed -n 's/.*listening on //p' "$dir/serve.out" | head -1)
[ -n "$RINGFENCE_API" ] || die "serve did not start: $(cat "$dir/serve.log")"
echo "serve: $RINGFENCE_API (the project's token in RINGFENCE_TOKEN)"
api() { curl -sS -H "Authorization: Bearer $RINGFENCE_TOKEN" "$@"; }

step "$rf sandbox create --name demo --timeout 10m --cwd /workspace/site"
for _ in $(seq 100); do
  id=$("$rf" sandbox create --name demo --timeout 10m --cwd /workspace/site 2>"$dir/create.err") && break
  sleep 0.2  # until the worker's door is up
done
[ -n "${id:-}" ] || die "no sandbox: $(cat "$dir/create.err")"
echo "$id"

echo
echo "A web server in the background: it outlives this request and every later one."
api -X PUT --data-binary '<html><title>made in a sandbox</title><h1 id="msg">hello from '"$id"'</h1></html>' \
  "$RINGFENCE_API/v1/sandboxes/$id/files?path=/workspace/site/index.html" >/dev/null
run "$rf" sandbox process start --tag web "$id" -- python3 -m http.server 8000 --bind 127.0.0.1
for _ in $(seq 100); do
  [ "$(api -o /dev/null -w '%{http_code}' "$RINGFENCE_API/v1/sandboxes/$id/ports/8000/")" = 200 ] && break
  sleep 0.1
done
step "curl -X POST \$RINGFENCE_API/v1/sandboxes/$id/ports/8000:share   # a token for this port alone"
url=$(api -X POST -d '{"ttl": "10m"}' "$RINGFENCE_API/v1/sandboxes/$id/ports/8000:share" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["url"])')
echo "$url" | sed 's/rf_port_token=.*/rf_port_token=.../'
step "chromium $RINGFENCE_API${url%%\?*}?rf_port_token=...  (no API token: the port's own)"
page=$(node "$js/open_page.mjs" --url "$RINGFENCE_API$url" --selector '#msg' --screenshot "$dir/page.png") ||
  die "chromium could not open the page"
echo "$page"
echo "$page" | grep -q "hello from $id" || die "the page is not the sandbox's"

echo
echo "A watch on the site's directory sees the page change."
"$rf" sandbox watch "$id" /workspace/site >"$dir/watch.out" 2>"$dir/watch.err" &
watch=$!
for _ in $(seq 100); do
  api -X PUT --data-binary 'poke' "$RINGFENCE_API/v1/sandboxes/$id/files?path=/workspace/site/.poke" >/dev/null
  [ -s "$dir/watch.out" ] && break
  sleep 0.1
done
run "$rf" sandbox process start "$id" -- sh -c 'sed -i s/hello/changed/ index.html'
for _ in $(seq 50); do grep -q 'index.html' "$dir/watch.out" && break; sleep 0.1; done
kill "$watch"; wait "$watch" 2>/dev/null
step "$rf sandbox watch $id /workspace/site   # what it printed"
grep -v '.poke' "$dir/watch.out"
grep -q 'index.html' "$dir/watch.out" || die "the watch did not see index.html change"
node "$js/open_page.mjs" --url "$RINGFENCE_API$url" --selector '#msg' | grep -q changed ||
  die "the page did not change"

echo
echo "A build's output, followed, left, and followed again from its start."
build_pid=$("$rf" sandbox process start --tag build "$id" -- sh -c 'for i in 1 2 3 4; do echo "compiling part $i"; sleep 0.5; done; echo built')
step "$rf sandbox process logs --follow $id $build_pid   # then the client leaves"
timeout 0.8 "$rf" sandbox process logs --follow "$id" "$build_pid"
echo "(left)"
run "$rf" sandbox process list "$id"
step "$rf sandbox process logs --follow $id $build_pid   # back, from its start"
"$rf" sandbox process logs --follow "$id" "$build_pid" | tee "$dir/build.out"
echo "(exit ${PIPESTATUS[0]})"
grep -q '^built$' "$dir/build.out" || die "the build's output did not come back whole"

echo
echo "Two seconds more, then the sandbox expires: the web server ends with it."
"$rf" sandbox process logs --follow "$id" "$(api "$RINGFENCE_API/v1/sandboxes/$id/processes" |
  python3 -c 'import json,sys; print([p["pid"] for p in json.load(sys.stdin)["processes"] if p["tag"]=="web"][0])')" \
  >/dev/null 2>"$dir/web.err" &
follower=$!
run "$rf" sandbox set-timeout "$id" 2s
wait "$follower"
step "the web server's follower was told:"
cat "$dir/web.err"
grep -q 'its sandbox expired' "$dir/web.err" || die "the web server's follower was not told why it ended"
run "$rf" sandbox find --name demo
step "curl \$RINGFENCE_API/v1/audit   # sandbox.destroy"
api "$RINGFENCE_API/v1/audit" | python3 -c '
import json, sys
for e in json.load(sys.stdin)["events"]:
    if e["kind"] == "sandbox.destroy":
        print(e["kind"], e["sandbox"], e["detail"])'
api "$RINGFENCE_API/v1/audit" | grep -q '"reason":"timeout"' || die "no audit event says it timed out"
echo
echo "demo-session: done (a screenshot of the page was at $dir/page.png)"
