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
  - A threshold miss is reported in the checks, not as a failure; the report decides.
  - Every job that ran gets a C(run) check. A job whose benchmark exited non-zero (an open or
    setup failure included), crashed, printed no record, outran its timeout or moved no bytes is
    an ERROR, with the benchmark's stderr in the check and in the record; its thresholds and I/O
    path are not judged (SKIP). After a crash or a timeout the remaining jobs are not run. The task
    fails when any job broke, and still returns every job's checks.
  - "When no job ran at all (an empty job list, or every job skipped) the check C(bench: jobs run)
    FAILs: a host without a measurement cannot pass."
  - A target directory that is a symbolic link, or a data file the job would open that is a link,
    not a regular file or another user's, makes the job an ERROR naming it before the benchmark
    runs; links above the target are followed (docs/benchmark.md, Data files).
  - A job with C(jobs) runs every GPU at once in one gdsbench process, from the gdsio job file
    C(jobfile) the plan wrote (docs/benchmark.md, Every GPU at once).
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
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
        gdsbench C(-P); when unset gdsbench chooses, one per thread for large sequential
        C(xfer_type) 0 I/O); C(duration) (seconds, 0 = one pass); C(verify); C(seed).
      - C(thresholds) maps a metric to [reference, lower, upper, unit]; C(expect_path) is the I/O
        path GPU-direct jobs must take.
      - C(compare) is C({job, metric, as, threshold}), a ratio of this job's metric to another
        job's; C(spec) is C({metric, value}), the array's summed drive spec, which gives the metric
        C(fraction_of_spec).
      - C(skip) is a reason; the job is not run and its checks SKIP.
      - "For the watch of each job: C(md) (the array's kernel name, whose sysfs slaves are its
        drives), C(members) (its drives, when there is no md), C(drives_from_target) (the disk
        under the target, on a live node), C(expect_bounce) (the planner's non-affine job: a
        bounce through a GPU near the drives PASSes)."
      - "C(ceiling) names the job that read the same drives into host memory in the same run: the
        job's C(watch.ceiling) is its throughput over that one's (C(bench: <job>: ceiling_fraction)
        with the watch's C(ceiling_fraction_min)). C(nonaffine) marks a GPU measured on storage
        outside its affinity group (its thresholds are the non-affine ones); it counts for
        C(bench: every GPU measured), the planner's non-affine pair (C(expect_bounce) alone) does not."
      - "Every GPU at once: C(jobs) lists the sub-jobs (C(name), C(gpu), C(numa), C(target),
        C(threads), C(array), C(members), C(single): the single job of that GPU to compare with)
        and C(jobfile) the gdsio job file that runs them, one C([jobN]) per sub-job in the same
        order; C(drive_groups) ({array: members}) compares each array's drives with their own
        (C(bench: <job>: <array> drive load)) and, for a direct read, all of them together with the
        job's reported bytes (C(bench: <job>: drives served));
        C(scaling) ([reference, lower, upper, unit]) judges the aggregate over the sum of the
        singles (C(bench: <job>: scaling))."
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
  keep_files:
    description:
      - Keep the data files the benchmark wrote. By default the files and directories this run
        created are removed after the last job; files that existed before (a file given as
        C(file), an earlier run's data) are never removed. Removal goes through descriptors of
        the directories held since the first job and takes only the regular files the jobs made
        (the same device and inode), never a link swapped in after a job.
    type: bool
    default: false
  gpu_skip_reason:
    description:
      - "Why the GPU transfer types are not run on this host (no usable GPU); adds the SKIP check
        C(bench: GPU transfer types) naming the transfer type that ran instead."
    type: str
  pcie_links:
    description:
      - "The node's PCIe links (C(gds_topology)'s C(pcie_links)). Their AER counters are read right
        before the first job and after the last (C(pcie: aer <bdf>) checks), and the links of the
        GPUs the jobs use are judged under load from NVML's samples
        (C(pcie: link <bdf> under load))."
    type: list
    elements: dict
    default: []
  nvme_devices:
    description: "NVMe controllers (C(nvme0)) whose SMART health is read before and after the jobs (C(nvme: health <dev>))."
    type: list
    elements: str
    default: []
  nvme_cli:
    description:
      - The nvme-cli executable (name or path) that reads C(smart-log -o json). When it is absent
        (or empty) only the temperature is read, from the controller's hwmon device in sysfs.
    type: str
    default: nvme
  health_thresholds:
    description:
      - "Device health limits: C(aer_correctable_limit), C(nvme_percentage_used_max),
        C(nvme_temperature_max_c), C(gpu_throttle_fail) and C(gpu_throttle_warn) (lists of clock
        event reasons: gpu_idle, applications_clocks_setting, sw_power_cap, hw_slowdown,
        sync_boost, sw_thermal, hw_thermal, hw_power_brake, display_clock_setting),
        C(gpu_remapped_rows_pending) (pending remapped rows or retired pages FAIL when true, WARN
        when false). Missing keys take their defaults."
    type: dict
    default: {}
  nvml_interval:
    description:
      - Seconds between NVML samples of each GPU used by a GPU-direct job, and of every GPU's PCIe
        traffic (GPM samples, never closer than 0.15 s; or PCIe throughput where the GPU has
        neither GPM nor PCIe byte counters).
    type: float
    default: 0.5
  nvml_timeout:
    description:
      - The longest the module waits on NVML at any one point (one call, or the sampler's reads at
        the start, at each job's start and end, and after the last job). A call that does not
        answer in time, or NVML too slow to answer within it, marks NVML hung for the rest of the
        run; the GPUs' traffic is then unknown (C(watch.gpus_unknown) says which call), and the
        run takes at most about this much longer than its jobs. Raise it where nvmlInit itself
        is slow (GPUs without persistence mode).
    type: float
    default: 5.0
  gds_stats:
    description:
      - "cuFile's C(gds_stats) (a path, else a name looked up in PATH). While a cuFile job runs,
        C(gds_stats -p PID -l 3) reads each of its processes' per-GPU statistics (cufile.json's
        C(profile.cufile_stats) must be 3): the GPU whose bounce buffers cuFile used. Empty: not run."
    type: str
    default: gds_stats
  topology:
    description:
      - "The node's C(gds_topology) facts: the drives' PCI addresses, the link matrix and the PCIe
        links that the watch of each job names and measures the path's limit from."
    type: dict
    default: {}
  expect_gpus:
    description:
      - "Every GPU of the node (indices): C(bench: every GPU measured) FAILs unless each had a
        job of its own that completed (a node is signed off for every GPU or not at all), and the
        device health covers each of them. Only when a job of the plan uses a GPU."
    type: list
    elements: int
    default: []
  progress_file:
    description:
      - "A file of the product's own (in gds_bench's directory) where an event is written, whole,
        as each job starts and ends (job N of M, its name, GPU and transfer type, the expected and
        the elapsed seconds, its first verdict), for M(gds.commission.gds_bench_progress) to wait
        on while this module runs in the background. Empty: none written. A file that cannot be
        written never changes the run."
    type: path
  watch_thresholds:
    description:
      - "What the watch of each job judges (docs/profiles.md): C(drive_skew_tolerance),
        C(drive_await_tolerance) and C(drive_skew_verdict) (WARN or FAIL) for C(bench: <job>: drive
        load); C(path_fraction_min) (null: off) for C(bench: <job>: path_fraction); C(bounce_share) and
        C(bounce_verdict) for C(bench: <job>: bounce). Missing keys take their defaults."
    type: dict
    default: {}
notes:
  - "Below I(sysfs_root) it reads the AER counters and the NVMe hwmon temperatures; below
    I(procfs_root), C(diskstats) before and after each job."
  - In check mode nothing is run and every job's checks are SKIP.
  - NVML (pynvml) is sampled only when it can be imported and GPU-direct jobs run; what a GPU does
    not support (retired pages on Hopper) is unknown, never a failure.
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
  - gds.commission.gds.sysfs
  - gds.commission.gds.procfs
"""

EXAMPLES = r"""
- name: Sequential read from the GPU local to /raid1
  gds.commission.gds_bench:
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
    jobfile:
      description: For every GPU at once, the gdsio job file that ran (C(gdsbench FILE) runs it again).
      type: str
    record:
      description: The benchmark's JSON record (docs/benchmark.md keys), plus C(stderr) and C(gdsio_line); C(exit_code) and C(stderr) only when it printed none.
      type: dict
    path:
      description: The I/O path actually taken (nvfs, p2pdma, compat, posix), null when skipped.
      type: str
    stderr:
      description: The tail of the benchmark's stderr (also kept in C(record)).
      type: str
    checks:
      description: Checks of this job (name, verdict, expected, actual, detail).
      type: list
      elements: dict
    watch:
      description:
        - "What the job moved where (docs/reports.md): C(drives) (per member: bytes, r/s, w/s,
          rkB/s, wkB/s, await, %util from /proc/diskstats), C(array) (the md device itself),
          C(drives_source), C(drives_unknown), C(seconds); C(gpus) (every GPU's PCIe bytes received
          and sent during the job, from NVML, with the source used) or C(gpus_unknown); C(cufile)
          (cuFile's per-GPU reads, writes and bounce-buffer pool from gds_stats, or its C(unknown)); C(limit)
          (what the PCIe links between the drives and the GPU carry, from C(topology); for every GPU at
          once, the links their paths share) and C(fraction) (measured / limit); C(ceiling) (the host-memory
          read of the same drives: C({job, gib_s, fraction})); C(concurrency) (every GPU at once: the
          aggregate over the sum of the singles, per sub-job, per affinity group and per root port). Only
          for a job that completed."
      type: dict
checks:
  description:
    - "All jobs' checks, each named C(bench: <job>: <metric>); also returned when the task fails."
    - "C(bench: every GPU measured) (with C(expect_gpus)): FAIL naming each GPU without a completed job."
  returned: always
  type: list
  elements: dict
removed:
  description: The data files and directories this run created and removed (empty with keep_files).
  returned: always
  type: list
  elements: str
health:
  description:
    - "What the health checks were judged from: C(gpu_load) ({bdf: {max_gen_seen, max_width_seen,
      max_gen, max_width, samples, gpu_max_gen, gpu_max_width, first_gen, first_width, index}}),
      C(gpus) ({index: ECC, retired pages, remapped rows, clock_events}), C(nvml_problem),
      C(nvme) ({dev: {before, after}}), C(aer) ({before, after})."
  returned: when jobs ran
  type: dict
"""

import json
import os
import shutil
import tempfile
import time

from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule, SYSFS_ROOT, PROCFS_ROOT  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.core.checks import check, subject, worst
from ansible_collections.gds.commission.plugins.module_utils.tune.driver import udev_record_check
from ansible_collections.gds.commission.plugins.module_utils.core.files import (
    UnsafeFile, data_file, new_regular_file, open_dir, remove_dir, remove_file,
)
from ansible_collections.gds.commission.plugins.module_utils.measure.concurrency import (
    ceiling_check, ceiling_entry, concurrency_entry, every_gpu_check, scaling_check,
)
from ansible_collections.gds.commission.plugins.module_utils.measure.devhealth import HealthConfigError, HealthRun
from ansible_collections.gds.commission.plugins.module_utils.measure.progress import PASS_TIMEOUT, Progress
from ansible_collections.gds.commission.plugins.module_utils.core.proc import run as proc_run
from ansible_collections.gds.commission.plugins.module_utils.measure.watch import JobWatch, WatchConfigError, gds_stats_tool, watches_gpus
from ansible_collections.gds.commission.plugins.module_utils.measure.thresholds import (
    ThresholdError, evaluate, gpu_skip_check, job_checks, jobs_run_check, lookup_metric, skipped_job_checks,
)
from ansible_collections.gds.commission.plugins.module_utils.measure.vocab import CUFILE_XFER_TYPES, IO_TYPES
STDERR_TAIL = 2000


class JobError(Exception):
    pass


def command(binary, job, jobfile=None):
    io_type = job.get("io_type", "read")
    if io_type not in IO_TYPES:
        raise JobError("io_type %r is not one of %s" % (io_type, ", ".join(IO_TYPES)))
    if job.get("jobs"):  # every GPU at once: the job file holds each sub-job's GPU, node and target
        return [binary] + _procs(job) + ["--json", "-", jobfile]
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
    cmd += _procs(job)
    if job.get("verify"):
        cmd += ["-V"]
    return cmd + ["--json", "-"]


def _procs(job):
    """gdsbench's -P: worker processes, one cuFile instance each; unset: gdsbench's own choice
    (one per thread for large sequential GPU-direct jobs), so procs: 1 is passed to keep threads."""
    if job.get("procs") is None:
        return []
    procs = job["procs"]
    if isinstance(procs, bool) or not str(procs).isdigit() or int(procs) < 1:
        raise JobError("procs %r is not a number of worker processes (1 or more)" % (procs,))
    return ["-P", str(int(procs))]


def write_jobfile(job):
    """The plan's gdsio job file of a job with sub-jobs, in a directory of its own (removed after
    the job): (directory, path)."""
    text = job.get("jobfile")
    if not isinstance(text, str) or not text.strip():
        raise JobError("has sub-jobs (jobs) but no gdsio job file (jobfile)")
    if not all(isinstance(sub, dict) and sub.get("target") for sub in job["jobs"]):
        raise JobError("every sub-job needs a target directory")
    where = tempfile.mkdtemp(prefix="gds_bench-")
    path = os.path.join(where, "jobs.gdsio")
    with open(path, "w") as handle:
        handle.write(text)
    return where, path


def jobfile_mismatch(job, record):
    """Why the record's per-job results are not the job's sub-jobs (count, order, GPU, threads,
    directory), or None: the plan wrote the job file from the sub-jobs, and a figure is compared
    with a sub-job's single only when it is that sub-job's."""
    per_job, subs = (record or {}).get("jobs"), job["jobs"]
    if not isinstance(per_job, list) or len(per_job) != len(subs):
        return "the job file ran %s job(s), the job has %d sub-jobs" % (
            len(per_job) if isinstance(per_job, list) else "no per-job result for its", len(subs))
    for number, (sub, rec) in enumerate(zip(subs, per_job), 1):
        rec = rec if isinstance(rec, dict) else {}
        got = (rec.get("threads"), os.path.abspath(str(rec.get("target") or "")).rstrip("/"))
        want = (sub.get("threads"), os.path.abspath(str(sub.get("target"))).rstrip("/"))
        if got != want or (sub.get("gpu") is not None and rec.get("gpu") != sub.get("gpu")):
            return "job %d of the job file (%s threads, GPU %s, %s) is not sub-job %s (%s threads, GPU %s, %s)" % (
                number, got[0], rec.get("gpu"), got[1], sub.get("name"), want[0], sub.get("gpu"), want[1])
    return None


def parse_record(out):
    """The JSON record on stdout (--json -), None when there is none."""
    for start in [i for i, line in enumerate(out.splitlines()) if line.startswith("{")][::-1]:
        try:
            record = json.loads("\n".join(out.splitlines()[start:]))
        except ValueError:
            continue
        if isinstance(record, dict):
            return record
    return None


def run_job(cmd, timeout, env, started=None):
    """Run one benchmark: (record, failure, stderr, fatal).

    ``failure`` is None for a clean exit, else why the job broke; ``fatal`` says that the next
    jobs should not run (a crash or a timeout: the device may be in a bad state).
    """
    start = time.time()
    res = proc_run(cmd, timeout, env, started)
    if res.error:
        return None, res.error, "", False
    if res.timed_out:
        return None, "timed out after %d s and was killed" % timeout, res.stderr.strip()[-STDERR_TAIL:], True
    out, err, returncode = res.stdout, res.stderr, res.rc
    tail = err.strip()[-STDERR_TAIL:]
    if returncode < 0:
        return None, "crashed with signal %d after %.1f s" % (-returncode, time.time() - start), tail, True
    record = parse_record(out)
    if record is None:
        return None, "exited %d without a JSON record" % returncode, tail or out.strip()[-STDERR_TAIL:], False
    lines = err.splitlines() + out.splitlines()  # with --json - the gdsio line goes to stderr
    record["gdsio_line"] = next((line for line in lines if line.startswith("IoType:")), None)
    record["stderr"] = tail
    record.setdefault("exit_code", returncode)
    failure = None if returncode == 0 else "exited %d" % returncode
    return record, failure, tail, False


def udev_check(job, udev_root, prefix):
    """cuFile looks up the file system's block device in the udev database; say when it is absent.
    Every GPU at once reads the targets of the single jobs, which were checked already."""
    if not udev_root or int(job.get("xfer_type", 0)) not in CUFILE_XFER_TYPES or job.get("jobs"):
        return None
    where = job.get("file") or job["target"]
    dev = os.stat(where if os.path.exists(where) else os.path.dirname(where)).st_dev
    devno = (os.major(dev), os.minor(dev))
    return udev_record_check(prefix + "udev record", os.path.join(udev_root, "data", "b%d:%d" % devno), devno)


class Workspace(object):
    """What the jobs write: the directories and files that did not exist before this run. Every
    directory is held by a descriptor from core/files.py, and a file is removed only while it is
    the regular file gdsbench made there: a link swapped in for a file or a directory after a job
    is never followed, and nothing it points at is removed."""

    def __init__(self):
        self.made = []          # directories this run created: (parent fd, name, file_id, path), outermost first
        self.targets = {}       # -D directory -> [fd, names it held before the first job, {new gdsbench.N: file_id}]
        self.files = {}         # -f file that did not exist before -> [directory fd, name, file_id or None]
        self.fds = []

    def _open(self, path, follow):
        fd = open_dir(path, self.made, follow)
        self.fds.append(fd)
        return fd

    def prepare(self, job):
        """Open (and make) the job's directory; UnsafeFile when its target is a link, or a data file
        it would open is a link, not a regular file or another user's (core/files.py's rule)."""
        if job.get("jobs"):
            # sub-jobs sharing a directory number their files on, as gdsbench does (file bases)
            bases = {}
            for sub in job["jobs"]:
                path = os.path.abspath(sub["target"])
                names = data_names(sub, bases.get(path, 0))
                bases[path] = bases.get(path, 0) + len(names)
                self._directory(path, names)
            return
        if job.get("file"):
            path = os.path.abspath(job["file"])
            fd, name = self._open(os.path.dirname(path), True), os.path.basename(path)
            if data_file(fd, name, path) is None and path not in self.files:
                self.files[path] = [fd, name, None]
            return
        self._directory(os.path.abspath(job["target"]), data_names(job))

    def _directory(self, path, names):
        fd = self._open(path, False)  # again for each job: a link put in its place since is refused
        self.targets.setdefault(path, [fd, set(os.listdir(fd)), {}])
        for name in names:
            data_file(fd, name, os.path.join(path, name))

    def settle(self):
        """After each job: the files it made, by file_id, the only ones clean() removes."""
        for fd, before, new in self.targets.values():
            try:
                names = os.listdir(fd)
            except OSError:
                continue
            for name in names:
                if name.startswith("gdsbench.") and name not in before and name not in new:  # gdsbench's naming
                    ident = new_regular_file(fd, name)
                    if ident:
                        new[name] = ident
        for entry in self.files.values():
            if entry[2] is None:
                entry[2] = new_regular_file(entry[0], entry[1])

    def clean(self):
        """Remove what this run created: new gdsbench.N files, new -f files, new directories."""
        removed = []
        for path, (fd, dummy, new) in self.targets.items():
            removed += [os.path.join(path, name) for name, ident in sorted(new.items()) if remove_file(fd, name, ident)]
        removed += [path for path, (fd, name, ident) in self.files.items() if ident and remove_file(fd, name, ident)]
        # only when empty: something else put there stays
        removed += [path for parent, name, ident, path in reversed(self.made) if remove_dir(parent, name, ident)]
        return removed

    def close(self):
        for fd in self.fds + [entry[0] for entry in self.made]:
            os.close(fd)
        self.fds, self.made = [], []


def data_names(job, base=0):
    """The gdsbench.N files of a directory job (one per thread, gdsbench's -D naming), numbered
    from ``base`` (a job file's jobs that share a directory)."""
    try:
        threads = int(job.get("threads", 8))
    except (TypeError, ValueError):
        return []  # gdsbench refuses the value itself
    return ["gdsbench.%d" % t for t in range(base, base + min(max(threads, 0), 4096))]


def compare_check(job, result, records):
    """A ratio between two jobs (the affine GPU against a non-affine one)."""
    compare = job["compare"]
    other = records.get(compare.get("job"))
    metric = compare.get("metric", "throughput_gib_s")
    mine, theirs = lookup_metric(result["record"], metric), lookup_metric(other or {}, metric)
    value = mine / theirs if mine is not None and theirs else None
    check = evaluate(compare.get("as", "ratio"), compare["threshold"], value)
    check["detail"] = (check["detail"] + "; " if check.get("detail") else "") + \
        "%s %s / %s %s" % (job["name"], metric, compare.get("job"), metric)
    check["name"] = "bench: %s: %s" % (job["name"], compare.get("as", "ratio"))
    return check


def gpu_indices(jobs, expect=()):
    """The GPUs the GPU-direct jobs that will run use (NVML samples those), sub-jobs included, and
    every GPU of the node (``expect``) once any does: the health gate covers each GPU."""
    found = set()
    for job in jobs:
        if job.get("skip") or int(job.get("xfer_type", 0)) not in CUFILE_XFER_TYPES:
            continue
        for each in [job] + [s for s in job.get("jobs") or [] if isinstance(s, dict)]:
            if each.get("gpu") is not None:
                found.add(int(each["gpu"]))
    return sorted(found | set(expect or [])) if found else []


def every_gpu_figures(params, results, records, health=None, watch=None):
    """After the last job, the figures that need other jobs' records: each job against the host
    read of its drives (``ceiling``), every GPU at once against each GPU alone (``jobs``)."""
    minimum = (watch.th if watch is not None else {}).get("ceiling_fraction_min")
    load = health.gpu_load() if health is not None else {}
    for job, result in zip(params["jobs"], results):
        if job["name"] not in records:
            continue
        record, seen = records[job["name"]], result.setdefault("watch", {})
        prefix = "bench: %s: " % job["name"]
        if job.get("ceiling"):
            seen["ceiling"] = ceiling_entry(record, job["ceiling"], records.get(job["ceiling"]))
            if minimum is not None:
                result["checks"].append(ceiling_check(prefix, seen["ceiling"], minimum))
        if job.get("jobs"):
            drives = [d.get("name") for d in seen.get("drives") or [] if isinstance(d, dict)]
            seen["concurrency"] = concurrency_entry(job, record, records, params["topology"], load, drives)
            if job.get("scaling"):
                result["checks"].append(scaling_check(prefix, seen["concurrency"], job["scaling"]))


def launch(params, job, env, workspace, watch):
    """One job run: its command (and job file, removed after), its directory prepared, its udev
    record checked, gdsbench run under its timeout with the watch begun right before.
    (cmd, record, failure, stderr, udev check, fatal)."""
    cmd, record, failure, stderr, udev, jobdir, fatal = [], None, None, "", None, None, False
    try:
        if not job.get("target") and not job.get("file") and not job.get("jobs"):
            raise JobError("has neither a target directory nor a file")
        if job.get("jobs"):
            jobdir, jobfile = write_jobfile(job)
            cmd = command(params["binary"], job, jobfile)
        else:
            cmd = command(params["binary"], job)
        workspace.prepare(job)
        udev = udev_check(job, params["udev_root"], "bench: %s: " % job["name"])
        duration = int(job.get("duration") or 0)
        timeout = duration + params["timeout_grace"] if duration else params["pass_timeout"]
        if watch is not None:
            watch.begin(job)  # never raises: the watch is outside the job's fate
        record, failure, stderr, fatal = run_job(cmd, timeout, env, watch.started if watch else None)
        if record is not None and failure is None and job.get("jobs"):
            failure = jobfile_mismatch(job, record)
    except (JobError, UnsafeFile, OSError, ValueError, TypeError) as exc:
        failure, fatal = "could not run: %s" % exc, False
    finally:
        if jobdir:
            shutil.rmtree(jobdir, ignore_errors=True)
    return cmd, record, failure, stderr, udev, fatal


def compare_jobs(jobs, results, records):
    """Each job's ``compare`` (the affine read against the non-affine one) judged, or SKIP when
    the other job did not complete."""
    for job, result in zip(jobs, results):
        if not job.get("compare") or job["name"] not in records:
            continue
        other = job["compare"].get("job")
        if other in records or other not in [r["name"] for r in results]:
            result["checks"].append(compare_check(job, result, records))
        else:  # the other job broke or was skipped: no ratio to judge
            result["checks"].append(check("bench: %s: %s" % (job["name"], job["compare"].get("as", "ratio")),
                                          "SKIP", None, None, "not judged: job %s did not complete" % other))


def run_all(params, check_mode, env, health=None, watch=None):
    """Run the jobs in order; returns (results, error messages, removed paths).

    ``watch`` (measure/watch.JobWatch) reads the drives and GPUs right before and after each job."""
    results, records, errors, skips = [], {}, [], []
    workspace, halted = Workspace(), None
    progress = Progress(None if check_mode else params["progress_file"], params["jobs"])
    if health is not None:
        health.begin()  # AER and SMART counters right before the first job, NVML sampling on
    try:
        for number, job in enumerate(params["jobs"], 1):
            reason = job.get("skip") or ("check mode: nothing was run" if check_mode else None) or halted
            if reason:
                progress.skipped(number, job, reason)
                skips.append(reason)
                results.append({"name": job["name"], "cmd": [], "record": {}, "path": None, "stderr": "",
                                "checks": skipped_job_checks(job, reason)})
                continue
            progress.started(number, job)
            began = time.monotonic()
            cmd, record, failure, stderr, udev, fatal = launch(params, job, env, workspace, watch)
            workspace.settle()
            checks = job_checks(job, record, failure, stderr) + ([udev] if udev else [])
            seen = None
            if watch is not None and cmd and checks[0]["verdict"] == "PASS":
                seen, more = watch.end(job, record)  # only a job that measured something is watched
                checks += more
            elif watch is not None:
                watch.abandon()
            verdict = worst([c["verdict"] for c in checks])
            problem = next((c for c in checks if c["verdict"] == verdict), {})
            progress.ended(number, job, time.monotonic() - began, verdict,
                           None if verdict == "PASS" else "%s: %s" % (problem.get("name"), problem.get("detail") or problem.get("actual")))
            if checks[0]["verdict"] == "ERROR":
                errors.append("%s: %s" % (job["name"], checks[0].get("detail") or checks[0]["actual"]))
                if fatal:
                    halted = "not run: job %s %s" % (job["name"], failure)
            else:
                records[job["name"]] = record
            results.append({"name": job["name"], "cmd": cmd, "record": record or {},
                            "path": ((record or {}).get("path") or {}).get("mode"), "stderr": stderr,
                            "checks": checks, "attempted": True})
            if seen is not None:
                results[-1]["watch"] = seen
            if job.get("jobs"):  # what ran, to run again by hand (the file itself is removed)
                results[-1]["jobfile"] = job.get("jobfile")
        compare_jobs(params["jobs"], results, records)
        every_gpu_figures(params, results, records, health, watch)
        for job, result in zip(params["jobs"], results):  # what each check is about, as data
            subject(result["checks"], job=job["name"], gpu=job.get("gpu"))
    finally:
        if health is not None:
            health.end()  # after the last job, before the files go
        removed = [] if params["keep_files"] or check_mode else workspace.clean()
        workspace.close()
    return results, errors, removed, skips


def run_checks(params, check_mode, results, skips, health):
    """The run's checks: every job's, the device health's, whether any job ran, the GPU skip and
    every GPU measured; (checks, the health facts as extra results)."""
    checks = [check for result in results for check in result["checks"]]
    extra = {}
    if health is not None:
        checks.extend(health.checks())
        extra["health"] = health.facts()
    ran = [r for r in results if r.pop("attempted", False)]
    if not check_mode:
        none_ran = jobs_run_check(ran, len(params["jobs"]), skips)
        if none_ran:
            checks.append(none_ran)
        if params["gpu_skip_reason"]:
            checks.append(gpu_skip_check(params["gpu_skip_reason"],
                                         [int(j.get("xfer_type", 0)) for j in params["jobs"] if not j.get("skip")]))
        every = every_gpu_check(params["expect_gpus"], params["jobs"], results)
        if every:
            checks.append(every)
    return checks, extra


def main():
    module = AnsibleModule(
        argument_spec=dict(
            binary=dict(type="path", required=True),
            jobs=dict(type="list", elements="dict", required=True),
            timeout_grace=dict(type="int", default=60),
            pass_timeout=dict(type="int", default=PASS_TIMEOUT, no_log=False),  # a timeout, not a password
            cufile_config=dict(type="path"),
            udev_root=dict(type="str", default="/run/udev"),
            keep_files=dict(type="bool", default=False),
            gpu_skip_reason=dict(type="str"),
            pcie_links=dict(type="list", elements="dict", default=[]),
            sysfs_root=SYSFS_ROOT,
            nvme_devices=dict(type="list", elements="str", default=[]),
            nvme_cli=dict(type="str", default="nvme"),
            health_thresholds=dict(type="dict", default={}),
            nvml_interval=dict(type="float", default=0.5),
            nvml_timeout=dict(type="float", default=5.0),
            procfs_root=PROCFS_ROOT,
            topology=dict(type="dict", default={}),
            expect_gpus=dict(type="list", elements="int", default=[]),
            watch_thresholds=dict(type="dict", default={}),
            progress_file=dict(type="path"),
            gds_stats=dict(type="str", default="gds_stats"),
        ),
        supports_check_mode=True,
    )
    params = module.params

    def broken(msg, **extra):
        module.fail_json(msg=msg, checks=[check("bench: run", "ERROR", "the jobs run", "not run", msg)],
                         results=[], removed=[], **extra)

    env = dict(os.environ)
    # CUDA's default order is fastest first; PCI order makes -d N the GPU NVML and the topology call N
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if params["cufile_config"]:
        env["CUFILE_ENV_PATH_JSON"] = params["cufile_config"]
    names = [job.get("name") for job in params["jobs"]]
    if None in names or len(set(names)) != len(names):
        broken("every job needs a unique name; got %r" % names)
    if not module.check_mode and not all(job.get("skip") for job in params["jobs"]) \
            and not os.access(params["binary"], os.X_OK):
        broken("binary %s is missing or not executable" % params["binary"])
    health = None
    try:
        if not module.check_mode and any(not j.get("skip") for j in params["jobs"]):
            health = HealthRun(params["pcie_links"], params["sysfs_root"], params["nvme_devices"],
                               params["nvme_cli"], params["health_thresholds"],
                               gpu_indices(params["jobs"], params["expect_gpus"]),
                               interval=max(0.05, params["nvml_interval"]), traffic=watches_gpus(params["jobs"]),
                               nvml_timeout=max(0.1, params["nvml_timeout"]))
    except (HealthConfigError, ValueError, TypeError) as exc:
        broken("health_thresholds: %s" % exc)
    try:
        stats, note = gds_stats_tool(params["gds_stats"], params["cufile_config"])
        watch = JobWatch(params["watch_thresholds"], params["procfs_root"], params["sysfs_root"],
                         params["topology"], health, stats, note) if not module.check_mode else None
    except WatchConfigError as exc:
        broken("watch_thresholds: %s" % exc)
    try:
        results, errors, removed, skips = run_all(params, module.check_mode, env, health, watch)
    except (ThresholdError, KeyError) as exc:
        broken("bad threshold or compare: %s" % exc)
    checks, extra = run_checks(params, module.check_mode, results, skips, health)
    if errors:
        module.fail_json(msg="benchmark job(s) broke: %s" % " | ".join(e[:600] for e in errors),
                         results=results, checks=checks, removed=removed, **extra)
    module.exit_json(changed=False, results=results, checks=checks, removed=removed, **extra)


if __name__ == "__main__":
    main()
