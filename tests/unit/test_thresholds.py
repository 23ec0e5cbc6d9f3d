"""Threshold evaluation (ReFrame-style references) and the I/O path check."""
import pytest

from ansible_collections.gds.commission.plugins.module_utils.measure.thresholds import (
    ThresholdError, evaluate, evaluate_all, job_checks, path_check,
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


@pytest.mark.parametrize("spec", [[6.0, -0.10, None, "GiB/s"], [1200, None, 0.5, "us"], [1.1, -0.1, 0.5, "x"]])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), -1.0, 10 ** 400],
                         ids=["nan", "inf", "-inf", "negative", "beyond-float"])
def test_a_value_that_is_no_figure_is_an_error_naming_it(spec, value):
    # NaN compares false with every bound and infinity passes an open one: never PASS
    check = evaluate("throughput_gib_s", spec, value)
    assert check["verdict"] == "ERROR", check
    assert "not a finite figure" in check["detail"] and "throughput_gib_s" in check["detail"]


@pytest.mark.parametrize("moved", [float("nan"), float("inf"), -4096])
def test_a_record_whose_bytes_are_no_count_is_an_error_not_a_traceback(moved):
    job = {"name": "md1 seq_read", "thresholds": {"throughput_gib_s": [6.0, -0.1, None, "GiB/s"]}}
    record = {"exit_code": 0, "bytes": moved, "throughput_gib_s": 7.0}
    checks = {c["name"]: c for c in job_checks(job, record)}
    run = checks["bench: md1 seq_read: run"]
    assert run["verdict"] == "ERROR" and run["actual"] == "exit 0, bytes unknown" and repr(moved) in run["detail"]
    assert checks["bench: md1 seq_read: throughput_gib_s"]["verdict"] == "SKIP"  # not judged from it


@pytest.mark.parametrize("value", [float("nan"), 0, -6.5, "6.5"])
def test_a_drive_spec_that_is_no_figure_gives_no_fraction_of_spec(value):
    job = {"name": "j", "spec": {"metric": "throughput_gib_s", "value": value},
           "thresholds": {"fraction_of_spec": [0.85, -0.15, None, ""]}}
    record = {"exit_code": 0, "bytes": 1 << 30, "throughput_gib_s": 6.0}
    checks = {c["name"]: c for c in job_checks(job, record)}
    assert checks["bench: j: fraction_of_spec"]["verdict"] == "ERROR" and "fraction_of_spec" not in record
