"""Threshold evaluation (ReFrame-style references) and the I/O path check."""
import pytest

from ansible_collections.gds.commission.plugins.module_utils.measure.thresholds import (
    ThresholdError, evaluate, evaluate_all, path_check,
)


@pytest.mark.parametrize("value, verdict", [
    (7.0, "PASS"),      # comfortably above 6.0 * 0.9 = 5.4
    (5.6, "WARN"),      # inside, but within 5 % of 5.4
    (5.3, "FAIL"),      # below the lower bound
])
def test_lower_bound(value, verdict):
    check = evaluate("throughput_gib_s", [6.0, -0.10, None, "GiB/s"], value)
    assert check["verdict"] == verdict
    assert check["expected"] == ">= 5.4 GiB/s"


@pytest.mark.parametrize("value, verdict", [(1000, "PASS"), (1750, "WARN"), (1900, "FAIL")])
def test_upper_bound_for_latency(value, verdict):
    assert evaluate("lat_us.mean", [1200, None, 0.5, "us"], value)["verdict"] == verdict


def test_missing_metric_is_an_error():
    checks = evaluate_all({"throughput_gib_s": 6.5}, {"iops": [800000, -0.1, None]})
    assert checks[0]["verdict"] == "ERROR" and "no iops" in checks[0]["detail"]


def test_dotted_metric_lookup():
    checks = evaluate_all({"lat_us": {"p99": 150.0}}, {"lat_us.p99": [200, None, 0.0, "us"]})
    assert checks[0]["verdict"] == "PASS" and checks[0]["actual"] == 150.0


@pytest.mark.parametrize("spec", [[6.0], [6.0, 0.1, None], ["fast", -0.1, None], [6.0, None, None], "6.0"])
def test_malformed_thresholds_name_the_metric(spec):
    with pytest.raises(ThresholdError, match="throughput_gib_s"):
        evaluate("throughput_gib_s", spec, 1.0)


def test_compat_fallback_fails_whatever_the_throughput():
    record = {"throughput_gib_s": 99.0,
              "path": {"mode": "compat", "evidence": ["nvidia-fs not loaded", "cuFile posix reads 4096/4096"]}}
    check = path_check(record, 0, "nvfs")
    assert check["verdict"] == "FAIL" and "posix reads" in check["detail"]
    assert path_check(dict(record, path={"mode": "compat"}), 5, "compat")["verdict"] == "PASS"
    assert path_check(record, 1, "nvfs") is None  # CPU transfer types take no GPU path

