# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-drive load around a benchmark job: /proc/diskstats read before and after the job, turned
into what ``iostat -x`` prints (r/s, w/s, rkB/s, wkB/s, r_await, w_await, %util), for the drives
under the job's md array, and the check that every member took its share.

Fields as Documentation/admin-guide/iostats.rst numbers them; sectors are 512 bytes whatever the
device's logical block size (the block layer counts in 512-byte units). Only reads files.
"""
from __future__ import annotations

import os
import time

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.files import UnreadableFile, is_live_root, read_file
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import base_disk, source_disks

SECTOR_BYTES = 512
# after major, minor, name (iostats.rst: fields 1-11, 12-15 since 4.18, 16-17 since 5.5)
FIELDS = ("reads", "reads_merged", "sectors_read", "read_ms", "writes", "writes_merged",
          "sectors_written", "write_ms", "in_flight", "io_ms", "weighted_ms",
          "discards", "discards_merged", "sectors_discarded", "discard_ms", "flushes", "flush_ms")


def parse_diskstats(text):
    """{name: {field: int}} from /proc/diskstats; lines that are not a device's are skipped."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 14 or not all(p.isdigit() for p in parts[3:]):
            continue
        out[parts[2]] = dict(zip(FIELDS, (int(p) for p in parts[3:])))
    return out


def read_diskstats(procfs_root="/proc"):
    """({name: {field: int}}, None) or (None, why it could not be read)."""
    path = os.path.join(procfs_root, "diskstats")
    try:
        text = read_file(path)
    except UnreadableFile as exc:
        return None, str(exc)
    if text is None:
        return None, "%s is absent" % path
    return parse_diskstats(text), None


def _delta(after, before):
    """A counter's growth; the counters are unsigned longs that wrap (32 bits on 32-bit kernels)."""
    diff = after - before
    if diff < 0:
        diff += 1 << (32 if before < (1 << 32) else 64)
    return diff


def io_load(before, after, seconds):
    """One device's load between two diskstats samples, as iostat -x computes it."""
    d = {key: _delta(after.get(key, 0), before.get(key, 0)) for key in FIELDS if key != "in_flight"}
    secs = seconds if seconds and seconds > 0 else None

    def rate(value):
        return round(value / secs, 2) if secs else None

    return {
        "reads": d["reads"], "writes": d["writes"],
        "read_bytes": d["sectors_read"] * SECTOR_BYTES, "write_bytes": d["sectors_written"] * SECTOR_BYTES,
        "r_s": rate(d["reads"]), "w_s": rate(d["writes"]),
        "rkB_s": rate(d["sectors_read"] * SECTOR_BYTES / 1024.0),
        "wkB_s": rate(d["sectors_written"] * SECTOR_BYTES / 1024.0),
        # mean time per request, queue included (iostat's r_await/w_await)
        "r_await_ms": round(d["read_ms"] / float(d["reads"]), 3) if d["reads"] else None,
        "w_await_ms": round(d["write_ms"] / float(d["writes"]), 3) if d["writes"] else None,
        # share of the window with a request in flight; iostat does not cap it either
        "util_pct": round(100.0 * d["io_ms"] / (secs * 1000.0), 2) if secs else None,
    }


def job_drives(sysfs_root="/sys", md=None, members=(), target=None):
    """(disks, source): the whole disks whose diskstats lines carry the job's I/O.

    The md array's members from sysfs (``block/<md>/slaves``, a partition standing for its
    disk), else the members the facts name, else (only when ``target`` is given, on a live root:
    a simulated node's files live on the controller's disks) the disk under the target."""
    md = str(md or "").rsplit("/", 1)[-1]
    if md and os.path.isdir(os.path.join(sysfs_root, "block", md)):
        found = source_disks("/dev/" + md, sysfs_root, {})
        if found:
            return sorted(found), "%s/block/%s/slaves" % (sysfs_root.rstrip("/"), md)
    if members:
        return sorted({base_disk(str(m)) for m in members}), "the array's members (facts)"
    if target and is_live_root(sysfs_root, "/sys"):
        probe = target
        while probe and not os.path.exists(probe):
            probe = os.path.dirname(probe)
        try:
            dev = os.stat(probe).st_dev if probe else 0
        except OSError:
            dev = 0
        found = source_disks("", sysfs_root, {}, "%d:%d" % (os.major(dev), os.minor(dev))) if dev else None
        if found:
            return sorted(found), "the block device under %s" % probe
    return [], None


class DriveWatch(object):
    """diskstats of the job's drives (and the md device itself) before and after one job."""

    def __init__(self, procfs_root="/proc", sysfs_root="/sys"):
        self.procfs_root, self.sysfs_root = procfs_root, sysfs_root

    def begin(self, job):
        # the target's own disk only where the plan asks (a target directory, no array)
        target = (job.get("file") or job.get("target")) if job.get("drives_from_target") else None
        self.drives, self.source = job_drives(self.sysfs_root, job.get("md"), job.get("members") or (), target)
        self.md = str(job.get("md") or "").rsplit("/", 1)[-1] or None
        self.before, self.problem = read_diskstats(self.procfs_root) if self.drives else (None, None)
        if not self.drives:
            self.problem = "no drive known for this job: no md array or members in the facts%s" % (
                ", and no block device under %s" % target if target else "")
        self.started = time.monotonic()

    def end(self):
        """{drives: [{name, ...iostat figures}], array, seconds, source} or {unknown: why}."""
        seconds = time.monotonic() - self.started
        if self.before is None:
            return {"unknown": self.problem}
        after, problem = read_diskstats(self.procfs_root)
        if after is None:
            return {"unknown": problem}
        drives = []
        for name in self.drives:
            if name not in self.before or name not in after:
                drives.append({"name": name, "missing": "not in %s/diskstats" % self.procfs_root})
                continue
            drives.append(dict(io_load(self.before[name], after[name], seconds), name=name))
        out = {"drives": drives, "seconds": round(seconds, 3), "source": self.source}
        if self.md and self.md in self.before and self.md in after:
            out["array"] = dict(io_load(self.before[self.md], after[self.md], seconds), name=self.md)
        return out


# --------------------------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------------------------
def _label(drive, bdf_of):
    bdf = bdf_of.get(drive["name"])
    return "%s (%s)" % (drive["name"], bdf or "PCI address unknown")


def _off(value, peers):
    """How far ``value`` is from its peers' mean, as a share of that mean (None without peers)."""
    peers = [p for p in peers if p is not None]
    if not peers or value is None:
        return None
    mean = sum(peers) / float(len(peers))
    return (value - mean) / mean if mean else (0.0 if not value else float("inf"))


def drive_load_check(prefix, load, io_type, bdf_of, thresholds, buffered=False):
    """``bench: <job>: drive load``: every member took I/O of the job's direction (FAIL when one
    took none), and none is skewed from its peers by more than the profile's tolerances on bytes
    (a mis-grouped member) or mean service time (a slow member): WARN or FAIL per profile. A
    ``buffered`` job (through the page cache) may be served without the drives: an idle member is
    no failure there, and the members that did take I/O are compared."""
    name = prefix + "drive load"
    tol_bytes, tol_await = thresholds["drive_skew_tolerance"], thresholds["drive_await_tolerance"]
    expected = "every member moves data, within %d%% of its peers' bytes and %d%% of their service time" % (
        round(tol_bytes * 100), round(tol_await * 100))
    if buffered:
        expected = "a buffered job: the members that move data are within %d%% of their peers' bytes and %d%% " \
                   "of their service time" % (round(tol_bytes * 100), round(tol_await * 100))
    if "unknown" in load:
        return check(name, "SKIP", expected, "unknown", load["unknown"])
    write = io_type in ("write", "randwrite")
    key, await_key = ("write_bytes", "w_await_ms") if write else ("read_bytes", "r_await_ms")
    drives = load["drives"]
    measured = [d for d in drives if "missing" not in d]
    missing = ["%s %s" % (_label(d, bdf_of), d["missing"]) for d in drives if "missing" in d]
    idle = [d for d in measured if not d[key]]
    fails, skewed, notes = [], [], []
    if idle and buffered:
        notes.append("the page cache served the job without %s" % ", ".join(_label(d, bdf_of) for d in idle))
    elif idle:
        fails.append("%s took no %s" % (", ".join(_label(d, bdf_of) for d in idle), "writes" if write else "reads"))
    busy = [d for d in measured if d not in idle]  # an idle member already FAILs: not a peer
    for drive in busy:
        others = [d for d in busy if d is not drive]
        off = _off(drive[key], [d[key] for d in others])
        if off is not None and abs(off) > tol_bytes:
            skewed.append("%s moved %d%% %s bytes than its peers" % (
                _label(drive, bdf_of), round(abs(off) * 100), "more" if off > 0 else "fewer"))
        slow = _off(drive[await_key], [d[await_key] for d in others])
        if slow is not None and slow > tol_await:
            skewed.append("%s took %d%% longer per request (%s ms against %s ms)" % (
                _label(drive, bdf_of), round(slow * 100), drive[await_key],
                "/".join(str(d[await_key]) for d in others)))
    figures = "; ".join("%s: %.1f MB %s, %s %s, await %s ms, util %s%%" % (
        _label(d, bdf_of), d[key] / 1e6, "written" if write else "read", d["w_s"] if write else d["r_s"],
        "w/s" if write else "r/s", d[await_key], d["util_pct"]) for d in measured)
    notes.append(figures)
    if missing:
        notes.append("unknown: " + "; ".join(missing))
    if fails:
        verdict = "FAIL"
    elif skewed:
        verdict = thresholds["drive_skew_verdict"]
    elif measured:
        verdict = "PASS"
    else:
        verdict = "SKIP"
    moved = len(busy)
    if buffered and measured and not moved:
        actual = "no drive I/O: the page cache served the job"
    else:
        actual = "; ".join(fails + skewed) or (
            "%d drives balanced" % moved if moved > 1 else "1 drive moved data" if moved else "unknown")
    return check(name, verdict, expected, actual, "; ".join(n for n in notes if n) or None)
