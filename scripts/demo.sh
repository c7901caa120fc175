#!/usr/bin/env bash
# The main job on the embedded defaults: untrusted code runs in a native
# sandbox (host image) and is shown contained.
set -uo pipefail
build=${1:-build}
rf="$build/ringfence"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { step "$*"; "$@"; echo "(exit $?)"; }

echo "ringfence demo: each command below runs in a fresh sandbox with every bound on."
run "$rf" sandbox exec -- python3 -c 'print(1)'
run "$rf" sandbox exec -- sh -c 'id; hostname; pwd; env'
HOST_SECRET=hunter2 run "$rf" sandbox exec -- sh -c 'echo "HOST_SECRET=${HOST_SECRET:-<not visible>}"'
run "$rf" sandbox exec -- sh -c 'cat /etc/shadow; touch /usr/bin/evil; ls /home'
run "$rf" sandbox exec -- unshare --user --map-root-user id
run "$rf" sandbox exec --mem 64m -- python3 -c 'x = bytearray(512 << 20)'
run "$rf" sandbox exec --pids 32 -- sh -c 'for i in $(seq 100); do sleep 5 & done; wait'
run "$rf" sandbox exec --timeout 1s -- sh -c 'setsid sleep 100 & sleep 100'
run "$rf" sandbox exec --json -- sh -c 'echo contained'
echo
echo "The main job: a worker (embedded SQLite store, native backend, host image, per_run)"
echo "serving tool calls that a client sends."
state=$(mktemp -d /tmp/ringfence-demo-XXXXXX)
"$rf" worker start --sandbox-mode per_run --project-environment development --state-dir "$state" &
worker=$!
sleep 1
run "$rf" call --state-dir "$state" --project demo --run r1 -- sh -c 'echo step 1 > /workspace/notes; hostname'
run "$rf" call --state-dir "$state" --project demo --run r1 -- sh -c 'cat /workspace/notes; hostname'
run "$rf" call --state-dir "$state" --project demo --run r2 -- sh -c 'ls /workspace; hostname'
run "$rf" sandbox list
run "$rf" run show r1 --state-dir "$state"
echo
echo "Credentials per customer: a secret, a project profile, an identity-scoped call."
step "printf %s sk-demo-0123456789abcdef | $rf secret set demo-key --state-dir $state"
printf %s sk-demo-0123456789abcdef | "$rf" secret set demo-key --state-dir "$state"; echo "(exit $?)"
run "$rf" identity profile set demo --level project --project demo API_KEY=secret:demo-key --state-dir "$state"
run "$rf" identity resolve --project demo --state-dir "$state"
run "$rf" call --state-dir "$state" --project demo --run r3 --identity -- sh -c 'echo "key: $API_KEY"; printf %s "$API_KEY" | base64'
run "$rf" secret revoke demo-key --state-dir "$state"
run "$rf" call --state-dir "$state" --project demo --run r4 --identity -- true
run "$rf" audit verify --state-dir "$state"
kill -TERM "$worker"; wait "$worker"
rm -rf "$state"
echo
echo "An interactive shell on its own pty: $rf sandbox shell"
