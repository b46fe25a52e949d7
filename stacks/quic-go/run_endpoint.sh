#!/usr/bin/env bash
# quic-go's interop client and server behind the quic-interop-runner interface (docs/interop.md).
# Built by scripts/build_stacks.sh quic-go into $PROTOLAB_STACKS/quic-go/bin. The programs read
# TESTCASE, SSLKEYLOGFILE and QLOGDIR themselves and exit 127 for a case they do not implement.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${PROTOLAB_STACKS:-$here/../../.stacks}/quic-go/bin"
case "${ROLE:-}" in
  client) read -r -a urls <<< "${REQUESTS:-}"; exec "$bin/client" "${urls[@]}" ;;
  server) exec "$bin/server" ;;
  *) echo "run_endpoint.sh: ROLE must be client or server (got '${ROLE:-}')" >&2; exit 1 ;;
esac
