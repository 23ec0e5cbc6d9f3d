"""gds_bench measures every GPU: each alone, all at once from one gdsio job file (the real
gdsbench, CPU transfer type, so no GPU is needed), each GPU job against the same drives read into
host memory, the health gate over every GPU of the node, and no sign-off while a GPU is missing."""
import json
import os
import sys

import pytest

from conftest import COLLECTION, GDSBENCH_SRC, ROOT, run_module
from test_gds_bench import RECORD, fake_bench

sys.path.insert(0, os.path.join(COLLECTION, "plugins", "filter"))
from gds_bench_plan import gds_gdsio_jobfile  # noqa: E402

BENCH = os.path.join(GDSBENCH_SRC, "gdsbench")
FAULT = os.path.join(ROOT, "tests", "fault")
needs_bench = pytest.mark.skipif(not os.access(BENCH, os.X_OK), reason="gdsbench not built (make -C bench)")


def by_name(checks):
    return {c["name"]: c for c in checks}


def single(name, target, gpu, io_type, **extra):
    job = {"name": name, "target": target, "gpu": gpu, "xfer_type": 1, "io_type": io_type, "threads": 2,
           "size": "4M", "io_size": "64K", "duration": 0, "thresholds": {}}
    job.update(extra)
    return job


def concurrent(name, target, io_type, subs, **extra):
    """A job of every GPU at once, as gds_bench_plan writes it: sub-jobs and their job file."""
    io = {"xfer_type": 1, "io_type": io_type, "io_size": "64K", "size": "4M", "duration": 0}
    jobs = [dict(io, name="gpu%d t" % gpu, gpu=gpu, target=target, threads=2, array="t", single=single_name)
            for gpu, single_name in subs]
    job = dict(io, name=name, threads=2 * len(jobs), thresholds={}, jobs=jobs,
               jobfile=gds_gdsio_jobfile(jobs, name="t_%s" % io_type), drives_from_target=True, target=target)
    job.update(extra)
    return job


@needs_bench
def test_every_gpu_at_once_runs_one_job_file_and_is_read_against_each_gpu_alone(tmp_path):
    target = str(tmp_path / "data")
    jobs = [single("t gpu0 seq_write", target, 0, "write"), single("t gpu0 seq_read", target, 0, "read"),
            single("t gpu1 seq_write", target, 1, "write"), single("t gpu1 seq_read", target, 1, "read"),
            # the write gives each sub-job files of its own (gdsbench numbers them on in a shared directory)
            concurrent("all write", target, "write", [(0, "t gpu0 seq_write"), (1, "t gpu1 seq_write")]),
            concurrent("all read", target, "read", [(0, "t gpu0 seq_read"), (1, "t gpu1 seq_read")],
                       scaling=[0.01, 0.0, None, "x"], ceiling="t gpu0 seq_read")]
    rc, result = run_module("gds_bench", {"binary": BENCH, "jobs": jobs, "udev_root": ""})
    assert rc == 0, result
    results = {r["name"]: r for r in result["results"]}
    read = results["all read"]
    assert read["cmd"][0] == BENCH and read["cmd"][-1].endswith(".gdsio") and "-D" not in read["cmd"]
    assert [j["threads"] for j in read["record"]["jobs"]] == [2, 2]
    entry = read["watch"]["concurrency"]
    alone = [results["t gpu%d seq_read" % g]["record"]["throughput_gib_s"] for g in (0, 1)]
    assert entry["singles_gib_s"] == pytest.approx(sum(alone), abs=1e-3)
    assert entry["aggregate_gib_s"] == read["record"]["throughput_gib_s"]
    assert entry["scaling"] == pytest.approx(entry["aggregate_gib_s"] / entry["singles_gib_s"], rel=1e-3)
    assert [(r["gpu"], r["single"]) for r in entry["jobs"]] == [(0, "t gpu0 seq_read"), (1, "t gpu1 seq_read")]
    checks = by_name(result["checks"])
    assert checks["bench: all read: run"]["verdict"] == "PASS"
    assert checks["bench: all read: scaling"]["verdict"] == "PASS"
    assert "aggregate" in checks["bench: all read: scaling"]["detail"]
    # the ceiling: this job against the job named as its host read (here one GPU's own read)
    assert read["watch"]["ceiling"]["job"] == "t gpu0 seq_read" and read["watch"]["ceiling"]["fraction"] > 0
    # the files the concurrent write made, numbered on past the single jobs', went with the rest
    assert {os.path.basename(p) for p in result["removed"] if "gdsbench." in p} == {"gdsbench.%d" % i for i in range(4)}
    assert not os.path.exists(target)  # the directory the run made, empty again


@needs_bench
def test_a_job_file_that_is_not_the_sub_jobs_is_an_error(tmp_path):
    """The figures are compared with each sub-job's single: a job file whose jobs are other
    directories (or GPUs, or thread counts) than the sub-jobs measured something else."""
    target, other = str(tmp_path / "data"), str(tmp_path / "other")
    os.makedirs(other)
    job = concurrent("all write", target, "write", [(0, None), (1, None)])
    wrong = [dict(s, target=other) for s in job["jobs"]]
    job["jobfile"] = gds_gdsio_jobfile(wrong, name="wrong")
    rc, result = run_module("gds_bench", {"binary": BENCH, "jobs": [job], "udev_root": ""})
    run = by_name(result["checks"])["bench: all write: run"]
    assert rc != 0 and run["verdict"] == "ERROR" and "is not sub-job gpu0 t" in run["detail"]
    assert "concurrency" not in (result["results"][0].get("watch") or {})


def test_a_gpu_job_is_read_against_the_host_read_of_its_drives(tmp_path):
    """The measured ceiling: the same drives read with O_DIRECT into host memory in the same run
    (gdsbench -x 1); the GPU job's share of it is recorded, and judged with ceiling_fraction_min."""
    binary = fake_bench(tmp_path, 'if [[ " $* " == *" -x 1 "* ]]; then echo \'%s\'; else echo \'%s\'; fi'
                        % (json.dumps(dict(RECORD, throughput_gib_s=8.0, path={"mode": "posix"})), json.dumps(RECORD)))
    target = str(tmp_path / "data")
    jobs = [{"name": "g gpu0 seq_read", "target": target, "gpu": 0, "io_type": "read", "duration": 1,
             "thresholds": {}, "ceiling": "g seq_read host"},
            {"name": "g seq_read host", "target": target, "gpu": None, "xfer_type": 1, "io_type": "read",
             "duration": 1, "thresholds": {}}]
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": jobs, "udev_root": "",
                                          "watch_thresholds": {"ceiling_fraction_min": 0.9}})
    assert rc == 0, result
    ceiling = result["results"][0]["watch"]["ceiling"]
    assert ceiling == {"job": "g seq_read host", "gib_s": 8.0, "fraction": round(6.52 / 8.0, 4)}
    check = by_name(result["checks"])["bench: g gpu0 seq_read: ceiling_fraction"]
    assert check["verdict"] == "FAIL" and "host read g seq_read host: 8.0 GiB/s" in check["detail"]
    # off by default: recorded, not judged
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": jobs, "udev_root": ""})
    assert "bench: g gpu0 seq_read: ceiling_fraction" not in by_name(result["checks"])
    assert result["results"][0]["watch"]["ceiling"]["fraction"] == round(6.52 / 8.0, 4)


def test_health_covers_every_gpu_and_a_gpu_without_a_job_fails_the_node(tmp_path, monkeypatch):
    """A node of two GPUs whose plan measured GPU 0 only: the health gate still reads GPU 1, and
    'bench: every GPU measured' FAILs naming it (a node is signed off for every GPU or not at all)."""
    monkeypatch.syspath_prepend(FAULT)  # the pynvml stand-in: two GPUs
    for name in [n for n in os.environ if n.startswith("GDS_FAKE_NVML_")]:
        monkeypatch.delenv(name)
    binary = fake_bench(tmp_path, "echo '%s'" % json.dumps(RECORD))
    job = {"name": "g gpu0 seq_read", "target": str(tmp_path / "data"), "gpu": 0, "io_type": "read",
           "duration": 1, "thresholds": {}}
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job], "udev_root": "", "expect_gpus": [0, 1],
                                          "nvml_interval": 0.05})
    assert rc == 0, result
    checks = by_name(result["checks"])
    assert "gpu: health 0" in checks and "gpu: health 1" in checks
    every = checks["bench: every GPU measured"]
    assert every["verdict"] == "FAIL" and "GPU 1: no job was planned for it" in every["detail"]
    job1 = dict(job, name="g gpu1 seq_read", gpu=1)
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job, job1], "udev_root": "",
                                          "expect_gpus": [0, 1], "nvml_interval": 0.05})
    assert by_name(result["checks"])["bench: every GPU measured"]["verdict"] == "PASS"
    # the planner's non-affine pair (GPU 1 reading another group's array) is no job of GPU 1's own;
    # a GPU without drives measured on the nearest array (non-affine too) is
    pair = dict(job1, expect_bounce=True)
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job, pair], "udev_root": "", "expect_gpus": [0, 1]})
    assert by_name(result["checks"])["bench: every GPU measured"]["verdict"] == "FAIL"
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job, dict(pair, nonaffine=True)], "udev_root": "",
                                          "expect_gpus": [0, 1]})
    assert by_name(result["checks"])["bench: every GPU measured"]["verdict"] == "PASS"
    # a GPU whose job broke is no measured GPU either
    broken = fake_bench(tmp_path, 'if [[ " $* " == *" -d 1 "* ]]; then exit 1; fi; echo \'%s\'' % json.dumps(RECORD))
    rc, result = run_module("gds_bench", {"binary": broken, "jobs": [job, job1], "udev_root": "", "expect_gpus": [0, 1]})
    every = by_name(result["checks"])["bench: every GPU measured"]
    assert every["verdict"] == "FAIL" and "GPU 1: 1 of its 1 jobs did not complete" in every["detail"]
