"""Stage 2 of loading an experiment spec: its meaning (docs/spec.md).

`protolab.plan.spec` checks a spec's structure (stage 1). Here the scenario is looked up in the
registry; scenario parameters, scenario axes and transport axes are checked against it; the
modes are checked against the scenario's workload (page loads, bulk transfers or pairs of
clients); QUIC controllers are checked against the Rust registry; sweeps are expanded; and
every page is resolved (a scenario page, a corpus page or a manifest file).

Every error is a `SpecError` naming the file and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from protolab.browser.modes import UnsupportedMode, chromium_mode
from protolab.corpus.errors import ManifestError
from protolab.corpus.manifest import read_manifest
from protolab.files import parse_toml
from protolab.plan import controllers
from protolab.plan.design import WSP_MAX_POINTS, design_points, design_seed
from protolab.plan.spec import (
    RANGED_AXES,
    STANDARD_AXES,
    TRANSPORT_AXES,
    Axes,
    Spec,
    SpecError,
    Transport,
    axis_type,
    format_validation_error,
    quoted,
)
from protolab.scenarios import SCENARIOS, Scenario


@dataclass(frozen=True)
class Page:
    """A page of the matrix: its name in the spec and the manifest to serve and load."""

    ref: str  # as written in the spec
    name: str  # manifest name
    source: str  # "scenario", "corpus" or the manifest path
    manifest: dict[str, Any] = field(hash=False, compare=False)
    digest: str = ""  # sha256 of the canonical manifest: a changed manifest is another page

    @property
    def size_bytes(self) -> int:
        return sum(int(obj.get("size", 0)) for obj in self.manifest.get("objects", []))

    @property
    def addresses(self) -> list[str]:
        return sorted({origin["address"] for origin in self.manifest.get("origins", [])})


@dataclass
class Experiment:
    """A validated spec with its scenario, effective parameters and axes, and resolved pages."""

    spec: Spec
    path: Path | None
    name: str
    scenario: Any  # protolab.scenarios.Scenario (import cycle otherwise)
    params: BaseModel
    axes: dict[str, list[Any]]  # every axis (standard, scenario, transport), values over all sweeps
    pages: dict[str, Page]  # by ref
    sweeps: list[dict[str, list[Any]]] = field(default_factory=list)  # each a full set of axes

    @property
    def extra_axes(self) -> list[str]:
        """Scenario-specific axes (part of the condition)."""
        return [name for name in self.axes if name not in STANDARD_AXES and name not in TRANSPORT_AXES]

    @property
    def transport_axes(self) -> list[str]:
        """Transport options that vary from run to run."""
        return [name for name in TRANSPORT_AXES if name in self.axes]

    def spec_dict(self) -> dict[str, Any]:
        """The spec as written, plus the effective values it left to the scenario."""
        return {
            **self.spec.model_dump(mode="json"),
            "effective": {
                "name": self.name,
                "params": self.params.model_dump(mode="json"),
                "axes": self.axes,
                "sweeps": self.sweeps,
                "pages": {
                    ref: {"name": p.name, "source": p.source, "digest": p.digest, "bytes": p.size_bytes}
                    for ref, p in self.pages.items()
                },
            },
        }


def canonical_digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# ---------------------------------------------------------------------- loading


def load_spec(path: Path) -> Experiment:
    """Read, validate and resolve a spec file; raise SpecError naming the file and field."""
    return spec_from_dict(read_spec_data(path), source=path.name, path=path)


def read_spec_data(path: Path) -> dict[str, Any]:
    """A spec file's TOML as a dict, not yet validated (callers may merge overrides into it)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:  # a ValueError, not an OSError
        raise SpecError(f"{path.name}: not UTF-8 text: {exc}") from exc
    try:
        return parse_toml(text)
    except ValueError as exc:  # TOMLDecodeError, or NestedTooDeeply
        raise SpecError(f"{path.name}: not valid TOML: {exc}") from exc


def parse_spec(text: str, *, source: str = "spec.toml", path: Path | None = None) -> Experiment:
    try:
        data = parse_toml(text)
    except ValueError as exc:  # TOMLDecodeError, or NestedTooDeeply
        raise SpecError(f"{source}: not valid TOML: {exc}") from exc
    return spec_from_dict(data, source=source, path=path)


def spec_from_dict(data: Mapping[str, Any], *, source: str = "spec.toml", path: Path | None = None) -> Experiment:
    try:
        spec = Spec.model_validate(dict(data))
    except ValidationError as exc:
        raise SpecError(format_validation_error(source, exc, Spec)) from exc
    return resolve(spec, source=source, path=path)


def _axis_values(scenario: Scenario, params: BaseModel, name: str, values: Any, where: str, source: str) -> list[Any]:
    """Checks the values of one axis: standard, scenario-specific or transport."""
    if not isinstance(values, list):
        # Scenario and transport axes are extra keys the model does not type: a string here
        # would otherwise become a list of its characters.
        raise SpecError(f"{source}: {where}.{name}: an axis is a list of values, got {quoted(values)[:80]}")
    if name == "mode":
        checked = []
        for index, value in enumerate(values):
            try:
                checked.append(scenario.workload_for(params).check_mode(value, params))
            except ValueError as exc:
                raise SpecError(f"{source}: {where}.mode[{index}]: {exc}") from None
        if len(set(checked)) != len(checked):
            raise SpecError(f"{source}: {where}.mode: a mode appears twice")
        return checked
    if name in STANDARD_AXES:
        return list(values)
    kind = scenario.extra_axes.get(name)
    if kind is None and name in TRANSPORT_AXES:
        info = Transport.model_fields[name]
        # With the field's constraints (lengths, ranges): the bare annotation has none of them,
        # and an axis value must obey the same as the [transport] value.
        kind = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
    if kind is None:
        known = [*STANDARD_AXES, *scenario.extra_axes, *TRANSPORT_AXES]
        raise SpecError(f"{source}: {where}.{name}: unknown axis for scenario {quoted(scenario.name)} "
                        f"(known: {', '.join(known)})")
    try:
        return list(TypeAdapter(axis_type(kind)).validate_python(values))
    except ValidationError as exc:
        raise SpecError(format_validation_error(source, exc, prefix=(where, name))) from exc


def _written_axes(axes: Axes) -> dict[str, list[Any]]:
    written = {name: values for name, values in axes.model_dump(exclude_unset=True).items()
               if name in STANDARD_AXES and values is not None}
    written.update(axes.model_extra or {})
    return written


def _check_controllers(source: str, spec: Spec, axes: Mapping[str, list[Any]]) -> None:
    where = [("transport.quic_cc", spec.transport.quic_cc)]
    where += [(f"axes.quic_cc[{i}]", v) for i, v in enumerate(axes.get("quic_cc", []))]
    for field_name, value in where:
        try:
            controllers.check(value)
        except controllers.ControllerError as exc:
            raise SpecError(f"{source}: {field_name}: {exc}") from None
        if controllers.has_link_rate(value) and "unlimited" in axes.get("bandwidth_mbps", []):
            raise SpecError(f"{source}: {field_name}: {value} gives a rate in % of the link, "
                            "but the bandwidth axis has \"unlimited\"")


def _check_client(source: str, spec: Spec, axes: Mapping[str, list[Any]], workload_name: str) -> None:
    """Chromium loads pages, in the modes it can be made to speak."""
    where = "axes.client" if "client" in axes else "transport.client"
    if "chromium" not in axes.get("client", [spec.transport.client]):
        return
    if workload_name != "page":
        raise SpecError(f"{source}: {where}: client \"chromium\" loads pages; scenario {quoted(spec.scenario)} "
                        f"runs a {workload_name} workload")
    for index, mode in enumerate(axes.get("mode", [])):
        try:
            chromium_mode(mode)
        except UnsupportedMode as exc:
            raise SpecError(f"{source}: axes.mode[{index}]: {exc} (client \"chromium\" in {where})") from None
    if handshake_bound := _transport_option_set(spec, axes, "quic_handshake_timeout_ms"):
        raise SpecError(f"{source}: {handshake_bound}: bounds protolab's page-load engine only; "
                        f"Chromium keeps its own (client \"chromium\" in {where})")
    # sprout-ewma's window comes from the receiver's reports, which only protolab's client sends:
    # under Chromium the server would stay at its initial window.
    cc_fields = [("transport.quic_cc", spec.transport.quic_cc)]
    cc_fields += [(f"axes.quic_cc[{i}]", v) for i, v in enumerate(axes.get("quic_cc", []))]
    for field_name, value in cc_fields:
        if str(value).split(":", 1)[0].strip().lower() == "sprout-ewma":
            raise SpecError(f"{source}: {field_name}: sprout-ewma needs the receiver's feedback reports, which "
                            f"Chromium does not send (client \"chromium\" in {where}); use sprout-ewma-sender")


def _transport_option_set(spec: Spec, axes: Mapping[str, list[Any]], name: str) -> str | None:
    """Where the spec sets an optional transport option (`axes.NAME` or `transport.NAME`), or None."""
    if name in axes:
        return f"axes.{name}"
    return f"transport.{name}" if getattr(spec.transport, name) is not None else None


def _check_page_only(source: str, spec: Spec, axes: Mapping[str, list[Any]], workload_name: str) -> None:
    """Warm loads prime the TLS sessions of a page's origins, and the QUIC handshake bound is the
    page-load engine's: page loads only."""
    if workload_name == "page":
        return
    if "resumed" in axes.get("warm", [spec.transport.warm]):
        where = "axes.warm" if "warm" in axes else "transport.warm"
        raise SpecError(f"{source}: {where}: warm loads are page loads; scenario {quoted(spec.scenario)} "
                        f"runs a {workload_name} workload")
    if handshake_bound := _transport_option_set(spec, axes, "quic_handshake_timeout_ms"):
        raise SpecError(f"{source}: {handshake_bound}: bounds the page-load engine's QUIC connections; "
                        f"scenario {quoted(spec.scenario)} runs a {workload_name} workload")


def _check_ranges(spec: Spec, scenario: Any, written: Mapping[str, list[Any]], source: str) -> None:
    """The ranges of a space-filling design: numeric condition axes, not also in [axes]."""
    d = spec.design
    for name, (lo, hi) in d.ranges.items():
        where = f"{source}: design.ranges.{name}"
        if name not in RANGED_AXES:
            what = ("not a numeric condition axis" if name in (*STANDARD_AXES, *scenario.extra_axes, *TRANSPORT_AXES)
                    else f"unknown axis for scenario {quoted(scenario.name)}")
            raise SpecError(f"{where}: {what}; a range is for one of {', '.join(RANGED_AXES)} "
                            "(other axes keep their lists in [axes])")
        if name in written:
            raise SpecError(f"{where}: also an axis ([axes] {name}); give it in one place")
        if not lo < hi:
            raise SpecError(f"{where}: the low end {lo:g} must be below the high end {hi:g}")
        if name == "buffer":
            if lo <= 0:
                raise SpecError(f"{where}: a buffer range is in multiples of the BDP and must be above 0, got {lo:g}")
            continue
        try:  # the axis's own bounds; every point lies between the two ends
            Axes.model_validate({name: [lo, hi]})
        except ValidationError as exc:
            raise SpecError(format_validation_error(source, exc, Axes, prefix=("design", "ranges"))) from exc
    for index, name in enumerate(d.log):
        if name not in d.ranges:
            raise SpecError(f"{source}: design.log[{index}]: {name} has no range in [design.ranges]")
        if d.ranges[name][0] <= 0:
            raise SpecError(f"{source}: design.log[{index}]: a log scale needs a positive low end for {name}")
    if len(set(d.log)) != len(d.log):
        raise SpecError(f"{source}: design.log: an axis appears twice")


def _check_adaptive(spec: Spec, source: str) -> None:
    d = spec.design
    if d.ci_target is None:
        if "min_repetitions" in d.model_fields_set:
            raise SpecError(f"{source}: design.min_repetitions: only with adaptive repetitions (design.ci_target)")
        return
    if spec.repetitions <= d.min_repetitions:
        raise SpecError(f"{source}: design.ci_target: adaptive repetitions need repetitions (the maximum, "
                        f"{spec.repetitions}) above design.min_repetitions ({d.min_repetitions})")


def _design_sweeps(spec: Spec, scenario: Any, params: BaseModel, base: dict[str, list[Any]],
                   written: Mapping[str, list[Any]], source: str) -> list[dict[str, list[Any]]]:
    """A space-filling design's points as one sweep each (none for a grid)."""
    _check_adaptive(spec, source)
    d = spec.design
    if d.kind == "grid":
        for field_name in ("points", "ranges", "log"):
            if getattr(d, field_name):
                raise SpecError(f"{source}: design.{field_name}: only for a space-filling design "
                                f"(kind lhs, sobol or wsp), not a grid")
        return []
    if d.points is None:
        raise SpecError(f"{source}: design.points: kind {quoted(d.kind)} needs a number of points (the budget "
                        "of conditions)")
    if d.kind == "wsp" and d.points > WSP_MAX_POINTS:
        raise SpecError(f"{source}: design.points: a wsp design takes at most {WSP_MAX_POINTS} points "
                        f"(lhs and sobol: 100000), got {d.points}")
    if not d.ranges:
        raise SpecError(f"{source}: design.ranges: kind {quoted(d.kind)} needs at least one range, "
                        "e.g. rtt_ms = [10, 200]")
    if spec.sweeps:
        raise SpecError(f"{source}: design.kind: a space-filling design ({quoted(d.kind)}) and sweeps cannot be combined")
    _check_ranges(spec, scenario, written, source)
    seed = design_seed(spec.seed if d.seed is None else d.seed, d.kind)
    sweeps = []
    for point in design_points(d.kind, d.points, d.ranges, d.log, seed):
        values = {name: f"{value:g}bdp" if name == "buffer" else value for name, value in point.items()}
        sweeps.append({**base, **{name: _axis_values(scenario, params, name, [value], f"design.ranges.{name}", source)
                                  for name, value in values.items()}})
    return sweeps


def resolve(spec: Spec, *, source: str, path: Path | None) -> Experiment:
    scenario = SCENARIOS.get(spec.scenario)
    if scenario is None:
        raise SpecError(f"{source}: scenario: unknown scenario {quoted(spec.scenario)} (known: {', '.join(SCENARIOS)})")
    try:
        params = scenario.Params.model_validate(spec.params)
    except ValidationError as exc:
        raise SpecError(format_validation_error(source, exc, scenario.Params, prefix=("params",))) from exc
    workload = scenario.workload_for(params)

    base: dict[str, list[Any]] = {}
    written = _written_axes(spec.axes)
    for name in (*STANDARD_AXES, *scenario.extra_axes):
        values = written.get(name, scenario.default_axes[name])
        if name == "page" and not workload.uses_pages(params):
            if "page" in written:
                raise SpecError(f"{source}: axes.page: scenario {quoted(scenario.name)} runs {workload.description}, "
                                "which load no pages")
            base[name] = []
            continue
        base[name] = _axis_values(scenario, params, name, values, "axes", source)
    for name, values in written.items():
        if name not in base:
            base[name] = _axis_values(scenario, params, name, values, "axes", source)
    sweeps: list[dict[str, list[Any]]] = []
    for index, sweep in enumerate(spec.sweeps):
        where = f"sweeps[{index}]"
        override = _written_axes(sweep)
        if "page" in override and not workload.uses_pages(params):
            raise SpecError(f"{source}: {where}.page: scenario {quoted(scenario.name)} loads no pages")
        sweeps.append({**base, **{name: _axis_values(scenario, params, name, values, where, source)
                                  for name, values in override.items()}})
    sweeps = _design_sweeps(spec, scenario, params, base, written, source) or sweeps or [base]
    # Every axis over all sweeps, values in first-seen order.
    axes: dict[str, list[Any]] = {}
    for sweep in sweeps:
        for name, values in sweep.items():
            merged = axes.setdefault(name, [])
            merged.extend(v for v in values if v not in merged)
    for name in TRANSPORT_AXES:
        if name in axes and name in spec.transport.model_fields_set:
            raise SpecError(f"{source}: axes.{name}: also set in [transport]; give it in one place")
    _check_controllers(source, spec, axes)
    _check_client(source, spec, axes, workload.name)
    _check_page_only(source, spec, axes, workload.name)

    base_dir = path.parent if path is not None else Path.cwd()
    scenario_pages = scenario.pages(params)
    pages: dict[str, Page] = {}
    for index, ref in enumerate(axes["page"]):
        try:
            pages[ref] = resolve_page(ref, base_dir, scenario_pages, corpus_seed=spec.seed)
        except ValueError as exc:
            raise SpecError(f"{source}: axes.page[{index}]: {exc}") from exc
    _check_shared_origins(source, pages)
    try:
        scenario.check(params, axes)
    except ValueError as exc:
        raise SpecError(f"{source}: {exc}") from exc
    _check_lab(source, spec, scenario, params, pages)
    name = spec.name or (path.stem if path is not None else spec.scenario)
    return Experiment(spec=spec, path=path, name=name, scenario=scenario, params=params, axes=axes, pages=pages,
                      sweeps=sweeps)


def _check_lab(source: str, spec: Spec, scenario: Scenario, params: BaseModel, pages: Mapping[str, Page]) -> None:
    """Per-host lab settings name hosts of the scenario's topology."""
    if not spec.lab.host_offload:
        return
    addresses = sorted({address for page in pages.values() for address in page.addresses})
    hosts = [entry["name"] for entry in scenario.topology("check", params, addresses, spec.seed)["hosts"]]
    for name in spec.lab.host_offload:
        if name not in hosts:
            raise SpecError(f"{source}: lab.host_offload.{name}: scenario {quoted(scenario.name)} has no host "
                            f"{quoted(name)} (its hosts: {', '.join(hosts)})")


def _check_shared_origins(source: str, pages: Mapping[str, Page]) -> None:
    """Pages are served together: a hostname must have one address across them (docs/manifest.md)."""
    seen: dict[str, tuple[str, str]] = {}
    for ref, page in pages.items():
        for origin in page.manifest.get("origins", []):
            host, address = origin.get("hostname"), origin.get("address")
            earlier = seen.setdefault(host, (address, ref))
            if earlier[0] != address:
                raise SpecError(
                    f"{source}: axes.page: pages {quoted(earlier[1])} and {quoted(ref)} give origin {host} "
                    f"different addresses ({earlier[0]} and {address}); pages of one spec are served together"
                )


def resolve_page(
    ref: str, base: Path, scenario_pages: Mapping[str, dict[str, Any]], *, corpus_seed: int
) -> Page:
    """A page by name: a page the scenario provides, a corpus page, or a manifest file path."""
    if ref in scenario_pages:
        manifest = scenario_pages[ref]
        return Page(ref, manifest["name"], "scenario", manifest, canonical_digest(manifest))
    looks_like_path = "/" in ref or ref.endswith(".json")
    if not looks_like_path:
        manifest = corpus_manifest(ref, seed=corpus_seed)
        return Page(ref, manifest["name"], "corpus", manifest, canonical_digest(manifest))
    file = Path(ref) if Path(ref).is_absolute() else base / ref
    try:
        manifest = read_manifest(file)  # checked by protolab-net: every rule, and the recorded bodies
    except ManifestError as exc:
        raise ValueError(f"manifest {exc}") from exc
    return Page(ref, manifest["name"], str(file), manifest, canonical_digest(manifest))


def corpus_manifest(name: str, *, seed: int) -> dict[str, Any]:
    """A built-in corpus page as a manifest dict: 001 Table I by name, or `page-NNN`, a page of
    the generated corpus shaped like 002 Table 4.1 (protolab.corpus.generate)."""
    from protolab.corpus import SITES, CorpusError, site_manifest
    from protolab.corpus.generate import GENERATED_NAME, generated_page

    if GENERATED_NAME.fullmatch(name):
        try:
            return generated_page(name, seed=seed)
        except CorpusError as exc:
            raise ValueError(str(exc)) from exc
    if name not in SITES:
        raise ValueError(
            f"unknown page {quoted(name)}: not a corpus page (known: {', '.join(SITES)}, or page-001 ... page-999 "
            "of the generated corpus) and not a manifest path (a path contains '/' or ends in .json)"
        )
    try:
        return site_manifest(name, seed=seed)
    except CorpusError as exc:
        raise ValueError(str(exc)) from exc
