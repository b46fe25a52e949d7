"""Parsers and metrics over measurement artifacts (tool outputs, event logs)."""
