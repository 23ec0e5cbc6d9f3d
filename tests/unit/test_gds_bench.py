"""The gds_bench module: records, checks, timeouts and crashes, with fake and real benchmarks."""
import json
import os
import stat

import pytest

from conftest import GDSBENCH_SRC, run_module

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
        ("bench: g1 seq_read: run", "PASS"), ("bench: g1 seq_read: throughput_gib_s", "PASS"),
        ("bench: g1 seq_read: io path", "PASS"),
        ("bench: g1 seq_read: drive load", "SKIP"),   # no array named: its drives are unknown
        ("bench: g1 seq_read: bounce", "SKIP")]       # no GPU here: NVML cannot start
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
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job(tmp_path), job(tmp_path, name="next")]})
    assert rc != 0 and "crashed with signal 11" in result["msg"] and "boom" in result["msg"]
    run = result["checks"][0]
    assert run["verdict"] == "ERROR" and "boom" in run["detail"]
    # after a crash the device may be wedged: the next job is not run, and says why
    assert result["results"][1]["cmd"] == [] and "crashed" in result["results"][1]["checks"][0]["detail"]


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


BENCH = os.path.join(GDSBENCH_SRC, "gdsbench")


@pytest.mark.skipif(not os.access(BENCH, os.X_OK), reason="gdsbench not built (make -C bench)")
def test_real_benchmark_cpu_path(tmp_path):
    jobs = [dict(job(tmp_path, name="w", io_type="write", xfer_type=1, threads=2, size="8M", duration=0), thresholds={}),
            job(tmp_path, name="r", xfer_type=1, threads=2, size="8M", duration=0,
                thresholds={"throughput_gib_s": [0.001, 0.0, None, "GiB/s"]}, expect_path="nvfs",
                drives_from_target=True)]
    rc, result = run_module("gds_bench", {"binary": BENCH, "jobs": jobs})
    assert rc == 0, result
    read = result["results"][1]
    assert read["path"] == "posix" and read["record"]["bytes"] > 0
    # CPU: no io path; the drive load of the disk under the target, from the real /proc/diskstats
    assert [c["name"] for c in read["checks"]] == ["bench: r: run", "bench: r: throughput_gib_s", "bench: r: drive load"]
    assert [c["verdict"] for c in read["checks"]][:2] == ["PASS", "PASS"]
    drives = read["watch"].get("drives") or []
    if drives:  # O_DIRECT reads reach the disk: at least the bytes the job read
        assert read["checks"][2]["verdict"] in ("PASS", "WARN") and sum(d["read_bytes"] for d in drives) >= 16 << 20


def test_missing_udev_record_is_reported_before_cufile_fails(tmp_path):
    binary = fake_bench(tmp_path, "echo '%s'" % json.dumps(RECORD))
    udev = tmp_path / "udev"
    (udev / "data").mkdir(parents=True)
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job(tmp_path)], "udev_root": str(udev)})
    check = [c for c in result["checks"] if c["name"].endswith("udev record")][0]
    assert check["verdict"] == "FAIL" and "cuFile cannot register" in check["detail"]
    # the same remedy as the driver check: udevd writes the record, the product never does
    assert "udevadm trigger --action=change" in check["detail"]
    dev = os.stat(tmp_path).st_dev
    (udev / "data" / ("b%d:%d" % (os.major(dev), os.minor(dev)))).write_text("E:ID_FS_USAGE=filesystem\n")
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job(tmp_path)], "udev_root": str(udev)})
    assert [c["verdict"] for c in result["checks"] if c["name"].endswith("udev record")] == ["PASS"]
    # CPU transfer types do not go through cuFile: no udev check
    rc, result = run_module("gds_bench", {"binary": binary, "jobs": [job(tmp_path, xfer_type=1)], "udev_root": str(udev)})
    assert not [c for c in result["checks"] if c["name"].endswith("udev record")]


# A job that measured nothing is never PASS, and nothing is deduced from it.
OPEN_FAILED = dict(RECORD, bytes=0, ops=0, throughput_gib_s=0.0, iops=0.0, errors=0, exit_code=1)


def test_nonzero_exit_is_an_error_with_the_benchmarks_stderr(tmp_path):
    binary = fake_bench(tmp_path, "echo 'gdsbench: open /x/gdsbench.0 O_DIRECT: Invalid argument' >&2; "
                                  "echo '%s'; exit 1" % json.dumps(OPEN_FAILED))
    rc, result = run_module("gds_bench", {"binary": binary, "udev_root": "",
                                          "jobs": [job(tmp_path, thresholds={}, expect_path="nvfs")]})
    assert rc != 0 and "Invalid argument" in result["msg"]
    res = result["results"][0]
    assert "Invalid argument" in res["stderr"] and "Invalid argument" in res["record"]["stderr"]
    verdicts = {c["name"]: c["verdict"] for c in result["checks"]}
    assert verdicts["bench: g1 seq_read: run"] == "ERROR"
    # the record says nvfs, but a job that failed proves no path
    assert verdicts["bench: g1 seq_read: io path"] == "SKIP"
    assert "PASS" not in verdicts.values()


def test_zero_bytes_with_exit_0_is_an_error(tmp_path):
    record = dict(OPEN_FAILED, exit_code=0)
    binary = fake_bench(tmp_path, "echo '%s'" % json.dumps(record))
    rc, result = run_module("gds_bench", {"binary": binary, "udev_root": "", "jobs": [job(tmp_path)]})
    assert rc != 0
    run = result["checks"][0]
    assert (run["verdict"], run["actual"]) == ("ERROR", "exit 0, 0 bytes")
    # the threshold is not judged
    assert [c["verdict"] for c in result["checks"][1:] if c["name"].startswith("bench: ")] == ["SKIP"]


def test_failed_write_then_good_read(tmp_path):
    """Later jobs still run after a job that exited non-zero; each is judged on its own."""
    binary = fake_bench(tmp_path, 'if [[ " $* " == *" -I 1 "* ]]; then echo "no space left" >&2; echo \'%s\'; exit 1; '
                                  "else echo '%s'; fi" % (json.dumps(OPEN_FAILED), json.dumps(RECORD)))
    jobs = [job(tmp_path, name="w", io_type="write", thresholds={}, expect_path="nvfs"),
            job(tmp_path, name="r", expect_path="nvfs")]
    rc, result = run_module("gds_bench", {"binary": binary, "udev_root": "", "jobs": jobs})
    assert rc != 0 and result["msg"].startswith("benchmark job(s) broke: w: exited 1")
    verdicts = [(c["name"], c["verdict"]) for c in result["checks"]]
    assert ("bench: w: run", "ERROR") in verdicts and ("bench: w: io path", "SKIP") in verdicts
    assert ("bench: r: io path", "PASS") in verdicts


def test_no_job_run_is_a_failed_check(tmp_path):
    rc, result = run_module("gds_bench", {"binary": "/nonexistent", "jobs": []})
    assert rc == 0
    assert [(c["name"], c["verdict"]) for c in result["checks"]] == [("bench: jobs run", "FAIL")]
    rc, result = run_module("gds_bench", {"binary": "/nonexistent", "jobs": [job(tmp_path, skip="no GPU")]})
    assert [c["verdict"] for c in result["checks"] if c["name"] == "bench: jobs run"] == ["FAIL"]
    assert "no GPU" in result["checks"][-1]["detail"]


def test_setup_failure_before_any_job_still_returns_an_error_check(tmp_path):
    rc, result = run_module("gds_bench", {"binary": str(tmp_path / "missing"), "jobs": [job(tmp_path)]})
    assert rc != 0 and [c["verdict"] for c in result["checks"]] == ["ERROR"]
    assert "missing" in result["checks"][0]["detail"]


def test_bad_job_is_an_error_for_that_job(tmp_path):
    binary = fake_bench(tmp_path, "echo '%s'" % json.dumps(RECORD))
    rc, result = run_module("gds_bench", {"binary": binary, "udev_root": "",
                                          "jobs": [job(tmp_path, name="bad", io_type="sideways"), job(tmp_path)]})
    assert rc != 0 and "sideways" in result["msg"]
    assert result["checks"][0]["verdict"] == "ERROR" and "sideways" in result["checks"][0]["detail"]
    assert ("bench: g1 seq_read: run", "PASS") in [(c["name"], c["verdict"]) for c in result["checks"]]


def test_gpu_skip_reason_is_a_skip_check(tmp_path):
    binary = fake_bench(tmp_path, "echo '%s'" % json.dumps(RECORD))
    rc, result = run_module("gds_bench", {"binary": binary, "udev_root": "", "gpu_skip_reason": "simulated node",
                                          "jobs": [job(tmp_path, xfer_type=1)]})
    note = result["checks"][-1]
    assert rc == 0 and note["name"] == "bench: GPU transfer types" and note["verdict"] == "SKIP"
    assert "simulated node" in note["detail"] and "transfer type 1" in note["detail"]


# Data files: what the run created goes, what was there stays.
WRITER = ('d=""; f=""; while [ $# -gt 0 ]; do case $1 in -D) d=$2;; -f) f=$2;; esac; shift; done; '
          '[ -n "$d" ] && touch "$d/gdsbench.0" "$d/gdsbench.1"; [ -n "$f" ] && touch "$f"; echo \'%s\'')


def test_created_files_are_removed_and_a_users_file_kept(tmp_path):
    binary = fake_bench(tmp_path, WRITER % json.dumps(RECORD))
    user = tmp_path / "user.dat"
    user.write_text("precious")
    existing = tmp_path / "shared"
    existing.mkdir()
    (existing / "gdsbench.0").write_text("earlier run")
    (existing / "notes.txt").write_text("mine")
    jobs = [job(tmp_path, name="new dir", target=str(tmp_path / "a" / "b"), thresholds={}),
            job(tmp_path, name="user file", file=str(user), thresholds={}),
            job(tmp_path, name="new file", file=str(tmp_path / "made.dat"), thresholds={}),
            job(tmp_path, name="old dir", target=str(existing), thresholds={})]
    rc, result = run_module("gds_bench", {"binary": binary, "udev_root": "", "jobs": jobs})
    assert rc == 0, result
    assert not (tmp_path / "a").exists() and not (tmp_path / "made.dat").exists()
    assert user.read_text() == "precious"
    assert sorted(os.listdir(existing)) == ["gdsbench.0", "notes.txt"]  # gdsbench.1 was this run's
    assert str(existing / "gdsbench.1") in result["removed"]


def test_keep_files_keeps_them(tmp_path):
    binary = fake_bench(tmp_path, WRITER % json.dumps(RECORD))
    rc, result = run_module("gds_bench", {"binary": binary, "udev_root": "", "keep_files": True,
                                          "jobs": [job(tmp_path, thresholds={})]})
    assert rc == 0 and result["removed"] == []
    assert sorted(os.listdir(tmp_path / "data")) == ["gdsbench.0", "gdsbench.1"]


@pytest.mark.skipif(not os.access(BENCH, os.X_OK), reason="gdsbench not built (make -C bench)")
def test_real_benchmark_read_without_files_is_an_error(tmp_path):
    (tmp_path / "data").mkdir()
    rc, result = run_module("gds_bench", {"binary": BENCH, "jobs": [
        job(tmp_path, xfer_type=1, threads=2, size="1M", duration=0, thresholds={})]})
    assert rc != 0
    run = result["checks"][0]
    assert run["verdict"] == "ERROR" and "gdsbench.0" in run["detail"]  # gdsbench's own message


@pytest.mark.skipif(not os.access(BENCH, os.X_OK), reason="gdsbench not built (make -C bench)")
def test_real_benchmark_leaves_no_data_files(tmp_path):
    jobs = [dict(job(tmp_path, name="w", io_type="write", xfer_type=1, threads=2, size="1M", duration=0), thresholds={}),
            dict(job(tmp_path, name="r", xfer_type=1, threads=2, size="1M", duration=0), thresholds={})]
    rc, result = run_module("gds_bench", {"binary": BENCH, "jobs": jobs})
    assert rc == 0, result
    assert not (tmp_path / "data").exists()


def test_no_ratio_against_a_job_that_broke(tmp_path):
    binary = fake_bench(tmp_path, 'if [[ " $* " == *" -d 12 "* ]]; then echo "cuFileHandleRegister failed" >&2; exit 1; '
                                  "else echo '%s'; fi" % json.dumps(RECORD))
    jobs = [job(tmp_path, thresholds={}, compare={"job": "far", "metric": "throughput_gib_s", "as": "affinity_gain",
                                                 "threshold": [1.3, -0.1, None, "x"]}),
            job(tmp_path, name="far", gpu=12, thresholds={})]
    rc, result = run_module("gds_bench", {"binary": binary, "udev_root": "", "jobs": jobs})
    checks = {c["name"]: c for c in result["checks"]}
    assert checks["bench: far: run"]["verdict"] == "ERROR" and "cuFileHandleRegister" in checks["bench: far: run"]["detail"]
    assert checks["bench: g1 seq_read: affinity_gain"]["verdict"] == "SKIP"
