"""Reading a contract document into its generated model, with errors naming the file and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from protolab.errors import ProtolabError
from protolab.files import parse_json

Model = TypeVar("Model", bound=BaseModel)


class DocumentError(ProtolabError):
    """A document does not match its schema; the message names the file (or place) and the field."""


def field_path(location: tuple[int | str, ...]) -> str:
    """pydantic's error location as the documents write it: `objects[3].status`."""
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(document)"


def parse_document(model: type[Model], data: Any, where: str) -> Model:
    """`data` as `model`; a mismatch raises DocumentError naming `where` and the first fields."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [f"{field_path(e['loc'])}: {e['msg']}" for e in exc.errors()[:3]]
        more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        raise DocumentError(f"{where}: " + "; ".join(problems) + more) from None


def read_document(model: type[Model], path: Path) -> Model:
    """The document in `path` as `model` (DocumentError: unreadable, not JSON, or not the model)."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise DocumentError(f"{path}: cannot read: {exc}") from None
    try:
        data = parse_json(text)
    except ValueError as exc:  # JSONDecodeError, or NestedTooDeeply
        raise DocumentError(f"{path}: not JSON: {exc}") from None
    return parse_document(model, data, str(path))


def plain(value: Any) -> Any:
    """A model (or a structure of them) as JSON-ready Python values, as the binary wrote it:
    the fields the document had (a field the binary leaves out when empty stays out)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True, by_alias=True)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value
