"""`protolab serve-live` (docs/live.md): the coordinator as a foreground process."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from protolab.errors import ProtolabError


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


def serve_live_command(
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
) -> None:
    """Run the live-measurement coordinator: one responsiveness test at a time, each result
    stored with its server qlogs. Runs in the foreground until Ctrl-C or SIGTERM."""
    host, port = parse_listen(listen)
    if not allow_origin or any(c in allow_origin for c in "\r\n"):
        raise typer.BadParameter("expected an origin such as * or https://example.test", param_hint="--allow-origin")
    from protolab.live.coordinator import Coordinator
    from protolab.live.server import serve

    try:
        coordinator = Coordinator(data, lock_timeout_s=lock_timeout_s, max_upload_bytes=max_upload_bytes,
                                  qlog_dir=qlog_dir)
    except OSError as exc:
        raise ProtolabError(f"cannot use the data directory {data}: {exc}") from exc
    try:
        server = serve(coordinator, host, port, allow_origin=allow_origin)
    except OSError as exc:
        coordinator.close()
        raise ProtolabError(f"cannot listen on {listen}: {exc.strerror or exc}") from exc
    try:
        # Announced inside the try: a SIGTERM sent as soon as the line is read must find the
        # handler in place (on a busy machine the server thread can answer before we get here).
        typer.echo(f"protolab serve-live: listening on {server.url}, data in {coordinator.data_dir}, "
                   f"lock timeout {lock_timeout_s:g} s; Ctrl-C stops", err=True)
        server.wait()
    except KeyboardInterrupt:
        typer.echo("protolab serve-live: stopping", err=True)
    finally:
        server.close()
