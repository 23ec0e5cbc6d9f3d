"""gds_bench passes a job's procs to gdsbench as given (1 included), and leaves -P out when the
job has none, so that gdsbench's own default applies."""
import json
import os
import stat
import sys

from conftest import COLLECTION, run_module

sys.path.insert(0, os.path.join(COLLECTION, "plugins", "filter"))
from gds_bench_plan import gds_bench_plan  # noqa: E402

RECORD = {"io_type": "READ", "xfer_type": "GPUD", "threads": 8, "io_size_bytes": 1048576,
          "bytes": 8 << 30, "ops": 8192, "elapsed_s": 1.2, "throughput_gib_s": 6.52, "iops": 6680.0,
          "lat_us": {"mean": 1197.4, "p50": 1100.0, "p90": 1500.0, "p99": 2100.0, "p999": 2600.0, "max": 3000.0},
          "cpu_util_pct": 12.0, "errors": 0, "verify_errors": 0,
          "path": {"mode": "compat", "evidence": ["cuFile per-GPU stats ops=1 nvfs=0 p2p=0 posix=1"]}}


def argv_of(tmp_path, **extra):
    log = tmp_path / "argv.txt"
    binary = tmp_path / "gdsbench"
    binary.write_text("#!/bin/bash\nprintf '%%s\\n' \"$@\" >%s\necho '%s'\n" % (log, json.dumps(RECORD)))
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    job = {"name": "g1 seq_read", "target": str(tmp_path), "gpu": 0, "io_type": "read", "duration": 1}
    job.update(extra)
    rc, result = run_module("gds_bench", {"binary": str(binary), "jobs": [job], "udev_root": ""})
    return rc, result, (log.read_text().split("\n") if log.exists() else [])


def procs_arg(argv):
    return argv[argv.index("-P") + 1] if "-P" in argv else None


def test_procs_one_is_passed_to_keep_threads(tmp_path):
    rc, result, argv = argv_of(tmp_path, procs=1)
    assert rc == 0, result
    assert procs_arg(argv) == "1"


def test_procs_given_or_left_to_gdsbench(tmp_path):
    assert procs_arg(argv_of(tmp_path, procs=8)[2]) == "8"
    assert procs_arg(argv_of(tmp_path, procs="4")[2]) == "4"
    assert procs_arg(argv_of(tmp_path)[2]) is None


def test_bad_procs_is_an_error_naming_the_value(tmp_path):
    for bad in (0, -2, "many", True):
        rc, result, argv = argv_of(tmp_path, procs=bad)
        assert rc != 0 and "procs" in result["msg"] and repr(bad) in result["msg"], result
        assert argv == []


def test_plan_leaves_procs_to_gdsbench_unless_the_template_sets_it():
    arrays = [{"mount": "/raid1", "gpus": [0], "members": ["nvme0n1"]}]
    templates = [{"name": "seq_write", "io_type": "write"}, {"name": "seq_read", "io_type": "read", "procs": 8},
                 {"name": "rand_read", "io_type": "randread", "io_size": "4K", "threads": 32, "procs": 1}]
    jobs = {j["name"]: j for j in gds_bench_plan(arrays, {"templates": templates, "xfer_type": 0})}
    assert jobs["raid1 gpu0 seq_write"]["procs"] is None
    assert jobs["raid1 gpu0 seq_read"]["procs"] == 8 and jobs["raid1 gpu0 rand_read"]["procs"] == 1
    cpu = gds_bench_plan(arrays, {"templates": templates, "xfer_type": 1})
    assert {j["procs"] for j in cpu} == {1}
