"""Certificates from an ACME CA for the speed-test server (docs/live.md, "Certificates"), with
certbot's `acme` library: one certificate per origin (the page's and each load origin's: a
certificate naming several would let Chromium pool their connections), HTTP-01 challenges
answered on the cleartext port, renewal some days before expiry.

Files, in DIR (the service's DATA/acme): `account.key.pem` (the ACME account's key, kept so
that renewals use the same account), `certs/<hostname>.pem` (the chain, leaf first) and
`certs/<hostname>.key.pem` (its key, mode 0600), which `protolab-net serve --cert-dir` reads.

Why Python's `acme` rather than Rust's `instant-acme`: certificates are obtained and renewed
while the measurement server is stopped (the service holds the coordinator's lock meanwhile, so
no test is cut short), so the server itself needs no ACME code, only `--cert-dir`; and the
service's supervision lives in Python.
"""

from __future__ import annotations

import datetime
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import TCPServer
from typing import Any

from protolab.errors import ProtolabError
from protolab.files import write_text_atomically

CHALLENGE_PREFIX = "/.well-known/acme-challenge/"
ORDER_TIMEOUT_S = 90.0


class AcmeError(ProtolabError):
    """A certificate could not be obtained (the CA refused, a challenge failed, no answer)."""


@dataclass(frozen=True)
class AcmeSettings:
    """The CA's directory URL, the contact address, the CA bundle that verifies the directory's
    own HTTPS (None: the system's), and how many days before expiry a certificate is renewed."""

    directory_url: str
    email: str | None = None
    ca_bundle: Path | None = None
    renew_before_days: float = 30.0


def cert_paths(cert_dir: Path, hostname: str) -> tuple[Path, Path]:
    return cert_dir / f"{hostname}.pem", cert_dir / f"{hostname}.key.pem"


def expires_at(cert_pem: bytes) -> datetime.datetime:
    """The first certificate's notAfter (UTC)."""
    from cryptography import x509

    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc


def needs_certificate(cert_dir: Path, hostname: str, now: datetime.datetime, renew_before_days: float) -> bool:
    """True without a certificate, with an unreadable one, one whose key is not the key file's
    (a renewal interrupted between the two files), or within `renew_before_days` of its expiry."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert_path, key_path = cert_paths(cert_dir, hostname)
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return True
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if cert.public_key().public_bytes(*spki) != key.public_key().public_bytes(*spki):
        return True
    return cert.not_valid_after_utc - now <= datetime.timedelta(days=renew_before_days)


class _ChallengeHandler(BaseHTTPRequestHandler):
    server: ChallengeServer

    def do_GET(self) -> None:
        token = self.path[len(CHALLENGE_PREFIX):] if self.path.startswith(CHALLENGE_PREFIX) else None
        body = self.server.answers.get(token or "")
        data = (body or "not found\n").encode()
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the CA's validation requests are not the service's log."""


class ChallengeServer(ThreadingHTTPServer):
    """Answers HTTP-01 challenges (`GET /.well-known/acme-challenge/<token>`) from `answers`."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int) -> None:
        self.answers: dict[str, str] = {}
        super().__init__((host, port), _ChallengeHandler)

    def server_bind(self) -> None:
        TCPServer.server_bind(self)  # no reverse DNS lookup of the host (HTTPServer's would)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])


@contextmanager
def challenge_server(host: str, port: int) -> Iterator[ChallengeServer]:
    server = ChallengeServer(host, port)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _pem_key(key: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _account_key(path: Path) -> Any:
    """The account's key (RSA 2048, which every CA takes), made on first use."""
    import josepy
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    if path.is_file():
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        write_text_atomically(path, _pem_key(key), durable=True)
        os.chmod(path, 0o600)
    return josepy.JWKRSA(key=key)


class AcmeClient:
    """One ACME account at one CA; `obtain(hostname, answers)` gets a certificate for one name."""

    def __init__(self, settings: AcmeSettings, account_key_path: Path) -> None:
        from acme import client, errors, messages

        self.settings = settings
        self._key = _account_key(account_key_path)
        verify: bool | str = str(settings.ca_bundle) if settings.ca_bundle is not None else True
        network = client.ClientNetwork(self._key, user_agent="protolab-live", verify_ssl=verify)  # type: ignore[arg-type]
        try:
            directory = client.ClientV2.get_directory(settings.directory_url, network)
            self._client = client.ClientV2(directory, network)
            registration = messages.NewRegistration.from_data(email=settings.email, terms_of_service_agreed=True)
            try:
                self._client.new_account(registration)
            except errors.ConflictError as known:  # the key's account exists already (a renewal)
                network.account = messages.RegistrationResource(body=messages.Registration(), uri=known.location)
        except Exception as exc:  # noqa: BLE001 - requests' and acme's errors, named for the operator
            raise AcmeError(f"ACME CA {settings.directory_url}: {type(exc).__name__}: {exc}") from exc

    def obtain(self, hostname: str, answers: dict[str, str]) -> tuple[str, str]:
        """(chain PEM, key PEM) for `hostname`; the HTTP-01 answers are put in `answers` (the
        challenge server's table) while the CA validates."""
        from acme import challenges, crypto_util, messages
        from cryptography.hazmat.primitives.asymmetric import ec

        key_pem = _pem_key(ec.generate_private_key(ec.SECP256R1()))
        try:
            order = self._client.new_order(crypto_util.make_csr(key_pem.encode(), [hostname]))
            for authorization in order.authorizations:
                if authorization.body.status == messages.STATUS_VALID:
                    continue  # the CA reuses an authorization this account earned recently
                challenge = next((c for c in authorization.body.challenges if isinstance(c.chall, challenges.HTTP01)), None)
                if challenge is None:
                    raise AcmeError(f"{hostname}: the CA offers no HTTP-01 challenge")
                response, validation = challenge.response_and_validation(self._key)
                answers[challenge.chall.encode("token")] = validation
                self._client.answer_challenge(challenge, response)
            deadline = datetime.datetime.now() + datetime.timedelta(seconds=ORDER_TIMEOUT_S)
            order = self._client.poll_and_finalize(order, deadline=deadline)
        except AcmeError:
            raise
        except Exception as exc:  # noqa: BLE001 - acme's errors (ValidationError, TimeoutError, ...)
            raise AcmeError(f"{hostname}: no certificate from {self.settings.directory_url}: "
                            f"{type(exc).__name__}: {exc}") from exc
        return order.fullchain_pem, key_pem


def ensure_certificates(settings: AcmeSettings, acme_dir: Path, hostnames: Sequence[str], host: str, http_port: int,
                        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
                        log: Callable[[str], None] = lambda line: None) -> list[str]:
    """Obtains a certificate for every hostname that has none or whose certificate expires
    within `renew_before_days`, answering HTTP-01 on HOST:HTTP_PORT (which must be free: the
    measurement server is not running). Returns the hostnames renewed. Each certificate is
    written atomically (key, then chain); a crash between the two leaves a pair that
    `needs_certificate` finds mismatched, so the next call obtains it again."""
    cert_dir = acme_dir / "certs"
    due = [h for h in hostnames if needs_certificate(cert_dir, h, now(), settings.renew_before_days)]
    if not due:
        return []
    client = AcmeClient(settings, acme_dir / "account.key.pem")
    with challenge_server(host, http_port) as server:
        for hostname in due:
            chain, key = client.obtain(hostname, server.answers)
            cert_path, key_path = cert_paths(cert_dir, hostname)
            write_text_atomically(key_path, key, durable=True)
            os.chmod(key_path, 0o600)
            write_text_atomically(cert_path, chain, durable=True)
            log(f"certificate for {hostname} from {settings.directory_url}, valid until "
                f"{expires_at(chain.encode()).isoformat()}")
    return due
