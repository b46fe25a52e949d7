"""Models generated from `schemas/` by scripts/generate_models.py: do not edit (docs/architecture.md)."""
