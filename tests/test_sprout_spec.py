"""Specs with Sprout-EWMA: `sprout-ewma` needs the receiver's feedback reports, which only
protolab's page-load client sends, so a spec that pairs it with Chromium is refused (the server
would stay at its initial window); `sprout-ewma-sender` works with any client."""

from __future__ import annotations

from pathlib import Path

import pytest

from protolab.plan.experiment import parse_spec
from protolab.plan.spec import SpecError

SPEC = """
schema_version = 1
name = "sprout-spec"
scenario = "bw-rtt-grid"
[axes]
bandwidth_mbps = [5]
rtt_ms = [120]
mode = ["h3"]
page = ["wikipedia"]
client = CLIENTS
quic_cc = CONTROLLERS
"""


def _spec(clients: str, controllers: str) -> str:
    return SPEC.replace("CLIENTS", clients).replace("CONTROLLERS", controllers)


def test_sprout_ewma_with_chromium_is_refused(emu_binary: Path) -> None:
    with pytest.raises(SpecError, match=r"axes.quic_cc\[1\]: sprout-ewma needs the receiver's feedback reports.*"
                                        r"use sprout-ewma-sender"):
        parse_spec(_spec('["engine", "chromium"]', '["cubic", "sprout-ewma:gain=0.25"]'))
    assert parse_spec(_spec('["chromium"]', '["cubic", "sprout-ewma-sender"]'))
    assert parse_spec(_spec('["engine"]', '["cubic", "sprout-ewma"]'))
