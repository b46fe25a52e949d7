"""The validation's configuration: its check groups, chosen by name (no lab)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from protolab.validate.emulator import CHECK_GROUPS
from protolab.validate.report import GROUP_NAMES, ValidationConfig


def test_every_named_group_has_its_checks_in_order() -> None:
    assert tuple(CHECK_GROUPS) == GROUP_NAMES


def test_groups_run_in_their_order_and_count_their_steps() -> None:
    config = ValidationConfig.for_mode(quick=True, groups=["contention", "delay"])
    assert config.groups == ["delay", "contention"]
    assert config.step_count() == len(config.delays_ms) + 1 + 1
    # delay 4 levels + the veth reference, jitter 2, loss 5, rate 4, ecmp 1, contention 1, wifi 2 + 2.
    assert ValidationConfig().step_count() == 5 + 2 + 5 + 4 + 1 + 1 + 4


@pytest.mark.parametrize("groups", [["contention", "latency"], []])
def test_an_unknown_or_empty_group_list_is_refused_naming_the_choices(groups: list[str]) -> None:
    with pytest.raises(ValidationError, match="choose from delay, jitter, loss, rate, ecmp, contention, wifi"):
        ValidationConfig(groups=groups)
