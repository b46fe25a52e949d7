#!/usr/bin/env bash
# nginx (Debian's package) as a quic-interop-runner server (docs/interop.md): /www served as
# static files over HTTP/1.1 and HTTP/2 (TLS on TCP 443) with /certs. Debian's nginx 1.22 has no
# HTTP/3, so it takes transfer-h1 and transfer-h2 and exits 127 for the other cases. It runs in
# the foreground (daemon off) with its pid, logs and temporary files in /logs.
set -euo pipefail
[[ "${ROLE:-}" == server ]] || { echo "nginx: no interop client" >&2; exit 127; }
case "${TESTCASE:-}" in
  transfer-h1|transfer-h2) ;;
  *) echo "nginx: unsupported test case '${TESTCASE:-}'" >&2; exit 127 ;;
esac
nginx="${NGINX:-nginx}"
command -v "$nginx" >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || { echo "nginx: not installed (apt-get install nginx)" >&2; exit 1; }
command -v "$nginx" >/dev/null 2>&1 || nginx=/usr/sbin/nginx
home=/logs/nginx
mkdir -p "$home/tmp"
cat > "$home/nginx.conf" <<NGINX
daemon off;
worker_processes 1;
pid $home/nginx.pid;
error_log $home/error.log;
events {}
http {
    access_log $home/access.log;
    default_type application/octet-stream;
    sendfile on;
    client_body_temp_path $home/tmp/body;
    proxy_temp_path $home/tmp/proxy;
    fastcgi_temp_path $home/tmp/fastcgi;
    uwsgi_temp_path $home/tmp/uwsgi;
    scgi_temp_path $home/tmp/scgi;
    server {
        listen 443 ssl http2;
        ssl_certificate /certs/cert.pem;
        ssl_certificate_key /certs/priv.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        root /www;
        location / { }
    }
}
NGINX
exec "$nginx" -p "$home" -c "$home/nginx.conf"
