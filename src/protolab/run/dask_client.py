"""A Dask client for `--cluster ADDRESS`, shared by the sweeps (protolab.run.cluster) and the traffic
commands: a running scheduler (`tcp://HOST:8786`), or `local:N`, a cluster of N worker
processes on this machine started for the one command and stopped after it."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from protolab.errors import ProtolabError

# A task whose worker died is given to another worker this many times before the command fails.
TASK_RETRIES = 3


class ClusterError(ProtolabError):
    """The cluster could not be reached or a task failed beyond its retries."""


def _local_workers(address: str) -> int | None:
    """N of `local:N` (None for any other address); an error for a bad N."""
    if not address.startswith("local:"):
        return None
    text = address.removeprefix("local:")
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise ClusterError(f"--cluster {address}: expected local:N with N workers, 1 to 64")
    return int(text)


@contextlib.contextmanager
def connect(address: str) -> Iterator[Any]:
    """A `distributed.Client` for ADDRESS, closed (and a local cluster stopped) afterwards."""
    from distributed import Client, LocalCluster

    workers = _local_workers(address)
    with contextlib.ExitStack() as stack:
        if workers is not None:
            # One thread per worker process: a task uses one core (DuckDB and numpy in it). The
            # workers' own log stays quiet below CRITICAL: a failed task reaches the command as a
            # ClusterError with its exception, and at shutdown a worker whose heartbeat meets the
            # closing scheduler would print a traceback for nothing. The scheduler's HTTP server
            # takes a free port (None meant 8787, and a second sweep at once warned about it).
            cluster = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                       dashboard_address=":0", silence_logs=logging.CRITICAL))
            address = cluster.scheduler_address
        try:
            client = stack.enter_context(Client(address, timeout="20s"))
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"--cluster {address}: no Dask scheduler answers there ({exc})") from exc
        yield client


def worker_names(client: Any) -> list[str]:
    """The names of the scheduler's workers."""
    return sorted(str(w.get("name")) for w in client.scheduler_info().get("workers", {}).values())
