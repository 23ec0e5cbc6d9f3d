# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-drive load around a benchmark job: /proc/diskstats read before and after the job, turned
into what ``iostat -x`` prints (r/s, w/s, rkB/s, wkB/s, r_await, w_await, %util), for the drives
under the job's md array, and the check that every member took its share.

Fields as Documentation/admin-guide/iostats.rst numbers them; sectors are 512 bytes whatever the
device's logical block size (the block layer counts in 512-byte units). Only reads files.

The counters are read strictly (core/numbers.py: ASCII digits, below 2**64). A device whose line
is garbled, that is missing from either read, or one of whose counters went back between them (the
device was removed and added again: its counters restarted) is unknown with the reason, never
dropped and never taken for a wrap: the kernels that run GPUs are 64-bit, and a 64-bit counter of
I/O does not wrap.
"""
from __future__ import annotations

import math
import os
import time

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.files import UnreadableFile, is_live_root, read_file
from ansible_collections.gds.commission.plugins.module_utils.core.numbers import BadNumber, counter, figure, is_figure
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import base_disk, source_disks
from ansible_collections.gds.commission.plugins.module_utils.measure.vocab import io_is_write

SECTOR_BYTES = 512
# after major, minor, name (iostats.rst: fields 1-11, 12-15 since 4.18, 16-17 since 5.5)
FIELDS = ("reads", "reads_merged", "sectors_read", "read_ms", "writes", "writes_merged",
          "sectors_written", "write_ms", "in_flight", "io_ms", "weighted_ms",
          "discards", "discards_merged", "sectors_discarded", "discard_ms", "flushes", "flush_ms")


def parse_diskstats(text, garbled=None):
    """{name: {field: int}} from /proc/diskstats. A line that names a device (major, minor, name)
    but whose counters cannot be read, or a device named on two lines, goes to ``garbled``
    ({name: why}) when given; other lines are skipped."""
    out, first_line = {}, {}
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if len(parts) < 3:
            continue
        name = parts[2]
        try:
            counter(parts[0], 32), counter(parts[1], 32)
        except BadNumber:
            continue  # no major:minor: not a device's line
        if name in first_line:  # the kernel prints a device once: which line is it, is unknown
            out.pop(name, None)
            if garbled is not None:
                garbled[name] = "lines %d and %d of diskstats both name %s" % (first_line[name], number, name)
            continue
        first_line[name] = number
        try:
            if len(parts) < 14:
                raise BadNumber("%d counters, iostats.rst has at least 11" % (len(parts) - 3))
            out[name] = dict(zip(FIELDS, (counter(p) for p in parts[3:3 + len(FIELDS)])))
        except BadNumber as exc:
            out.pop(name, None)
            if garbled is not None:
                garbled[name] = "line %d of diskstats is garbled: %s" % (number, exc)
    return out


def read_diskstats(procfs_root="/proc"):
    """({name: {field: int}}, {name: why its line is garbled}, None) or (None, None, why it could
    not be read)."""
    path = os.path.join(procfs_root, "diskstats")
    try:
        text = read_file(path)
    except UnreadableFile as exc:
        return None, None, str(exc)
    if text is None:
        return None, None, "%s is absent" % path
    garbled = {}
    return parse_diskstats(text, garbled), garbled, None


class CounterWentBack(ValueError):
    """A diskstats counter was lower after the job than before: the device's counters restarted."""


def io_load(before, after, seconds):
    """One device's load between two diskstats samples, as iostat -x computes it; CounterWentBack
    when a counter is lower after than before."""
    d = {}
    for key in FIELDS:
        if key == "in_flight":
            continue
        old, new = before.get(key, 0), after.get(key, 0)
        if new < old:
            raise CounterWentBack("counter %s went back (%d before the job, %d after): the device's counters "
                                  "restarted (removed and added again?)" % (key, old, new))
        d[key] = new - old
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
    disk), else the members the facts name, else (``target`` given) the disk under the target,
    looked up in ``sysfs_root``: the caller passes the sysfs of the machine that holds the target."""
    md = str(md or "").rsplit("/", 1)[-1]
    if md and os.path.isdir(os.path.join(sysfs_root, "block", md)):
        found = source_disks("/dev/" + md, sysfs_root, {})
        if found:
            return sorted(found), "%s/block/%s/slaves" % (sysfs_root.rstrip("/"), md)
    if members:
        return sorted({base_disk(str(m)) for m in members}), "the array's members (facts)"
    if target:
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
        self.procfs, self.sysfs = procfs_root, sysfs_root  # where the current job's drives are read

    def begin(self, job):
        # the target's own disk only where the plan asks (a target directory, no array). That disk
        # is this machine's, whatever roots the node's facts come from: a simulated node's jobs run
        # here, on the controller, and its tree holds no diskstats of theirs
        target = (job.get("file") or job.get("target")) if job.get("drives_from_target") else None
        live = is_live_root(self.sysfs_root, "/sys")
        self.sysfs, self.procfs = ("/sys", "/proc") if target and not live else (self.sysfs_root, self.procfs_root)
        self.drives, self.source = job_drives(self.sysfs, job.get("md"), job.get("members") or (), target)
        if target and self.drives and not live:
            self.source += " on the machine that ran the job (a simulated node's jobs run there)"
        self.md = str(job.get("md") or "").rsplit("/", 1)[-1] or None
        self.garbled = {}
        self.before, self.garbled, self.problem = read_diskstats(self.procfs) if self.drives else (None, {}, None)
        if not self.drives:
            self.problem = "no drive known for this job: no md array or members in the facts%s" % (
                ", and no block device under %s" % target if target else "")
        self.started = time.monotonic()

    def end(self, io_seconds=None):
        """{drives: [{name, ...iostat figures}], array, seconds, source} or {unknown: why}.

        ``io_seconds``: the benchmark's own timed I/O window (its record's ``elapsed_s``). Its
        processes start and stop outside it (32 workers took ~43 s of a job's window on four
        H200s): the rates and utilisation are then over the I/O window, and ``window_seconds``
        and ``outside_io_seconds`` say what was left out. The bytes are the whole window's. A
        drive busy for longer than the I/O window (it served I/O outside it: 21.9 s busy in a
        20 s read on the lab's H200) makes it the whole window: no utilisation over 100 %."""
        window = time.monotonic() - self.started
        seconds, outside = window, None
        if is_figure(io_seconds) and 0 < io_seconds < window:
            seconds, outside = io_seconds, window - io_seconds
        if self.before is None:
            return {"unknown": self.problem}
        after, garbled, problem = read_diskstats(self.procfs)
        if after is None:
            return {"unknown": problem}
        drives = [self._load(name, after, garbled, seconds) for name in self.drives]
        if outside is not None and any((d.get("util_pct") or 0) > 100.0 for d in drives):
            seconds, outside = window, None
            drives = [self._load(name, after, garbled, seconds) for name in self.drives]
        out = {"drives": drives, "seconds": round(seconds, 3), "source": self.source}
        if outside is not None:
            out.update(window_seconds=round(window, 3), outside_io_seconds=round(outside, 3))
        if self.md:
            array = self._load(self.md, after, garbled, seconds)
            if any(self.md in d for d in (self.before, after, self.garbled or {}, garbled)):
                out["array"] = array
        return out

    def _load(self, name, after, garbled, seconds):
        """{name, ...figures} of one device, or {name, missing: why it is unknown}."""
        where = "%s/diskstats" % self.procfs
        for when, stats, bad in (("before", self.before, self.garbled or {}), ("after", after, garbled)):
            if name in bad:
                return {"name": name, "missing": "%s the job: %s" % (when, bad[name])}
            if name not in stats:
                return {"name": name, "missing": "not in %s %s the job" % (where, when)}
        try:
            return dict(io_load(self.before[name], after[name], seconds), name=name)
        except CounterWentBack as exc:
            return {"name": name, "missing": str(exc)}


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


def _percent(share):
    """A share as a check says it: "246%", or "far" where the peers' mean is 0."""
    return "%d%%" % round(share * 100) if math.isfinite(share) else "far"


def _members(drives, key, await_key, bdf_of):
    """(read, unknown): the members read, each record with ``bytes`` (of the job's direction) and
    ``wait`` (its service time, None where it moved nothing), and "<member> unknown: why" for each
    member that was not read (``missing``) or whose bytes, or service time while it moved data,
    are no figures."""
    read, unknown = [], []
    for number, drive in enumerate(drives):
        if not isinstance(drive, dict) or not isinstance(drive.get("name"), str):
            unknown.append("member %d unknown: no drive record (%r)" % (number, drive))
            continue
        if "missing" in drive:
            unknown.append("%s unknown: %s" % (_label(drive, bdf_of), drive["missing"]))
            continue
        moved, wait = figure(drive.get(key)), figure(drive.get(await_key))
        if moved is None or (moved and wait is None):
            unknown.append("%s unknown: %s %r, %s %r"
                           % (_label(drive, bdf_of), key, drive.get(key), await_key, drive.get(await_key)))
            continue
        read.append(dict(drive, bytes=moved, wait=wait if moved else None))
    return read, unknown


# A direct read's bytes come from its drives: with less than this share read from them, the rest
# came from memory (cuFile's compat batch path reads through the page cache: bench/RESULTS.md 14.4)
DRIVES_SERVED_MIN = 0.9
# ... and with more than this multiple of it read from them, something else read those drives in
# the window (or the job's bytes are wrong): their figures are not the job's alone
DRIVES_SERVED_MAX = 2.0


def _served_short(busy, missing, job_bytes):
    """Why a direct read's figure is not its drives' (their reads under DRIVES_SERVED_MIN of the
    bytes the job reported), or None. Only a shortfall of the drives that were read is judged: with
    a member unread, a sum that already reaches the share is enough, a short one is not judged."""
    read = sum(d["bytes"] for d in busy)
    if not job_bytes or read >= DRIVES_SERVED_MIN * job_bytes or missing:
        return None
    return "%s: the rest came from memory (the page cache), so the figure is not the drives'" % _served(read, job_bytes)


def _served_over(busy, job_bytes):
    """Why the drives' figures are not the direct read's alone (they read over DRIVES_SERVED_MAX
    times the bytes the job reported), or None."""
    read = sum(d["bytes"] for d in busy)
    if not job_bytes or read <= DRIVES_SERVED_MAX * job_bytes:
        return None
    return "%s: other I/O read these drives in the job's window, so their figures are not the job's alone" \
        % _served(read, job_bytes)


def _served(read, job_bytes):
    """What the drives read against what the job reported, as the served checks say it."""
    if not job_bytes:
        return "the drives read %.1f MB of the unknown bytes the job reported" % (read / 1e6)
    share = _percent(read / job_bytes)
    return "the drives read %.1f MB of the %.1f MB the job reported (%s)" % (read / 1e6, job_bytes / 1e6, share)


def _drive_records(name, expected, load):
    """(the load record's drives, None), or (None, the check's SKIP saying why it holds none)."""
    load = load if isinstance(load, dict) else {"unknown": "no load record: %r" % (load,)}
    if "unknown" in load:
        return None, check(name, "SKIP", expected, "unknown", load["unknown"])
    drives = load.get("drives")
    if not isinstance(drives, list):
        return None, check(name, "SKIP", expected, "unknown", "the load record holds no list of drives: %r" % (drives,))
    return drives, None


def drives_served_check(prefix, load, io_type, bdf_of, buffered=False, job_bytes=None):
    """``bench: <job>: drives served``: a direct read over several arrays at once (every GPU at once;
    each array's balance is its own ``<array> drive load``, without the job's bytes, which the record
    holds only for the whole job): the bytes all its drives read against the bytes the job reported,
    judged as drive_load_check judges one array's (under DRIVES_SERVED_MIN: FAIL, memory served the
    rest). None where nothing is judged: a write, a buffered job, a record without bytes."""
    if job_bytes is None or buffered or io_is_write(io_type):
        return None
    name = prefix + "drives served"
    expected = "at least %d%% of the bytes the job read come from its drives" % round(DRIVES_SERVED_MIN * 100)
    drives, skipped = _drive_records(name, expected, load)
    if skipped:
        return skipped
    measured, missing = _members(drives, "read_bytes", "r_await_ms", bdf_of)
    if not measured:
        return check(name, "SKIP", expected, "unknown", "; ".join(missing) or "the job has no drive")
    reported = figure(job_bytes)
    read = sum(d["bytes"] for d in measured)
    short = _served_short(measured, missing, reported)
    if short:
        verdict, actual = "FAIL", short
    else:
        verdict, actual = "WARN" if missing else "PASS", _served(read, reported)  # an unread drive might hold the rest
    if missing:
        actual = "%d of %d drives unknown: %s; %s" % (len(missing), len(drives), "; ".join(missing), actual)
    return check(name, verdict, expected, actual, inputs={
        "bytes": [d["bytes"] for d in measured] + [None] * len(missing), "the bytes the job reported": reported})


def _skewed(busy, tol_bytes, tol_await, bdf_of):
    """Each member that moved data and is off its peers' bytes or service time by more than the
    tolerances, said."""
    out = []
    for drive in busy:
        others = [d for d in busy if d is not drive]
        off = _off(drive["bytes"], [d["bytes"] for d in others])
        if off is not None and abs(off) > tol_bytes:
            out.append("%s moved %s %s bytes than its peers" % (
                _label(drive, bdf_of), _percent(abs(off)), "more" if off > 0 else "fewer"))
        slow = _off(drive["wait"], [d["wait"] for d in others])
        if slow is not None and slow > tol_await:
            out.append("%s took %s longer per request (%s ms against %s ms)" % (
                _label(drive, bdf_of), _percent(slow), drive["wait"], "/".join(str(d["wait"]) for d in others)))
    return out


def drive_load_check(prefix, load, io_type, bdf_of, thresholds, buffered=False, job_bytes=None, shared_disk=False):
    """``bench: <job>: drive load``: every member took I/O of the job's direction (FAIL when one
    took none), and none is skewed from its peers by more than the profile's tolerances on bytes
    (a mis-grouped member) or mean service time (a slow member): WARN or FAIL per profile. A
    ``buffered`` job (through the page cache) may be served without the drives: an idle member is
    no failure there, and the members that did take I/O are compared. A direct read whose
    ``job_bytes`` (what the benchmark reported) the members did not read, DRIVES_SERVED_MIN of them
    at least, measured memory: FAIL. A member that could not be read (garbled, vanished, counters
    restarted, a figure that is no number) is named and keeps the check from PASS (WARN); with no
    member read it is SKIP. Members that read over DRIVES_SERVED_MAX times the job's bytes carried
    other I/O: WARN, unless ``shared_disk`` (the disk under a target directory, which the machine
    shares with everything: a simulated node's jobs on the controller's disk), where it is said."""
    name = prefix + "drive load"
    tol_bytes, tol_await = thresholds["drive_skew_tolerance"], thresholds["drive_await_tolerance"]
    expected = "every member moves data, within %d%% of its peers' bytes and %d%% of their service time" % (
        round(tol_bytes * 100), round(tol_await * 100))
    if buffered:
        expected = "a buffered job: the members that move data are within %d%% of their peers' bytes and %d%% " \
                   "of their service time" % (round(tol_bytes * 100), round(tol_await * 100))
    judge_served = job_bytes is not None and not buffered and not io_is_write(io_type)
    if judge_served:
        expected += ", and at least %d%% of the bytes the job read come from them" % round(DRIVES_SERVED_MIN * 100)
    drives, skipped = _drive_records(name, expected, load)
    if skipped:
        return skipped
    write = io_is_write(io_type)
    key, await_key = ("write_bytes", "w_await_ms") if write else ("read_bytes", "r_await_ms")
    measured, missing = _members(drives, key, await_key, bdf_of)
    idle = [d for d in measured if not d["bytes"]]
    fails, skewed, notes = [], [], []
    if idle and buffered:
        notes.append("the page cache served the job without %s" % ", ".join(_label(d, bdf_of) for d in idle))
    elif idle:
        fails.append("%s took no %s" % (", ".join(_label(d, bdf_of) for d in idle), "writes" if write else "reads"))
    busy = [d for d in measured if d not in idle]  # an idle member already FAILs: not a peer
    skewed += _skewed(busy, tol_bytes, tol_await, bdf_of)
    short = _served_short(busy, missing, figure(job_bytes)) if judge_served and measured else None
    if short:
        fails.append(short)
    over = _served_over(busy, figure(job_bytes)) if judge_served and measured else None
    if over and shared_disk:
        notes.append(over + " (the disk under the target directory is shared)")
    elif over:
        skewed.append(over)
    notes.append("; ".join("%s: %.1f MB %s, %s %s, await %s ms, util %s%%" % (
        _label(d, bdf_of), d["bytes"] / 1e6, "written" if write else "read", d.get("w_s" if write else "r_s"),
        "w/s" if write else "r/s", d.get(await_key), d.get("util_pct")) for d in measured))
    verdict = ("FAIL" if fails else thresholds["drive_skew_verdict"] if skewed
               else "WARN" if measured and missing  # an unread member might be the idle or slow one
               else "PASS" if measured else "SKIP")
    moved = len(busy)
    if not measured:
        actual = "unknown"
    elif buffered and not moved:
        actual = "no drive I/O: the page cache served the job"
    else:
        actual = "; ".join(fails + skewed) or (
            "%d drives balanced" % moved if moved > 1 else "1 drive moved data" if moved else "unknown")
    if missing and measured:
        actual = "%d of %d members unknown: %s; of the others: %s" % (len(missing), len(drives), "; ".join(missing), actual)
    elif missing:
        notes.append("; ".join(missing))
    # judged: every member's bytes, and the service time of each that moved data
    inputs = {"bytes": [d["bytes"] for d in measured] + [None] * len(missing),
              "service times": [d["wait"] for d in busy]}
    if judge_served:
        inputs["the bytes the job reported"] = figure(job_bytes)
    return check(name, verdict, expected, actual, "; ".join(n for n in notes if n) or None, inputs=inputs)
