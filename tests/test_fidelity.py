"""The fidelity record of a run (docs/store.md, "Fidelity"), from fixed counters."""

from __future__ import annotations

from documents import counters, emulator_counters, link, link_counters

from protolab.analysis.fidelity import run_fidelity
from protolab.results.record import RunRecord
from protolab.run.runner import fidelity_of
from protolab.store import build_run_rows


def _late(mean_ns: int, p999_ns: int, max_ns: int, packets: int = 1000) -> dict:
    return {"delivery_late": {"packets": packets, "mean_ns": mean_ns, "p999_ns_at_most": p999_ns, "max_ns": max_ns,
                              "p99_ns_at_most": p999_ns, "buckets": []}}


def _link(name: str, loss_pct: float, arrived: int, lost: int, config: dict | None = None) -> dict:
    return {"link": name, "configured_loss_pct": loss_pct, "arrived_packets": arrived,
            "dropped_random_loss_packets": lost,
            "config": config or {"loss": {"kind": "bernoulli", "p": loss_pct / 100} if loss_pct else None}}


def test_a_faithful_run_has_no_flags() -> None:
    fid = run_fidelity(_late(40_000, 200_000, 900_000), [_link("p0.forward", 2.0, 10_000, 205),
                                                         _link("c.up", 0.0, 10_000, 0)])
    assert (fid.late_mean_us, fid.late_p999_us, fid.late_max_us) == (40.0, 200.0, 900.0)
    assert fid.flags == [] and fid.flags_text is None


def test_late_packets_wrong_loss_and_emulator_drops_are_flagged() -> None:
    emulator = {**_late(300_000, 2_000_000, 21_000_000), "tx_errors": 3, "pcap_dropped": 0, "events_dropped": 7}
    links = [_link("p0.forward", 2.0, 10_000, 400),  # 4%: far outside
             _link("p0.reverse", 1.0, 100, 9),  # too few packets to judge
             _link("p1.forward", 5.0, 10_000, 900, {"loss": {"kind": "gilbert-elliott", "p": 0.01, "r": 0.3}})]  # bursty: not binomial
    fid = run_fidelity(emulator, links)
    assert fid.flags == [
        "delay error p99.9 up to 2 ms (limit 1)",
        "delay error max 21.0 ms (limit 5)",
        "3 packets lost to failed TUN writes",
        "7 event-log records dropped",
        "p0.forward: random loss 4.000% outside the 99.9% interval of the configured 2%",
    ]
    assert fid.flags_text is not None and fid.flags_text.count("; ") == 4


def test_old_counters_give_no_record() -> None:
    fid = run_fidelity({"rx_packets": 5}, [])
    assert (fid.late_mean_us, fid.late_max_us, fid.flags) == (None, None, [])
    assert run_fidelity(None, []).flags == []


def test_the_record_lands_in_the_runs_row() -> None:
    run = RunRecord(run_key="k1", status="ok", error=None, params={"mode": "h2"}, started_unix_ns=1, duration_s=2.0,
                    link_counters=counters({"p0.forward": link_counters()}, now_ns=5,
                                           emulator=emulator_counters(**_late(10_000, 50_000, 6_000_000))),
                    link_config={"p0.forward": link(rate_bps=10_000_000)})
    run.fidelity = fidelity_of(run)
    rows = build_run_rows("e1", run)
    (row,) = rows["runs"]
    assert (row["late_mean_us"], row["late_p999_us"], row["late_max_us"]) == (10.0, 50.0, 6000.0)
    assert row["fidelity_flags"] == "delay error max 6.0 ms (limit 5)"
