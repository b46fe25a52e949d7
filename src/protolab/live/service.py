"""The live service as one long-running process (docs/live.md, "Run it on a server"): the
coordinator's API and, with a speed-test host, the measurement server `protolab-net serve` as a
supervised child serving the speed-test page over HTTP/3 with TCP fallback (Alt-Svc), its
qlogs written where the coordinator collects them.

The child is the service's: if it dies the service stops with an error (a process manager
restarts both), and stopping the service stops it (SIGTERM, then SIGKILL after 10 s).
"""

from __future__ import annotations

import datetime
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from protolab.errors import ProtolabError
from protolab.live.acme import AcmeSettings, ensure_certificates, needs_certificate
from protolab.live.coordinator import Coordinator, LiveError
from protolab.live.page import load_hostnames, write_manifest

STARTUP_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0


class ServiceError(ProtolabError):
    """The measurement server could not be started or stopped unexpectedly."""


@dataclass(frozen=True)
class SpeedtestSite:
    """Where the measurement server serves the page: `hostname` (its origin and the load
    origins load1.<hostname> ..., all resolving to `address`), the ports, and the coordinator's
    URL as the page's clients reach it (served at `/?coordinator=...`)."""

    hostname: str
    address: str
    coordinator_url: str
    https_port: int = 443
    http_port: int = 80
    max_connections: int = 4096
    load_origins: int = 16


class MeasurementServer:
    """`protolab-net serve` for the speed-test page, as a child process. Its files live in
    DATA/site (the manifest), DATA/tls (certificates) and DATA/qlog-incoming (qlogs until a
    test's upload moves them into the test)."""

    def __init__(self, binary: Path, data_dir: Path, site: SpeedtestSite, cert_dir: Path | None = None) -> None:
        self.binary = binary
        self.site = site
        self.cert_dir = cert_dir
        self.site_dir = data_dir / "site"
        self.tls_dir = data_dir / "tls"
        self.qlog_dir = data_dir / "qlog-incoming"
        self.log_path = data_dir / "protolab-net-serve.log"
        self.process: subprocess.Popen[bytes] | None = None

    def command(self, manifest: Path) -> list[str]:
        site = self.site
        return [str(self.binary), "serve", "--manifest", str(manifest), "--tls-dir", str(self.tls_dir),
                "--qlog", str(self.qlog_dir), "--listen", site.address, "--https-port", str(site.https_port),
                "--http-port", str(site.http_port), "--raw-port", "off", "--lab", "live",
                "--max-connections", str(site.max_connections),
                # On the internet, a pending handshake or a client that stops reading (or never
                # acknowledges) holds a connection slot: the live service keeps 10 s and 30 s
                # (docs/live.md, "Abuse") where the lab follows nginx's 60 s and waits out TCP's
                # retransmissions.
                "--handshake-timeout-ms", "10000", "--send-timeout-ms", "30000", "--strict-send-timeout",
                *(["--cert-dir", str(self.cert_dir)] if self.cert_dir is not None else [])]

    def start(self) -> None:
        """Writes the page's manifest, starts the server and waits until its TLS port answers."""
        self.qlog_dir.mkdir(parents=True, exist_ok=True)
        queries = [urlencode({"coordinator": self.site.coordinator_url}),
                   urlencode({"coordinator": self.site.coordinator_url, "autostart": "1"})]
        try:
            manifest = write_manifest(self.site_dir, self.site.hostname, self.site.address, queries=queries,
                                      load_origins=self.site.load_origins)
        except ValueError as exc:
            raise ServiceError(f"speed-test site: {exc}") from exc
        with self.log_path.open("ab") as log:
            # Its own process group: a Ctrl-C in a terminal reaches us, and we stop it in order.
            self.process = subprocess.Popen(self.command(manifest), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            self.check()
            try:
                with socket.create_connection((self.site.address, self.site.https_port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise ServiceError(f"protolab-net serve did not listen on {self.site.address}:{self.site.https_port} "
                           f"within {STARTUP_TIMEOUT_S:g} s (its log: {self.log_path})")

    def check(self) -> None:
        """Raises ServiceError if the server has exited."""
        if self.process is not None and (code := self.process.poll()) is not None:
            raise ServiceError(f"protolab-net serve exited with status {code} (its log: {self.log_path})")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # its own group (start_new_session): only its processes
            process.wait()


class Certificates:
    """The speed-test site's certificates from an ACME CA (protolab.live.acme): obtained before
    the measurement server first starts, renewed while it runs by stopping it for the
    challenges, with the coordinator's lock held so that no test runs meanwhile."""

    def __init__(self, settings: AcmeSettings, data_dir: Path, site: SpeedtestSite,
                 log: Callable[[str], None]) -> None:
        self.settings = settings
        self.acme_dir = data_dir / "acme"
        self.cert_dir = self.acme_dir / "certs"
        self.site = site
        self.hostnames = [site.hostname, *load_hostnames(site.hostname, site.load_origins)]
        self._log = log

    def due(self, now: datetime.datetime) -> bool:
        return any(needs_certificate(self.cert_dir, h, now, self.settings.renew_before_days) for h in self.hostnames)

    def ensure(self) -> list[str]:
        """Obtains what is missing or due (the measurement server must be stopped: port 80)."""
        return ensure_certificates(self.settings, self.acme_dir, self.hostnames, self.site.address,
                                   self.site.http_port, log=self._log)

    def renew(self, coordinator: Coordinator, measurement: MeasurementServer) -> bool:
        """Renews if due and no test runs: takes the lock, stops the server, renews, starts it
        again, frees the lock. False (try later) while a test holds the lock."""
        if not self.due(datetime.datetime.now(datetime.UTC)):
            return False
        try:
            token = coordinator.issue_token({"client": "maintenance: certificate renewal"})["token"]
        except LiveError:
            return False
        try:
            measurement.stop()
            try:
                self.ensure()
            finally:
                measurement.start()  # with the new certificates, or the old ones if renewal failed
        finally:
            coordinator.release(token)
        return True
