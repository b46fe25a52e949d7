"""What an endpoint with the quic-interop-runner interface finds where it runs: `/www`,
`/downloads`, `/certs` and `/logs` bind-mounted from the run's directories, and `/etc/hosts`
naming the server `server` and `server4` (the runner's URLs), in a private mount namespace
(`unshare --mount`): an unmodified `run_endpoint.sh` works without Docker, and nothing of it is
visible outside the endpoint's processes. The namespace goes when its last process ends; the
first run creates the empty mount points `/www`, `/downloads`, `/certs`, `/logs` if missing.

The certificates are the lab's interop CA's (`make_certificates`, openssl): `cert.pem` (the
server's certificate for `server`, `server4` and its address, then the CA's), `priv.key`, and
`ca.pem` for clients that verify.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from protolab.errors import ToolError

MOUNT_POINTS = ("/www", "/downloads", "/certs", "/logs")
SERVER_NAMES = ("server", "server4")
CERT_DAYS = 7

# argv after the script: SOURCE TARGET pairs, then `--`, then the endpoint's command. `[ -e ]`:
# /etc/hosts is a file to bind over; the mount points are directories made on first use.
_MOUNT_SCRIPT = (
    'set -e; while [ "$1" != "--" ]; do [ -e "$2" ] || mkdir -p "$2"; mount --bind "$1" "$2"; shift 2; done; '
    'shift; exec "$@"'
)


def mounted_argv(command: Sequence[str], binds: Mapping[str, Path]) -> list[str]:
    """`command` in a private mount namespace with `binds` (target -> source) mounted first."""
    argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _MOUNT_SCRIPT, "interop-endpoint"]
    for target, source in binds.items():
        argv += [str(Path(source).resolve()), target]
    return [*argv, "--", *command]


def hosts_file(server_address: str) -> str:
    return f"127.0.0.1 localhost\n{server_address} {' '.join(SERVER_NAMES)}\n"


def environment(base: Mapping[str, str], role: str, testcase: str, requests: Sequence[str] = (),
                extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The interface's variables: ROLE, TESTCASE, REQUESTS (client), SSLKEYLOGFILE and QLOGDIR
    under /logs."""
    env = {**base, "ROLE": role, "TESTCASE": testcase, "SSLKEYLOGFILE": "/logs/keys.log", "QLOGDIR": "/logs/qlog",
           **(extra or {})}
    if role == "client":
        env["REQUESTS"] = " ".join(requests)
    return env


def request_urls(names: Sequence[str], port: int = 443) -> list[str]:
    return [f"https://{SERVER_NAMES[1]}:{port}/{name}" for name in names]


def _openssl(argv: Sequence[str], cwd: Path) -> None:
    try:
        done = subprocess.run(["openssl", *argv], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolError(f"openssl {argv[0]}: {exc}") from exc
    if done.returncode != 0:
        raise ToolError(f"openssl {' '.join(argv)} exited with status {done.returncode}: {done.stderr.strip()[-800:]}")


def make_certificates(directory: Path, server_address: str, chain: int = 0) -> Path:
    """A fresh CA (P-256) and the server's certificate for `server`, `server4` and its address,
    as the interface names them (`cert.pem` with the chain, `priv.key`), and `ca.pem`. With
    `chain` (the runner's amplificationlimit: 9), `cert.pem` holds that many certificates: the
    leaf, `chain - 2` intermediates and the CA, these RSA-3072 so the server's first flight is
    well over 3x a client's Initial (the runner requires 7500 bytes of it)."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    authority = key if chain == 0 else ["-newkey", "rsa:3072", "-nodes"]
    _openssl(["req", "-x509", *authority, "-keyout", "ca.key", "-out", "ca.pem", "-days", str(CERT_DAYS),
              "-subj", "/CN=protolab interop CA"], directory)
    issuers = ["ca"]
    (directory / "ca.ext").write_text("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\n")
    for index in range(1, max(0, chain - 1)):
        name = f"intermediate{index}"
        _openssl(["req", *authority, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                  "-subj", f"/CN=protolab interop intermediate {index}"], directory)
        _sign(directory, name, issuers[-1], "ca.ext")
        issuers.append(name)
    _openssl(["req", *key, "-keyout", "priv.key", "-out", "leaf.csr", "-subj", "/CN=server"], directory)
    sans = ",".join([*(f"DNS:{name}" for name in SERVER_NAMES), f"IP:{server_address}"])
    (directory / "leaf.ext").write_text(f"subjectAltName={sans}\nbasicConstraints=CA:FALSE\n")
    _sign(directory, "leaf", issuers[-1], "leaf.ext")
    pems = ["leaf", *reversed(issuers)]
    (directory / "cert.pem").write_text("".join((directory / f"{name}.pem").read_text() for name in pems))
    for path in directory.iterdir():
        if path.name not in ("cert.pem", "priv.key", "ca.pem"):
            path.unlink()
    (directory / "priv.key").chmod(0o600)
    return directory


def _sign(directory: Path, name: str, issuer: str, extensions: str) -> None:
    """`name`.csr signed by `issuer` into `name`.pem."""
    _openssl(["x509", "-req", "-in", f"{name}.csr", "-CA", f"{issuer}.pem", "-CAkey", f"{issuer}.key",
              "-CAcreateserial", "-out", f"{name}.pem", "-days", str(CERT_DAYS), "-extfile", extensions], directory)
