"""Parsers and metrics over measurement artifacts (tool outputs, samples files, qlogs, event
logs, captures): pure functions of files and rows that every stage may use.

May import: `errors` and what the scenarios expect of results (`scenarios`); no stage
package (plan, run, analysis, store, report)."""
