"""Where each field of a document goes in the store: one `Placement` per (document object, table).

A placement lists, for one model of `results.generated`, the fields stored under another column
name, the fields stored elsewhere (another table or part), the fields deliberately not stored
(with why) and the table's columns that are derived rather than copied. Every other field is a
column of the same name. tests/test_contract.py checks that every field is placed and every
column produced, so a field can be neither dropped silently nor invented.

A table whose rows are exactly one document object each (objects, connections, bulk intervals)
takes its columns from the placement (`column_specs`): a new document field then becomes a new
column by itself (the store adds missing columns to older databases).
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from protolab.results.documents import plain

Column = tuple[str, str, str]  # (name, DuckDB type, description), as in the store's schema


def _strip(annotation: Any) -> Any:
    """The type inside Annotated[...] and Optional[...] (X | None)."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            rest = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(rest) != 1:
                return annotation
            annotation = rest[0]
        else:
            return annotation


def duckdb_type(annotation: Any) -> str:
    """The column type of a model field: numbers, text, booleans; anything nested is JSON."""
    inner = _strip(annotation)
    if inner is bool:
        return "BOOLEAN"
    if inner is int:
        return "BIGINT"
    if inner is float:
        return "DOUBLE"
    if inner is str or (isinstance(inner, type) and issubclass(inner, enum.Enum)):
        return "VARCHAR"
    return "JSON"


@dataclass(frozen=True)
class Placement:
    """Where the fields of `model` go in `table` (see the module docstring)."""

    table: str
    model: type[BaseModel]
    renamed: Mapping[str, str] = field(default_factory=dict)  # field -> its column
    elsewhere: Mapping[str, str] = field(default_factory=dict)  # field -> where it is stored instead
    not_stored: Mapping[str, str] = field(default_factory=dict)  # field -> why it is not stored
    derived: tuple[Column, ...] = ()  # columns computed by the part, not copied from a field
    # Tables with a fixed set of typed columns and one JSON column for the rest (transport
    # samples): the fields without a typed column go into `rest_column`.
    typed_columns: frozenset[str] | None = None
    rest_column: str | None = None

    def stored_fields(self) -> list[str]:
        skip = {*self.elsewhere, *self.not_stored}
        return [name for name in self.model.model_fields if name not in skip]

    def column_of(self, name: str) -> str:
        """The column a stored field goes to (its own, a renamed one, or the rest column)."""
        column = self.renamed.get(name, name)
        if self.rest_column is not None and self.typed_columns is not None and column not in self.typed_columns:
            return self.rest_column
        return column

    def row(self, obj: BaseModel) -> dict[str, Any]:
        """The stored fields of `obj` under their column names (nested values as plain JSON;
        fields without a typed column gathered in the rest column, if the table has one)."""
        row: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for name in self.stored_fields():
            value = plain(getattr(obj, name))
            column = self.column_of(name)
            if column == self.rest_column and column not in (self.typed_columns or ()):
                rest[name] = value
            else:
                row[column] = value
        if self.rest_column is not None:
            row[self.rest_column] = rest
        return row

    def column_specs(self) -> list[Column]:
        """The table's columns: the derived ones, then one per stored field (type from its
        annotation, description from the schema's doc comment)."""
        fields = self.model.model_fields
        copied = [(self.renamed.get(name, name), duckdb_type(fields[name].annotation),
                   (fields[name].description or "").strip().replace("\n", " ")) for name in self.stored_fields()]
        return [*self.derived, *copied]
