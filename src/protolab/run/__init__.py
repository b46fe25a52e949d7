"""Run: an experiment's runs executed and recorded (docs/spec.md, docs/cluster.md).

Owns the runner (matrix, order, keys, resume, the loop: `runner`), the lab session every run of
an experiment shares (`session`), what one run does per workload (`executors`, handed to the
session by `LabExecutor`), sweeps on a Dask cluster (`cluster`, `dask_client`), the provenance
recorded with results (`provenance`), and the `protolab run` / `protolab demo` commands (`cli`).

May import the stages below it: `plan`, and `analysis` and `store`, which it hands each run's
results to; the lab, scenarios, measurement parsers and browser; and the leaves (`errors`,
`files`, `console`). Never `report`, `reproduce` or `validate`.
"""
