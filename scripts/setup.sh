#!/usr/bin/env bash
# protolab set-up: Debian packages, Rust release build, Python venv.
#
# Idempotent and fast when everything is already in place; `make setup`, `make demo`,
# `make test` and `make bench` run it first. Works from any directory. Needs root (apt-get,
# and the lab itself needs network namespaces and TUN devices).
#
# Environment:
#   PYTHON   interpreter used to create .venv (default: python3)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# Debian packages the lab needs. Later issues append here.
APT_PACKAGES=(
  iperf3          # reference TCP/UDP throughput
  irtt            # reference latency/loss measurement
  iputils-ping    # emulator validation (ping)
  iproute2        # ip netns / ip mptcp
  tcpdump         # captures
  curl            # real HTTP client in the endpoint tests
  pkg-config      # native builds
  build-essential # cc/ld for Rust crates with C parts
  python3-venv    # python3 -m venv
  chromium        # real browser peer (headless; h1, h2, h3) in tests/test_peers.py
  nginx-light     # reference H1/H2 server for the peer tests and benches/endpoints.py
  caddy           # reference H3 server (and H1/H2) for the peer tests and benches/endpoints.py
  nghttp2-client  # h2load: H2 load generator against our server and nginx
  mptcpd          # MPTCP path manager daemon (h2-mptcp experiments)
  mptcpize        # runs unmodified programs (e.g. Chromium) over MPTCP
  tshark          # TCP retransmission analysis of captures (protolab analyze)
  pebble          # ACME test CA: the live service's certificates end to end (tests/test_live_acme.py)
  nftables        # nft: the NAT gateway of clients behind one address (protolab.lab.nat)
  conntrack       # the NAT gateway's port mappings: the NAT corpus' truth
)

VENV=".venv"
STAMP="$VENV/.protolab-pyproject.sha256"
PYTHON="${PYTHON:-python3}"

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

if [[ "$(id -u)" -ne 0 ]]; then
  die "must run as root (apt-get; the lab creates network namespaces and TUN devices). Try: sudo make setup"
fi

# Serialize concurrent runs (e.g. two make targets at once) on the same checkout.
if command -v flock >/dev/null 2>&1; then
  exec 9<"$ROOT/scripts/setup.sh"
  flock 9
fi

# --- 1. Debian packages -------------------------------------------------------------------
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  [[ "$status" == *"ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found: protolab expects Debian 12"
  apt-get -o Acquire::Retries=3 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 install -y -qq \
    --no-install-recommends "${missing[@]}" </dev/null
else
  say "Debian packages: ok (${#APT_PACKAGES[@]} installed)"
fi

# --- 2. Rust ------------------------------------------------------------------------------
if ! command -v cargo >/dev/null 2>&1 && [[ -x "$HOME/.cargo/bin/cargo" ]]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null 2>&1 \
  || die "cargo not found (not on PATH, not in $HOME/.cargo/bin); install Rust with rustup: https://rustup.rs"
[[ -f Cargo.toml ]] || die "Cargo.toml not found in $ROOT"
say "cargo build --release --workspace"
cargo build --release --workspace

# --- 3. Python ----------------------------------------------------------------------------
[[ -f pyproject.toml ]] || die "pyproject.toml not found in $ROOT"
if [[ -d "$VENV" ]] && ! { "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1 \
                           && [[ -x "$VENV/bin/pip" ]]; }; then
  say "$VENV is broken (interpreter or pip missing); recreating it"
  rm -rf -- "$VENV"
fi
if [[ ! -d "$VENV" ]]; then
  command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found"
  say "creating $VENV with $PYTHON -m venv ($("$PYTHON" --version 2>&1))"
  "$PYTHON" -m venv "$VENV" || { rm -rf -- "$VENV"; die "$PYTHON -m venv $VENV failed"; }
fi
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
have="$(cat "$STAMP" 2>/dev/null || true)"
if [[ "$want" != "$have" ]]; then
  say "pip install -e '.[dev]' into $VENV"
  rm -f -- "$STAMP"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -e '.[dev]' </dev/null
  printf '%s\n' "$want" >"$STAMP"
else
  say "Python environment: ok ($VENV, pyproject.toml unchanged)"
fi

# aioquic for the interop runs (a wheel in a venv of its own, seconds; the lab test of every
# stack needs it as client). quic-go compiles for minutes: `make stacks` (docs/interop.md).
bash scripts/build_stacks.sh aioquic || say "warning: aioquic not built; the interop tests that need it skip"

say "done"
