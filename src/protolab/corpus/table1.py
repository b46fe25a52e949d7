"""The 15 cloned pages of 001 Table I as a registry, and their manifests.

Counts per type and total size are the paper's; the origins per page (1-3, the range of
001 Table II's live pages: the paper does not say how many hostnames its clones used) follow
one rule, `origins_for`, from the number of objects.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from protolab.corpus.build import TYPES, AddressPlan, PageShape, build_manifest
from protolab.corpus.errors import CorpusError

DEFAULT_NETWORK = "10.99.0.0/16"  # page i, origin k -> 10.99.i.(k+1)
DEFAULT_SEED = 1
KB = 1000  # the paper's kB: 1000 bytes

# Origins by number of objects: < 12 -> 1, 12-39 -> 2, >= 40 -> 3.
_ORIGIN_THRESHOLDS = (12, 40)


def origins_for(objects: int) -> int:
    return 1 + bisect.bisect_right(_ORIGIN_THRESHOLDS, objects)


@dataclass(frozen=True)
class Site:
    """One row of 001 Table I."""

    name: str
    index: int
    html: int
    css: int
    js: int
    img: int
    other: int
    objects: int
    size_kb: int

    @property
    def counts(self) -> dict[str, int]:
        return {t: getattr(self, t) for t in TYPES}

    @property
    def size_bytes(self) -> int:
        return self.size_kb * KB

    @property
    def origins(self) -> int:
        return origins_for(self.objects)

    def shape(self) -> PageShape:
        return PageShape(name=self.name, counts=self.counts, total_bytes=self.size_bytes,
                         origins=self.origins, index=self.index)


_ROWS = (
    # name        html css  js  img other objects size_kB
    ("baidu",        1,  1,  1,   6,  1,  10,   50),
    ("google",       2,  1,  3,   5,  1,  12,   56),
    ("live",         2,  2,  2,   2,  0,   8,  262),
    ("twitter",      6,  1,  4,   2,  3,  16,  421),
    ("wikipedia",    1,  1,  2,  20,  1,  25,  441),
    ("reddit",       4,  2,  5,  26,  2,  39,  470),
    ("yahoo",       16, 13,  5,  48,  4,  86,  839),
    ("vk",           4,  1, 14,   3,  1,  23,  920),
    ("taobao",       2,  2,  7,  38,  4,  53, 1320),
    ("instagram",    3,  1,  7,  25,  1,  37, 1409),
    ("qq",          15,  6, 19, 115,  6, 161, 1728),
    ("sohu",        13, 11, 33, 167,  4, 228, 2056),
    ("youtube",      8,  3,  5, 113, 20, 149, 2911),
    ("facebook",     1,  1,  8, 123,  1, 134, 3560),
    ("amazon",       5,  2, 14,  41,  2,  64, 3723),
)

SITES: Mapping[str, Site] = MappingProxyType(
    {row[0]: Site(row[0], i, *row[1:]) for i, row in enumerate(_ROWS)}
)

# Five pages for demos, small to large.
DEMO_PAGES = ("baidu", "wikipedia", "vk", "instagram", "amazon")


def get_site(name: str) -> Site:
    try:
        return SITES[name]
    except KeyError:
        raise CorpusError(f"unknown site {name!r}; Table I has: {', '.join(SITES)}") from None


def site_manifest(name: str, seed: int = DEFAULT_SEED, network: str | AddressPlan = DEFAULT_NETWORK) -> dict[str, Any]:
    """The manifest of one Table I site, deterministic in (name, seed, network)."""
    plan = network if isinstance(network, AddressPlan) else AddressPlan.parse(network)
    return build_manifest(get_site(name).shape(), seed, plan)


def all_manifests(seed: int = DEFAULT_SEED, network: str | AddressPlan = DEFAULT_NETWORK) -> dict[str, dict[str, Any]]:
    plan = network if isinstance(network, AddressPlan) else AddressPlan.parse(network)
    return {name: site_manifest(name, seed, plan) for name in SITES}
