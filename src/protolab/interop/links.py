"""What a test case does to the link while the client runs (pure: the emulator's counters and
the time in, the `set_link` changes out), the runner's ns-3 scenarios `blackhole` and
`droplist` on protolab's emulated link:

- blackhole: once half the files' bytes have crossed the link to the client, every packet is
  dropped both ways (loss 1) for the case's `blackout_s`, then the condition's loss returns;
- amplificationlimit (`droplist --drops_to_server=2,3,4,5,6,7`): before the client starts,
  the link to the server gets a Gilbert-Elliott chain that passes the first packet and loses
  every one after it (good state lossless, p = 1 into the bad state, r = 0 out of it); once the
  link's counters show the case's number of losses, the condition's loss returns. Polling the
  counters may lose a packet more than the runner's list when two come back to back.

`LinkSchedule.start` gives the changes to make before the client starts (reseeding, so the
chain starts in its good state), `step` those due now; the runner applies them with
`Lab.set_link` (protolab.run.interop).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from protolab.interop.testcases import TestCase

# The link directions of the interop scenario's bottleneck (docs/topology.md: forward is left to
# right, the client's side to the server's).
TO_SERVER, TO_CLIENT = "p0.forward", "p0.reverse"
PASS_FIRST_THEN_DROP = {"kind": "gilbert-elliott", "p": 1.0, "r": 0.0, "loss_good": 0.0, "loss_bad": 1.0}
DROP_ALL = {"kind": "bernoulli", "p": 1.0}
# How often the counters are read while an event is due. Each read is a command to the packet
# loop, so not faster than needed: the drop list must see the client's packets one by one (they
# come a PTO apart, or a few back to back), the outage needs its start to ~25 kB at 10 Mbit/s.
DROPLIST_POLL_S = 0.005
BLACKOUT_POLL_S = 0.02


@dataclass(frozen=True)
class LinkChange:
    link: str
    loss: Any  # set_link's loss: a probability, a loss model, or None (no loss)
    reseed: bool = False  # restart the link's random stream and loss chain


@dataclass
class LinkSchedule:
    """The case's link events for one run; `restore` is each direction's loss of the condition."""

    case: TestCase
    total_bytes: int
    restore: Mapping[str, Any]
    dark_since_s: float | None = None
    done: bool = False
    events: list[str] = field(default_factory=list)  # what happened, for the run's record

    @property
    def active(self) -> bool:
        return (self.case.blackout_s > 0 or self.case.drops_to_server > 0) and not self.done

    @property
    def poll_s(self) -> float:
        return DROPLIST_POLL_S if self.case.drops_to_server > 0 else BLACKOUT_POLL_S

    def start(self) -> list[LinkChange]:
        if self.case.drops_to_server > 0:
            return [LinkChange(TO_SERVER, PASS_FIRST_THEN_DROP, reseed=True)]
        return []

    def step(self, links: Mapping[str, Mapping[str, Any]], now_s: float) -> list[LinkChange]:
        """`links`: the counters reply's `links` (name -> a direction's counters)."""
        if not self.active:
            return []
        if self.case.drops_to_server > 0:
            dropped = int(links.get(TO_SERVER, {}).get("dropped_packets", {}).get("random_loss", 0))
            if dropped < self.case.drops_to_server:
                return []
            self.done = True
            self.events.append(f"dropped the client's packets 2 to {dropped + 1} to the server")
            return [LinkChange(TO_SERVER, self.restore.get(TO_SERVER))]
        if self.dark_since_s is None:
            delivered = int(links.get(TO_CLIENT, {}).get("delivered_bytes", 0))
            if 2 * delivered < self.total_bytes:
                return []
            self.dark_since_s = now_s
            self.events.append(f"dark both ways after {delivered} bytes to the client")
            return [LinkChange(name, DROP_ALL) for name in (TO_SERVER, TO_CLIENT)]
        if now_s - self.dark_since_s < self.case.blackout_s:
            return []
        self.done = True
        self.events.append(f"light again after {now_s - self.dark_since_s:.2f} s")
        return [LinkChange(name, self.restore.get(name)) for name in (TO_SERVER, TO_CLIENT)]
