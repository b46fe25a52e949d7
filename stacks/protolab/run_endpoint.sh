#!/usr/bin/env bash
# protolab's own server (`protolab-net serve`) behind the quic-interop-runner interface
# (docs/interop.md): the files of /www become a page manifest whose objects' bodies are those
# files (docs/manifest.md), served over HTTP/3 on UDP 443 as `server` and `server4`. It speaks
# h3 only (no HTTP/0.9), so every case but http3 exits 127, as the interface says. It makes its
# certificates itself (docs/tls.md) rather than using /certs: the interop clients do not verify.
# No client: `protolab-net load` keeps no bodies to put in /downloads (docs/interop.md).
set -euo pipefail
net="${PROTOLAB_NET:-protolab-net}"
[[ "${ROLE:-}" == server ]] || { echo "protolab: no interop client (docs/interop.md)" >&2; exit 127; }
[[ "${TESTCASE:-}" == http3 ]] || { echo "protolab: unsupported test case '${TESTCASE:-}' (h3 only)" >&2; exit 127; }
address="${PROTOLAB_SERVER_ADDRESS:-$(ip -4 -o addr show scope global | awk '{split($4, a, "/"); print a[1]; exit}')}"
work=/logs/protolab-serve
mkdir -p "$work" "${QLOGDIR:-/logs/qlog}"
ln -sfn /www "$work/www"
python3 - "$address" > "$work/manifest.json" <<'PY'
import json, os, sys
names = sorted(n for n in os.listdir("/www") if os.path.isfile(os.path.join("/www", n)))
objects = [{"path": "/" + n, "origin": "server4", "size": os.path.getsize(os.path.join("/www", n)),
            "content_type": "application/octet-stream", "body": "www/" + n} for n in names]
for o in objects[1:]:
    o["parent"] = objects[0]["path"]
origins = [{"hostname": h, "address": sys.argv[1]} for h in ("server4", "server")]
print(json.dumps({"name": "interop", "origins": origins, "objects": objects}))
PY
exec "$net" serve --manifest "$work/manifest.json" --tls-dir "$work/tls" --raw-port off --qlog "${QLOGDIR:-/logs/qlog}"
