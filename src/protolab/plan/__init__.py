"""Plan: what an experiment is before anything runs (docs/spec.md).

Owns the spec's structure (`spec`), its meaning against the scenario registry (`experiment`),
the designs beyond the full grid and the stopping rule of adaptive repetitions (`design`), the
QUIC controller specs checked by the binary's registry (`controllers`), and the page-load modes
as the binary's registry defines them (`modes`).

May import: `errors`, the contract's models (`results`), the scenario registry (`scenarios`), page manifests (`corpus`), browser
modes (`browser`) and the binary's location (`lab.binary`). No other stage: every one of them
may import this one.
"""
