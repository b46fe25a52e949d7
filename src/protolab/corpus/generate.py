"""Generated corpora shaped like 002 Table 4.1 (500 recorded pages).

Per page, three correlated log-normal draws give the number of objects, the page size and the
number of server addresses (origins), each clamped to the table's range; the object kinds
follow web-typical shares; the manifest is then built exactly like a Table I replica
(build.build_manifest), with object sizes clamped to the table's object-size range.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from protolab.corpus.build import (
    TYPES,
    AddressPlan,
    PageShape,
    build_manifest,
    check_seed,
    lognormal,
    normal,
    weighted,
)
from protolab.corpus.errors import CorpusError

DEFAULT_NETWORK = "10.128.0.0/9"  # page i, origin k -> base + 256 i + k + 1
MAX_PAGES = 10_000


@dataclass(frozen=True)
class Range:
    low: float
    median: float
    high: float

    def clamp(self, value: float) -> float:
        return min(self.high, max(self.low, value))


# 002 Table 4.1.
ADDRESSES = Range(1, 22, 66)
OBJECTS = Range(2, 100, 680)
OBJECT_BYTES = Range(53, 3_000, 43_000_000)
PAGE_BYTES = Range(15_000, 1_200_000, 51_000_000)

# Spread (sigma of the log) of the per-page draws and their correlation with the object count:
# bigger pages have more objects and more servers. Chosen so 500 pages span the table's ranges
# with the table's medians (tests/test_corpus.py checks it).
SIGMA_OBJECTS = 0.95
SIGMA_PAGE_BYTES = 1.25
SIGMA_ADDRESSES = 0.75
RHO_BYTES = 0.6
RHO_ADDRESSES = 0.7
# Within a page object sizes are more spread than in the curated Table I pages.
SIGMA_SCALE = 1.15
# Shares of the types (before a per-page jitter of sigma 0.4 on each).
TYPE_SHARES: Mapping[str, float] = {"html": 0.04, "css": 0.06, "js": 0.22, "img": 0.6, "other": 0.08}
TYPE_JITTER = 0.4


@dataclass(frozen=True)
class GeneratedPage:
    shape: PageShape
    manifest: dict[str, Any]


def page_name(i: int, pages: int) -> str:
    return f"page-{i + 1:0{max(3, len(str(pages)))}d}"


def _correlated(rng: random.Random, z: float, rho: float) -> float:
    return rho * z + math.sqrt(1.0 - rho * rho) * normal(rng)


def page_shape(i: int, pages: int, rng: random.Random) -> PageShape:
    z_objects = normal(rng)
    objects = round(OBJECTS.clamp(OBJECTS.median * math.exp(SIGMA_OBJECTS * z_objects)))
    size = PAGE_BYTES.median * math.exp(SIGMA_PAGE_BYTES * _correlated(rng, z_objects, RHO_BYTES))
    # A page must hold its objects at the smallest object size (twice, to leave room for spread).
    size = round(max(PAGE_BYTES.clamp(size), 2 * objects * OBJECT_BYTES.low))
    size = min(size, int(objects * OBJECT_BYTES.high))
    addresses = ADDRESSES.median * math.exp(SIGMA_ADDRESSES * _correlated(rng, z_objects, RHO_ADDRESSES))
    origins = round(min(ADDRESSES.clamp(addresses), objects))

    shares = {t: TYPE_SHARES[t] * lognormal(rng, 1.0, TYPE_JITTER) for t in TYPES}
    counts = dict.fromkeys(TYPES, 0)
    counts["html"] = 1  # the root
    for _ in range(objects - 1):
        counts[weighted(rng, shares)] += 1
    return PageShape(name=page_name(i, pages), counts=counts, total_bytes=size, origins=origins, index=i,
                     min_object_bytes=int(OBJECT_BYTES.low), max_object_bytes=int(OBJECT_BYTES.high),
                     sigma_scale=SIGMA_SCALE)


def generate_corpus(pages: int, seed: int = 1, network: str | AddressPlan = DEFAULT_NETWORK) -> list[GeneratedPage]:
    """`pages` manifests, deterministic in (pages, seed, network)."""
    if not 1 <= pages <= MAX_PAGES:
        raise CorpusError(f"--pages: {pages} must be between 1 and {MAX_PAGES}")
    check_seed(seed)
    plan = network if isinstance(network, AddressPlan) else AddressPlan.parse(network)
    plan.address(pages - 1, int(ADDRESSES.high) - 1)  # fails early if the network is too small
    rng = random.Random(f"protolab-corpus/generate/{seed}")
    result = []
    for i in range(pages):
        shape = page_shape(i, pages, rng)
        result.append(GeneratedPage(shape, build_manifest(shape, seed, plan)))
    return result


GENERATED_NAME = re.compile(r"page-(\d{3})")
_NAME_WIDTH_PAGES = 999  # corpora of up to 999 pages name their pages with three digits


def generated_page(name: str, seed: int = 1, network: str | AddressPlan = DEFAULT_NETWORK) -> dict[str, Any]:
    """The manifest of one page of a generated corpus by its name (`page-017`): the same page as
    in `generate_corpus(pages, seed, network)` for any corpus of 17 to 999 pages, so a spec can
    name generated pages without files (docs/corpus.md)."""
    match = GENERATED_NAME.fullmatch(name)
    if match is None or int(match.group(1)) < 1:
        raise CorpusError(f"{name!r} is not a generated page name (page-001 ... page-999)")
    check_seed(seed)
    plan = network if isinstance(network, AddressPlan) else AddressPlan.parse(network)
    rng = random.Random(f"protolab-corpus/generate/{seed}")
    shapes = [page_shape(i, _NAME_WIDTH_PAGES, rng) for i in range(int(match.group(1)))]
    return build_manifest(shapes[-1], seed, plan)
