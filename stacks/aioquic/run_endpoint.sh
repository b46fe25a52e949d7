#!/usr/bin/env bash
# aioquic's example HTTP/3 (and HTTP/0.9, ALPN hq-interop) client and server behind the
# quic-interop-runner interface (docs/interop.md). Built by scripts/build_stacks.sh aioquic into
# $PROTOLAB_STACKS/aioquic (a venv and the sdist's examples/). The test cases other than http3
# speak HTTP/0.9, as the runner asks; multiconnect opens one connection per request, resumption
# and zerortt a first connection for the first request and a resumed one for the others.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${PROTOLAB_STACKS:-$here/../../.stacks}/aioquic"
python="$build/venv/bin/python"
case "${TESTCASE:-}" in
  handshake|transfer|http3|multiconnect|chacha20|retry|resumption|zerortt) ;;
  *) echo "aioquic: unsupported test case '${TESTCASE:-}'" >&2; exit 127 ;;
esac
mkdir -p "${QLOGDIR:-/logs/qlog}"
case "${ROLE:-}" in
  client)
    args=(--insecure --output-dir /downloads --quic-log "${QLOGDIR:-/logs/qlog}")
    [[ -n "${SSLKEYLOGFILE:-}" ]] && args+=(--secrets-log "$SSLKEYLOGFILE")
    [[ "$TESTCASE" != http3 ]] && args+=(--legacy-http)
    [[ "$TESTCASE" == chacha20 ]] && args+=(--cipher-suites CHACHA20_POLY1305_SHA256)
    read -r -a urls <<< "${REQUESTS:-}"
    if [[ "$TESTCASE" == multiconnect ]]; then
      for url in "${urls[@]}"; do "$python" "$build/examples/http3_client.py" "${args[@]}" "$url"; done
    elif [[ "$TESTCASE" == resumption || "$TESTCASE" == zerortt ]]; then
      # The first request's connection leaves a session ticket; the rest resume with it.
      ticket=/logs/session-ticket
      rm -f "$ticket"
      "$python" "$build/examples/http3_client.py" "${args[@]}" --session-ticket "$ticket" "${urls[0]}"
      [[ "$TESTCASE" == zerortt ]] && args+=(--zero-rtt)
      exec "$python" "$build/examples/http3_client.py" "${args[@]}" --session-ticket "$ticket" "${urls[@]:1}"
    else
      exec "$python" "$build/examples/http3_client.py" "${args[@]}" "${urls[@]}"
    fi
    ;;
  server)
    args=(--certificate /certs/cert.pem --private-key /certs/priv.key --host 0.0.0.0 --port 443
          --quic-log "${QLOGDIR:-/logs/qlog}")
    [[ -n "${SSLKEYLOGFILE:-}" ]] && args+=(--secrets-log "$SSLKEYLOGFILE")
    [[ "$TESTCASE" == retry ]] && args+=(--retry)
    # demo.py serves STATIC_ROOT at /; it is imported from the examples directory.
    cd "$build/examples"
    STATIC_ROOT=/www exec "$python" http3_server.py "${args[@]}"
    ;;
  *) echo "run_endpoint.sh: ROLE must be client or server (got '${ROLE:-}')" >&2; exit 1 ;;
esac
