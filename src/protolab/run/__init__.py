"""Run: an experiment's runs executed and recorded (docs/spec.md, docs/cluster.md).

Owns the runner (matrix, order, keys, resume, the loop: `runner`), the lab session every run of
an experiment shares (`session`), what one run does per workload (`executors`), sweeps on a Dask
cluster (`cluster`, `dask_client`), the provenance recorded with results (`provenance`), and the
`protolab run` / `protolab demo` commands (`cli`).

May import the stages before it: `plan`, and what it hands each run's results to: `analysis`
and `store`; and the lab, scenarios, measurement parsers and browser. Never `report` or
`reproduce`.
"""
