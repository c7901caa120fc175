#!/usr/bin/env bash
# The docker tests' own Docker daemon (issue 5): `start DIR` / `stop DIR`.
#
# start: runs Debian's dockerd with its own socket, data dir, exec root, pid
# file and containerd namespace, so it touches no other daemon, and with
#   --bridge=none --iptables=false --ip-masq=false --ip6tables=false
# so it creates no network and changes no firewall: containers get network
# none or the host's. It also listens on tcp://127.0.0.1:PORT (the "remote"
# daemon of the TCP tests) and, through an sshd of our own on 127.0.0.1,
# over ssh (`ssh ... docker system dial-stdio`), and through a TLS front
# (socat, with certificates of a CA made here) for the tcp+TLS transport. Test images are built here
# with `docker import` from Debian's busybox-static and bash-static; nothing
# is ever pulled. DIR/env then tells the tests where everything is
# (tests/support/docker_daemon.h). If dockerd cannot start on this machine,
# DIR/env says why (SKIP_REASON) and the tests skip, naming it.
#
# stop: removes every container of that daemon, ends sshd and dockerd by
# their pids, and keeps the data dir (images) so the next start is quick.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# Unix socket paths are short (108 bytes): containerd's live under the exec root.
tag=$(printf '%s' "$dir" | sha256sum | cut -c1-8)
run=/run/rf-dockerd-$tag
sock=$run/docker.sock
export DOCKER_HOST=unix://$sock
docker_cli=/usr/bin/docker
[ -x "$docker_cli" ] || docker_cli=$(command -v docker || true)

# A pidfile's process, alive and still ours: its command line names $dir
# (dockerd's --data-root, sshd's -f, socat's cert). A pidfile left from before
# a reboot or a SIGKILL may name anyone's process now, never to be signalled.
alive() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1")
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' '\n' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop_pid() {  # pidfile: SIGTERM, up to 15 s, then SIGKILL
  local f=$1 pid
  alive "$f" || { rm -f "$f"; return 0; }
  pid=$(cat "$f")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$f"
}

skip() {
  echo "docker-test-daemon: cannot start dockerd: $1" >&2
  printf 'SKIP_REASON=%s\n' "$1" > "$dir/env.tmp"
  mv "$dir/env.tmp" "$dir/env"
  exit 0
}

make_rootfs() {  # DIR WORKSPACE(yes|no)
  local root=$1 ws=$2
  rm -rf "$root"
  mkdir -p "$root"/{bin,usr/bin,usr/local/bin,etc,tmp,proc,sys,dev,run}
  chmod 1777 "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
  done
  cp /bin/bash-static "$root/bin/bash"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
  if [ "$ws" = yes ]; then mkdir -m 0755 "$root/workspace"; fi
}

import_image() {  # NAME ROOTFS WORKDIR
  if "$docker_cli" image inspect "$1" >/dev/null 2>&1; then return 0; fi
  tar --numeric-owner -C "$2" -c . |
    "$docker_cli" import --change "WORKDIR $3" --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' - "$1" >/dev/null
  echo "docker-test-daemon: built image $1"
}

start_sshd() {
  local ssh=$dir/ssh port
  mkdir -p "$ssh" /run/sshd
  chmod 700 "$ssh"
  [ -f "$ssh/host_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$ssh/host_key"
  [ -f "$ssh/client_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$ssh/client_key"
  cp "$ssh/client_key.pub" "$ssh/authorized_keys"
  port=$(free_port)
  cat > "$ssh/sshd_config" <<CONF
ListenAddress 127.0.0.1
Port $port
HostKey $ssh/host_key
AuthorizedKeysFile $ssh/authorized_keys
PidFile $ssh/sshd.pid
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
SetEnv DOCKER_HOST=unix://$sock
CONF
  printf '[127.0.0.1]:%s %s\n' "$port" "$(cut -d' ' -f1,2 "$ssh/host_key.pub")" > "$ssh/known_hosts"
  cat > "$ssh/ssh_config" <<CONF
Host 127.0.0.1
  Port $port
  IdentityFile $ssh/client_key
  IdentitiesOnly yes
  UserKnownHostsFile $ssh/known_hosts
  StrictHostKeyChecking yes
CONF
  if ! /usr/sbin/sshd -f "$ssh/sshd_config" -E "$ssh/sshd.log"; then
    SSH_SKIP="sshd did not start: $(tail -n 1 "$ssh/sshd.log" 2>/dev/null)"
    return 0
  fi
  for _ in $(seq 50); do
    if ssh -F "$ssh/ssh_config" -o BatchMode=yes root@127.0.0.1 true 2>/dev/null; then
      SSH_HOST=ssh://root@127.0.0.1:$port
      SSH_OPTIONS="-F $ssh/ssh_config"
      return 0
    fi
    sleep 0.1
  done
  SSH_SKIP="ssh to 127.0.0.1:$port did not work: $(tail -n 1 "$ssh/sshd.log" 2>/dev/null)"
}

# A TLS front for the daemon (the tcp+TLS transport's test): socat terminates
# TLS with a certificate of a CA made here and demands a client certificate of
# the same CA, then relays to the daemon's socket. DOCKER_CERT_PATH-style files
# (ca.pem, cert.pem, key.pem) for the client land in DIR/tls/client.
start_tls() {
  local tls=$dir/tls port
  command -v socat >/dev/null || { TLS_SKIP="socat is not installed"; return 0; }
  mkdir -p "$tls/client"
  if [ ! -f "$tls/client/key.pem" ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=rf-test-ca \
      -keyout "$tls/ca-key.pem" -out "$tls/ca.pem" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$tls/server-key.pem" \
      -out "$tls/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' > "$tls/san.ext"
    openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca-key.pem" \
      -CAcreateserial -days 3650 -extfile "$tls/san.ext" -out "$tls/server-cert.pem" 2>/dev/null
    cat "$tls/server-cert.pem" "$tls/server-key.pem" > "$tls/server.pem"
    openssl req -newkey rsa:2048 -nodes -subj /CN=rf-test-client -keyout "$tls/client/key.pem" \
      -out "$tls/client.csr" 2>/dev/null
    openssl x509 -req -in "$tls/client.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca-key.pem" \
      -CAcreateserial -days 3650 -out "$tls/client/cert.pem" 2>/dev/null
    cp "$tls/ca.pem" "$tls/client/ca.pem"
  fi
  port=$(free_port)
  setsid socat "OPENSSL-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork,cert=$tls/server.pem,cafile=$tls/ca.pem,verify=1" \
    "UNIX-CONNECT:$sock" >"$tls/socat.log" 2>&1 </dev/null &
  echo $! > "$tls/socat.pid"
  for _ in $(seq 50); do
    if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
      TLS_HOST=tcp://127.0.0.1:$port
      TLS_CERTS=$tls/client
      return 0
    fi
    sleep 0.1
  done
  TLS_SKIP="socat did not listen: $(tail -n 1 "$tls/socat.log" 2>/dev/null)"
}

case "$cmd" in
start)
  command -v dockerd >/dev/null || { echo "docker-test-daemon: dockerd is not installed: run scripts/install-deps.sh" >&2; exit 1; }
  mkdir -p "$run" "$dir/data"
  if ! alive "$dir/dockerd.pid" || ! curl -sf --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; then
    stop_pid "$dir/dockerd.pid"
    rm -f "$sock"
    port=$(free_port)
    setsid dockerd \
      --bridge=none --iptables=false --ip-masq=false --ip6tables=false \
      -H "unix://$sock" -H "tcp://127.0.0.1:$port" \
      --data-root "$dir/data" --exec-root "$run/exec" --pidfile "$dir/dockerd.pid" \
      --containerd-namespace "rf-test-$tag" --containerd-plugins-namespace "rf-test-$tag-p" \
      --log-level warn >"$dir/dockerd.log" 2>&1 </dev/null &
    echo "$port" > "$dir/tcp.port"
    up=no
    for _ in $(seq 300); do
      if curl -sf --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; then up=yes; break; fi
      if ! kill -0 $! 2>/dev/null; then break; fi
      sleep 0.1
    done
    [ $up = yes ] || skip "$(grep -iE 'error|fail' "$dir/dockerd.log" | tail -n 1 | cut -c1-300)"
    echo "docker-test-daemon: dockerd up on $sock and tcp://127.0.0.1:$port"
  fi
  port=$(cat "$dir/tcp.port")
  make_rootfs "$dir/rootfs-busybox" yes
  import_image rf-test/busybox:1 "$dir/rootfs-busybox" /workspace
  make_rootfs "$dir/rootfs-no-workspace" no
  import_image rf-test/no-workspace:1 "$dir/rootfs-no-workspace" /
  make_rootfs "$dir/rootfs-old-runner" yes
  printf '#!/bin/sh\nif [ "$1" = --version ]; then echo "ringfence-tool-runner 0.0.1 protocol 0.0.1"; exit 0; fi\nexit 1\n' \
    > "$dir/rootfs-old-runner/usr/local/bin/ringfence-tool-runner"
  chmod 0755 "$dir/rootfs-old-runner/usr/local/bin/ringfence-tool-runner"
  import_image rf-test/old-runner:1 "$dir/rootfs-old-runner" /workspace
  SSH_HOST="" SSH_OPTIONS="" SSH_SKIP=""
  stop_pid "$dir/ssh/sshd.pid"
  start_sshd
  TLS_HOST="" TLS_CERTS="" TLS_SKIP=""
  alive "$dir/tls/socat.pid" && kill -TERM -- "-$(cat "$dir/tls/socat.pid")" 2>/dev/null || true
  stop_pid "$dir/tls/socat.pid"
  start_tls
  {
    echo "DOCKER_HOST=unix://$sock"
    echo "DOCKER_TCP_HOST=tcp://127.0.0.1:$port"
    if [ -n "$SSH_HOST" ]; then
      echo "DOCKER_SSH_HOST=$SSH_HOST"
      echo "RINGFENCE_SSH_OPTIONS=$SSH_OPTIONS"
    else
      echo "SSH_SKIP_REASON=$SSH_SKIP"
    fi
    if [ -n "$TLS_HOST" ]; then
      echo "DOCKER_TLS_HOST=$TLS_HOST"
      echo "DOCKER_TLS_CERT_PATH=$TLS_CERTS"
    else
      echo "TLS_SKIP_REASON=$TLS_SKIP"
    fi
    echo "IMAGE=rf-test/busybox:1"
    echo "BROKEN_IMAGE=rf-test/no-workspace:1"
    echo "OLD_RUNNER_IMAGE=rf-test/old-runner:1"
  } > "$dir/env.tmp"
  mv "$dir/env.tmp" "$dir/env"
  echo "docker-test-daemon: ready ($dir/env)"
  ;;
stop)
  if alive "$dir/dockerd.pid" && [ -n "$docker_cli" ]; then
    ids=$("$docker_cli" ps -aq 2>/dev/null || true)
    [ -z "$ids" ] || "$docker_cli" rm -f $ids >/dev/null 2>&1 || true
  fi
  stop_pid "$dir/ssh/sshd.pid"
  # socat forks a child per connection: end its whole group.
  alive "$dir/tls/socat.pid" && kill -TERM -- "-$(cat "$dir/tls/socat.pid")" 2>/dev/null || true
  stop_pid "$dir/tls/socat.pid"
  stop_pid "$dir/dockerd.pid"
  rm -f "$dir/env"
  echo "docker-test-daemon: stopped"
  ;;
*)
  echo "usage: $0 start|stop DIR" >&2
  exit 2
  ;;
esac
