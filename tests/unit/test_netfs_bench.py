"""Benchmarks on network mounts: each GPU against the mount of its own NIC, the penalty through a
far NIC's mount, and gdsio job files in the guide's format."""
import configparser
import os
import sys

import pytest

from conftest import COLLECTION
from test_netfs_mounts import guide_topology

sys.path.insert(0, os.path.join(COLLECTION, "plugins", "filter"))
from gds_bench_plan import PlanError, gds_bench_plan, gds_gdsio_jobfile, gds_netfs_bench_targets  # noqa: E402

MOUNTS = [
    {"mountpoint": "/mnt/nfs/ib0/data/0", "nic": "mlx5_0", "nics": ["mlx5_0"], "gpus": [0, 1]},
    {"mountpoint": "/mnt/nfs/ib0/data/1", "nic": "mlx5_0", "nics": ["mlx5_0"], "gpus": [0, 1]},
    {"mountpoint": "/mnt/nfs/ib9/data/0", "nic": "mlx5_9", "nics": ["mlx5_9"], "gpus": [14, 15]},
    {"mountpoint": "/mnt/data", "nic": None, "nics": [], "gpus": []},  # a plain netdev: no pair
]
PROFILE = {
    "templates": [{"name": "seq_write", "io_type": "write", "threads": 8},
                  {"name": "seq_read", "io_type": "read", "threads": 8}],
    "thresholds": {"seq_read": {"throughput_gib_s": [9.0, -0.1, None]}},
    "affinity_gain": [1.1, -0.05, None], "expect_path": "nvfs", "xfer_type": 0,
    "gpu_indices": list(range(16)), "numa_of_gpu": {g: 0 if g < 8 else 1 for g in range(16)},
    "size": "1G", "duration": 120,
}


def test_each_gpu_gets_its_nics_mount_and_a_far_one():
    targets = gds_netfs_bench_targets(MOUNTS, guide_topology(), gpus=[0, 1, 14], subdir="gds_dir")
    by_gpu = {t["gpus"][0]: t for t in targets}
    assert by_gpu[0]["mount"] == "/mnt/nfs/ib0/data/0/gds_dir"
    assert by_gpu[1]["mount"] == "/mnt/nfs/ib0/data/1/gds_dir"  # the NIC's mounts in turn
    assert (by_gpu[0]["far_mount"], by_gpu[0]["far_nic"]) == ("/mnt/nfs/ib9/data/0/gds_dir", "mlx5_9")
    assert (by_gpu[14]["nic"], by_gpu[14]["far_nic"]) == ("mlx5_9", "mlx5_0")


def test_default_is_one_gpu_per_nic():
    targets = gds_netfs_bench_targets(MOUNTS, guide_topology())
    assert [t["gpus"] for t in targets] == [[0], [14]]


def test_plan_measures_the_far_nic_penalty_with_the_same_gpu():
    targets = gds_netfs_bench_targets(MOUNTS, guide_topology(), gpus=[0], subdir="gds_dir")
    jobs = gds_bench_plan(targets, PROFILE)
    names = [j["name"] for j in jobs]
    label = "GPU0 /mnt/nfs/ib0/data/0"
    assert names == [label + " seq_write", label + " seq_read", label + " far NIC write (mlx5_9)",
                     label + " seq_read far NIC (mlx5_9)"]
    optimal, far = jobs[1], jobs[3]
    assert optimal["target"] == "/mnt/nfs/ib0/data/0/gds_dir" and optimal["gpu"] == 0
    assert far["target"] == "/mnt/nfs/ib9/data/0/gds_dir" and far["gpu"] == 0 and far["numa"] == 0
    assert jobs[2]["target"] == far["target"] and jobs[2]["io_type"] == "write"
    assert far["thresholds"] == {} and jobs[2]["thresholds"] == {}
    assert optimal["compare"] == {"job": far["name"], "metric": "throughput_gib_s",
                                  "as": "affinity_gain", "threshold": [1.1, -0.05, None]}
    assert optimal["thresholds"] == {"throughput_gib_s": [9.0, -0.1, None]}


def test_gpu_without_a_mount_or_far_nic_is_skipped_with_the_reason():
    only_ib0 = MOUNTS[:2]
    targets = gds_netfs_bench_targets(only_ib0, guide_topology(), gpus=[0, 8])
    jobs = gds_bench_plan(targets, PROFILE)
    skipped = {j["name"]: j["skip"] for j in jobs if j.get("skip")}
    assert skipped["GPU0 /mnt/nfs/ib0/data/0 seq_read far NIC"].startswith("no network mount")
    assert "no network mount leaves through a NIC of GPU8" in skipped["GPU8 seq_read"]


def test_bad_gpu_is_refused_by_name():
    with pytest.raises(PlanError) as err:
        gds_netfs_bench_targets(MOUNTS, guide_topology(), gpus=[16])
    assert "gds_bench_netfs_gpus" in str(err.value) and "16" in str(err.value)


# the guide's nfs_rr.gdsio without its comments
GUIDE_RR = """[global]
name=nfs_random_read
xfer_type=0
rw=randread
bs=4k
size=500M
runtime=120
[job1]
numa_node=0
gpu_dev_id=0
num_threads=16
directory=/mnt/nfs/ib0/data/0/gds_dir
[job2]
numa_node=0
gpu_dev_id=2
num_threads=16
directory=/mnt/nfs/ib1/data/0/gds_dir
[job3]
numa_node=0
gpu_dev_id=4
num_threads=16
directory=/mnt/nfs/ib2/data/0/gds_dir
[job4]
numa_node=0
gpu_dev_id=6
num_threads=16
directory=/mnt/nfs/ib3/data/0/gds_dir
"""


def sections(text):
    parser = configparser.ConfigParser()
    parser.read_string(text)
    return {name: dict(parser[name]) for name in parser.sections()}


def test_jobfile_in_the_guide_format():
    jobs = [{"name": "rr%d" % g, "gpu": g, "numa": 0, "threads": 16, "xfer_type": 0,
             "io_type": "randread", "io_size": "4k", "size": "500M", "duration": 120,
             "target": "/mnt/nfs/ib%d/data/0/gds_dir" % (g // 2)} for g in (0, 2, 4, 6)]
    jobs.append({"name": "skipped", "skip": "no mount"})
    text = gds_gdsio_jobfile(jobs, name="nfs_random_read")
    got, want = sections(text), sections(GUIDE_RR)
    want["global"]["do_verify"] = "0"  # as in the guide's nfs_sr.gdsio
    assert got == want
    assert text.startswith("[global]\nname=nfs_random_read\n")


def test_jobfile_refuses_jobs_of_different_kinds():
    jobs = [{"gpu": 0, "threads": 8, "xfer_type": 0, "io_type": "read", "io_size": "1M", "size": "1G",
             "duration": 60, "target": "/a"},
            {"gpu": 1, "threads": 8, "xfer_type": 0, "io_type": "write", "io_size": "1M", "size": "1G",
             "duration": 60, "target": "/b"}]
    with pytest.raises(PlanError) as err:
        gds_gdsio_jobfile(jobs)
    assert "io_type" in str(err.value) and "read, write" in str(err.value)


def test_simulated_root_prefixes_the_targets():
    targets = gds_netfs_bench_targets(MOUNTS, guide_topology(), gpus=[0], subdir="gds_dir", root="/sim/node/")
    assert targets[0]["mount"] == "/sim/node/mnt/nfs/ib0/data/0/gds_dir"
    assert targets[0]["far_mount"] == "/sim/node/mnt/nfs/ib9/data/0/gds_dir"


def test_cpu_transfer_type_skips_the_far_nic_penalty():
    targets = gds_netfs_bench_targets(MOUNTS, guide_topology(), gpus=[0])
    jobs = gds_bench_plan(targets, dict(PROFILE, xfer_type=1))
    assert jobs[-1]["name"].endswith("far NIC") and "CPU transfer type" in jobs[-1]["skip"]
    assert [j.get("skip") for j in jobs[:2]] == [None, None]


# ---------------------------------------------------------------- hostile values in job files

def _job(**kw):
    job = {"gpu": 0, "numa": 0, "threads": 16, "xfer_type": 0, "io_type": "read", "io_size": "1M",
           "size": "1G", "duration": 60, "target": "/mnt/nfs/ib0/data/0/gds_dir"}
    job.update(kw)
    return job


BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1e", "\x85", "\u2028", "\u2029"]
CONTROLS = ["\x00", "\x1b[2J", "\t", "\x7f", "\x9b"]
FIELDS = ["target", "io_size", "size", "duration", "xfer_type", "threads", "gpu", "numa", "io_type", "name"]


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("char", BREAKS + CONTROLS, ids=[repr(c) for c in BREAKS + CONTROLS])
def test_jobfile_writes_no_line_break_or_control_character_from_data(field, char):
    """A mount point (or any value) with a line break would add a line such as rw=write: a read
    job would become a write. Every field refuses it, whatever the break or control character."""
    value = {"target": "/mnt/nfs/ib0%srw=write" % char, "name": "nfs%srw=write" % char}.get(field, "1%srw=write" % char)
    with pytest.raises(PlanError) as err:
        if field == "name":
            gds_gdsio_jobfile([_job()], name=value)
        else:
            gds_gdsio_jobfile([_job(**{field: value})])
    assert field in str(err.value) and "\n" not in str(err.value)


def test_jobfile_read_stays_a_read_whatever_the_mount_point():
    """The reported case: the line the newline would have added is never written."""
    with pytest.raises(PlanError) as err:
        gds_gdsio_jobfile([_job(target="/mnt/nfs\nrw=write")])
    assert "target" in str(err.value) and "U+000A" in str(err.value)
    text = gds_gdsio_jobfile([_job()])
    assert [line for line in text.splitlines() if line.startswith("rw=")] == ["rw=read"]


@pytest.mark.parametrize("path", ["/mnt/a[1]", "/mnt/a]b", "/mnt/k=v", "/mnt/a#1", "/mnt/a;b", "/mnt/[global]",
                                  "/mnt/x y", "/mnt/ünï"])
def test_jobfile_keeps_paths_whose_characters_are_data_after_the_key(path):
    """After `directory=` the characters [ ] = # ; are data to gdsbench and configparser (a
    line is a section or a comment only by its first character): written verbatim, read back
    the same."""
    text = gds_gdsio_jobfile([_job(target=path)])
    assert sections(text)["job1"]["directory"] == path
    assert text.count("\n") == 14


@pytest.mark.parametrize("path,why", [
    ("mnt/relative", "absolute"), (" /mnt/a", "white space"), ("/mnt/a ", "white space"),
    ("/mnt/a #comment", "inline comment"), ("/mnt/a ;comment", "inline comment"), ("", "non-empty"),
    ("/mnt/\udcff", "UTF-8"), ("/" + "a" * 4095, "longer than 4095 bytes"), (None, "non-empty"), (["/a"], "non-empty"),
])
def test_jobfile_refuses_paths_a_reader_would_read_differently(path, why):
    with pytest.raises(PlanError) as err:
        gds_gdsio_jobfile([_job(target=path)])
    assert "target" in str(err.value) and why in str(err.value)


@pytest.mark.parametrize("name", ["a[b", "a]b", "a=b", "a#b", "a;b", " a", "a ", "", "x" * 64, 5])
def test_jobfile_name_is_a_plain_label(name):
    with pytest.raises(PlanError) as err:
        gds_gdsio_jobfile([_job()], name=name)
    assert "name" in str(err.value)


@pytest.mark.parametrize("field,value", [
    ("threads", True), ("threads", 0), ("threads", 4097), ("threads", "8 "), ("threads", 1.5), ("gpu", -1),
    ("gpu", "0x1"), ("numa", "one"), ("xfer_type", None), ("io_size", "4K:1M"), ("io_size", "0"), ("io_size", True),
    ("io_size", "1M=1"), ("io_size", "[1M]"), ("size", "1G#"), ("size", "1E"), ("size", -1), ("size", 1 << 63),
    ("size", "4K:8K:4K"), ("duration", -1), ("duration", float("nan")), ("duration", float("inf")), ("duration", "1e3"),
    ("duration", "60;"), ("io_type", ["read"]), ("io_type", "read\n"),
])
def test_jobfile_refuses_values_of_the_wrong_type(field, value):
    with pytest.raises(PlanError) as err:
        gds_gdsio_jobfile([_job(**{field: value})])
    assert field in str(err.value)


@pytest.mark.parametrize("xfer,why", [
    (3, "3 (CPU_ASYNC_GPU) is not supported (managed memory)"), (7, "7 (GPU_BATCH_STREAM) is not supported"),
    (9, "9 is not a transfer type (0 GPUD, 1 CPUONLY, 2 CPU_GPU, 4 CPU_CACHED_GPU, 5 GPUD_ASYNC, 6 GPU_BATCH)"),
])
def test_jobfile_refuses_a_transfer_type_gdsbench_does_not_run(xfer, why):
    """gdsbench's own words (its vocabulary), before a node's gdsbench would refuse the file."""
    with pytest.raises(PlanError) as err:
        gds_gdsio_jobfile([_job(xfer_type=xfer)])
    assert "xfer_type" in str(err.value) and why in str(err.value)


@pytest.mark.parametrize("field,value,line", [
    ("io_size", "4K:1M:4K", "bs=4K:1M:4K"), ("io_size", 4096, "bs=4096"), ("io_size", "64KiB", "bs=64KiB"),
    ("size", "2gb", "size=2gb"), ("threads", "8", "num_threads=8"), ("gpu", 3.0, "gpu_dev_id=3"),
    ("duration", 0.5, "runtime=1"), ("duration", "10", "runtime=10"), ("duration", 0, "runtime=0"),
])
def test_jobfile_writes_checked_values(field, value, line):
    """Fractions of a second round up: truncated, 0.5 s would be runtime=0 (one pass, not a timed run)."""
    assert line in gds_gdsio_jobfile([_job(**{field: value})]).splitlines()
