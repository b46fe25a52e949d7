"""A page load's result (`schemas/load-result.json`) in the store: page_loads, objects, connections.

Both clients write this document: `protolab-net load` (the engine) and the Chromium driver
(`protolab.browser.driver`, whose extras sit in its `browser` sub-object).
"""

from __future__ import annotations

from typing import Any

from protolab.results.generated.load_result import ConnectionResult, LoadResult, ObjectResult
from protolab.results.placement import Placement

PAGE_LOADS = Placement(
    table="page_loads",
    model=LoadResult,
    renamed={"schema_version": "result_schema_version"},
    elsewhere={"objects": "table objects", "connections": "table connections"},
    not_stored={"kind": "always page_load (the table says it)"},
    derived=(
        ("n_objects", "INTEGER", "number of objects in the result"),
        ("n_connections", "INTEGER", "number of connections opened"),
        ("mode", "VARCHAR", "config.mode of the result"),
        ("page", "VARCHAR", "config.page of the result"),
    ),
)

OBJECTS = Placement(
    table="objects",
    model=ObjectResult,
    renamed={"status": "http_status"},
    derived=(("idx", "INTEGER", "position of the object in the result's objects list"),),
)

CONNECTIONS = Placement(
    table="connections",
    model=ConnectionResult,
    # `id` is the connection's index in the result (what objects.connection refers to);
    # `conn_id` is its name in sample and qlog files, which joins transport_samples.conn.
    renamed={"id": "idx"},
)


def _config_value(result: LoadResult, key: str) -> Any:
    config = result.config.model_dump(mode="json")
    return config.get(key)


def load_rows(result: LoadResult) -> dict[str, list[dict[str, Any]]]:
    """The rows of one page load: one in page_loads, one per object and per connection."""
    page_load = {
        **PAGE_LOADS.row(result),
        "n_objects": len(result.objects),
        "n_connections": len(result.connections),
        "mode": _config_value(result, "mode"),
        "page": _config_value(result, "page"),
    }
    objects = [{"idx": i, **OBJECTS.row(obj)} for i, obj in enumerate(result.objects)]
    connections = [CONNECTIONS.row(conn) for conn in result.connections]
    return {"page_loads": [page_load], "objects": objects, "connections": connections}


def artifact_files(result: LoadResult, kind: str) -> list[str]:
    """The client's samples (`kind` = "samples") or qlog ("qlog") files of the load's connections."""
    attribute = {"samples": "samples_file", "qlog": "qlog_file"}[kind]
    return [name for conn in result.connections if (name := getattr(conn, attribute, None))]


PLACEMENTS = (PAGE_LOADS, OBJECTS, CONNECTIONS)
