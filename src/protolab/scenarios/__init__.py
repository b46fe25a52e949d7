"""Named scenarios from the seeds, looked up by name (docs/scenarios.md)."""

from __future__ import annotations

from typing import Any

from protolab.scenarios.base import Condition, Context, Scenario
from protolab.scenarios.builtin import (
    FIVE_PAGES,
    TABLE_I_PAGES,
    BwRttGrid,
    EcmpCongestion,
    SingleObject,
    WifiLoss,
)
from protolab.scenarios.cellular import Cellular
from protolab.scenarios.congestion import (
    CcSuite,
    CpuLimit,
    CubicTuning,
    Fairness,
    QuicVsTcp,
    SlowStartExit,
    WifiAggregation,
)
from protolab.scenarios.interop import Interop, QuicVsTcpStacks
from protolab.scenarios.rpm import Rpm
from protolab.scenarios.traffic import TrafficCorpus
from protolab.scenarios.wifi import WifiClients, WifiFairness

SCENARIOS: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (
        WifiLoss(), EcmpCongestion(), BwRttGrid(), SingleObject(), Cellular(),
        Fairness(), CubicTuning(), QuicVsTcp(), CcSuite(), SlowStartExit(), CpuLimit(), Rpm(), TrafficCorpus(),
        WifiAggregation(), WifiClients(), WifiFairness(), Interop(), QuicVsTcpStacks(),
    )
}


def pages_of_scenario(scenario: Scenario, params: Any) -> dict[str, dict[str, Any]]:
    return scenario.pages(params)


__all__ = [
    "FIVE_PAGES",
    "SCENARIOS",
    "TABLE_I_PAGES",
    "Condition",
    "Context",
    "Scenario",
    "pages_of_scenario",
]
