#!/usr/bin/env bash
# A fleet on this machine (issue 16, docs/fleet.md): a PostgreSQL cluster
# started here (initdb into a temporary directory, a unix socket, no system
# service), three labelled workers sharing it, each with a host id and a
# state dir of its own, calls and a workflow routed by label, `fleet status`,
# a worker killed with SIGKILL mid-call losing nothing, and one drained
# (`fleet drain`): it finishes its call and exits 0 by itself.
# Exits non-zero when something does not happen as shown (ctest runs it).
set -uo pipefail
build=${1:-build}
rf="$(cd "$(dirname "$build/ringfence")" && pwd)/ringfence"
pgbin=/usr/lib/postgresql/15/bin

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { step "$*"; "$@"; echo "(exit $?)"; }
die() { echo "demo-fleet: $*" >&2; exit 1; }

dir=$(mktemp -d /tmp/ringfence-fleet-XXXXXX)
chown nobody:nogroup "$dir"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  [ -n "${pg:-}" ] && kill -INT "$pg" 2>/dev/null && wait "$pg" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

echo "PostgreSQL 15 in $dir (its own cluster, as nobody, socket only)"
setpriv --reuid=nobody --regid=nogroup --clear-groups \
  "$pgbin/initdb" -D "$dir/data" -A trust -U rf -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
  die "initdb failed: $(cat "$dir/initdb.log")"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
setpriv --reuid=nobody --regid=nogroup --clear-groups \
  "$pgbin/postgres" -D "$dir/data" -k "$dir" -p "$port" -c listen_addresses= -c fsync=off \
  >"$dir/postgres.log" 2>&1 &
pg=$!
export RINGFENCE_STORE="postgresql://rf@/postgres?host=$dir&port=$port"
for _ in $(seq 100); do [ -S "$dir/.s.PGSQL.$port" ] && break; sleep 0.1; done
[ -S "$dir/.s.PGSQL.$port" ] || die "postgres did not start: $(cat "$dir/postgres.log")"
echo "store: $RINGFENCE_STORE"

start_worker() {  # HOST LABEL...
  local host=$1; shift
  local labels=()
  for l in "$@"; do labels+=(--label "$l"); done
  step "$rf worker start --store \$RINGFENCE_STORE --host-id $host --worker-id $host ${labels[*]} --sandbox-mode per_run --lease 3s &"
  "$rf" worker start --store "$RINGFENCE_STORE" --state-dir "$dir/$host" --host-id "$host" \
    --worker-id "$host" "${labels[@]}" --sandbox-mode per_run --lease 3s \
    >"$dir/$host.log" 2>&1 &
  pids+=($!)
  eval "pid_${host//-/_}=$!"
}
start_worker eu-1 zone=eu
start_worker us-1 zone=us
start_worker gpu-1 zone=eu gpu=true
for _ in $(seq 100); do
  [ "$("$rf" fleet status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["live_workers"])')" = 3 ] && break
  sleep 0.1
done
run "$rf" fleet status

echo
echo "Calls go only to a worker with every label they require."
ran_on() { "$rf" run show "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["calls"][0]["worker_id"])'; }
run "$rf" call --project demo --run r-eu --require zone=eu -- sh -c 'echo "a call for zone=eu"'
run "$rf" call --project demo --run r-gpu --require gpu=true -- sh -c 'echo "a call for gpu=true"'
run "$rf" call --project demo --run r-us --require zone=us -- sh -c 'echo "a call for zone=us"'
for r in r-eu r-gpu r-us; do echo "$r ran on $(ran_on $r)"; done
[ "$(ran_on r-gpu)" = gpu-1 ] || die "the gpu call ran on $(ran_on r-gpu)"
[ "$(ran_on r-us)" = us-1 ] || die "the zone=us call ran on $(ran_on r-us)"
echo
echo "No live worker has zone=ap: the call fails in seconds, naming what each lacks."
run "$rf" call --project demo --run r-ap --require zone=ap -- echo never

echo
echo "A workflow whose steps need different workers: the run moves to one that has the labels."
cat >"$dir/routed.yaml" <<'EOF'
name: routed
steps:
  - id: prepare
    mode: sandboxed
    requires: {labels: {zone: us}}
    run: "echo prepared on $(hostname)"
  - id: train
    needs: [prepare]
    mode: sandboxed
    requires: {labels: {gpu: "true"}}
    run: "echo trained"
  - id: report
    needs: [train]
    mode: in_process
    kind: template
    template: "{{steps.prepare.output}} / {{steps.train.output}}"
EOF
run "$rf" workflow run "$dir/routed.yaml" --project demo --run-id wr-routed --follow ||
  die "the workflow failed"

echo
echo "kill -9 of a worker mid-call: the call is interrupted once its lease (3 s) runs out,"
echo "never run twice; the others keep serving; a restart reaps what it left."
"$rf" call --project demo --run r-doomed --require zone=us -- sh -c 'echo started; sleep 60' &
client=$!
for _ in $(seq 100); do
  "$rf" run show r-doomed --json 2>/dev/null | grep -q '"state":"running"' && break
  sleep 0.1
done
sleep 0.5
step "kill -9 us-1 (pid $pid_us_1)"
kill -KILL "$pid_us_1"
run "$rf" call --project demo --run r-still --require zone=eu -- echo "zone=eu still served"
step "wait for the doomed call's client"
wait "$client"; echo "(exit $?)"
run "$rf" run show r-doomed
"$rf" run show r-doomed --json | grep -q '"state":"interrupted"' || die "the call is not interrupted"
start_worker us-1 zone=us
sleep 1.5
run "$rf" call --project demo --run r-back --require zone=us -- echo "us-1 is back"
run "$rf" fleet status --all

echo
echo "Draining a worker: it takes no new work, finishes the call it holds, then exits 0."
"$rf" call --project demo --run r-held --require zone=eu -- sh -c 'echo held; sleep 2; echo finished' &
held=$!
for _ in $(seq 100); do
  "$rf" run show r-held --json 2>/dev/null | grep -q '"state":"running"' && break
  sleep 0.1
done
held_on=$(ran_on r-held)
step "$rf fleet drain $held_on --wait"
"$rf" fleet drain "$held_on" --wait --timeout 60s || die "the drain did not end"
wait "$held" || die "the held call did not finish"
pid_var="pid_${held_on//-/_}"
wait "${!pid_var}"
rc=$?
echo "worker $held_on exited $rc"
[ "$rc" = 0 ] || die "the drained worker exited $rc"
run "$rf" fleet cordon gpu-1
run "$rf" fleet status --all
run "$rf" fleet uncordon gpu-1
echo
echo "demo-fleet: done."
