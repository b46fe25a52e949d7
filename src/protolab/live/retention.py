"""Bounded storage for the live service (docs/live.md, "Retention"): which stored tests to
remove so that at most `max_tests` tests, none older than `max_age_s`, and at most `max_bytes`
bytes remain, oldest first. Pure: the coordinator lists the tests and removes what this says."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class RetentionPolicy:
    """Limits on what the store keeps; None: no limit of that kind."""

    max_tests: int | None = None
    max_age_s: float | None = None
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_tests", "max_age_s", "max_bytes"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(f"retention {name}: expected a number >= 0, got {value}")

    @property
    def unlimited(self) -> bool:
        return self.max_tests is None and self.max_age_s is None and self.max_bytes is None


@dataclass(frozen=True)
class StoredTest:
    """What retention needs to know of a stored test: when it was uploaded and its size."""

    token: str
    uploaded_unix_ns: int
    size_bytes: int


def select_for_removal(tests: Iterable[StoredTest], policy: RetentionPolicy, now_unix_ns: int) -> list[str]:
    """Tokens to remove, oldest upload first: every test older than `max_age_s`, then the oldest
    of the rest until both the count and the bytes are within their limits."""
    ordered = sorted(tests, key=lambda t: (t.uploaded_unix_ns, t.token))
    remove: list[str] = []
    keep: list[StoredTest] = []
    for test in ordered:
        too_old = policy.max_age_s is not None and now_unix_ns - test.uploaded_unix_ns > policy.max_age_s * 1e9
        if too_old:
            remove.append(test.token)
        else:
            keep.append(test)
    count = len(keep)
    total = sum(t.size_bytes for t in keep)
    for test in keep:
        over_count = policy.max_tests is not None and count > policy.max_tests
        over_bytes = policy.max_bytes is not None and total > policy.max_bytes
        if not (over_count or over_bytes):
            break
        remove.append(test.token)
        count -= 1
        total -= test.size_bytes
    return remove
