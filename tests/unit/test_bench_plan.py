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
    names = [j["name"] for j in jobs]
    assert names[:6] == ["raid1 gpu0 seq_write", "raid1 gpu0 seq_read", "raid1 gpu1 seq_write", "raid1 gpu1 seq_read",
                         "raid1 seq_read host", "raid1 seq_read non-affine gpu4"]
    optimal, far = jobs[1], jobs[5]
    assert optimal["gpu"] == 0 and optimal["numa"] == 0 and optimal["procs"] == 8
    assert optimal["spec"] == {"metric": "throughput_gib_s", "value": 13.0}
    assert optimal["compare"]["job"] == far["name"] and far["gpu"] == 4 and far["thresholds"] == {}
    assert "compare" not in jobs[3]  # one affinity pair per array, on its first GPU
    raid3 = {j["name"]: j for j in jobs if j["name"].startswith("raid3")}
    assert raid3["raid3 seq_read non-affine gpu0"]["gpu"] == 0  # raid3's far GPU is on NUMA 0


def test_each_gpus_sequential_write_lays_out_whole_files_whatever_the_duration():
    """A 5 s time-based write wrote less than one pass over GPU 0's 8 x 1 GiB files on four H200s
    and both its reads broke: the sequential write is one full pass (duration 0), the others keep
    the profile's duration."""
    jobs = gds_bench_plan(ARRAYS, dict(PROFILE, duration=5, templates=PROFILE["templates"] + [
        {"name": "rand_write", "io_type": "randwrite", "io_size": "4K"}]))
    durations = {j["name"]: j["duration"] for j in jobs if not j.get("jobs")}
    assert durations["raid1 gpu0 seq_write"] == 0 and durations["raid3 gpu5 seq_write"] == 0
    assert durations["raid1 gpu0 seq_read"] == 5 and durations["raid1 gpu0 rand_write"] == 5


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
    target directory without an array follows the disk under it. A simulated node's jobs run on
    the controller: they follow the disk under their target there, whatever array its facts name."""
    arrays = [dict(ARRAYS[0], md="md127")]
    jobs = gds_bench_plan(arrays, dict(PROFILE, live=True, gpu_indices=[0, 1, 4]))
    singles = [j for j in jobs if not j.get("skip") and not j.get("jobs")]
    assert all(j["md"] == "md127" and j["members"] == ["nvme0n1", "nvme1n1"] for j in singles if j["target"].startswith("/raid1"))
    assert not any(j.get("drives_from_target") for j in jobs)
    # the non-affine pair's GPU is far from the drives: its data may bounce, and that is expected
    assert [j["name"] for j in jobs if j.get("expect_bounce") and not j.get("nonaffine")] == ["raid1 seq_read non-affine gpu4"]
    target = [{"mount": "/data", "gpus": [0], "members": []}]
    assert all(j.get("drives_from_target") for j in gds_bench_plan(target, dict(PROFILE, live=True)) if not j.get("skip"))
    simulated = [j for j in gds_bench_plan(arrays, dict(PROFILE, live=False, gpu_indices=[0, 1, 4])) if not j.get("skip")]
    assert simulated and all(j.get("drives_from_target") and "members" not in j and "md" not in j
                             for j in simulated if not j.get("jobs"))


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


# --------------------------------------------------------------------------------------------
# Every GPU, measured alone, then all at once
# --------------------------------------------------------------------------------------------
def by_name(jobs):
    return {j["name"]: j for j in jobs}


def test_every_gpu_of_an_array_runs_every_template():
    """The README promises every GPU/array pair: both GPUs of raid1 and of raid3, each template."""
    jobs = by_name(gds_bench_plan(ARRAYS, dict(PROFILE, gpu_indices=[0, 1, 4, 5])))
    for label, gpu in (("raid1", 0), ("raid1", 1), ("raid3", 4), ("raid3", 5)):
        for template in ("seq_write", "seq_read"):
            job = jobs["%s gpu%d %s" % (label, gpu, template)]
            assert job["gpu"] == gpu and job["target"] == "/%s/gds-bench" % label and "nonaffine" not in job
    assert jobs["raid1 gpu1 seq_read"]["thresholds"] == PROFILE["thresholds"]["seq_read"]


def test_a_gpu_without_an_array_runs_on_the_nearest_one_with_its_own_thresholds():
    """GPUs 2 and 7 have no array: each runs on the array its link class is best to (the matrix),
    named non-affine, judged by the non-affine thresholds and never by the affine ones."""
    matrix = {"GPU2": {"nvme0n1": "SYS", "nvme1n1": "SYS", "nvme6n1": "PXB", "nvme7n1": "PXB"},
              "GPU7": {"nvme0n1": "NODE", "nvme1n1": "NODE", "nvme6n1": "SYS", "nvme7n1": "SYS"}}
    nonaffine = {"seq_read": {"throughput_gib_s": [4.0, -0.2, None, "GiB/s"]}}
    jobs = by_name(gds_bench_plan(ARRAYS, dict(PROFILE, gpu_indices=[0, 1, 2, 4, 5, 7], matrix=matrix,
                                               nonaffine_thresholds=nonaffine)))
    two, seven = jobs["raid3 gpu2 non-affine seq_read"], jobs["raid1 gpu7 non-affine seq_read"]
    assert (two["gpu"], two["target"], seven["gpu"], seven["target"]) == (2, "/raid3/gds-bench", 7, "/raid1/gds-bench")
    assert two["nonaffine"] and two["thresholds"] == nonaffine["seq_read"]
    assert two["expect_bounce"]  # far from the drives: cuFile may stage its data in a GPU near them
    assert jobs["raid3 gpu2 non-affine seq_write"]["thresholds"] == {}  # none given for the write: none taken
    assert two["ceiling"] == "raid3 seq_read host"
    # without a matrix: an array of the GPU's NUMA node (GPU 2 is on node 0 with raid1)
    plain = by_name(gds_bench_plan(ARRAYS, dict(PROFILE, gpu_indices=[0, 1, 2, 4, 5])))
    assert plain["raid1 gpu2 non-affine seq_read"]["target"] == "/raid1/gds-bench"


def test_the_drives_are_read_into_host_memory_as_each_arrays_ceiling():
    jobs = by_name(gds_bench_plan(ARRAYS, PROFILE))
    host = jobs["raid1 seq_read host"]
    assert (host["xfer_type"], host["gpu"], host["expect_path"], host["thresholds"], host["procs"]) == (1, None, None, {}, 1)
    assert (host["target"], host["threads"], host["numa"], host["members"]) == ("/raid1/gds-bench", 8, 0, ["nvme0n1", "nvme1n1"])
    assert jobs["raid1 gpu0 seq_read"]["ceiling"] == jobs["raid1 gpu1 seq_read"]["ceiling"] == "raid1 seq_read host"
    assert "ceiling" not in jobs["raid1 gpu0 seq_write"]


def test_every_gpu_at_once_on_own_arrays_then_on_one_array_from_job_files():
    import configparser
    jobs = gds_bench_plan(ARRAYS, dict(PROFILE, gpu_indices=[0, 1, 4, 5],
                                       concurrency={"own_array": [0.45, -0.1, None, "x"]}))
    names = [j["name"] for j in jobs if j.get("jobs")]
    assert names == ["all GPUs on own arrays seq_write", "all GPUs on own arrays seq_read",
                     "all GPUs on own arrays seq_read host", "all GPUs on raid1 seq_write",
                     "all GPUs on raid1 seq_read", "all GPUs on raid1 seq_read host"]
    jobs = by_name(jobs)
    own = jobs["all GPUs on own arrays seq_read"]
    assert [(s["gpu"], s["target"], s["single"]) for s in own["jobs"]] == [
        (0, "/raid1/gds-bench", "raid1 gpu0 seq_read"), (1, "/raid1/gds-bench", "raid1 gpu1 seq_read"),
        (4, "/raid3/gds-bench", "raid3 gpu4 seq_read"), (5, "/raid3/gds-bench", "raid3 gpu5 seq_read")]
    assert own["scaling"] == [0.45, -0.1, None, "x"] and own["ceiling"] == "all GPUs on own arrays seq_read host"
    assert own["expect_path"] == "nvfs" and own["procs"] == 32 and own["threads"] == 32
    assert own["drive_groups"] == {"raid1": ["nvme0n1", "nvme1n1"], "raid3": ["nvme6n1", "nvme7n1"]}
    parser = configparser.ConfigParser()
    parser.read_string(own["jobfile"])
    assert parser.sections() == ["global", "job1", "job2", "job3", "job4"]
    assert dict(parser["global"])["xfer_type"] == "0" and dict(parser["global"])["rw"] == "read"
    assert [(parser[s]["gpu_dev_id"], parser[s]["numa_node"], parser[s]["directory"]) for s in parser.sections()[1:]] == [
        ("0", "0", "/raid1/gds-bench"), ("1", "0", "/raid1/gds-bench"), ("4", "1", "/raid3/gds-bench"),
        ("5", "1", "/raid3/gds-bench")]
    # the write makes the read's files: the same directories, threads and order
    write = jobs["all GPUs on own arrays seq_write"]
    assert [(s["target"], s["threads"]) for s in write["jobs"]] == [(s["target"], s["threads"]) for s in own["jobs"]]
    assert write["io_type"] == "write" and "scaling" not in write and "ceiling" not in write
    # and writes them whole: one full pass, no runtime to cut it short (the read then refuses short files)
    assert write["duration"] == 0 and "runtime=0" in write["jobfile"]
    assert own["duration"] == 30 and "runtime=30" in own["jobfile"]
    host = jobs["all GPUs on own arrays seq_read host"]
    assert host["xfer_type"] == 1 and all(s["gpu"] is None for s in host["jobs"]) and "gpu_dev_id" not in host["jobfile"]
    assert [s["single"] for s in host["jobs"]] == ["raid1 seq_read host"] * 2 + ["raid3 seq_read host"] * 2
    one = jobs["all GPUs on raid1 seq_read"]
    # all on raid1, each compared with what it did alone on its own array
    assert {s["target"] for s in one["jobs"]} == {"/raid1/gds-bench"} and "drive_groups" not in one
    assert [s["single"] for s in one["jobs"]][2:] == ["raid3 gpu4 seq_read", "raid3 gpu5 seq_read"]
    assert "scaling" not in one  # no threshold given for one_array: recorded only


def test_one_storage_for_every_gpu_runs_once_and_says_why():
    """The rented VM: one target directory for both GPUs (NUMA -1): every GPU on its own storage is
    every GPU on one storage, so that run is planned once; a node is not pinned to NUMA -1."""
    target = [{"mount": "/data/gds-bench", "target": "/data/gds-bench", "gpus": [0, 1], "members": []}]
    jobs = gds_bench_plan(target, dict(PROFILE, gpu_indices=[0, 1], numa_of_gpu={0: -1, 1: -1}, live=True))
    names = [j["name"] for j in jobs]
    assert names[:4] == ["gds-bench gpu0 seq_write", "gds-bench gpu0 seq_read", "gds-bench gpu1 seq_write",
                         "gds-bench gpu1 seq_read"]
    jobs = by_name(jobs)
    assert "the run on their own arrays is the run on one array" in jobs["all GPUs on one array"]["skip"]
    own = jobs["all GPUs on own arrays seq_read"]
    assert "numa_node" not in own["jobfile"] and own["drives_from_target"] and own["target"] == "/data/gds-bench"
    assert [s["single"] for s in own["jobs"]] == ["gds-bench gpu0 seq_read", "gds-bench gpu1 seq_read"]


@pytest.mark.parametrize("profile, why", [
    (dict(PROFILE, gpu_indices=[0]), "one GPU"),
    (dict(PROFILE, concurrent=False), "gds_bench_concurrent is false"),
    (dict(PROFILE, templates=[{"name": "seq_read", "io_type": "read"}]), "no write template"),
])
def test_no_concurrent_run_says_why(profile, why):
    arrays = [dict(ARRAYS[0], gpus=[0])] if profile["gpu_indices"] == [0] else ARRAYS
    jobs = by_name(gds_bench_plan(arrays, profile))
    assert why in jobs["all GPUs at once"]["skip"] and not any(j.get("jobs") for j in jobs.values())


def test_a_cpu_transfer_type_runs_once_per_array_and_says_why():
    """The demo's simulated nodes: transfer type 1 never touches a GPU, so there is one job per
    template and array, not one per GPU, no host twin and no concurrent run: the skip entries say so."""
    jobs = gds_bench_plan(ARRAYS, dict(PROFILE, xfer_type=1))
    ran = [j["name"] for j in jobs if not j.get("skip")]
    assert ran == ["raid1 seq_write", "raid1 seq_read", "raid3 seq_write", "raid3 seq_read"]
    skips = {j["name"]: j["skip"] for j in jobs if j.get("skip")}
    assert "one job per array, not one per GPU" in skips["every GPU"]
    assert skips["all GPUs at once"] == skips["every GPU"]
    assert "host memory already" in skips["host ceiling"]


@pytest.mark.parametrize("key, value, named", [
    ("concurrency", {"own": [1, 0, None]}, "'own'"), ("concurrency", {"own_array": 0.9}, "own_array: expected"),
    ("concurrency", [0.9], "[0.9]"), ("nonaffine_thresholds", {"seq_read": [1, 0, None]}, "'seq_read'")])
def test_a_bad_every_gpu_setting_is_refused_by_name(key, value, named):
    with pytest.raises(PlanError) as info:
        gds_bench_plan(ARRAYS, dict(PROFILE, **{key: value}))
    assert ("gds_bench_" + key) in str(info.value) and named in str(info.value)


def test_an_array_without_gpus_is_no_gpus_own_array():
    """An array that names no GPU runs with the node's first GPU (as before), but that is no
    GPU's own array: every GPU at once compares each GPU with its single on its own array."""
    arrays = [{"mount": "/scratch", "gpus": [], "members": ["nvme9n1"]}] + ARRAYS[:1]
    jobs = by_name(gds_bench_plan(arrays, dict(PROFILE, gpu_indices=[0, 1])))
    assert jobs["scratch seq_read"]["gpu"] == 0
    own = jobs["all GPUs on own arrays seq_read"]
    assert [(s["gpu"], s["single"]) for s in own["jobs"]] == [(0, "raid1 gpu0 seq_read"), (1, "raid1 gpu1 seq_read")]
