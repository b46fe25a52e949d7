"""Results: the documents the binaries write, as Python models, and the rows they give the store.

Owns the Python side of the contract (docs/architecture.md). The documents are defined once, in
Rust (`crates/contract`); `protolab-net schema` writes their JSON Schemas to `schemas/` and
`scripts/generate_models.py` turns those into the pydantic models of `results.generated` (never
edited by hand; tests/test_contract.py fails when they are stale). The modules here read
documents into those models (errors name the file and the field), say where each field is stored
(`placement`), and turn one run's documents into the rows of the store's tables (`record`).

Pure: no database, no lab, no subprocess; the only I/O is reading a document or samples file.
Stage: the first (docs/architecture.md): it imports no other stage, every stage may import it;
the store only stores what `RunRecord.rows()` gives it.
"""
