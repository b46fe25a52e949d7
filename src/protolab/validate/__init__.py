"""Validate: the emulator measured with real tools against its configured links
(docs/validation.md, `protolab validate-emulator`).

Owns the measurements and their checks (`emulator`), the validation's configuration,
thresholds and result file (`report`), and the command (`cli`).

May import: `errors`, `files`, `console`, the lab (`lab`), the measurement parsers (`measure`)
and the provenance of results (`run.provenance`). No other stage imports it but the app
(`protolab.cli`).
"""
