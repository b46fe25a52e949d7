"""Building a page manifest from its shape: object kinds, sizes, dependency tree, origins, paths.

Shared by the Table I replicas (table1.py) and the generated corpora (generate.py). Everything is
drawn from one `random.Random` seeded with a string (seeding from a string and `random()` are
the two parts of the module Python keeps stable across versions); normal variates come from our
own Box-Muller transform over `random()` rather than `random.gauss`, so a manifest is a pure
function of (shape, seed). The model is described in docs/corpus.md.
"""

from __future__ import annotations

import ipaddress
import math
import random
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from protolab.corpus.errors import CorpusError
from protolab.corpus.manifest import MAX_OBJECT_SIZE, MAX_SEED, SCHEMA_VERSION

TYPES = ("html", "css", "js", "img", "other")


@dataclass(frozen=True)
class Kind:
    """One kind of object: its Table I type, content type, and log-normal size (median, sigma)."""

    type: str
    content_type: str
    median: float
    sigma: float
    cache_control: str


_IMMUTABLE = "public, max-age=31536000, immutable"
KINDS: Mapping[str, Kind] = {
    "document": Kind("html", "text/html; charset=utf-8", 45_000, 0.5, "no-cache"),
    "iframe": Kind("html", "text/html; charset=utf-8", 12_000, 0.8, "no-cache"),
    "css": Kind("css", "text/css", 18_000, 1.0, _IMMUTABLE),
    "js": Kind("js", "text/javascript", 35_000, 1.2, _IMMUTABLE),
    "jpeg": Kind("img", "image/jpeg", 22_000, 1.3, "public, max-age=86400"),
    "png": Kind("img", "image/png", 6_000, 1.4, "public, max-age=86400"),
    "webp": Kind("img", "image/webp", 14_000, 1.2, "public, max-age=86400"),
    "gif": Kind("img", "image/gif", 1_500, 1.5, "public, max-age=86400"),
    "svg": Kind("img", "image/svg+xml", 2_500, 1.0, "public, max-age=86400"),
    "font": Kind("other", "font/woff2", 28_000, 0.25, _IMMUTABLE),
    "json": Kind("other", "application/json", 3_000, 1.2, "no-store"),
    "ico": Kind("other", "image/x-icon", 5_000, 0.5, "public, max-age=86400"),
}
# Image formats and their shares; "other" objects: fonts, JSON, at most one favicon.
IMAGE_MIX: Mapping[str, float] = {"jpeg": 0.35, "png": 0.25, "webp": 0.2, "gif": 0.1, "svg": 0.1}
OTHER_MIX: Mapping[str, float] = {"font": 0.55, "json": 0.3, "ico": 0.15}

# Discovery delay (ms) after the parent finishes, by the parent's type: the HTML parser and
# preload scanner find references at once; CSS needs style resolution before fonts and
# background images are requested; JS must run before it requests anything.
DELAY_RANGE_MS: Mapping[str, tuple[int, int]] = {"html": (0, 5), "css": (1, 5), "js": (5, 20)}

# Tree shape: probabilities of the less common discovery routes (docs/corpus.md).
P_NESTED_IFRAME = 0.25     # an iframe inside an earlier iframe instead of the root
P_IN_IFRAME = 0.25         # a CSS/JS/image referenced by an iframe rather than the root
P_CSS_IMPORT = 0.15        # a stylesheet pulled in by @import of an earlier one
P_JS_LOADED_BY_JS = 0.25   # a script inserted by an earlier script
IMAGE_DISCOVERY: Mapping[str, float] = {"html": 0.6, "css": 0.2, "js": 0.2}
P_FIRST_PARTY_HOME = 0.85  # an object on its type's usual first-party origin
P_THIRD_PARTY = 0.35       # beyond 3 origins: share of objects on the extra origins

FIRST_PARTY_HOSTS = ("www", "static", "img")
THIRD_PARTY_HOSTS = ("cdn", "api", "media", "ads", "stats", "fonts", "video", "social", "pix", "tags", "edge")

DEFAULT_MIN_OBJECT = 100


@dataclass(frozen=True)
class PageShape:
    """What a page must look like: counts per Table I type, exact total bytes, origins."""

    name: str
    counts: Mapping[str, int]
    total_bytes: int
    origins: int
    index: int
    min_object_bytes: int = DEFAULT_MIN_OBJECT
    max_object_bytes: int = MAX_OBJECT_SIZE
    sigma_scale: float = 1.0

    @property
    def objects(self) -> int:
        return sum(self.counts[t] for t in TYPES)


@dataclass(frozen=True)
class AddressPlan:
    """Origin addresses: host number `index * stride + origin + 1` inside `network`."""

    network: ipaddress.IPv4Network
    stride: int = 256

    @classmethod
    def parse(cls, text: str, field: str = "--network") -> AddressPlan:
        try:
            return cls(ipaddress.IPv4Network(text, strict=True))
        except ValueError as exc:
            raise CorpusError(f"{field}: {text!r} is not an IPv4 network (e.g. 10.99.0.0/16): {exc}") from None

    def address(self, index: int, origin: int) -> str:
        if origin + 1 >= self.stride:
            raise CorpusError(f"origin {origin} of page {index} does not fit a block of {self.stride} addresses")
        offset = index * self.stride + origin + 1
        if offset >= self.network.num_addresses - 1:
            raise CorpusError(f"--network {self.network}: page {index} does not fit "
                              f"({self.stride} addresses per page); give a larger network")
        return str(self.network.network_address + offset)


def normal(rng: random.Random) -> float:
    """A standard normal variate (Box-Muller over `random()`, stable across Python versions)."""
    u1 = 1.0 - rng.random()
    u2 = rng.random()
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return median * math.exp(sigma * normal(rng))


def weighted(rng: random.Random, weights: Mapping[str, float]) -> str:
    """One key of `weights`, drawn in proportion to its weight (keys in insertion order)."""
    total = sum(weights.values())
    x = rng.random() * total
    for key, weight in weights.items():
        x -= weight
        if x < 0:
            return key
    return list(weights)[-1]


def fit_sizes(raw: Sequence[float], total: int, low: int, high: int) -> list[int]:
    """Scale `raw` to integers summing to exactly `total`, each within [low, high].

    Proportional scaling; objects that would fall outside the bounds are pinned to them and the
    rest rescaled (water filling); rounding hands the remainder to the largest fractional parts.
    """
    n = len(raw)
    if not n * low <= total <= n * high:
        raise CorpusError(f"{total} bytes cannot be split into {n} objects of {low}-{high} bytes")
    pinned: dict[int, int] = {}
    values: dict[int, float] = {}
    while True:
        free = [i for i in range(n) if i not in pinned]
        if not free:
            break
        budget = total - sum(pinned.values())
        weight = sum(raw[i] for i in free)
        values = {i: raw[i] * budget / weight for i in free}
        below = [i for i in free if values[i] < low]
        above = [] if below else [i for i in free if values[i] > high]
        for i in below:
            pinned[i] = low
        for i in above:
            pinned[i] = high
        if not below and not above:
            break
    sizes = [0] * n
    for i, v in pinned.items():
        sizes[i] = v
    floors = {i: max(low, min(high, math.floor(v))) for i, v in values.items() if i not in pinned}
    for i, v in floors.items():
        sizes[i] = v
    remainder = total - sum(sizes)
    order = sorted(floors, key=lambda i: (-(values[i] - math.floor(values[i])), i))
    order += [i for i in range(n) if i not in floors]
    # The remainder is below the number of free objects; the loop also absorbs float slack.
    step = 1 if remainder > 0 else -1
    while remainder != 0:
        moved = False
        for i in order:
            if remainder == 0:
                break
            if low <= sizes[i] + step <= high:
                sizes[i] += step
                remainder -= step
                moved = True
        if not moved:
            raise CorpusError(f"cannot fit {total} bytes into {n} objects")  # unreachable: checked above
    return sizes


def choose_kinds(counts: Mapping[str, int], rng: random.Random) -> list[str]:
    """Kinds of the objects: the root, iframes, stylesheets, scripts, images, others (in that
    order, which is also the order the tree is built in)."""
    if counts["html"] < 1:
        raise CorpusError("a page needs at least one HTML document (the root)")
    kinds = ["document"] + ["iframe"] * (counts["html"] - 1)
    kinds += ["css"] * counts["css"] + ["js"] * counts["js"]
    kinds += [weighted(rng, IMAGE_MIX) for _ in range(counts["img"])]
    mix = dict(OTHER_MIX)
    for _ in range(counts["other"]):
        kind = weighted(rng, mix)
        if kind == "ico":
            del mix["ico"]  # a page has one favicon
        kinds.append(kind)
    return kinds


def build_tree(kinds: Sequence[str], rng: random.Random) -> list[int | None]:
    """Parent index of every object (None for the root). Parents always come earlier in
    `kinds`, so the result has no cycles by construction."""
    parents: list[int | None] = [None]
    seen: dict[str, list[int]] = {"html": [0], "iframe": [], "css": [], "js": []}

    def document() -> int:
        if seen["iframe"] and rng.random() < P_IN_IFRAME:
            return rng.choice(seen["iframe"])
        return 0

    for i, kind in enumerate(kinds[1:], start=1):
        ktype = KINDS[kind].type
        if kind == "iframe":
            nested = seen["iframe"] and rng.random() < P_NESTED_IFRAME
            parent = rng.choice(seen["iframe"]) if nested else 0
        elif kind == "css":
            parent = rng.choice(seen["css"]) if seen["css"] and rng.random() < P_CSS_IMPORT else document()
        elif kind == "js":
            parent = rng.choice(seen["js"]) if seen["js"] and rng.random() < P_JS_LOADED_BY_JS else document()
        elif ktype == "img":
            routes = {k: w for k, w in IMAGE_DISCOVERY.items() if k == "html" or seen[k]}
            route = weighted(rng, routes)
            parent = document() if route == "html" else rng.choice(seen[route])
        elif kind == "font":
            parent = rng.choice(seen["css"]) if seen["css"] else 0  # else: <link rel=preload> in the root
        elif kind == "json":
            parent = rng.choice(seen["js"]) if seen["js"] else 0
        else:  # favicon
            parent = 0
        parents.append(parent)
        if kind in seen:
            seen[kind].append(i)
    return parents


def assign_origins(kinds: Sequence[str], n_origins: int, rng: random.Random) -> list[int]:
    """Origin index of every object. Origin 0 (www) has the root; with 2+ origins stylesheets,
    scripts and fonts live mostly on `static`, images on `img` (or `static`); beyond three
    origins a share of objects goes to the extra (third-party-like) origins, Zipf-weighted.
    Every origin gets at least one object."""
    if n_origins < 1 or n_origins > len(kinds):
        raise CorpusError(f"{n_origins} origins for {len(kinds)} objects: each origin needs an object")
    homes = {"document": 0, "iframe": 0, "json": 0, "ico": 0, "css": 1, "js": 1, "font": 1}
    extra = {k: 1.0 / (k - 2) ** 0.8 for k in range(3, n_origins)}
    origins = [0]
    for kind in kinds[1:]:
        if n_origins == 1 or kind == "ico":
            origins.append(0)
            continue
        home = homes.get(kind, 2 if n_origins >= 3 else 1)
        if extra and rng.random() < P_THIRD_PARTY:
            origin = int(weighted(rng, {str(k): w for k, w in extra.items()}))
        elif rng.random() < P_FIRST_PARTY_HOME:
            origin = home
        else:
            origin = rng.randrange(min(n_origins, 3))
        origins.append(origin)
    # Every origin serves something: move an object from the busiest origin to an empty one.
    for empty in range(n_origins):
        if empty in origins:
            continue
        load = {o: origins.count(o) for o in set(origins)}
        busiest = max(sorted(load), key=lambda o: load[o])
        # The busiest origin has 2+ objects (pigeonhole: origins <= objects), so one is not the root.
        movable = [i for i in range(1, len(kinds)) if origins[i] == busiest]
        preferred = [i for i in movable if kinds[i] != "ico"] or movable
        origins[rng.choice(preferred)] = empty
    return origins


def hostnames(site: str, n_origins: int) -> list[str]:
    names = [f"{h}.{site}.test" for h in FIRST_PARTY_HOSTS[:n_origins]]
    for k in range(len(names), n_origins):
        prefix = THIRD_PARTY_HOSTS[(k - 3) % len(THIRD_PARTY_HOSTS)]
        names.append(f"{prefix}{k - 2}.{site}.test")
    return names


_STEMS: Mapping[str, Sequence[str]] = {
    "iframe": ("ads", "login", "player", "widget", "social", "consent", "chat"),
    "css": ("main", "vendor", "theme", "components", "print", "fonts", "layout"),
    "js": ("app", "vendor", "runtime", "analytics", "polyfills", "ads", "player", "consent"),
    "jpeg": ("hero", "photo", "banner", "product"),
    "png": ("icon", "sprite", "badge"),
    "webp": ("thumb", "card", "avatar"),
    "gif": ("pixel", "spinner"),
    "svg": ("logo", "icon"),
    "font": ("roboto-regular", "roboto-bold", "opensans-regular", "icons", "noto-sans", "inter-medium"),
    "json": ("config", "feed", "user", "recommendations", "strings"),
}
_TEMPLATES: Mapping[str, str] = {
    "iframe": "/frames/{stem}.html",
    "css": "/static/css/{stem}.{hash}.css",
    "js": "/static/js/{stem}.{hash}.js",
    "jpeg": "/img/{stem}.jpg",
    "png": "/img/{stem}.png",
    "webp": "/img/{stem}.webp",
    "gif": "/img/{stem}.gif",
    "svg": "/img/{stem}.svg",
    "font": "/static/fonts/{stem}.{hash}.woff2",
    "json": "/api/{stem}.json?v={hash}",
}
_FIXED_PATHS: Mapping[str, str] = {"document": "/", "ico": "/favicon.ico"}


def make_paths(kinds: Sequence[str], rng: random.Random) -> list[str]:
    """Realistic, unique paths: `/`, `/static/css/main.3f2a.css`, `/img/hero-12.jpg`, ..."""
    counters: dict[str, int] = {}
    paths: list[str] = []
    used: set[str] = set()
    image_number = 0
    for kind in kinds:
        if kind in _FIXED_PATHS:
            path = _FIXED_PATHS[kind]
        else:
            stems = _STEMS[kind]
            k = counters.get(kind, 0)
            counters[kind] = k + 1
            if KINDS[kind].type == "img":
                image_number += 1
                stem = f"{stems[k % len(stems)]}-{image_number}"
            elif kind == "font":
                stem = stems[k] if k < len(stems) else f"{stems[k % len(stems)]}-{k}"
            else:
                stem = stems[k] if k < len(stems) else f"chunk-{k}"
            path = _TEMPLATES[kind].format(stem=stem, hash=f"{rng.getrandbits(16):04x}")
        while path in used:  # only possible for `?v=` hashes; keeps (origin, path) unique
            path = f"{path}{'&' if '?' in path else '?'}r={rng.getrandbits(16):04x}"
        used.add(path)
        paths.append(path)
    return paths


def check_seed(seed: int) -> None:
    if not 0 <= seed <= MAX_SEED:
        raise CorpusError(f"--seed: {seed} must be between 0 and 2^64-1")


def page_rng(name: str, seed: int, purpose: str = "page") -> random.Random:
    return random.Random(f"protolab-corpus/{purpose}/{name}/{seed}")


def build_manifest(shape: PageShape, seed: int, plan: AddressPlan) -> dict[str, Any]:
    """The manifest (docs/manifest.md, schema_version 1) of a page of this shape."""
    check_seed(seed)
    if shape.objects < 1 or shape.counts["html"] < 1:
        raise CorpusError(f"page {shape.name}: needs at least one HTML document")
    rng = page_rng(shape.name, seed)
    kinds = choose_kinds(shape.counts, rng)
    raw = [lognormal(rng, KINDS[k].median, KINDS[k].sigma * shape.sigma_scale) for k in kinds]
    sizes = fit_sizes(raw, shape.total_bytes, shape.min_object_bytes, shape.max_object_bytes)
    parents = build_tree(kinds, rng)
    origin_of = assign_origins(kinds, shape.origins, rng)
    paths = make_paths(kinds, rng)
    hosts = hostnames(shape.name, shape.origins)
    delays = [0] + [rng.randint(*DELAY_RANGE_MS[KINDS[kinds[p]].type]) for p in parents[1:] if p is not None]

    def reference(i: int, parent: int) -> str:
        if origin_of[parent] == origin_of[i]:
            return paths[parent]
        return f"//{hosts[origin_of[parent]]}{paths[parent]}"

    children: dict[int, list[int]] = {}
    for i, p in enumerate(parents):
        if p is not None:
            children.setdefault(p, []).append(i)
    order: list[int] = []
    queue = deque([0])
    while queue:  # breadth-first: the root, then what it discovers, ...
        i = queue.popleft()
        order.append(i)
        queue.extend(children.get(i, []))

    objects: list[dict[str, Any]] = []
    for i in order:
        kind = KINDS[kinds[i]]
        obj: dict[str, Any] = {
            "path": paths[i],
            "origin": hosts[origin_of[i]],
            "size": sizes[i],
            "content_type": kind.content_type,
            "headers": {"cache-control": kind.cache_control},
        }
        parent = parents[i]
        if parent is not None:
            obj["parent"] = reference(i, parent)
            if delays[i]:
                obj["delay_ms"] = delays[i]
        objects.append(obj)
    return {
        "schema_version": SCHEMA_VERSION,
        "name": shape.name,
        "seed": seed,
        "origins": [{"hostname": h, "address": plan.address(shape.index, k)} for k, h in enumerate(hosts)],
        "objects": objects,
    }


def type_of(content_type: str) -> str:
    """Table I type of a content type (for counting what a manifest holds)."""
    base = content_type.split(";", 1)[0].strip().lower()
    by_base = {"text/html": "html", "text/css": "css", "text/javascript": "js", "application/javascript": "js"}
    if base in by_base:
        return by_base[base]
    if base.startswith("image/") and base != "image/x-icon":
        return "img"
    return "other"
