#!/usr/bin/env bash
# caddy (Debian's package) as a quic-interop-runner server (docs/interop.md): /www served as
# static files over HTTP/1.1 and HTTP/2 (TLS on TCP 443) and HTTP/3 (UDP 443, caddy's quic-go),
# with /certs. It speaks no HTTP/0.9 (hq-interop), so it takes http3, transfer-h1 and
# transfer-h2 and exits 127 for the other cases. Its state (config autosave) stays in /logs.
set -euo pipefail
[[ "${ROLE:-}" == server ]] || { echo "caddy: no interop client" >&2; exit 127; }
case "${TESTCASE:-}" in
  http3|transfer-h1|transfer-h2) ;;
  *) echo "caddy: unsupported test case '${TESTCASE:-}'" >&2; exit 127 ;;
esac
caddy="${CADDY:-caddy}"
command -v "$caddy" >/dev/null 2>&1 || { echo "caddy: not installed (apt-get install caddy)" >&2; exit 1; }
home=/logs/caddy
mkdir -p "$home"
cat > "$home/Caddyfile" <<CADDY
{
	admin off
	auto_https disable_redirects
	skip_install_trust
	servers {
		protocols h1 h2 h3
	}
}
:443 {
	tls /certs/cert.pem /certs/priv.key
	root * /www
	file_server
	log {
		output file $home/access.log
	}
}
CADDY
export HOME="$home" XDG_DATA_HOME="$home/data" XDG_CONFIG_HOME="$home/config"
exec "$caddy" run --config "$home/Caddyfile" --adapter caddyfile
