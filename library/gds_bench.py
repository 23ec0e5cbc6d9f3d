#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_bench
short_description: Run gdsbench jobs and judge them against thresholds
description:
  - Runs C(gdsbench) (the gdsio-compatible cuFile benchmark of gds-commission) once per job, under
    a hard timeout, and returns each job's JSON record, the I/O path the data really took
    (C(nvfs), C(p2pdma), C(compat) or C(posix)) and checks against the job's thresholds.
  - A threshold miss is reported in the checks, not as a failure; the report decides. A benchmark
    that crashed, printed no record or outran its timeout fails the task with the reason.
version_added: "1.0.0"
author: gds-commission contributors
options:
  binary:
    description: Path of the gdsbench executable on the node.
    type: path
    required: true
  jobs:
    description:
      - The jobs, run in order (a read job in directory mode needs the files a write job made).
      - Keys C(name) (required); C(target), a directory with one file per thread, or C(file), one
        shared file (one of them unless C(skip)); C(gpu); C(numa); C(xfer_type) (gdsio numbering,
        default 0); C(io_type) (read, write, randread, randwrite); C(size) (per-thread file size,
        default 1G); C(io_size) (default 1M); C(threads) (default 8); C(procs) (worker processes,
        gdsbench C(-P)); C(duration) (seconds, 0 = one pass); C(verify); C(seed).
      - C(thresholds) maps a metric to [reference, lower, upper, unit]; C(expect_path) is the I/O
        path GPU-direct jobs must take.
      - C(compare) is C({job, metric, as, threshold}), a ratio of this job's metric to another
        job's; C(spec) is C({metric, value}), the array's summed drive spec, which gives the metric
        C(fraction_of_spec).
      - C(skip) is a reason; the job is not run and its checks SKIP.
    type: list
    elements: dict
    required: true
  timeout_grace:
    description: Seconds a timed job may run past its duration before it is killed.
    type: int
    default: 60
  pass_timeout:
    description: Hard timeout in seconds for a one-pass job (duration 0).
    type: int
    default: 1800
  cufile_config:
    description: cufile.json the benchmark uses (exported as CUFILE_ENV_PATH_JSON).
    type: path
  udev_root:
    description:
      - Where the udev database lives. Before a GPU-direct job the module checks that the block
        device under its target has a record there, C(data/b<major>:<minor>); without it cuFile
        cannot register the file and fails or falls back. Empty skips the check.
    type: str
    default: /run/udev
notes:
  - In check mode nothing is run and every job's checks are SKIP.
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Sequential read from the GPU local to /raid1
  gds_bench:
    binary: /opt/gds-commission/bench/gdsbench
    jobs:
      - name: group1 seq write
        target: /raid1/gds-bench
        gpu: 0
        io_type: write
        size: 1G
        threads: 8
        duration: 60
      - name: group1 seq read
        target: /raid1/gds-bench
        gpu: 0
        io_type: read
        duration: 60
        expect_path: nvfs
        thresholds:
          throughput_gib_s: [6.0, -0.10, null, GiB/s]
          lat_us.mean: [1200, null, 0.5, us]
"""

RETURN = r"""
results:
  description: One entry per job.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The job's name.
      type: str
    cmd:
      description: The command line that ran (empty for a skipped job).
      type: list
      elements: str
    record:
      description: The benchmark's JSON record (docs/benchmark.md keys).
      type: dict
    path:
      description: The I/O path actually taken (nvfs, p2pdma, compat, posix), null when skipped.
      type: str
    checks:
      description: Checks of this job (name, verdict, expected, actual, detail).
      type: list
      elements: dict
checks:
  description: All jobs' checks, each named after its job and metric, C(bench) first.
  returned: always
  type: list
  elements: dict
"""

import json
import os
import signal
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gds_thresholds import (
    GPU_DIRECT_XFER_TYPES, ThresholdError, evaluate, evaluate_all, lookup_metric, path_check,
)

IO_TYPES = {"read": 0, "write": 1, "randread": 2, "randwrite": 3}


class JobError(Exception):
    pass


def command(binary, job):
    io_type = job.get("io_type", "read")
    if io_type not in IO_TYPES:
        raise JobError("job %s: io_type %r is not one of %s" % (job["name"], io_type, ", ".join(IO_TYPES)))
    where = ["-f", job["file"]] if job.get("file") else ["-D", job["target"]]
    cmd = [binary] + where + ["-x", str(job.get("xfer_type", 0)),
           "-I", str(IO_TYPES[io_type]), "-w", str(job.get("threads", 8)),
           "-s", str(job.get("size", "1G")), "-i", str(job.get("io_size", "1M")),
           "-T", str(job.get("duration", 0))]
    if job.get("gpu") is not None:
        cmd += ["-d", str(job["gpu"])]
    if job.get("numa") is not None and int(job["numa"]) >= 0:
        cmd += ["-n", str(job["numa"])]
    if job.get("seed") is not None:
        cmd += ["-k", str(job["seed"])]
    if int(job.get("procs") or 1) > 1:
        cmd += ["-P", str(job["procs"])]  # worker processes: one cuFile instance each
    if job.get("verify"):
        cmd += ["-V"]
    return cmd + ["--json", "-"]


def run_job(cmd, timeout, env):
    """Run one benchmark; returns its JSON record or raises JobError with the reason."""
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)  # own process group: a kill takes its children
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise JobError("timed out after %d s and was killed" % timeout)
    out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    tail = err.strip()[-600:]
    if proc.returncode < 0:
        raise JobError("crashed with signal %d after %.1f s: %s" % (-proc.returncode, time.time() - start, tail))
    record = None
    for line in out.splitlines()[::-1]:  # the JSON record is the last line; the gdsio line precedes it
        line = line.strip()
        if line.startswith("{"):
            try:
                record = json.loads(line)
                break
            except ValueError:
                continue
    if record is None:
        try:
            record = json.loads(out)
        except ValueError:
            raise JobError("exited %d without a JSON record: %s" % (proc.returncode, tail or out.strip()[-600:]))
    if proc.returncode not in (0, 1):  # 1 = ran, but I/O or verify errors (counted in the record)
        raise JobError("exited %d: %s" % (proc.returncode, tail))
    record["gdsio_line"] = next((line for line in out.splitlines() if line.startswith("IoType:")), None)
    return record


def udev_check(job, udev_root, prefix):
    """cuFile looks up the file system's block device in the udev database; say when it is absent."""
    if not udev_root or int(job.get("xfer_type", 0)) not in GPU_DIRECT_XFER_TYPES:
        return None
    where = job.get("file") or job["target"]
    dev = os.stat(where if os.path.exists(where) else os.path.dirname(where)).st_dev
    record = os.path.join(udev_root, "data", "b%d:%d" % (os.major(dev), os.minor(dev)))
    if os.path.exists(record):
        return {"name": prefix + "udev record", "verdict": "PASS", "expected": "present", "actual": record}
    return {"name": prefix + "udev record", "verdict": "FAIL", "expected": "present", "actual": "missing",
            "detail": "%s is missing: cuFile cannot register files on block device %d:%d without its udev "
                      "record (run udevd, or add the record with E:ID_FS_USAGE=filesystem and "
                      "E:ID_FS_TYPE=<fs>)" % (record, os.major(dev), os.minor(dev))}


def job_checks(job, record, prefix):
    spec = job.get("spec")  # {metric, value}: the summed drive spec of the array
    if spec and spec.get("value"):
        measured = lookup_metric(record, spec.get("metric", "throughput_gib_s"))
        if measured is not None:
            record["fraction_of_spec"] = round(measured / float(spec["value"]), 4)
    checks = evaluate_all(record, job.get("thresholds"), prefix)
    path = path_check(record, job.get("xfer_type", 0), job.get("expect_path"), prefix)
    if path:
        checks.append(path)
    for key in ("errors", "verify_errors"):
        if record.get(key):
            checks.append({"name": prefix + key, "verdict": "FAIL", "expected": 0,
                           "actual": record[key], "detail": "the benchmark counted %s" % key.replace("_", " ")})
    return checks


def main():
    module = AnsibleModule(
        argument_spec=dict(
            binary=dict(type="path", required=True),
            jobs=dict(type="list", elements="dict", required=True),
            timeout_grace=dict(type="int", default=60),
            pass_timeout=dict(type="int", default=1800),
            cufile_config=dict(type="path"),
            udev_root=dict(type="str", default="/run/udev"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    env = dict(os.environ)
    if params["cufile_config"]:
        env["CUFILE_ENV_PATH_JSON"] = params["cufile_config"]
    names = [job.get("name") for job in params["jobs"]]
    if None in names or len(set(names)) != len(names):
        module.fail_json(msg="every job needs a unique name; got %r" % names)
    if not module.check_mode and not any(job.get("skip") for job in params["jobs"]) \
            and not os.access(params["binary"], os.X_OK):
        module.fail_json(msg="binary %s is missing or not executable" % params["binary"])
    results, records = [], {}
    for job in params["jobs"]:
        prefix = "bench: %s: " % job["name"]
        reason = job.get("skip") or ("check mode: nothing was run" if module.check_mode else None)
        if reason:
            skipped = [{"name": prefix + metric, "verdict": "SKIP", "expected": None, "actual": None,
                        "detail": reason} for metric in sorted(job.get("thresholds") or {}) or ["run"]]
            results.append({"name": job["name"], "cmd": [], "record": {}, "path": None, "checks": skipped})
            continue
        try:
            if not job.get("target") and not job.get("file"):
                raise JobError("job %s has neither a target directory nor a file" % job["name"])
            cmd = command(params["binary"], job)
            if not job.get("file") and not os.path.isdir(job["target"]):
                os.makedirs(job["target"])
            duration = int(job.get("duration") or 0)
            timeout = duration + params["timeout_grace"] if duration else params["pass_timeout"]
            udev = udev_check(job, params["udev_root"], prefix)
            record = run_job(cmd, timeout, env)
            checks = job_checks(job, record, prefix) + ([udev] if udev else [])
        except (JobError, ThresholdError, OSError) as exc:
            module.fail_json(msg="benchmark job %s %s" % (job["name"], exc), results=results)
        records[job["name"]] = record
        results.append({"name": job["name"], "cmd": cmd, "record": record,
                        "path": (record.get("path") or {}).get("mode"), "checks": checks})
    # Derived checks: a ratio between two jobs (the affine GPU against a non-affine one).
    for job, result in zip(params["jobs"], results):
        compare = job.get("compare")
        if not compare or not result["record"]:
            continue
        other = records.get(compare.get("job"))
        metric = compare.get("metric", "throughput_gib_s")
        label = "bench: %s: %s" % (job["name"], compare.get("as", "ratio"))
        mine, theirs = lookup_metric(result["record"], metric), lookup_metric(other or {}, metric)
        try:
            value = mine / theirs if mine is not None and theirs else None
            check = evaluate(compare.get("as", "ratio"), compare["threshold"], value)
        except (ThresholdError, KeyError) as exc:
            module.fail_json(msg="job %s: bad compare: %s" % (job["name"], exc))
        check["detail"] = (check["detail"] + "; " if check["detail"] else "") + \
            "%s %s / %s %s" % (job["name"], metric, compare.get("job"), metric)
        check["name"] = label
        result["checks"].append(check)
    module.exit_json(changed=False, results=results,
                     checks=[check for result in results for check in result["checks"]])


if __name__ == "__main__":
    main()
