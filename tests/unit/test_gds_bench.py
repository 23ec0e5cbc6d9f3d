"""The gds_bench module: records, checks, timeouts and crashes, with fake and real benchmarks."""
import json
import os
import stat

import pytest

from conftest import ROOT, run_module

RECORD = {"io_type": "READ", "xfer_type": "GPUD", "threads": 8, "io_size_bytes": 1048576,
          "bytes": 8 << 30, "ops": 8192, "elapsed_s": 1.2, "throughput_gib_s": 6.52, "iops": 6680.0,
          "lat_us": {"mean": 1197.4, "p50": 1100.0, "p90": 1500.0, "p99": 2100.0, "p999": 2600.0, "max": 3000.0},
          "cpu_util_pct": 12.0, "errors": 0, "verify_errors": 0,
          "path": {"mode": "nvfs", "evidence": ["nvidia-fs 2.17 loaded", "nvfs reads 8192"]}}


def fake_bench(tmp_path, body):
    path = tmp_path / "gdsbench"
    path.write_text("#!/bin/bash\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def job(tmp_path, **extra):
    base = {"name": "g1 seq_read", "target": str(tmp_path / "data"), "gpu": 0, "io_type": "read",
            "duration": 1, "thresholds": {"throughput_gib_s": [6.0, -0.1, None, "GiB/s"]}}
    base.update(extra)
    return base


def test_record_and_checks(tmp_path):
    binary = fake_bench(tmp_path, "echo 'IoType: READ XferType: GPUD Threads: 8'; echo '%s'" % json.dumps(RECORD))
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job(tmp_path, expect_path="nvfs")], "udev_root": ""})
    assert rc == 0, result
    res = result["results"][0]
    assert res["path"] == "nvfs" and res["record"]["gdsio_line"].startswith("IoType: READ")
    assert [(c["name"], c["verdict"]) for c in res["checks"]] == [
        ("bench: g1 seq_read: throughput_gib_s", "PASS"), ("bench: g1 seq_read: io path", "PASS")]
    assert "-D" in res["cmd"] and "--json" in res["cmd"]


def test_compat_fallback_fails_with_evidence(tmp_path):
    record = dict(RECORD, path={"mode": "compat", "evidence": ["cuFile compat mode: nvidia-fs absent"]})
    binary = fake_bench(tmp_path, "echo '%s'" % json.dumps(record))
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job(tmp_path, expect_path="nvfs")]})
    assert rc == 0  # a threshold miss is the report's to judge
    path = [c for c in result["checks"] if c["name"].endswith("io path")][0]
    assert path["verdict"] == "FAIL" and "nvidia-fs absent" in path["detail"]


def test_hanging_benchmark_is_killed_at_the_timeout(tmp_path):
    binary = fake_bench(tmp_path, "sleep 60 & wait")
    rc, result = run_module("gds_bench", {"binary": binary, "timeout_grace": 1, "jobs": [job(tmp_path)]})
    assert rc != 0 and result["failed"]
    assert "timed out after 2 s and was killed" in result["msg"] and "g1 seq_read" in result["msg"]


def test_crashed_benchmark_fails_with_the_reason(tmp_path):
    binary = fake_bench(tmp_path, "echo 'cuFileDriverOpen: boom' >&2; kill -SEGV $$")
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job(tmp_path)]})
    assert rc != 0 and "crashed with signal 11" in result["msg"] and "boom" in result["msg"]


def test_no_record_is_a_failure(tmp_path):
    binary = fake_bench(tmp_path, "echo 'usage: gdsbench ...' >&2; exit 2")
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job(tmp_path)]})
    assert rc != 0 and "without a JSON record" in result["msg"] and "usage" in result["msg"]


def test_compare_and_spec_derived_checks(tmp_path):
    binary = fake_bench(tmp_path, 'if [[ " $* " == *" -d 12 "* ]]; then echo \'%s\'; else echo \'%s\'; fi'
                        % (json.dumps(dict(RECORD, throughput_gib_s=3.89)), json.dumps(RECORD)))
    jobs = [job(tmp_path, thresholds={"fraction_of_spec": [0.9, -0.1, None]},
                spec={"metric": "throughput_gib_s", "value": 7.0},
                compare={"job": "far", "metric": "throughput_gib_s", "as": "affinity_gain",
                         "threshold": [1.3, -0.1, None, "x"]}),
            job(tmp_path, name="far", gpu=12, thresholds={})]
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": jobs})
    assert rc == 0, result
    checks = {c["name"]: c for c in result["checks"]}
    assert checks["bench: g1 seq_read: fraction_of_spec"]["actual"] == pytest.approx(6.52 / 7.0, abs=1e-3)
    gain = checks["bench: g1 seq_read: affinity_gain"]
    assert gain["verdict"] == "PASS" and gain["actual"] == pytest.approx(6.52 / 3.89, rel=1e-3)


def test_check_mode_runs_nothing(tmp_path):
    rc, result = run_module("gds_bench", {"binary": "/nonexistent", "jobs": [job(tmp_path)]}, check_mode=True)
    assert rc == 0 and result["checks"][0]["verdict"] == "SKIP"
    assert not os.path.exists(tmp_path / "data")


def test_duplicate_job_names_are_refused(tmp_path):
    rc, result = run_module("gds_bench", {"binary": "/bin/true", "jobs": [job(tmp_path), job(tmp_path)]})
    assert rc != 0 and "unique name" in result["msg"]


BENCH = os.path.join(ROOT, "bench", "gdsbench")


@pytest.mark.skipif(not os.access(BENCH, os.X_OK), reason="bench/gdsbench not built (make -C bench)")
def test_real_benchmark_cpu_path(tmp_path):
    jobs = [dict(job(tmp_path, name="w", io_type="write", xfer_type=1, threads=2, size="8M", duration=0), thresholds={}),
            job(tmp_path, name="r", xfer_type=1, threads=2, size="8M", duration=0,
                thresholds={"throughput_gib_s": [0.001, 0.0, None, "GiB/s"]}, expect_path="nvfs")]
    rc, result = run_module("gds_bench", {"binary": BENCH, "jobs": jobs})
    assert rc == 0, result
    read = result["results"][1]
    assert read["path"] == "posix" and read["record"]["bytes"] > 0
    assert [c["verdict"] for c in read["checks"]] == ["PASS"]  # CPU path: no io-path check


def test_missing_udev_record_is_reported_before_cufile_fails(tmp_path):
    binary = fake_bench(tmp_path, "echo '%s'" % json.dumps(RECORD))
    udev = tmp_path / "udev"
    (udev / "data").mkdir(parents=True)
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job(tmp_path)], "udev_root": str(udev)})
    check = [c for c in result["checks"] if c["name"].endswith("udev record")][0]
    assert check["verdict"] == "FAIL" and "cuFile cannot register" in check["detail"]
    dev = os.stat(tmp_path).st_dev
    (udev / "data" / ("b%d:%d" % (os.major(dev), os.minor(dev)))).write_text("E:ID_FS_USAGE=filesystem\n")
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job(tmp_path)], "udev_root": str(udev)})
    assert [c["verdict"] for c in result["checks"] if c["name"].endswith("udev record")] == ["PASS"]
    # CPU transfer types do not go through cuFile: no udev check
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job(tmp_path, xfer_type=1)], "udev_root": str(udev)})
    assert not [c for c in result["checks"] if c["name"].endswith("udev record")]
