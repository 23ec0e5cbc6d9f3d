# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Watch the bytes of each benchmark job, as the GDS guide does with iostat, nvidia-smi dmon,
dcgmi dmon and gds_stats: the load of every drive of the job's array (measure/diskload.py), the PCIe
traffic of every GPU (measure/pcie_traffic.py, sampled by measure/devhealth.py's NvmlSampler), cuFile's own
per-GPU placement (measure/cufile_stats.py) and the limit of the path (measure/pathlimit.py).

``JobWatch.begin(job)`` right before a job and ``end(job, record)`` right after it: nothing runs
inside the benchmark's process, and what cannot be read is "unknown" with the reason, never a
failure. ``end`` returns the job's ``watch`` entry and its checks. The watch is outside the job's
fate: ``begin``, ``started`` and ``end`` never raise; each part (drives, GPU traffic, cuFile, the
path's limit) that fails is unknown with the error as its reason, and its check SKIP.
"""
from __future__ import annotations

import os

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check, non_negative_number, profile_thresholds
from ansible_collections.gds.commission.plugins.module_utils.core.numbers import figure, is_figure
from ansible_collections.gds.commission.plugins.module_utils.measure.cufile_stats import GdsStatsWatcher, stats_level_note
from ansible_collections.gds.commission.plugins.module_utils.measure.devhealth import find_cli
from ansible_collections.gds.commission.plugins.module_utils.measure.concurrency import concurrent_limit, parts_of
from ansible_collections.gds.commission.plugins.module_utils.measure.diskload import DriveWatch, drive_load_check, drives_served_check
from ansible_collections.gds.commission.plugins.module_utils.measure.pathlimit import GIB, path_limit, spec_bytes
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import pci_function_in_path
from ansible_collections.gds.commission.plugins.module_utils.measure.pcie_traffic import bounce_check, job_traffic
from ansible_collections.gds.commission.plugins.module_utils.measure.thresholds import evaluate
# by gdsbench's flags: data lands in GPU memory (the path ends at the GPU); through libcufile
# (gds_stats has its statistics); buffered (the page cache may serve it all)
from ansible_collections.gds.commission.plugins.module_utils.measure.vocab import (
    BUFFERED_XFER_TYPES, CUFILE_XFER_TYPES, GPU_XFER_TYPES, io_is_write,
)

OPTION_VERDICTS = ("WARN", "FAIL")  # what a *_verdict threshold may name
DEFAULT_THRESHOLDS = {
    "drive_skew_tolerance": 0.25,   # a member's bytes off its peers' mean by more than this share
    "drive_await_tolerance": 1.0,   # a member's mean service time above its peers' by more than this share
    "drive_skew_verdict": "WARN",
    "path_fraction_min": None,      # measured / path limit below this FAILs (within 5 %: WARN); null: off
    "ceiling_fraction_min": None,   # measured / the same drives read into host memory below this FAILs; null: off
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
    """{disk: PCI address}: the topology's NVMe drives and other disks by name, else the nearest
    PCI function above the disk in sysfs (a virtio or SCSI disk); None where neither knows it."""
    known = {d.get("name"): d.get("bdf") for key in ("nvme", "disks") for d in (topology or {}).get(key) or []
             if isinstance(d, dict)}
    out = {}
    for name in names:
        out[name] = known.get(name) or pci_function_in_path(os.path.realpath(os.path.join(sysfs_root, "block", name)))
    return out


def job_gpu(job):
    """The GPU the job's data lands in (an int), or None for a CPU transfer type."""
    if job.get("gpu") is None or int(job.get("xfer_type", 0)) not in GPU_XFER_TYPES:
        return None
    return int(job["gpu"])


def job_gpus(job):
    """The GPUs of every GPU at once (its sub-jobs' GPUs, a GPU transfer type), else []."""
    if not job.get("jobs") or int(job.get("xfer_type", 0)) not in GPU_XFER_TYPES:
        return []
    return sorted({int(part["gpu"]) for part in parts_of(job) if part["gpu"] is not None})


def watches_gpus(jobs):
    """Whether any job that will run has a GPU: then every GPU's PCIe traffic is followed."""
    return any(not j.get("skip") and (job_gpu(j) is not None or job_gpus(j)) for j in jobs or [])


def gpu_shares(gpus, job_gpus_, job_bytes, io_type):
    """Each GPU of every GPU at once with the bytes it carried in the job's direction (received
    for a read, sent for a write) and their share of the job's bytes: [{index, bytes, share}], a
    GPU without figures with its ``unknown``."""
    key = "tx_bytes" if io_is_write(io_type) else "rx_bytes"
    by_index = {g.get("index"): g for g in gpus if isinstance(g, dict)}
    out = []
    for index in job_gpus_:
        entry = by_index.get(index) or {"unknown": "NVML gave no figures for this GPU"}
        moved = entry.get(key)
        if entry.get("unknown") or not is_figure(moved):
            out.append({"index": index, "bytes": None, "share": None, "unknown": entry.get("unknown") or "no %s" % key})
            continue
        out.append({"index": index, "bytes": moved,
                    "share": round(moved / float(job_bytes), 3) if is_figure(job_bytes) and job_bytes > 0 else None})
    return out


def gds_stats_tool(name, cufile_config=None):
    """(gds_stats binary or None, a note on why cuFile's statistics may be unknown): ``name`` as a
    path or a name in PATH, else gds_stats in PATH; the note reads cufile.json's stats level."""
    if not name:
        return None, "gds_stats not given"
    binary = find_cli(name) or find_cli("gds_stats")
    if binary is None:
        return None, "gds_stats not found (%s)" % name
    return binary, stats_level_note(cufile_config or "/etc/cufile.json")


def failed(exc):
    """The reason a part of the watch gives when it broke."""
    return "the watch failed: %s: %s" % (exc.__class__.__name__, exc)


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
        self.job, self.stats, self.broken = None, None, {}
        self.traffic_before = self.traffic_problem = None

    def begin(self, job):
        """Read the drives and mark every GPU's traffic right before ``job``; never raises."""
        self.abandon()
        self.job, self.stats, self.broken = job, None, {}
        self.traffic_before = self.traffic_problem = None
        try:
            self.drives.begin(job)
        except Exception as exc:
            self.broken["drives"] = failed(exc)
        try:
            if job_gpu(job) is not None or job_gpus(job):
                if self.health is None:
                    self.traffic_problem = "NVML was not started"
                else:
                    self.traffic_before, self.traffic_problem = self.health.traffic_mark()
        except Exception as exc:
            self.traffic_before, self.traffic_problem = None, failed(exc)

    def started(self, pgid):
        """The job's benchmark runs as process group ``pgid``: read cuFile's statistics beside it."""
        try:
            if self.gds_stats and job_gpu(self.job) is not None \
                    and int(self.job.get("xfer_type", 0)) in CUFILE_XFER_TYPES:
                self.stats = GdsStatsWatcher(self.gds_stats, self.procfs_root, self.gds_stats_interval)
                self.stats.start(pgid)
        except Exception as exc:  # never in the way of the benchmark
            self.stats, self.broken["cufile"] = None, "gds_stats could not start: %s" % exc

    def abandon(self):
        """A job that is not watched to its end (it broke): its gds_stats thread stops."""
        if self.stats is not None:
            try:
                self.stats.stop()
            except Exception:
                pass
            self.stats = None

    def cufile(self, job):
        """The job's ``watch.cufile`` entry: cuFile's per-GPU placement, or {unknown: why}."""
        if self.broken.get("cufile"):
            return {"unknown": self.broken["cufile"]}
        if self.stats is not None:
            stats, self.stats = self.stats, None
            return stats.stop(self.gds_stats_note)
        if int(job.get("xfer_type", 0)) not in CUFILE_XFER_TYPES:
            return {"unknown": "not a cuFile transfer type"}
        return {"unknown": self.gds_stats_note or "gds_stats not found"}

    def end(self, job, record):
        """(watch entry, checks) of the job that just ended; ``record`` is its benchmark record.
        Never raises: a part that breaks is unknown with the error, its check SKIP."""
        prefix = "bench: %s: " % job.get("name")
        watch, checks = {}, []
        for part in (self._drives_part, self._gpu_part, self._limit_part):
            try:
                part(prefix, job, record, watch, checks)
            except Exception as exc:
                self._broken_part(part, prefix, job, watch, checks, failed(exc))
        self.abandon()
        return watch, checks

    def _broken_part(self, part, prefix, job, watch, checks, why):
        """What a part that raised leaves: its figures unknown with ``why``, its check SKIP."""
        names = {self._drives_part: ("drives_unknown", "drive load"), self._gpu_part: ("gpus_unknown", "bounce"),
                 self._limit_part: ("limit", "path_fraction")}
        key, check_name = names[part]
        try:
            cpu_job = job_gpu(job) is None
        except (TypeError, ValueError):
            cpu_job = False  # a GPU that is no number: the bounce check says why it is unknown
        if part == self._gpu_part and cpu_job:
            return
        if part == self._limit_part:
            watch["limit"], watch["fraction"] = {"unknown": why}, None
            if self.th["path_fraction_min"] is None:
                return
        else:
            watch[key] = why
        checks[:] = [c for c in checks if c.get("name") != prefix + check_name]
        checks.append(check(prefix + check_name, "SKIP", None, "unknown", why))

    def _drives_part(self, prefix, job, record, watch, checks):
        # the drives' rates over the benchmark's own timed I/O window, not the processes' start-up
        load = {"unknown": self.broken["drives"]} if self.broken.get("drives") else \
            self.drives.end((record or {}).get("elapsed_s"))
        names = [d["name"] for d in load.get("drives") or []]
        # the disks of another machine than the node's facts (a simulated node's jobs) are found
        # in that machine's sysfs, never by name in the node's topology
        here = getattr(self.drives, "sysfs", self.sysfs_root)
        bdf_of = drive_bdfs(self.topology if here == self.sysfs_root else {}, here, names)
        for drive in load.get("drives") or []:
            drive["bdf"] = bdf_of.get(drive["name"])
        watch.update({"drives": load.get("drives") or [], "drives_source": load.get("source"),
                      "seconds": load.get("seconds")})
        if load.get("window_seconds") is not None:
            watch.update(window_seconds=load["window_seconds"], outside_io_seconds=load["outside_io_seconds"])
        if "array" in load:
            watch["array"] = load["array"]
        if "unknown" in load:
            watch["drives_unknown"] = load["unknown"]
        buffered = int(job.get("xfer_type", 0)) in BUFFERED_XFER_TYPES
        groups = job.get("drive_groups") if isinstance(job.get("drive_groups"), dict) and "unknown" not in load else None
        if not groups:
            checks.append(drive_load_check(prefix, load, job.get("io_type", "read"), bdf_of, self.th, buffered,
                                           job_bytes=(record or {}).get("bytes"),
                                           shared_disk=bool(job.get("drives_from_target"))))
            return
        # every GPU at once over several arrays: arrays serve different numbers of GPUs, so the
        # members are compared with their own array's only
        for label, names in sorted(groups.items()):
            part = dict(load, drives=[d for d in load.get("drives") or [] if d.get("name") in (names or [])])
            checks.append(drive_load_check("%s%s " % (prefix, label), part, job.get("io_type", "read"), bdf_of,
                                           self.th, buffered))
        # the record's bytes are the whole job's: what every array's drives read, together, against them
        served = drives_served_check(prefix, load, job.get("io_type", "read"), bdf_of, buffered, (record or {}).get("bytes"))
        if served:
            checks.append(served)

    def _job_drives(self, job, watch):
        return [d["name"] for d in watch.get("drives") or []] or list(job.get("members") or [])

    def _gpu_part(self, prefix, job, record, watch, checks):
        gpu = job_gpu(job)
        if gpu is None and job_gpus(job):  # every GPU at once: what each GPU carried of the job
            gpus, problem = self.traffic()
            watch["gpus"] = gpus
            if problem:
                watch["gpus_unknown"] = problem
            watch["gpu_shares"] = gpu_shares(gpus, job_gpus(job), (record or {}).get("bytes"), job.get("io_type", "read"))
            return
        if gpu is None:
            return
        gpus, problem = self.traffic()
        watch["gpus"] = gpus
        if problem:
            watch["gpus_unknown"] = problem
        watch["cufile"] = self.cufile(job)
        checks.append(bounce_check(prefix, gpu, (record or {}).get("bytes"), job.get("io_type", "read"),
                                   gpus, self.topology, self._job_drives(job, watch), self.th, problem,
                                   watch["cufile"], bool(job.get("expect_bounce"))))

    def _limit_part(self, prefix, job, record, watch, checks):
        watch["limit"], watch["fraction"] = self.limit(job, record, self._job_drives(job, watch))
        if self.th["path_fraction_min"] is not None:
            checks.append(self.fraction_check(prefix, watch["limit"], watch["fraction"]))

    def traffic(self):
        """(every GPU's PCIe bytes during the job, why they are unknown or incomplete, or None)."""
        if self.traffic_before is None:
            return [], self.traffic_problem
        after, problem = self.health.traffic_mark()
        if after is None:
            return [], problem
        return job_traffic(self.traffic_before, after), problem or self.traffic_problem

    def limit(self, job, record, drives):
        """(the path's limit, measured / limit) of the job; the fraction None when unknown."""
        load = self.health.gpu_load() if self.health is not None else {}
        if getattr(self.drives, "sysfs", self.sysfs_root) != self.sysfs_root:
            # the job's disk is another machine's than the node's facts (DriveWatch.begin)
            return {"unknown": "a simulated node: the job ran on this machine's disk, not on the node's "
                               "PCIe path (the report draws the node's links from its fixture)"}, None
        if job.get("jobs"):  # every GPU at once: the links their paths share (measure/concurrency.py)
            limit = concurrent_limit(self.topology, parts_of(job, drives), load)
        else:
            limit = path_limit(self.topology, job_gpu(job), drives, load, spec_bytes(job.get("spec"), record))
        measured = figure((record or {}).get("throughput_gib_s"))
        if "unknown" in limit or measured is None:
            return limit, None
        return limit, round(measured * GIB / limit["bytes_per_s"], 4)

    def fraction_check(self, prefix, limit, fraction):
        """``bench: <job>: path_fraction``: measured / the path's limit against the profile's minimum.
        Above 1 the job moved more than the path carries: the limit or the measurement is wrong."""
        expected = ">= %g of the path" % self.th["path_fraction_min"]
        limit = limit if isinstance(limit, dict) else {"unknown": "no limit record: %r" % (limit,)}
        if fraction is None:
            return check(prefix + "path_fraction", "SKIP", expected, "unknown",
                         "the path's limit is unknown: %s" % limit.get("unknown", "no measured throughput"))
        if figure(fraction) is None:
            return check(prefix + "path_fraction", "SKIP", expected, "unknown",
                         "measured / the path's limit is %r, no figure to judge" % (fraction,))
        where = "limit %s GB/s (%s)" % (limit.get("gb_s", "unknown"), limit.get("bound", "bound unknown"))
        if fraction > 1:
            rate = figure(limit.get("bytes_per_s"))
            measured = "%.3f GB/s" % (fraction * rate / 1e9) if rate is not None else "%g of it" % fraction
            return check(prefix + "path_fraction", "WARN", expected, fraction,
                         "measured %s, above the path's %s: the limit or the measurement is wrong" % (measured, where))
        out = evaluate("path_fraction", [self.th["path_fraction_min"], 0.0, None, "of the path"], fraction, prefix)
        out["detail"] = "; ".join(p for p in (out.get("detail"), where) if p)
        return out
