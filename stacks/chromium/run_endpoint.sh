#!/usr/bin/env bash
# Chromium (Debian's package) as a quic-interop-runner client (docs/interop.md): download.py
# drives it headless with Playwright (the project's venv, $PROTOLAB_PYTHON) and saves each of
# REQUESTS into /downloads. Cases: transfer-h1, transfer-h2 (TLS over TCP), http3; else 127.
# No server: Chromium is a browser.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ "${ROLE:-}" == client ]] || { echo "chromium: no interop server (a browser)" >&2; exit 127; }
command -v "${CHROMIUM:-chromium}" >/dev/null 2>&1 || { echo "chromium: not installed (apt-get install chromium)" >&2; exit 1; }
exec "${PROTOLAB_PYTHON:-python3}" "$here/download.py"
