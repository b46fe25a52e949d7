"""Chromium as a page-load client (docs/browser.md): `modes` (flags per protocol mode),
`driver` (one cold load inside the client namespace, run as `python -m protolab.browser.driver`)."""
