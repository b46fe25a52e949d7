"""`protolab serve-live` (docs/live.md): the coordinator as a foreground process."""

from __future__ import annotations

import ipaddress
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from protolab.errors import ProtolabError

if TYPE_CHECKING:  # the service's modules load when it starts: `protolab --help` stays light
    from protolab.live.coordinator import Coordinator
    from protolab.live.limits import ServiceLimits
    from protolab.live.server import LiveServer
    from protolab.live.acme import AcmeSettings
    from protolab.live.service import Certificates, MeasurementServer, SpeedtestSite

LOG_FORMATS = ("text", "json")

# How often the service checks for tests past --retain-days and certificates due for renewal;
# $PROTOLAB_LIVE_MAINTENANCE_S shortens it (tests of renewal).
MAINTENANCE_INTERVAL_S = float(os.environ.get("PROTOLAB_LIVE_MAINTENANCE_S", "60"))


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT, with IPv6 hosts in brackets ([::1]:8080); port 0 lets the system choose."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise typer.BadParameter(f"expected HOST:PORT (e.g. 127.0.0.1:8090 or [::1]:8090), got {text!r}",
                                 param_hint="--listen")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise typer.BadParameter(f"write an IPv6 host in brackets, e.g. [{host}]:{port_text}", param_hint="--listen")
    return host, int(port_text)


def _limits(rate_per_address: float, burst_per_address: int, tests_per_address_per_hour: int,
            max_in_flight: int, connections: tuple[int, int] = (0, 0), head_timeout_s: float = 0) -> ServiceLimits:
    """The CLI's limits; 0 turns a limit off. `connections`: (in all, per address)."""
    from protolab.live.limits import AddressRateLimiter, ConcurrencyCap, ConnectionGate, ServiceLimits

    requests = AddressRateLimiter(rate_per_address, burst_per_address) if rate_per_address > 0 else None
    tests = (AddressRateLimiter(tests_per_address_per_hour / 3600.0, tests_per_address_per_hour)
             if tests_per_address_per_hour > 0 else None)
    total, per_address = connections
    gate = ConnectionGate(total or 1 << 30, per_address or 1 << 30) if total > 0 or per_address > 0 else None
    return ServiceLimits(requests=requests, tests=tests,
                         in_flight=ConcurrencyCap(max_in_flight) if max_in_flight > 0 else None,
                         connections=gate, head_timeout_s=head_timeout_s or None)


def _addresses(texts: list[str], option: str) -> frozenset[str]:
    try:
        return frozenset(str(ipaddress.ip_address(text)) for text in texts)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


def _site(speedtest_host: str | None, speedtest_address: str | None, public_url: str | None, listen_url: str,
          https_port: int, http_port: int) -> SpeedtestSite | None:
    if speedtest_host is None and speedtest_address is None:
        return None
    if speedtest_host is None or speedtest_address is None:
        raise typer.BadParameter("give both --speedtest-host and --speedtest-address", param_hint="--speedtest-host")
    from protolab.live.service import SpeedtestSite

    return SpeedtestSite(speedtest_host, speedtest_address, public_url or listen_url, https_port, http_port)


def _supervise(server: LiveServer, coordinator: Coordinator, measurement: MeasurementServer | None,
               certificates: Certificates | None) -> None:
    """Until the server stops or the measurement server dies (ServiceError): every minute ages
    tests out (an idle service stores nothing that would trigger retention) and renews
    certificates that are due (when no test runs)."""
    next_check = time.monotonic() + MAINTENANCE_INTERVAL_S
    while server.thread is not None and server.thread.is_alive():
        server.thread.join(0.5)
        if measurement is not None:
            measurement.check()
        if time.monotonic() >= next_check:
            coordinator.enforce_retention()
            if certificates is not None and measurement is not None:
                certificates.renew(coordinator, measurement)
            next_check = time.monotonic() + MAINTENANCE_INTERVAL_S


def serve_live_command(  # noqa: PLR0913 - one option per knob of the service (docs/live.md)
    listen: Annotated[str, typer.Option("--listen", metavar="HOST:PORT",
                                        help="Address to listen on ([::1]:8090 for IPv6; port 0 picks a free one).")],
    data: Annotated[Path, typer.Option("--data", metavar="DIR", file_okay=False,
                                       help="Where tests are stored (DIR/tests/<token>/, DIR/live.duckdb).")],
    lock_timeout_s: Annotated[float, typer.Option("--lock-timeout-s", min=0.001,
                                                  help="A token's lock is released after this long without an upload.")] = 120.0,
    max_upload_bytes: Annotated[int, typer.Option("--max-upload-bytes", min=1,
                                                  help="Largest result body accepted.")] = 1 << 20,
    qlog_dir: Annotated[Path | None, typer.Option("--qlog-dir", metavar="DIR", exists=True, file_okay=False,
                                                  help="The test server's qlog directory: *.qlog files written "
                                                       "during a test are moved into the test.")] = None,
    allow_origin: Annotated[str, typer.Option("--allow-origin",
                                              help="Access-Control-Allow-Origin of every answer.")] = "*",
    rate_per_address: Annotated[float, typer.Option("--rate-per-address", min=0,
                                                    help="API requests per second per client address, sustained "
                                                         "(0: no limit); beyond: 429.")] = 2.0,
    burst_per_address: Annotated[int, typer.Option("--burst-per-address", min=1,
                                                   help="API requests one address may make at once.")] = 40,
    tests_per_address_per_hour: Annotated[int, typer.Option("--tests-per-address-per-hour", min=0,
                                                            help="Tests (tokens) per client address and hour "
                                                                 "(0: no limit); beyond: 429.")] = 30,
    max_in_flight: Annotated[int, typer.Option("--max-in-flight", min=0,
                                               help="Requests served at once (0: no cap); beyond: 503.")] = 64,
    max_connections: Annotated[int, typer.Option("--max-connections", min=0,
                                                 help="Connections open at once (0: no cap); beyond: 503 at "
                                                      "accept.")] = 512,
    max_connections_per_address: Annotated[int, typer.Option("--max-connections-per-address", min=0,
                                                             help="Connections open at once per client address "
                                                                  "(0: no cap); beyond: 503 at accept.")] = 16,
    head_timeout_s: Annotated[float, typer.Option("--head-timeout-s", min=0,
                                                  help="Time for a request's line and headers to arrive "
                                                       "(0: only the 30 s socket timeout per read).")] = 10.0,
    retain_tests: Annotated[int | None, typer.Option("--retain-tests", min=0,
                                                     help="Keep at most this many tests (oldest removed).")] = None,
    retain_days: Annotated[float | None, typer.Option("--retain-days", min=0,
                                                      help="Remove tests older than this.")] = None,
    retain_bytes: Annotated[int | None, typer.Option("--retain-bytes", min=0,
                                                     help="Keep at most this many bytes of tests.")] = None,
    log_format: Annotated[str, typer.Option("--log-format", help="Request log: text or json (one object a line).")] = "text",
    speedtest_host: Annotated[str | None, typer.Option("--speedtest-host", metavar="HOSTNAME",
                                                       help="Also run protolab-net serve for the speed-test page "
                                                            "at https://HOSTNAME/ (and load1..16.HOSTNAME).")] = None,
    speedtest_address: Annotated[str | None, typer.Option("--speedtest-address", metavar="IPV4",
                                                          help="The address HOSTNAME resolves to.")] = None,
    public_url: Annotated[str | None, typer.Option("--public-url", metavar="URL",
                                                   help="The coordinator's URL as browsers reach it "
                                                        "(default: the --listen address).")] = None,
    https_port: Annotated[int, typer.Option("--https-port", min=1, max=65535, help="TLS and HTTP/3 port of the page.")] = 443,
    http_port: Annotated[int, typer.Option("--http-port", min=1, max=65535, help="Cleartext port of the page.")] = 80,
    protolab_net: Annotated[Path | None, typer.Option("--protolab-net", metavar="PATH",
                                                      help="The protolab-net binary (default: $PROTOLAB_NET, "
                                                           "the repository's build, PATH).")] = None,
    trusted_proxy: Annotated[list[str] | None, typer.Option("--trusted-proxy", metavar="ADDR",
                                                          help="A reverse proxy in front of the API whose "
                                                               "X-Forwarded-For names the client (repeatable).")] = None,
    acme_directory: Annotated[str | None, typer.Option("--acme-directory", metavar="URL",
                                                       help="Certificates for the speed-test site from this ACME "
                                                            "directory (HTTP-01 on --http-port).")] = None,
    acme_email: Annotated[str | None, typer.Option("--acme-email", help="Contact address of the ACME account.")] = None,
    acme_ca_bundle: Annotated[Path | None, typer.Option("--acme-ca-bundle", exists=True, dir_okay=False,
                                                        help="CA bundle verifying the ACME directory's HTTPS "
                                                             "(a test CA's).")] = None,
    acme_renew_days: Annotated[float, typer.Option("--acme-renew-days", min=0,
                                                   help="Renew a certificate this many days before it expires.")] = 30.0,
) -> None:
    """Run the live-measurement service: the coordinator (one responsiveness test at a time,
    each result stored with its server qlogs) and, with --speedtest-host, the measurement
    server with the speed-test page. Runs in the foreground until Ctrl-C or SIGTERM."""
    host, port = parse_listen(listen)
    if not allow_origin or any(c in allow_origin for c in "\r\n"):
        raise typer.BadParameter("expected an origin such as * or https://example.test", param_hint="--allow-origin")
    if log_format not in LOG_FORMATS:
        raise typer.BadParameter(f"expected one of {', '.join(LOG_FORMATS)}", param_hint="--log-format")
    listen_url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    site = _site(speedtest_host, speedtest_address, public_url, listen_url, https_port, http_port)
    if site is not None and qlog_dir is not None:
        raise typer.BadParameter("the speed-test server writes its qlogs into DATA/qlog-incoming", param_hint="--qlog-dir")
    if acme_directory is not None and site is None:
        raise typer.BadParameter("certificates are for the speed-test site: give --speedtest-host too",
                                 param_hint="--acme-directory")
    from protolab.live.acme import AcmeSettings
    from protolab.live.retention import RetentionPolicy

    acme = None if acme_directory is None else AcmeSettings(acme_directory, acme_email or None,  # "": none
                                                            acme_ca_bundle, acme_renew_days)
    retention = RetentionPolicy(retain_tests, None if retain_days is None else retain_days * 86400.0, retain_bytes)
    _run_service(data, listen, site, acme, protolab_net,
                 {"lock_timeout_s": lock_timeout_s, "max_upload_bytes": max_upload_bytes, "qlog_dir": qlog_dir,
                  "retention": retention},
                 {"host": host, "port": port, "allow_origin": allow_origin, "log_format": log_format,
                  "trusted_proxies": _addresses(trusted_proxy or [], "--trusted-proxy"),
                  "limits": _limits(rate_per_address, burst_per_address, tests_per_address_per_hour, max_in_flight,
                                    (max_connections, max_connections_per_address), head_timeout_s)})


def _run_service(data: Path, listen: str, site: SpeedtestSite | None, acme: AcmeSettings | None,
                 protolab_net: Path | None, coordinator_options: dict[str, Any], serve_options: dict[str, Any]) -> None:
    """Starts the coordinator, its API and (with a site) the measurement server, with ACME
    certificates obtained first if asked; runs until stopped; stops them in reverse order."""
    from protolab.lab.binary import find_binary
    from protolab.live.coordinator import Coordinator
    from protolab.live.server import serve
    from protolab.live.service import Certificates, MeasurementServer

    def say(line: str) -> None:
        typer.echo(f"protolab serve-live: {line}", err=True)

    measurement = certificates = None
    if site is not None:
        certificates = None if acme is None else Certificates(acme, data.resolve(), site, say)
        measurement = MeasurementServer(find_binary(protolab_net), data.resolve(), site,
                                        cert_dir=None if certificates is None else certificates.cert_dir)
        measurement.qlog_dir.mkdir(parents=True, exist_ok=True)
        coordinator_options["qlog_dir"] = measurement.qlog_dir
    try:
        coordinator = Coordinator(data, **coordinator_options)
    except OSError as exc:
        raise ProtolabError(f"cannot use the data directory {data}: {exc}") from exc
    try:
        server = serve(coordinator, **serve_options)
    except OSError as exc:
        coordinator.close()
        raise ProtolabError(f"cannot listen on {listen}: {exc.strerror or exc}") from exc
    try:
        if certificates is not None:
            certificates.ensure()
        if measurement is not None:
            measurement.start()
        # Announced inside the try: a SIGTERM sent as soon as the line is read must find the
        # handler in place (on a busy machine the server thread can answer before we get here).
        page = "" if site is None else f", speed test at https://{site.hostname}:{site.https_port}/"
        say(f"listening on {server.url}, data in {coordinator.data_dir}, "
            f"lock timeout {coordinator.lock_timeout_s:g} s{page}; Ctrl-C stops")
        _supervise(server, coordinator, measurement, certificates)
    except KeyboardInterrupt:
        say("stopping")
    finally:
        server.close()
        if measurement is not None:
            measurement.stop()
