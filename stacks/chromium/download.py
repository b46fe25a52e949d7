"""Chromium (headless, Debian's package, driven by Playwright) as a quic-interop-runner client:
every URL of REQUESTS downloaded into /downloads, one after the other in one browser, so the
requests share Chromium's connections. The test case picks the HTTP version: `transfer-h1`
HTTP/1.1, `transfer-h2` HTTP/2 (both over TLS on TCP), `http3` HTTP/3 forced on the server's
origin; any other case exits 127. The server's certificate is accepted by its public key's
SHA-256 (`--ignore-certificate-errors-spki-list`, which QUIC honours too); the TLS keys go to
SSLKEYLOGFILE and Chromium's NetLog to $QLOGDIR/../netlog.json. Exit 0 when every file was saved.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

UNSUPPORTED = 127
DOWNLOAD_TIMEOUT_MS = 120_000
COMMON_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                "--disable-component-update", "--disable-sync", "--disable-default-apps", "--mute-audio"]
PROTOCOL_FLAGS = {"transfer-h1": ["--disable-http2", "--disable-quic"], "transfer-h2": ["--disable-quic"],
                  "http3": ["--enable-quic"]}


def leaf_spki(cert_pem: Path) -> str:
    """base64 SHA-256 of the first certificate's SubjectPublicKeyInfo (DER), as Chromium wants it."""
    key = subprocess.run(["openssl", "x509", "-in", str(cert_pem), "-noout", "-pubkey"], capture_output=True,
                         check=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=key, capture_output=True,
                         check=True).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def flags(testcase: str, urls: list[str], spki: str, logs: Path) -> list[str]:
    origins = sorted({f"{urlsplit(u).hostname}:{urlsplit(u).port or 443}" for u in urls})
    out = [*COMMON_FLAGS, *PROTOCOL_FLAGS[testcase], f"--ignore-certificate-errors-spki-list={spki}",
           f"--log-net-log={logs / 'netlog.json'}", "--net-log-capture-mode=Default"]
    if testcase == "http3":
        out.append("--origin-to-force-quic-on=" + ",".join(origins))
    if os.environ.get("SSLKEYLOGFILE"):
        out.append(f"--ssl-key-log-file={os.environ['SSLKEYLOGFILE']}")
    return out


def download_all(urls: list[str], args: list[str], downloads: Path, profile: Path) -> None:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("CHROMIUM") or "/usr/bin/chromium"
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(str(profile), executable_path=chromium, headless=True,
                                                        args=args, accept_downloads=True)
        try:
            page = context.pages[0] if context.pages else context.new_page()
            for url in urls:
                with page.expect_download(timeout=DOWNLOAD_TIMEOUT_MS) as started:
                    try:
                        page.goto(url, timeout=DOWNLOAD_TIMEOUT_MS)
                    except PlaywrightError as exc:  # a download aborts the navigation, as it should
                        if "Download is starting" not in str(exc):
                            raise
                download = started.value
                failure = download.failure()
                if failure is not None:
                    raise RuntimeError(f"{url}: download failed: {failure}")
                download.save_as(str(downloads / Path(urlsplit(url).path).name))
        finally:
            context.close()


def main() -> int:
    testcase = os.environ.get("TESTCASE", "")
    if testcase not in PROTOCOL_FLAGS:
        print(f"chromium: unsupported test case {testcase!r}", file=sys.stderr)
        return UNSUPPORTED
    urls = os.environ.get("REQUESTS", "").split()
    logs = Path(os.environ.get("QLOGDIR", "/logs/qlog")).parent
    profile = logs / "chromium-profile"
    profile.mkdir(parents=True, exist_ok=True)
    try:
        download_all(urls, flags(testcase, urls, leaf_spki(Path("/certs/cert.pem")), logs), Path("/downloads"),
                     profile)
    except Exception as exc:  # noqa: BLE001 - any failure is the interface's exit 1, with its reason
        print(f"chromium: {exc}", file=sys.stderr)
        return 1
    finally:
        subprocess.run(["rm", "-rf", str(profile)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
