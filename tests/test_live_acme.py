"""Certificates from an ACME CA, end to end (docs/live.md, "Certificates"): Debian's `pebble`
test CA and its DNS (`pebble-challtestsrv`, every name -> 127.0.0.1) in a network namespace of
our own; the service obtains one certificate per origin over HTTP-01, `protolab-net serve
--cert-dir` presents it (verified against pebble's root), and renewal replaces it — not while a
test holds the lock. Needs root, pebble (`make setup`) and a protolab-net with `--cert-dir`."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from protolab.lab.watchdog import NamespaceWatchdog

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
HOST = "speed.pl.test"


def _binary_has_cert_dir() -> bool:
    from protolab.lab.binary import find_binary

    try:
        binary = find_binary()
    except Exception:  # noqa: BLE001 - no binary: skip below
        return False
    return "--cert-dir" in subprocess.run([str(binary), "serve", "--help"], capture_output=True, text=True).stdout


pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(shutil.which("pebble") is None, reason="Debian's pebble is not installed (make setup)"),
]


@dataclass
class Pebble:
    namespace: str
    directory_url: str
    tls_cert: Path  # verifies pebble's own HTTPS (the ACME directory)
    work: Path


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """pebble's HTTPS certificate: the Debian package ships none."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pebble")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "pebble.pem", directory / "pebble.key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def pebble(tmp_path: Path) -> Iterator[Pebble]:
    namespace = f"pl-acme-{os.getpid()}"
    watchdog = NamespaceWatchdog([namespace])  # a killed test run leaves neither it nor pebble
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        subprocess.run(["ip", "-n", namespace, "link", "set", "lo", "up"], check=True)
        cert, key = _self_signed(tmp_path)
        config = tmp_path / "pebble.json"
        config.write_text(json.dumps({"pebble": {
            "listenAddress": "127.0.0.1:14000", "managementListenAddress": "127.0.0.1:15000",
            "certificate": str(cert), "privateKey": str(key), "httpPort": 80, "tlsPort": 5001,
            "ocspResponderURL": "", "externalAccountBindingRequired": False}}))
        log = (tmp_path / "pebble.log").open("wb")
        processes.append(subprocess.Popen(
            ["ip", "netns", "exec", namespace, "pebble-challtestsrv", "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "",
             "-dns01", "127.0.0.1:8053", "-http01", "", "-https01", "", "-tlsalpn01", "", "-management", "127.0.0.1:8055"],
            stdout=log, stderr=subprocess.STDOUT))
        env = dict(os.environ, PEBBLE_VA_NOSLEEP="1", PEBBLE_WFE_NONCEREJECT="0")
        processes.append(subprocess.Popen(
            ["ip", "netns", "exec", namespace, "pebble", "-config", str(config), "-dnsserver", "127.0.0.1:8053"],
            stdout=log, stderr=subprocess.STDOUT, env=env))
        yield Pebble(namespace, "https://127.0.0.1:14000/dir", cert, tmp_path)
    finally:
        for process in processes:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        subprocess.run(["ip", "netns", "del", namespace], check=False)
        watchdog.stop()


def _inside(pebble: Pebble, function: str, timeout_s: float = 240, module: str = "test_live_acme") -> dict[str, object]:
    """Runs `function` of `module` (a test module) in the namespace (a process there) and returns its JSON."""
    code = (f"import sys, json; sys.path[:0] = [{str(SRC)!r}, {str(HERE)!r}]; import {module} as t; "
            f"print(json.dumps(t.{function}({str(pebble.work)!r}, {pebble.directory_url!r}, {str(pebble.tls_cert)!r})))")
    done = subprocess.run(["ip", "netns", "exec", pebble.namespace, sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=timeout_s, check=False)
    assert done.returncode == 0, done.stderr[-3000:] + (pebble.work / "pebble.log").read_text()[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- run inside the namespace --------------------------------------------------------------------


def _wait_for_pebble(directory_url: str, tls_cert: str) -> None:
    import ssl
    import urllib.request

    context = ssl.create_default_context(cafile=tls_cert)
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(directory_url, context=context, timeout=2).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _pebble_root(tls_cert: str) -> str:
    import ssl
    import urllib.request

    context = ssl.create_default_context(cafile=tls_cert)
    return urllib.request.urlopen("https://127.0.0.1:15000/roots/0", context=context, timeout=10).read().decode()


def _presented(root_pem: Path, hostname: str, port: int) -> tuple[int, str, str | None]:
    """The serial of the certificate the server presents for `hostname` (verified against
    pebble's root), and the status and Alt-Svc of the page (a load origin: its configuration
    document, it has no page)."""
    import http.client
    import socket
    import ssl

    from cryptography import x509

    context = ssl.create_default_context(cafile=str(root_pem))
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    # Our own socket: the name must go in the SNI, and there is no DNS for it in the namespace.
    connection.sock = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                          server_hostname=hostname)
    der = connection.sock.getpeercert(binary_form=True)
    connection.request("GET", "/" if hostname == HOST else "/.well-known/nq", headers={"Host": hostname})
    response = connection.getresponse()
    response.read()
    connection.close()
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number, str(response.status), response.getheader("alt-svc")


def obtain_serve_and_renew(work: str, directory_url: str, tls_cert: str) -> dict[str, object]:
    from protolab.lab.binary import find_binary
    from protolab.live.acme import AcmeSettings
    from protolab.live.coordinator import Coordinator
    from protolab.live.service import Certificates, MeasurementServer, SpeedtestSite

    _wait_for_pebble(directory_url, tls_cert)
    root = Path(work) / "pebble-root.pem"
    data = Path(work) / "data"
    site = SpeedtestSite(HOST, "127.0.0.1", "http://127.0.0.1:8090", load_origins=2)
    settings = AcmeSettings(directory_url, "ops@example.org", Path(tls_cert), renew_before_days=30)
    certificates = Certificates(settings, data, site, log=lambda line: None)
    obtained = certificates.ensure()
    again = certificates.ensure()  # nothing due
    root.write_text(_pebble_root(tls_cert))
    coordinator = Coordinator(data, log=lambda line: None)
    measurement = MeasurementServer(find_binary(), data, site, cert_dir=certificates.cert_dir)
    measurement.start()
    try:
        first = {h: _presented(root, h, 443) for h in certificates.hostnames}
        expiry = certificates.due(datetime.datetime.now(datetime.UTC))
        # Renewal "before expiry": make every certificate due by asking for more days than it has.
        renewing = Certificates(AcmeSettings(directory_url, None, Path(tls_cert), renew_before_days=100_000),
                                data, site, log=lambda line: None)
        token = coordinator.issue_token({"client": "cli"})["token"]
        while_busy = renewing.renew(coordinator, measurement)
        coordinator.release(token)
        renewed = renewing.renew(coordinator, measurement)
        second = {h: _presented(root, h, 443) for h in certificates.hostnames}
        lock_free = not coordinator.status()["busy"]
    finally:
        measurement.stop()
        coordinator.close()
    return {"obtained": obtained, "again": again, "due_after_obtaining": expiry, "renewed_while_busy": while_busy,
            "renewed": renewed, "lock_free_after": lock_free,
            "first": {h: [str(v[0]), v[1], v[2]] for h, v in first.items()},
            "second": {h: [str(v[0]), v[1], v[2]] for h, v in second.items()}}


def obtain_and_renew_files(work: str, directory_url: str, tls_cert: str) -> dict[str, object]:
    from cryptography import x509

    from protolab.live.acme import AcmeSettings, ensure_certificates

    _wait_for_pebble(directory_url, tls_cert)
    acme = Path(work) / "acme"
    names = ["a.pl.test", "b.pl.test"]
    settings = AcmeSettings(directory_url, None, Path(tls_cert))
    obtained = ensure_certificates(settings, acme, names, "127.0.0.1", 80)

    def serials() -> list[str]:
        return [str(x509.load_pem_x509_certificate((acme / "certs" / f"{n}.pem").read_bytes()).serial_number)
                for n in names]

    def sans(name: str) -> list[str]:
        cert = x509.load_pem_x509_certificate((acme / "certs" / f"{name}.pem").read_bytes())
        return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)

    before, account = serials(), (acme / "account.key.pem").read_bytes()
    not_due = ensure_certificates(settings, acme, names, "127.0.0.1", 80)
    # An interrupted renewal (a new key beside the old chain) is found and repaired.
    (acme / "certs" / "b.pl.test.key.pem").write_text((acme / "certs" / "a.pl.test.key.pem").read_text())
    repaired = ensure_certificates(settings, acme, names, "127.0.0.1", 80)
    renewed = ensure_certificates(AcmeSettings(directory_url, None, Path(tls_cert), renew_before_days=100_000),
                                  acme, names, "127.0.0.1", 80)
    return {"obtained": obtained, "not_due": not_due, "repaired": repaired, "renewed": renewed,
            "sans": {n: sans(n) for n in names}, "before": before, "after": serials(),
            "same_account": (acme / "account.key.pem").read_bytes() == account}


# -- the tests -----------------------------------------------------------------------------------


def test_certificates_are_obtained_over_http01_one_per_name_and_renewed(pebble: Pebble) -> None:
    out = _inside(pebble, "obtain_and_renew_files")
    assert out["obtained"] == ["a.pl.test", "b.pl.test"] and out["not_due"] == []
    assert out["repaired"] == ["b.pl.test"] and out["renewed"] == ["a.pl.test", "b.pl.test"]
    assert out["sans"] == {"a.pl.test": ["a.pl.test"], "b.pl.test": ["b.pl.test"]}
    before, after = out["before"], out["after"]
    assert isinstance(before, list) and isinstance(after, list)
    assert len(set(before)) == 2 and not set(before) & set(after)
    assert out["same_account"] is True


@pytest.mark.skipif(not _binary_has_cert_dir(), reason="protolab-net without --cert-dir: rebuild it")
def test_certificates_from_pebble_are_served_and_renewed(pebble: Pebble) -> None:
    out = _inside(pebble, "obtain_serve_and_renew")
    hostnames = [HOST, f"load1.{HOST}", f"load2.{HOST}"]
    assert out["obtained"] == hostnames and out["again"] == []
    assert out["due_after_obtaining"] is False
    first, second = out["first"], out["second"]
    assert isinstance(first, dict) and isinstance(second, dict)
    for hostname in hostnames:  # verified against pebble's root for each name, the page served
        assert first[hostname][1:] == ["200", 'h3=":443"']
        assert second[hostname][1:] == ["200", 'h3=":443"']
        assert first[hostname][0] != second[hostname][0]  # a new certificate after renewal
    assert len({first[h][0] for h in hostnames}) == 3  # one certificate per origin
    assert out["renewed_while_busy"] is False and out["renewed"] is True and out["lock_free_after"] is True
    acme = pebble.work / "data" / "acme"
    assert (acme / "certs" / f"{HOST}.key.pem").stat().st_mode & 0o777 == 0o600
    assert (acme / "account.key.pem").is_file()
