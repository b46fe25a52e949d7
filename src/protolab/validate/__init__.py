"""Validate: the emulator measured with real tools against its configured links
(docs/validation.md, `protolab validate-emulator`).

Owns the run of every check (`emulator`), the checks themselves (`timing`: delay, jitter,
contention; `traffic`: loss, rate, ECMP, WiFi), the lab and tool plumbing they share (`plumbing`),
the validation's configuration, thresholds and result file (`report`), and the command (`cli`).

May import: `errors`, `files`, `console`, the lab (`lab`), the measurement parsers (`measure`)
and the provenance of results (`run.provenance`). No other stage imports it but the app
(`protolab.cli`).
"""
