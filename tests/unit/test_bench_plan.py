"""The gds_bench_plan filter: jobs per array, the non-affine pair, skips without a GPU."""
import os
import sys

import pytest

from conftest import COLLECTION

sys.path.insert(0, os.path.join(COLLECTION, "plugins", "filter"))
from gds_bench_plan import FilterModule, PlanError, gds_bench_plan  # noqa: E402

ARRAYS = [{"mount": "/raid1", "gpus": [0, 1], "members": ["nvme0n1", "nvme1n1"]},
          {"mount": "/raid3", "gpus": [4, 5], "members": ["nvme6n1", "nvme7n1"]}]
PROFILE = {
    "templates": [{"name": "seq_read", "io_type": "read", "procs": 8},
                  {"name": "seq_write", "io_type": "write"}],
    "thresholds": {"seq_read": {"throughput_gib_s": [10, -0.1, None]}},
    "drive_spec": {"seq_read": ["throughput_gib_s", 6.5]},
    "affinity_gain": [1.3, -0.1, None], "expect_path": "nvfs", "xfer_type": 0,
    "gpu_indices": [0, 1, 2, 3, 4, 5, 6, 7], "numa_of_gpu": {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1},
}


def test_writes_first_then_reads_then_the_farthest_non_affine_gpu():
    jobs = gds_bench_plan(ARRAYS, PROFILE)
    assert [j["name"] for j in jobs[:3]] == ["raid1 seq_write", "raid1 seq_read", "raid1 seq_read non-affine gpu4"]
    optimal, far = jobs[1], jobs[2]
    assert optimal["gpu"] == 0 and optimal["numa"] == 0 and optimal["procs"] == 8
    assert optimal["spec"] == {"metric": "throughput_gib_s", "value": 13.0}
    assert optimal["compare"]["job"] == far["name"] and far["gpu"] == 4 and far["thresholds"] == {}
    assert jobs[4]["name"] == "raid3 seq_read" and jobs[5]["gpu"] == 0  # raid3's far GPU is on NUMA 0


def test_without_a_gpu_the_cpu_type_runs_and_the_pair_is_skipped():
    jobs = gds_bench_plan(ARRAYS[:1], dict(PROFILE, xfer_type=1))
    assert all(j.get("gpu") is None for j in jobs if "skip" not in j)
    assert jobs[1]["procs"] == 1 and jobs[1]["expect_path"] is None
    assert "CPU transfer type" in jobs[2]["skip"]


def test_unusable_gpu_skips_gpu_jobs_with_the_reason():
    jobs = gds_bench_plan(ARRAYS[:1], dict(PROFILE, run_gpu=False, skip_reason="no driver"))
    assert all(j["skip"] == "no driver" for j in jobs)


def test_reads_with_more_threads_than_files_share_one_file():
    profile = dict(PROFILE, templates=[{"name": "seq_write", "io_type": "write", "threads": 8},
                                       {"name": "rand_read", "io_type": "randread", "threads": 32}])
    jobs = gds_bench_plan(ARRAYS[:1], profile)
    assert "file" not in jobs[0] and jobs[1]["file"] == "/raid1/gds-bench/gdsbench.0"


def test_jobs_name_the_drives_their_watch_reads():
    """Each job carries its array's md device and members (the drive load is read from them); a
    target directory without an array follows the disk under it, only on a live node."""
    arrays = [dict(ARRAYS[0], md="md127")]
    jobs = gds_bench_plan(arrays, dict(PROFILE, live=True))
    assert all(j["md"] == "md127" and j["members"] == ["nvme0n1", "nvme1n1"] for j in jobs if not j.get("skip"))
    assert not any(j.get("drives_from_target") for j in jobs)
    # the non-affine pair's GPU is far from the drives: its data may bounce, and that is expected
    assert [j["name"] for j in jobs if j.get("expect_bounce")] == ["raid1 seq_read non-affine gpu4"]
    target = [{"mount": "/data", "gpus": [0], "members": []}]
    assert all(j.get("drives_from_target") for j in gds_bench_plan(target, dict(PROFILE, live=True)) if not j.get("skip"))
    assert not any(j.get("drives_from_target") for j in gds_bench_plan(target, dict(PROFILE, live=False)))


@pytest.mark.parametrize("spec, why", [
    (["throughput_gib_s", float("nan")], "value nan must be a finite number >= 0.01"),
    (["throughput_gib_s", float("inf")], "value inf must be a finite number"),
    (["throughput_gib_s", 0], "value 0 must be"),
    (["throughput_gib_s", 1e-300], "value 1e-300 must be"),
    (["iops", -1100000], "value -1100000 must be"),
    (["iops", "1100000"], "value '1100000' must be"),
    (["throughput_gib_s", True], "value True must be"),
    ([None, 6.5], "metric None must be a metric name"),
    (["throughput_gib_s"], "must be [metric, value]"),
    ("6.5", "must be [metric, value]"),
])
def test_a_drive_spec_that_is_no_figure_is_refused_naming_key_and_value(spec, why):
    # .nan or ~0 would divide fraction_of_spec and cap the path's limit: refused before anything runs
    with pytest.raises(PlanError) as info:
        gds_bench_plan(ARRAYS, dict(PROFILE, drive_spec={"seq_read": spec}))
    assert "gds_bench_drive_spec.seq_read" in str(info.value) and why in str(info.value)
    assert repr(spec) in str(info.value)


def test_the_filter_reports_a_bad_drive_spec_as_a_filter_error():
    from ansible.errors import AnsibleFilterError
    plan = FilterModule().filters()["gds_bench_plan"]
    with pytest.raises(AnsibleFilterError, match="gds_bench_drive_spec.seq_read"):
        plan(ARRAYS, dict(PROFILE, drive_spec={"seq_read": ["throughput_gib_s", float("nan")]}))
