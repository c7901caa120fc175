#!/usr/bin/env bash
# S3 fixture for tests: s3rver (npm, pinned in tests/artifacts/npm) on 127.0.0.1.
#
#   s3_server.sh start DIR [--bucket NAME]...   # data DIR/data, pid DIR/pid, port DIR/port, log DIR/log
#   s3_server.sh stop DIR                        # SIGTERM (then SIGKILL) to the pid in DIR/pid only
#
# Endpoint: http://127.0.0.1:$(cat DIR/port)/BUCKET/KEY (path style). Credentials: s3rver only
# knows access key id S3RVER (secret S3RVER); any other key id gets InvalidAccessKeyId. It does
# NOT verify SigV4 signatures (but does check x-amz-date within 15 minutes of now).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
npm_dir="$here/npm"
s3rver_js="$npm_dir/node_modules/s3rver/bin/s3rver.js"

usage() {
    echo "usage: $0 start DIR [--bucket NAME]... | $0 stop DIR" >&2
    exit 2
}

die() {
    echo "s3_server.sh: $*" >&2
    exit 1
}

# True if PID is alive and is the s3rver we started for data dir DATA.
is_ours() {
    local pid=$1 data=$2 cmdline
    [[ -r /proc/$pid/cmdline ]] || return 1
    cmdline=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    grep -qxF "$s3rver_js" <<<"$cmdline" && grep -qxF "$data" <<<"$cmdline"
}

deps_ok() {
    # npm writes node_modules/.package-lock.json last; a newer package-lock.json means stale.
    [[ -f $s3rver_js && -f $npm_dir/node_modules/.package-lock.json &&
        ! $npm_dir/package-lock.json -nt $npm_dir/node_modules/.package-lock.json ]]
}

ensure_deps() {
    deps_ok && return 0
    command -v npm >/dev/null || die "npm not found (node 20 + npm needed)"
    # Serialise concurrent starts (npm ci first deletes node_modules): lock the npm dir itself.
    local lockfd out
    exec {lockfd}<"$npm_dir"
    if command -v flock >/dev/null; then flock "$lockfd"; fi
    if ! deps_ok; then
        if ! out=$(npm ci --prefix "$npm_dir" --no-audit --no-fund --prefer-offline --silent 2>&1); then
            printf '%s\n' "$out" >&2
            die "npm ci --prefix $npm_dir failed"
        fi
    fi
    exec {lockfd}<&-
    [[ -f $s3rver_js ]] || die "s3rver missing after npm ci"
}

cmd_start() {
    local dir=$1
    shift
    local -a buckets=()
    while (($#)); do
        case $1 in
        --bucket) (($# >= 2)) || usage; buckets+=("$2"); shift 2 ;;
        --bucket=*) buckets+=("${1#--bucket=}"); shift ;;
        *) usage ;;
        esac
    done
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    local data="$dir/data" log="$dir/log"
    if [[ -f $dir/pid ]] && is_ours "$(cat "$dir/pid")" "$data"; then
        die "already running (pid $(cat "$dir/pid")); stop it first"
    fi
    rm -f "$dir/pid" "$dir/port"
    mkdir -p "$data"
    ensure_deps
    command -v node >/dev/null || die "node not found"

    local -a args=(-d "$data" -a 127.0.0.1 -p 0 --no-vhost-buckets)
    local b
    # s3rver's CLI takes the words after --configure-bucket NAME (up to the next -option) as
    # config files, so each bucket is followed directly by an option (or is last).
    for b in "${buckets[@]}"; do args+=(--configure-bucket "$b"); done

    : >"$log"
    # Plain background exec: $! is node itself. No inherited stdio (callers capturing our
    # output must not wait for the server's EOF).
    node "$s3rver_js" "${args[@]}" </dev/null >>"$log" 2>&1 &
    local pid=$!
    echo "$pid" >"$dir/pid"

    # The CLI prints "S3rver listening on 127.0.0.1:PORT" once the socket is bound.
    local port="" i
    for ((i = 0; i < 300; i++)); do
        port=$(sed -n 's/^S3rver listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$log" | head -n1)
        [[ -n $port ]] && break
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$dir/pid"
            cat "$log" >&2
            die "s3rver exited during startup"
        fi
        sleep 0.1
    done
    if [[ -z $port ]]; then
        kill "$pid" 2>/dev/null || true
        rm -f "$dir/pid"
        cat "$log" >&2
        die "s3rver did not report its port within 30 s"
    fi

    # Wait until it answers HTTP (ListBuckets, unsigned) and every bucket exists.
    local url="http://127.0.0.1:$port" ok=""
    for ((i = 0; i < 100; i++)); do
        ok=1
        curl -fsS -o /dev/null --max-time 2 "$url/" 2>/dev/null || ok=""
        if [[ -n $ok ]]; then
            for b in "${buckets[@]}"; do
                curl -fsS -o /dev/null --max-time 2 -I "$url/$b" 2>/dev/null || { ok=""; break; }
            done
        fi
        [[ -n $ok ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z $ok ]]; then
        kill "$pid" 2>/dev/null || true
        rm -f "$dir/pid"
        cat "$log" >&2
        die "s3rver on port $port does not answer (or a bucket is missing)"
    fi
    printf '%s\n' "$port" >"$dir/port.tmp"
    mv -f "$dir/port.tmp" "$dir/port"
    echo "s3rver pid $pid listening on $url (data $data)"
}

cmd_stop() {
    local dir=$1
    [[ -d $dir ]] || die "no such directory: $dir"
    dir=$(cd "$dir" && pwd)
    [[ -f $dir/pid ]] || { echo "s3_server.sh: not running (no $dir/pid)" >&2; return 0; }
    local pid i
    pid=$(cat "$dir/pid")
    [[ $pid =~ ^[0-9]+$ ]] || die "bad pid file $dir/pid"
    if ! is_ours "$pid" "$dir/data"; then
        echo "s3_server.sh: pid $pid is not our s3rver any more; nothing killed" >&2
        rm -f "$dir/pid" "$dir/port"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        is_ours "$pid" "$dir/data" || break # gone (or a zombie: empty cmdline)
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null && is_ours "$pid" "$dir/data"; then
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/pid" "$dir/port"
}

(($# >= 2)) || usage
case $1 in
start) shift; cmd_start "$@" ;;
stop) [[ $# -eq 2 ]] || usage; cmd_stop "$2" ;;
*) usage ;;
esac
