"""Report: the HTML report of a results directory, read from its store only (docs/report.md).

Owns the loading of experiments from the store and the page (`build`), what every section is
built from (`section`: the loaded experiments, labels, HTML helpers, the figure-writing
`Builder`), the sections (`analysis`, `calibration`, `fidelity`, `flows`, `rpm`, `transport`),
the figures and statistics they draw on (`figures`, `transport_figures`, `stats`), and the
`protolab report` / `protolab export` commands (`cli`). `build` imports the sections, the
sections import `section`, never `build`.

May import: `errors`, `store`, `measure`, the fidelity tolerances (`analysis.fidelity`) and the
flow characterization (`traffic.characterize`). Never `run` or `plan`: a report needs no lab.
"""
