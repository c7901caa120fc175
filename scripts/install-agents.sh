#!/usr/bin/env bash
# Install the pinned agent CLIs (Claude Code, Codex) for sandboxes.
#
#   scripts/install-agents.sh [--force] [--prefix DIR] [--bindir DIR]
#
# Installs agents/npm (package.json + package-lock.json, versions pinned) with
# `npm ci` into PREFIX (/usr/local/lib/ringfence-agents) and links
# BINDIR/claude and BINDIR/codex (/usr/local/bin) to the agents' NATIVE
# binaries (the platform optional-dependency packages), not to the npm
# wrappers: a sandbox sees the host's /usr read-only and may have no node.
# Idempotent: when the installed lock and versions already match, npm is not
# run. Install scripts are not run (--ignore-scripts): nothing needs them.
# Needs root (re-runs itself with sudo), node and npm, and the npm registry.
set -euo pipefail

PREFIX=/usr/local/lib/ringfence-agents
BINDIR=/usr/local/bin
FORCE=0
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --force) FORCE=1 ;;
    --prefix) PREFIX=${2:?--prefix needs a directory}; shift ;;
    --bindir) BINDIR=${2:?--bindir needs a directory}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install-agents: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

say() { echo "install-agents: $*"; }
die() { echo "install-agents: error: $*" >&2; exit 1; }

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../agents/npm" && pwd) || die "agents/npm not found next to scripts/"
if [ ! -f "$SRC/package.json" ] || [ ! -f "$SRC/package-lock.json" ]; then
  die "$SRC must hold package.json and package-lock.json"
fi

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    say "not root: re-running with sudo"
    args=(--prefix "$PREFIX" --bindir "$BINDIR"); [ "$FORCE" = 1 ] && args+=(--force)
    exec sudo -- "$0" "${args[@]}"
  fi
  die "must run as root (or with sudo available)"
fi
umask 022

# --- platform: which optional-dependency packages hold the native binaries
case "$(uname -m)" in
  x86_64|amd64) ARCH=x64; TRIPLE_CPU=x86_64 ;;
  aarch64|arm64) ARCH=arm64; TRIPLE_CPU=aarch64 ;;
  *) die "unsupported CPU $(uname -m) (Claude Code and Codex ship x64 and arm64)" ;;
esac
[ "$(uname -s)" = Linux ] || die "Linux only"
MUSL=""
if ls /lib/ld-musl-* >/dev/null 2>&1 && ! ls /lib*/ld-linux-* /lib/*/ld-linux-* >/dev/null 2>&1; then MUSL=-musl; fi
CLAUDE_REL="node_modules/@anthropic-ai/claude-code-linux-$ARCH$MUSL/claude"
# Codex ships static musl binaries for every Linux.
CODEX_REL="node_modules/@openai/codex-linux-$ARCH/vendor/$TRIPLE_CPU-unknown-linux-musl/bin/codex"

command -v node >/dev/null 2>&1 || die "node is needed to install (not to run) the agents"
command -v npm >/dev/null 2>&1 || die "npm is needed to install the agents"

# version of PKG in lock file LOCK (empty if absent)
lock_version() {
  node -e 'const l=require(process.argv[1]); const p=(l.packages||{})["node_modules/"+process.argv[2]]; process.stdout.write(p&&p.version||"")' "$1" "$2" 2>/dev/null || true
}
# version of PKG installed under DIR (empty if absent)
installed_version() {
  node -e 'try{process.stdout.write(require(process.argv[1]+"/node_modules/"+process.argv[2]+"/package.json").version||"")}catch(e){}' "$1" "$2" 2>/dev/null || true
}

WANT_CLAUDE=$(lock_version "$SRC/package-lock.json" @anthropic-ai/claude-code)
WANT_CODEX=$(lock_version "$SRC/package-lock.json" @openai/codex)
if [ -z "$WANT_CLAUDE" ] || [ -z "$WANT_CODEX" ]; then
  die "$SRC/package-lock.json does not pin @anthropic-ai/claude-code and @openai/codex"
fi

up_to_date() {
  [ -d "$PREFIX" ] &&
  cmp -s "$SRC/package-lock.json" "$PREFIX/package-lock.json" &&
  cmp -s "$SRC/package.json" "$PREFIX/package.json" &&
  [ "$(installed_version "$PREFIX" @anthropic-ai/claude-code)" = "$WANT_CLAUDE" ] &&
  [ "$(installed_version "$PREFIX" @openai/codex)" = "$WANT_CODEX" ] &&
  [ -x "$PREFIX/$CLAUDE_REL" ] && [ -x "$PREFIX/$CODEX_REL" ]
}

if [ "$FORCE" = 0 ] && up_to_date; then
  say "up to date in $PREFIX: claude-code $WANT_CLAUDE, codex $WANT_CODEX (npm not run)"
else
  # Install into a staging directory next to PREFIX, then swap it in, so a
  # failed install never leaves PREFIX half-written.
  parent=$(dirname "$PREFIX")
  mkdir -p "$parent"
  stage=$(mktemp -d "$PREFIX.new.XXXXXX")
  trap 'rm -rf "$stage"' EXIT
  cp "$SRC/package.json" "$SRC/package-lock.json" "$stage/"
  say "npm ci into $PREFIX: claude-code $WANT_CLAUDE, codex $WANT_CODEX"
  npm ci --prefix "$stage" --omit=dev --no-audit --no-fund --ignore-scripts --loglevel=error
  [ -x "$stage/$CLAUDE_REL" ] || die "npm ci did not install the native Claude Code binary ($CLAUDE_REL)"
  [ -x "$stage/$CODEX_REL" ] || die "npm ci did not install the native Codex binary ($CODEX_REL)"
  chmod 0755 "$stage"
  if [ -e "$PREFIX" ]; then
    old="$PREFIX.old.$$"
    mv "$PREFIX" "$old"
    mv "$stage" "$PREFIX"
    rm -rf "$old"
  else
    mv "$stage" "$PREFIX"
  fi
  trap - EXIT
  say "installed $PREFIX"
fi

# --- links to the native binaries
mkdir -p "$BINDIR"
link() { # NAME TARGET
  local name=$1 target=$2 dest="$BINDIR/$1"
  if [ -L "$dest" ] && [ "$(readlink "$dest")" = "$target" ]; then
    say "$dest -> $target (unchanged)"
    return
  fi
  if [ -e "$dest" ] && [ ! -L "$dest" ]; then
    die "$dest exists and is not a symlink; remove it (another install of $name?) and re-run"
  fi
  ln -sfn "$target" "$dest.ringfence-tmp"
  mv -Tf "$dest.ringfence-tmp" "$dest"
  say "$dest -> $target (linked)"
}
link claude "$PREFIX/$CLAUDE_REL"
link codex "$PREFIX/$CODEX_REL"

# Run each binary once (with a throwaway HOME: codex --version writes helper
# links under $CODEX_HOME/tmp, claude may write ~/.claude*).
scratch=$(mktemp -d)
say "claude: $(HOME=$scratch CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 "$BINDIR/claude" --version 2>/dev/null || echo 'FAILED to run')"
say "codex: $(HOME=$scratch CODEX_HOME=$scratch/.codex "$BINDIR/codex" --version 2>/dev/null || echo 'FAILED to run')"
rm -rf "$scratch"
