"""The live-measurement coordinator (seed 003 §5.3): at most one responsiveness test at a time.

A test under load disturbs any other test running at the same time, so a client first asks for
a token; while its token is held nobody else gets one. Uploading the result releases the lock,
and so does the lock timeout, so a client that never comes back cannot block the service. The
result, the token's metadata and the server-side qlogs written during the test are stored
together under DATA/tests/<token>/ and indexed in DATA/live.duckdb (docs/live.md).

This module is the HTTP-free core (tests drive it with a fake clock); protolab.live.server puts
it behind a JSON API.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protolab.errors import ProtolabError
from protolab.files import fsync_directory, write_text_atomically
from protolab.live.retention import RetentionPolicy, StoredTest, select_for_removal
from protolab.live.store import LiveStore, read_stored_test, row_for, summarize

TOKEN_PATTERN = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)
# protolab.measure.bulk: the wild client's bulk and limited tests (protolab.live.measure).
RESULT_SCHEMAS = ("protolab.rpm", "protolab.rpm.browser", "protolab.measure.bulk")
META_SCHEMA = "protolab.live.meta"
META_SCHEMA_VERSION = 1
MAX_CLIENT_BYTES = 4096
# File modification times come from the kernel's coarse clock, up to one tick (4 ms at HZ=250)
# behind time.time_ns(): a qlog written just after the token was issued can look a little older.
QLOG_CLOCK_SLACK_NS = 20_000_000
STAGING_PREFIX = ".partial-"
REMOVING_PREFIX = ".removing-"  # a test being removed by retention: already gone for readers


class LiveError(ProtolabError):
    """A request the coordinator refuses: an HTTP status, a short code and a message for people."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, **self.extra}


@dataclass
class _Ticket:
    """One issued token. state: held (the lock), submitting (an upload is being stored),
    used (stored; single use), expired (the lock timed out before an upload)."""

    token: str
    issued_mono: float
    issued_unix_ns: int
    client: dict[str, Any]
    peer: str | None
    user_agent: str | None
    state: str = "held"


def check_token(token: str) -> str:
    """Refuses anything that is not a token's shape before the text gets near a path."""
    if not isinstance(token, str) or not TOKEN_PATTERN.fullmatch(token):
        raise LiveError(400, "bad_token", "a token is 43 characters from A-Z a-z 0-9 _ -")
    return token


def _strict_json(text: str, what: str) -> Any:
    """JSON as the standard has it: NaN and Infinity are refused (they would not survive a
    round trip through other tools), and so is nesting deep enough to exhaust the parser."""
    def refuse_constant(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    try:
        return json.loads(text, parse_constant=refuse_constant)
    except RecursionError:
        raise LiveError(400, "bad_json", f"{what}: nested too deeply") from None
    except ValueError as exc:
        raise LiveError(400, "bad_json", f"{what}: not valid JSON ({exc})") from None


def _decode(body: bytes | str, what: str) -> str:
    if isinstance(body, str):
        return body
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise LiveError(400, "bad_json", f"{what}: not UTF-8") from None


def parse_client_metadata(body: bytes | str | Mapping[str, Any] | None) -> dict[str, Any]:
    """A token request's optional metadata: a JSON object of at most 4 KiB whose `client`,
    when present, is a string (the store's `client` column)."""
    if body is None or (isinstance(body, bytes | str) and not body.strip()):
        return {}
    if isinstance(body, Mapping):
        data: Any = dict(body)
    else:
        if len(body) > MAX_CLIENT_BYTES:
            raise LiveError(413, "too_large", f"client metadata is over {MAX_CLIENT_BYTES} bytes")
        data = _strict_json(_decode(body, "client metadata"), "client metadata")
    if not isinstance(data, dict):
        raise LiveError(400, "bad_metadata", "client metadata: expected a JSON object")
    if "client" in data and not isinstance(data["client"], str):
        raise LiveError(400, "bad_metadata", "client metadata field `client`: expected a string")
    return data


def parse_result(body: bytes | str | Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The uploaded text and its object, checked as far as the coordinator relies on it: an
    object with a known `schema` and an integer `schema_version`. Other fields are free."""
    if isinstance(body, Mapping):
        result: Any = dict(body)
        text = json.dumps(result, indent=2, allow_nan=False) + "\n"
    else:
        text = _decode(body, "result")
        result = _strict_json(text, "result")
    if not isinstance(result, dict):
        raise LiveError(400, "bad_result", "result: expected a JSON object")
    schema = result.get("schema")
    if schema not in RESULT_SCHEMAS:
        raise LiveError(400, "bad_result", f"result field `schema`: expected one of {', '.join(RESULT_SCHEMAS)}, "
                                           f"got {json.dumps(schema)[:80]}")
    version = result.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise LiveError(400, "bad_result", f"result field `schema_version`: expected an integer, "
                                           f"got {json.dumps(version)[:80]}")
    return text, result


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Coordinator:
    """Tokens, the lock and the stored tests. Thread-safe: the HTTP server calls it from one
    thread per request. `clock` (monotonic seconds) times the lock; wall-clock nanoseconds
    (`wall_clock`) date the files, because qlog modification times are wall-clock times."""

    def __init__(self, data_dir: Path | str, lock_timeout_s: float = 120.0, max_upload_bytes: int = 1 << 20,
                 qlog_dir: Path | str | None = None, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], int] = time.time_ns, log: Callable[[str], None] = _stderr,
                 retention: RetentionPolicy | None = None) -> None:
        if not lock_timeout_s > 0:
            raise ValueError(f"the lock timeout must be positive, got {lock_timeout_s}")
        if max_upload_bytes < 1:
            raise ValueError(f"the upload limit must be at least 1 byte, got {max_upload_bytes}")
        self.lock_timeout_s = float(lock_timeout_s)
        self.max_upload_bytes = int(max_upload_bytes)
        self.data_dir = Path(data_dir).resolve()
        self.tests_dir = self.data_dir / "tests"
        self.tests_dir.mkdir(parents=True, exist_ok=True)
        self._data_lock = self._lock_data_dir()
        self.qlog_dir = Path(qlog_dir).resolve() if qlog_dir is not None else None
        self._clock = clock
        self._wall = wall_clock
        self._log = log
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._tickets: dict[str, _Ticket] = {}
        self._holder: _Ticket | None = None
        self._submitting = 0
        self.retention = retention or RetentionPolicy()
        self._retention_lock = threading.Lock()
        self._catalogue: dict[str, StoredTest] = {}
        try:
            self.store = LiveStore(self.data_dir / "live.duckdb")
            self._finish_removals()
            stored = self._stored_tokens()
            self._tests = len(stored)
            self._backfill(stored)
            self._catalogue = {token: self._catalogue_entry(token) for token in stored}
            self.enforce_retention()
        except BaseException:
            self._data_lock.close()
            raise

    def _lock_data_dir(self) -> Any:
        """Two coordinators on one DATA would each let a test run: the second one is refused.
        The lock (flock on DATA/serve-live.lock) goes with the process, also when it crashes."""
        handle = (self.data_dir / "serve-live.lock").open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise ProtolabError(f"another coordinator is using {self.data_dir} (serve-live.lock is locked)") from None
        return handle

    # -- the lock --------------------------------------------------------------------------

    def _current_holder(self, now: float) -> _Ticket | None:
        """The ticket holding the lock; a held ticket past its timeout expires here (lazily,
        so no timer thread is needed). An upload being stored keeps the lock until it is done."""
        holder = self._holder
        if holder is not None and holder.state == "held" and now - holder.issued_mono >= self.lock_timeout_s:
            holder.state = "expired"
            self._holder = holder = None
        return holder

    def _fresh_token(self) -> str:
        """A token never issued before, also not by an earlier run of the server (its directory)."""
        while True:
            token = secrets.token_urlsafe(32)
            if token not in self._tickets and not (self.tests_dir / token).exists():
                return token

    def issue_token(self, client: Mapping[str, Any] | None = None, peer: str | None = None,
                    user_agent: str | None = None) -> dict[str, Any]:
        """A new token holding the lock, or LiveError 409 `busy` with the seconds left on the
        lock held by another test. Of concurrent requests exactly one wins."""
        metadata = parse_client_metadata(client)
        with self._lock:
            now = self._clock()
            holder = self._current_holder(now)
            if holder is not None:
                remaining = max(0.0, self.lock_timeout_s - (now - holder.issued_mono))
                # Same code either way (the page asks again on 409); the message tells a client
                # that started a second test while its first still runs.
                mine = peer is not None and holder.peer == peer
                raise LiveError(409, "busy", "a test from your address is already running; upload its result "
                                "or wait for its lock to time out" if mine else
                                "another test is running; ask again later", retry_after_s=round(remaining, 3))
            ticket = _Ticket(self._fresh_token(), now, self._wall(), metadata, peer, user_agent)
            self._tickets[ticket.token] = ticket
            self._holder = ticket
        return {"token": ticket.token, "expires_in_s": self.lock_timeout_s, "issued_unix_ns": ticket.issued_unix_ns}

    def status(self) -> dict[str, Any]:
        """Whether a test holds the lock, for how long, and how many tests are stored."""
        with self._lock:
            now = self._clock()
            holder = self._current_holder(now)
            held = None if holder is None else round(now - holder.issued_mono, 3)
            return {"busy": holder is not None, "held_for_s": held, "tests": self._tests}

    def release(self, token: str) -> None:
        """Frees the lock `token` holds without storing anything: the service's own maintenance
        (renewing certificates takes the lock so that no test runs meanwhile). The token is
        spent (410 `expired` if uploaded to)."""
        with self._lock:
            ticket = self._tickets.get(token)
            if ticket is not None and ticket.state == "held":
                ticket.state = "expired"
                if self._holder is ticket:
                    self._holder = None

    # -- uploads -----------------------------------------------------------------------------

    def _claim(self, token: str) -> _Ticket:
        """Marks the token's upload as in progress, or refuses it: 404 never issued, 410 used
        or expired, 409 another upload of the same token is being stored."""
        with self._lock:
            ticket = self._tickets.get(token)
            if ticket is None:
                if self._test_dir(token).exists():
                    raise LiveError(410, "used", "this token's result is already stored; tokens are single use")
                raise LiveError(404, "unknown_token", "no such token")
            self._current_holder(self._clock())
            if ticket.state == "used":
                raise LiveError(410, "used", "this token's result is already stored; tokens are single use")
            if ticket.state == "expired":
                raise LiveError(410, "expired", f"this token's lock timed out after {self.lock_timeout_s:g} s; "
                                                "the result was not stored")
            if ticket.state == "submitting":
                raise LiveError(409, "in_progress", "an upload for this token is being stored")
            ticket.state = "submitting"
            self._submitting += 1
            return ticket

    def _settle(self, ticket: _Ticket, stored: bool) -> None:
        """Ends an upload: stored, the token is used up and the lock free; refused, the token
        holds the lock again (until its timeout) so the client can correct and retry."""
        with self._lock:
            self._submitting -= 1
            if stored:
                ticket.state = "used"
                self._tests += 1
                if self._holder is ticket:
                    self._holder = None
            else:
                ticket.state = "held"
            self._idle.notify_all()

    def submit_result(self, token: str, body: bytes | str | Mapping[str, Any], peer: str | None = None) -> dict[str, Any]:
        """Validates and stores a test's result, moves the test's server qlogs next to it,
        records its row and releases the lock. Refusals raise LiveError and store nothing."""
        check_token(token)
        ticket = self._claim(token)
        stored = False
        try:
            text, result = parse_result(body)
            response = self._store(ticket, text, result, peer)
            stored = True
        finally:
            self._settle(ticket, stored)
        self.enforce_retention()
        return response

    def _test_dir(self, token: str) -> Path:
        """DATA/tests/<token>, built only from a checked token and checked to stay inside DATA."""
        path = (self.tests_dir / check_token(token)).resolve()
        if not path.is_relative_to(self.data_dir):  # cannot happen for a checked token; guards future edits
            raise LiveError(400, "bad_token", "a token is 43 characters from A-Z a-z 0-9 _ -")
        return path

    def _store(self, ticket: _Ticket, text: str, result: dict[str, Any], peer: str | None) -> dict[str, Any]:
        """Builds the test's directory under a staging name and renames it into place, so a
        reader (or a crash) never sees half a test; on failure the qlogs go back where they were."""
        uploaded_unix_ns = self._wall()
        final = self._test_dir(ticket.token)
        staging = self.tests_dir / f"{STAGING_PREFIX}{ticket.token}"
        shutil.rmtree(staging, ignore_errors=True)
        moved: list[tuple[Path, Path]] = []
        try:
            staging.mkdir()
            write_text_atomically(staging / "result.json", text, durable=True)
            moved = self._move_qlogs(ticket.issued_unix_ns, uploaded_unix_ns, staging / "qlogs")
            if moved:
                fsync_directory(staging / "qlogs")
            meta = self._meta(ticket, uploaded_unix_ns, peer, [dst.name for _, dst in moved])
            write_text_atomically(staging / "meta.json", json.dumps(meta, indent=2) + "\n", durable=True)
            staging.rename(final)
            fsync_directory(self.tests_dir)  # the answer below promises the test survives a crash
        except BaseException:
            for src, dst in moved:
                try:
                    shutil.move(dst, src)
                except OSError as exc:
                    self._log(f"could not put back qlog {dst} to {src}: {exc}")
            shutil.rmtree(staging, ignore_errors=True)
            raise
        result_path = f"tests/{ticket.token}/result.json"
        with self._retention_lock:
            self._catalogue[ticket.token] = self._catalogue_entry(ticket.token)
        recorded = True
        try:
            self.store.record(row_for(ticket.token, meta, result, result_path))
        except Exception as exc:  # noqa: BLE001 - the files are the record; the row is rewritten at next start
            recorded = False
            self._log(f"test {ticket.token[:8]}... stored, but not recorded in {self.store.path}: {exc}")
        return {"token": ticket.token, "stored": f"tests/{ticket.token}", "qlogs": len(moved),
                "recorded": recorded, "held_s": meta["held_s"], "summary": summarize(result)}

    def _meta(self, ticket: _Ticket, uploaded_unix_ns: int, peer: str | None, qlogs: list[str]) -> dict[str, Any]:
        return {
            "schema": META_SCHEMA,
            "schema_version": META_SCHEMA_VERSION,
            "token": ticket.token,
            "issued_unix_ns": ticket.issued_unix_ns,
            "uploaded_unix_ns": uploaded_unix_ns,
            "held_s": round(self._clock() - ticket.issued_mono, 6),
            "lock_timeout_s": self.lock_timeout_s,
            "client": ticket.client,
            "token_peer": ticket.peer,
            "token_user_agent": ticket.user_agent,
            "upload_peer": peer,
            "qlogs": qlogs,
        }

    def _fresh_qlogs(self, since_ns: int, until_ns: int) -> list[Path]:
        """The qlog files (`*.qlog`, regular files, not below subdirectories) modified while the
        token was held: the server's side of this test's connections."""
        if self.qlog_dir is None:
            return []
        try:
            entries = list(os.scandir(self.qlog_dir))
        except OSError as exc:
            self._log(f"cannot list the qlog directory {self.qlog_dir}: {exc}")
            return []
        found = []
        for entry in entries:
            try:
                if not entry.name.endswith(".qlog") or not entry.is_file(follow_symlinks=False):
                    continue
                mtime = entry.stat(follow_symlinks=False).st_mtime_ns
            except OSError:
                continue
            if since_ns - QLOG_CLOCK_SLACK_NS <= mtime <= until_ns + QLOG_CLOCK_SLACK_NS:
                found.append(Path(entry.path))
        return sorted(found)

    def _move_qlogs(self, since_ns: int, until_ns: int, target: Path) -> list[tuple[Path, Path]]:
        """Moves this test's qlogs into `target`; returns (from, to) pairs so a failed store can
        put them back. A file that vanished meanwhile is skipped."""
        moved: list[tuple[Path, Path]] = []
        for src in self._fresh_qlogs(since_ns, until_ns):
            target.mkdir(exist_ok=True)
            dst = target / src.name
            try:
                shutil.move(src, dst)
            except FileNotFoundError:
                continue
            moved.append((src, dst))
        return moved

    # -- stored tests ------------------------------------------------------------------------

    def test_info(self, token: str) -> dict[str, Any]:
        """A stored test: its meta.json and the summary of its result (404 if none is stored)."""
        test_dir = self._test_dir(token)
        try:
            meta, result = read_stored_test(test_dir)
        except FileNotFoundError:
            raise LiveError(404, "unknown_test", "no stored test for this token") from None
        except (OSError, ValueError) as exc:
            raise LiveError(500, "unreadable", f"the stored test cannot be read: {exc}") from None
        return {"token": token, "meta": meta, "summary": summarize(result)}

    def _stored_tokens(self) -> list[str]:
        return sorted(p.name for p in self.tests_dir.iterdir() if TOKEN_PATTERN.fullmatch(p.name) and p.is_dir())

    def _backfill(self, stored: list[str]) -> None:
        """Writes the rows of stored tests the table lacks (a write that failed earlier), and
        says which staging directories a crash left behind (they are not tests)."""
        for leftover in self.tests_dir.glob(f"{STAGING_PREFIX}*"):
            self._log(f"ignoring {leftover}: an upload interrupted by a crash (qlogs in it were moved there)")
        missing = sorted(set(stored) - self.store.tokens())
        for token in missing:
            try:
                meta, result = read_stored_test(self.tests_dir / token)
                self.store.record(row_for(token, meta, result, f"tests/{token}/result.json"))
            except (OSError, ValueError) as exc:
                self._log(f"cannot index stored test {token[:8]}...: {exc}")
                continue
            self._log(f"indexed stored test {token[:8]}... (its row was missing from {self.store.path.name})")

    def close(self, timeout_s: float = 10.0) -> bool:
        """Waits for uploads being stored to finish (so stopping the server leaves whole tests),
        then frees DATA for another coordinator; False if some were still running after `timeout_s`."""
        with self._idle:
            finished = self._idle.wait_for(lambda: self._submitting == 0, timeout_s)
        self._data_lock.close()
        return finished

    # -- retention ---------------------------------------------------------------------------

    def _catalogue_entry(self, token: str) -> StoredTest:
        """A stored test's upload time (meta.json; the directory's time if unreadable) and size."""
        test_dir = self.tests_dir / token
        size = sum(p.stat().st_size for p in test_dir.rglob("*") if p.is_file())
        try:
            uploaded = int(json.loads((test_dir / "meta.json").read_text())["uploaded_unix_ns"])
        except (OSError, ValueError, KeyError, TypeError):
            uploaded = test_dir.stat().st_mtime_ns
        return StoredTest(token, uploaded, size)

    def enforce_retention(self) -> list[str]:
        """Removes the oldest tests beyond the retention policy (docs/live.md, "Retention") and
        returns their tokens. Each goes in one rename out of readers' sight, then its row, then
        its files; a crash in between is finished at the next start (`_finish_removals`)."""
        if self.retention.unlimited:
            return []
        with self._retention_lock:
            doomed = select_for_removal(self._catalogue.values(), self.retention, self._wall())
            for token in doomed:
                (self.tests_dir / token).rename(self.tests_dir / f"{REMOVING_PREFIX}{token}")
                del self._catalogue[token]
            if doomed:
                fsync_directory(self.tests_dir)
                with self._lock:
                    self._tests -= len(doomed)
        if doomed:
            self._finish_removals()
            self._log(f"retention: removed {len(doomed)} oldest test(s)")
        return doomed

    def _finish_removals(self) -> None:
        """Deletes the rows and files of tests renamed for removal (by now or by a run that crashed)."""
        leaving = sorted(self.tests_dir.glob(f"{REMOVING_PREFIX}*"))
        if not leaving:
            return
        try:
            self.store.delete([p.name[len(REMOVING_PREFIX):] for p in leaving])
        except Exception as exc:  # noqa: BLE001 - rows and files are dropped at the next start
            self._log(f"retention: rows not yet deleted from {self.store.path.name}: {exc}")
            return
        for path in leaving:
            shutil.rmtree(path, ignore_errors=True)
