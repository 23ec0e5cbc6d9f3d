"""A verdict from evidence (fail closed, round 5): a figure no node measures (1e308 GiB/s) is the
check's ERROR and never a peer of the fleet; a ratio over a denominator below the floor
(1e-300) is nothing to judge, never a PASS."""
import pytest

from ansible_collections.gds.commission.plugins.module_utils.core.numbers import RATIO_FLOOR, ratio
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_baselines import fleet_checks, history_checks
from ansible_collections.gds.commission.plugins.module_utils.measure.concurrency import ceiling_entry, concurrency_entry
from ansible_collections.gds.commission.plugins.module_utils.measure.thresholds import evaluate

THRESHOLD = [10, -0.3, None, "GiB/s"]


def bench_check(value):
    check = evaluate("throughput_gib_s", THRESHOLD, value, "bench: raid1 seq_read: ")
    check.update(area="bench", job="raid1 seq_read")
    return check


def test_a_figure_no_node_measures_is_error_not_pass():
    check = bench_check(1e308)
    assert check["verdict"] == "ERROR" and "record gone wrong" in check["detail"]
    assert bench_check(12.0)["verdict"] == "PASS"


def test_three_impossible_hosts_are_no_fleet_for_the_real_one():
    docs = {"bad%d" % i: {"checks": [bench_check(1e308)]} for i in range(3)}
    docs["real"] = {"checks": [bench_check(12.0)]}
    out = fleet_checks(docs, dict((h, "dgx_a100") for h in docs), 0.1, 3)
    assert out == {}  # one real host has no three peers: no fleet check, no "100 % below the median"
    docs.update(("peer%d" % i, {"checks": [bench_check(v)]}) for i, v in enumerate((12.1, 11.9, 12.2)))
    out = fleet_checks(docs, dict((h, "dgx_a100") for h in docs), 0.1, 3)
    assert sorted(out) == ["peer0", "peer1", "peer2", "real"]
    assert out["real"][0]["verdict"] == "PASS" and out["real"][0]["reference"] == 12.05


@pytest.mark.parametrize("denominator", [1e-300, 0, RATIO_FLOOR, -1.0, float("nan"), None, "1"])
def test_a_ratio_over_no_denominator_is_nothing(denominator):
    assert ratio(1e-300, denominator) is None


def test_scaling_and_ceiling_over_a_tiny_figure_are_unknown():
    job = {"jobs": [{"name": "a", "gpu": 0, "single": "a1"}]}
    record = {"throughput_gib_s": 1e-300, "jobs": [{"throughput_gib_s": 1e-300}]}
    entry = concurrency_entry(job, record, {"a1": {"throughput_gib_s": 1e-300}})
    assert entry["scaling"] is None and "no figure to divide by" in entry["unknown"]
    assert "fraction" not in ceiling_entry({"throughput_gib_s": 1e-300}, "host", {"throughput_gib_s": 1e-300})


def test_history_against_a_last_pass_of_nothing_is_no_check():
    runs = [{"run_id": "r0", "verdict": "PASS", "values": {"raid1 seq_read: throughput_gib_s": 1e-300}}]
    assert history_checks("h", {"checks": [bench_check(1e-300)]}, runs) == []
