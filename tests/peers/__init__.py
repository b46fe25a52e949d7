"""Helpers of the real-peer tests (tests/test_peers.py) and of benches/endpoints.py: network
namespaces on loopback, our server, nginx, caddy, Chromium (Playwright) and their configs."""
