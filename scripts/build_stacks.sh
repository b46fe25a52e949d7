#!/usr/bin/env bash
# Build the external QUIC stacks of the interop endpoints (docs/interop.md) into $STACKS_DIR
# (default: .stacks in the repository). Idempotent: a stack whose recorded version matches is
# kept. `scripts/setup.sh` builds aioquic (a wheel install, seconds); `make stacks` builds all.
#
#   scripts/build_stacks.sh [aioquic] [quic-go]     (no argument: every stack)
#
# aioquic: its PyPI wheel in a venv of its own (.stacks/aioquic/venv, so the project's venv
#   keeps its pins) and the sdist's examples/ (http3_server.py, http3_client.py, demo.py),
#   which the wheel does not ship.
# quic-go: `go install` of its interop client and server (Go module proxy) into
#   .stacks/quic-go/bin; needs Go >= the module's go directive (under a minute here, cold).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STACKS_DIR="${STACKS_DIR:-$ROOT/.stacks}"
AIOQUIC_VERSION="${AIOQUIC_VERSION:-1.7.2}"
QUIC_GO_VERSION="${QUIC_GO_VERSION:-v0.65.0}"
PYTHON="${PYTHON:-python3}"

say() { printf 'build_stacks: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

build_aioquic() {
  local dir="$STACKS_DIR/aioquic"
  if [[ "$(cat "$dir/version.txt" 2>/dev/null)" == "aioquic $AIOQUIC_VERSION" && -x "$dir/venv/bin/python" ]]; then
    say "aioquic $AIOQUIC_VERSION already built in $dir"; return
  fi
  rm -rf -- "$dir"; mkdir -p "$dir"
  say "aioquic $AIOQUIC_VERSION: venv $dir/venv"
  "$PYTHON" -m venv "$dir/venv" || die "$PYTHON -m venv failed (apt-get install python3-venv)"
  # The examples' server runs demo.py's Starlette app (jinja2 templates) and imports wsproto.
  "$dir/venv/bin/pip" install --quiet --disable-pip-version-check "aioquic==$AIOQUIC_VERSION" starlette jinja2 wsproto </dev/null
  "$dir/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$dir/sdist" "aioquic==$AIOQUIC_VERSION" </dev/null
  tar -xzf "$dir/sdist/aioquic-$AIOQUIC_VERSION.tar.gz" -C "$dir" "aioquic-$AIOQUIC_VERSION/examples"
  mv "$dir/aioquic-$AIOQUIC_VERSION/examples" "$dir/examples"
  rm -rf -- "$dir/aioquic-$AIOQUIC_VERSION" "$dir/sdist"
  echo "aioquic $AIOQUIC_VERSION" > "$dir/version.txt"
}

build_quic_go() {
  local dir="$STACKS_DIR/quic-go"
  if [[ "$(cat "$dir/version.txt" 2>/dev/null)" == "quic-go $QUIC_GO_VERSION" && -x "$dir/bin/server" && -x "$dir/bin/client" ]]; then
    say "quic-go $QUIC_GO_VERSION already built in $dir"; return
  fi
  command -v go >/dev/null 2>&1 || die "go not found: quic-go needs Go (https://go.dev/doc/install or apt-get install golang)"
  rm -rf -- "$dir"; mkdir -p "$dir/bin"
  say "quic-go $QUIC_GO_VERSION: go install interop/{server,client} into $dir/bin (minutes the first time)"
  GOBIN="$dir/bin" GOFLAGS=-mod=mod go install \
    "github.com/quic-go/quic-go/interop/server@$QUIC_GO_VERSION" \
    "github.com/quic-go/quic-go/interop/client@$QUIC_GO_VERSION"
  echo "quic-go $QUIC_GO_VERSION" > "$dir/version.txt"
}

stacks=("$@")
[[ ${#stacks[@]} -gt 0 ]] || stacks=(aioquic quic-go)
for stack in "${stacks[@]}"; do
  case "$stack" in
    aioquic) build_aioquic ;;
    quic-go) build_quic_go ;;
    *) die "unknown stack $stack (known: aioquic quic-go)" ;;
  esac
done
