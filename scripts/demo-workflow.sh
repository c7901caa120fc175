#!/usr/bin/env bash
# make demo-workflow: the portfolio example (examples/portfolio.yaml) end to
# end on this host, as a new user would run it. It starts, on 127.0.0.1:
#   - the scripted fake model (tests/agents/fake_model.py) on port 18080,
#     following examples/portfolio-model.json;
#   - a git server (git http-backend behind a token, tests/artifacts/git_server.py)
#     on port 18081 with an empty site.git;
#   - a worker (per_run sandboxes) whose egress proxy resolves model.test and
#     git.test to 127.0.0.1;
# sets the secrets and the workflow's identity profile, runs the workflow
# with --follow (the real Claude Code scaffolds the site in a sandbox and
# pushes it), shows the run, and the commit that landed. Everything it
# started is ended by its pid, and its state dir removed, when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RF=$BUILD/ringfence
[ -x "$RF" ] || { echo "demo-workflow: $RF is not built (make build)" >&2; exit 1; }
[ -x /usr/local/bin/claude ] || ./scripts/install-agents.sh
for port in 18080 18081; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "demo-workflow: port $port on 127.0.0.1 is taken; the example uses it" >&2
    exit 1
  fi
done

dir=$(mktemp -d /tmp/rf-demo-workflow-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
wait_port() { for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.05; done; echo "demo-workflow: $2 did not start" >&2; exit 1; }

token="ghp_demo_$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
/usr/bin/python3 tests/agents/fake_model.py --script examples/portfolio-model.json --port 18080 \
  --port-file "$dir/model-port" --record "$dir/model-requests.jsonl" >"$dir/model.log" 2>&1 &
pids+=($!)
mkdir -p "$dir/git"
/usr/bin/python3 tests/artifacts/git_server.py --root "$dir/git" --port 18081 --port-file "$dir/git-port" \
  --token "$token" --anonymous-read --init site --log "$dir/git.log" >"$dir/git-server.log" 2>&1 &
pids+=($!)
wait_port "$dir/model-port" "the fake model"
wait_port "$dir/git-port" "the git server"

state="$dir/state"
echo "== secrets and the workflow's identity profile (values from stdin, never argv)"
printf %s "sk-ant-demo-$RANDOM$RANDOM" | "$RF" secret set demo-anthropic --state-dir "$state"
printf %s "$token" | "$RF" secret set demo-github --state-dir "$state"
"$RF" identity profile set portfolio --level workflow --workflow portfolio \
  ANTHROPIC_API_KEY=secret:demo-anthropic ANTHROPIC_BASE_URL=value:http://model.test:18080 \
  GITHUB_TOKEN=secret:demo-github --state-dir "$state"

# The demo's model and git servers listen on this host's loopback, and the
# planner step reads its key from the worker: the operator allows both for
# project demo (docs/security.md, "The operator's policy").
"$RF" policy set --project demo --egress-allow 127.0.0.1/32 --worker-env PLANNER_KEY \
  --state-dir "$state" >/dev/null

echo "== a worker"
PLANNER_KEY="sk-planner-demo" "$RF" worker start --sandbox-mode per_run --state-dir "$state" \
  --proxy-resolve model.test=127.0.0.1 --proxy-resolve git.test=127.0.0.1 >"$dir/worker.log" 2>&1 &
pids+=($!)

echo "== ringfence workflow run examples/portfolio.yaml --follow"
"$RF" workflow run examples/portfolio.yaml --project demo --run-id portfolio-1 --state-dir "$state" --follow
echo "== ringfence run show portfolio-1"
"$RF" run show portfolio-1 --state-dir "$state"
echo "== what landed in the git server"
git --git-dir="$dir/git/site.git" log --stat -1 main
