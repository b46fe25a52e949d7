"""Analysis: what a run's raw artifacts say beyond the client's own result (docs/analysis.md).

Owns the transport analysis of a run (`analyze`: QUIC_info/TCP_info, losses and bursts against
the emulator's truth, overhead), the fidelity record of the emulator's counters (`fidelity`),
and the `protolab analyze` command (`cli`).

May import: `errors` and the measurement parsers (`measure`); only its command reads and writes
the results store (`store`). Never `run`, `report` or `reproduce`.
"""
