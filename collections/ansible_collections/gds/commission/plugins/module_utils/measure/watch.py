# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Watch the bytes of each benchmark job, as the GDS guide does with iostat, nvidia-smi dmon,
dcgmi dmon and gds_stats: the load of every drive of the job's array (measure/diskload.py), the PCIe
traffic of every GPU (measure/pcie_traffic.py, sampled by measure/devhealth.py's NvmlSampler), cuFile's own
per-GPU placement (measure/cufile_stats.py) and the limit of the path (measure/pathlimit.py).

``JobWatch.begin(job)`` right before a job and ``end(job, record)`` right after it: nothing runs
inside the benchmark's process, and what cannot be read is "unknown" with the reason, never a
failure. ``end`` returns the job's ``watch`` entry and its checks.
"""
from __future__ import annotations

import os

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check, non_negative_number, profile_thresholds
from ansible_collections.gds.commission.plugins.module_utils.measure.cufile_stats import GdsStatsWatcher, stats_level_note
from ansible_collections.gds.commission.plugins.module_utils.measure.devhealth import find_cli
from ansible_collections.gds.commission.plugins.module_utils.measure.diskload import DriveWatch, drive_load_check
from ansible_collections.gds.commission.plugins.module_utils.measure.pathlimit import GIB, path_limit, spec_bytes
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import pci_function_in_path
from ansible_collections.gds.commission.plugins.module_utils.measure.pcie_traffic import bounce_check, job_traffic
from ansible_collections.gds.commission.plugins.module_utils.measure.thresholds import evaluate

# the transfer types whose data lands in GPU memory (gdsio numbering): their path ends at the GPU
GPU_XFER_TYPES = (0, 2, 4, 5, 6)
CUFILE_XFER_TYPES = (0, 5, 6)  # through libcufile: gds_stats has its statistics
BUFFERED_XFER_TYPES = (4,)  # CPU_CACHED_GPU: buffered pread, the page cache may serve it all

OPTION_VERDICTS = ("WARN", "FAIL")  # what a *_verdict threshold may name
DEFAULT_THRESHOLDS = {
    "drive_skew_tolerance": 0.25,   # a member's bytes off its peers' mean by more than this share
    "drive_await_tolerance": 1.0,   # a member's mean service time above its peers' by more than this share
    "drive_skew_verdict": "WARN",
    "path_fraction_min": None,      # measured / path limit below this FAILs (within 5 %: WARN); null: off
    "bounce_share": 0.5,            # another GPU that received this share of the job's bytes carried them
    "bounce_verdict": "WARN",
}


class WatchConfigError(ValueError):
    """A watch threshold has the wrong type or an unknown name."""


def watch_thresholds(given):
    """The profile's thresholds over the defaults; WatchConfigError names the bad key."""
    def why(key, value):
        if key.endswith("_verdict"):
            return None if value in OPTION_VERDICTS else "one of %s" % ", ".join(OPTION_VERDICTS)
        if value is None and DEFAULT_THRESHOLDS[key] is None:
            return None  # an optional threshold left off
        return None if non_negative_number(value) else "a non-negative number"
    return profile_thresholds(given, DEFAULT_THRESHOLDS, "watch", WatchConfigError, why)


def drive_bdfs(topology, sysfs_root, names):
    """{disk: PCI address}: the topology's NVMe drives by name, else the nearest PCI function
    above the disk in sysfs (a virtio or SCSI disk); None where neither knows it."""
    known = {d.get("name"): d.get("bdf") for d in (topology or {}).get("nvme") or [] if isinstance(d, dict)}
    out = {}
    for name in names:
        out[name] = known.get(name) or pci_function_in_path(os.path.realpath(os.path.join(sysfs_root, "block", name)))
    return out


def job_gpu(job):
    """The GPU the job's data lands in (an int), or None for a CPU transfer type."""
    if job.get("gpu") is None or int(job.get("xfer_type", 0)) not in GPU_XFER_TYPES:
        return None
    return int(job["gpu"])


def watches_gpus(jobs):
    """Whether any job that will run has a GPU: then every GPU's PCIe traffic is followed."""
    return any(not j.get("skip") and job_gpu(j) is not None for j in jobs or [])


def gds_stats_tool(name, cufile_config=None):
    """(gds_stats binary or None, a note on why cuFile's statistics may be unknown): ``name`` as a
    path or a name in PATH, else gds_stats in PATH; the note reads cufile.json's stats level."""
    if not name:
        return None, "gds_stats not given"
    binary = find_cli(name) or find_cli("gds_stats")
    if binary is None:
        return None, "gds_stats not found (%s)" % name
    return binary, stats_level_note(cufile_config or "/etc/cufile.json")


class JobWatch(object):
    """What one job moved where; one instance for the whole run, ``begin``/``end`` per job."""

    def __init__(self, thresholds=None, procfs_root="/proc", sysfs_root="/sys", topology=None, health=None,
                 gds_stats=None, gds_stats_note=None, gds_stats_interval=2.0):
        self.th = watch_thresholds(thresholds)
        self.sysfs_root, self.procfs_root = sysfs_root, procfs_root
        # gds_stats: the resolved binary, or (None and in the note) why cuFile's view is unknown
        self.gds_stats, self.gds_stats_note, self.gds_stats_interval = gds_stats, gds_stats_note, gds_stats_interval
        self.topology = topology or {}
        self.health = health  # measure/devhealth.HealthRun: the GPUs' links as NVML saw them under load
        self.drives = DriveWatch(procfs_root, sysfs_root)

    def begin(self, job):
        self.job, self.stats = job, None
        self.drives.begin(job)
        self.traffic_before = self.traffic_problem = None
        if job_gpu(job) is not None:
            if self.health is None:
                self.traffic_problem = "NVML was not started"
            else:
                self.traffic_before, self.traffic_problem = self.health.traffic_mark()

    def started(self, pgid):
        """The job's benchmark runs as process group ``pgid``: read cuFile's statistics beside it."""
        try:
            if self.gds_stats and job_gpu(self.job) is not None \
                    and int(self.job.get("xfer_type", 0)) in CUFILE_XFER_TYPES:
                self.stats = GdsStatsWatcher(self.gds_stats, self.procfs_root, self.gds_stats_interval)
                self.stats.start(pgid)
        except Exception as exc:  # never in the way of the benchmark
            self.stats, self.gds_stats_note = None, "gds_stats could not start: %s" % exc

    def cufile(self, job):
        """The job's ``watch.cufile`` entry: cuFile's per-GPU placement, or {unknown: why}."""
        if self.stats is not None:
            return self.stats.stop(self.gds_stats_note)
        if int(job.get("xfer_type", 0)) not in CUFILE_XFER_TYPES:
            return {"unknown": "not a cuFile transfer type"}
        return {"unknown": self.gds_stats_note or "gds_stats not found"}

    def end(self, job, record):
        """(watch entry, checks) of the job that just ended; ``record`` is its benchmark record."""
        prefix = "bench: %s: " % job["name"]
        load = self.drives.end()
        names = [d["name"] for d in load.get("drives") or []]
        bdf_of = drive_bdfs(self.topology, self.sysfs_root, names)
        for drive in load.get("drives") or []:
            drive["bdf"] = bdf_of.get(drive["name"])
        watch = {"drives": load.get("drives") or [], "drives_source": load.get("source"),
                 "seconds": load.get("seconds")}
        if "array" in load:
            watch["array"] = load["array"]
        if "unknown" in load:
            watch["drives_unknown"] = load["unknown"]
        checks = [drive_load_check(prefix, load, job.get("io_type", "read"), bdf_of, self.th,
                                   int(job.get("xfer_type", 0)) in BUFFERED_XFER_TYPES)]
        drives = names or list(job.get("members") or [])
        gpu = job_gpu(job)
        if gpu is not None:
            gpus, problem = self.traffic()
            watch["gpus"] = gpus
            if problem:
                watch["gpus_unknown"] = problem
            watch["cufile"] = self.cufile(job)
            checks.append(bounce_check(prefix, gpu, (record or {}).get("bytes"), job.get("io_type", "read"),
                                       gpus, self.topology, drives, self.th, problem, watch["cufile"],
                                       bool(job.get("expect_bounce"))))
        watch["limit"], watch["fraction"] = self.limit(job, record, drives)
        if self.th["path_fraction_min"] is not None:
            checks.append(self.fraction_check(prefix, watch["limit"], watch["fraction"]))
        return watch, checks

    def traffic(self):
        """(every GPU's PCIe bytes during the job, why they are unknown or None)."""
        if self.traffic_before is None:
            return [], self.traffic_problem
        after, problem = self.health.traffic_mark()
        if after is None:
            return [], problem
        return job_traffic(self.traffic_before, after), None

    def limit(self, job, record, drives):
        """(the path's limit, measured / limit) of the job; the fraction None when unknown."""
        load = self.health.gpu_load() if self.health is not None else {}
        limit = path_limit(self.topology, job_gpu(job), drives, load,
                           spec_bytes(job.get("spec"), record))
        measured = (record or {}).get("throughput_gib_s")
        if "unknown" in limit or not isinstance(measured, (int, float)):
            return limit, None
        return limit, round(measured * GIB / limit["bytes_per_s"], 4)

    def fraction_check(self, prefix, limit, fraction):
        """``bench: <job>: path_fraction``: measured / the path's limit against the profile's minimum."""
        if fraction is None:
            return check(prefix + "path_fraction", "SKIP", ">= %g of the path" % self.th["path_fraction_min"],
                         "unknown", "the path's limit is unknown: %s" % limit.get("unknown", "no measured throughput"))
        out = evaluate("path_fraction", [self.th["path_fraction_min"], 0.0, None, "of the path"], fraction, prefix)
        out["detail"] = "; ".join(p for p in (out.get("detail"), "limit %s GB/s (%s)" % (limit["gb_s"], limit["bound"])) if p)
        return out
