"""``bench: every GPU measured`` (measure/concurrency.every_gpu_check) counts a GPU only when
every job of its own that ran completed, and never PASSes with an expected GPU that is no index
(a GPU index "2" or true was dropped from the count and the check PASSed)."""
import pytest

from ansible_collections.gds.commission.plugins.module_utils.measure.concurrency import every_gpu_check


def job(name, gpu, **extra):
    return dict(name=name, gpu=gpu, **extra)


def result(name, verdict="PASS"):
    return {"name": name, "checks": [{"name": "bench: %s: completed" % name, "verdict": verdict}]}


JOBS = [job("g0 write", 0), job("g0 read", 0), job("g0 rand", 0), job("g1 write", 1), job("g1 read", 1)]


def test_every_job_of_every_gpu_completed_is_pass():
    check = every_gpu_check([0, 1], JOBS, [result(j["name"]) for j in JOBS])
    assert check["verdict"] == "PASS" and check["actual"] == "2 of 2"


def test_a_gpu_with_one_broken_job_of_three_is_not_measured():
    results = [result(j["name"]) for j in JOBS if j["name"] not in ("g0 read", "g0 rand")] + [result("g0 read", "ERROR")]
    check = every_gpu_check([0, 1], JOBS, results)
    assert check["verdict"] == "FAIL" and check["actual"] == "1 of 2: 1"
    assert "GPU 0: 2 of its 3 jobs did not complete (g0 read, g0 rand)" in check["detail"]


@pytest.mark.parametrize("bad", ["2", True, 1.5, None, -1])
def test_an_expected_gpu_that_is_no_index_is_never_pass(bad):
    check = every_gpu_check([0, 1, bad], JOBS, [result(j["name"]) for j in JOBS])
    assert check["verdict"] == "FAIL" and "is no GPU index" in check["detail"]
