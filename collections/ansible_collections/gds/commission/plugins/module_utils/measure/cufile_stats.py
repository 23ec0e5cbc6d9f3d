# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cuFile's own view of where a job's data went: the per-GPU sections of its level-3 statistics
as ``gds_stats -p PID -l 3`` prints them (PER_GPU STATS: reads and writes per GPU; PER_GPU POOL
BUFFER STATS: the GPU whose bounce buffers cuFile used), read from the benchmark's processes
while the job runs. This names the buffer GPU even where NVML has no PCIe counters.

gds_stats reads the statistics of a live process only, and only when cufile.json's
``profile.cufile_stats`` is 3 (the GDS benchmarking guide, 3.3.2); whatever stops it is
"unknown" with the reason. Its numbers are read strictly (core/numbers.py): output with a number
that is none (a Unicode digit, 400 digits, "nan"), a GPU index no node has, or a per-GPU line cut
short is unreadable, named, and never a figure.
"""
from __future__ import annotations

import os
import re
import threading
import time

from ansible_collections.gds.commission.plugins.module_utils.tune.cufile import CufileError, read_config
from ansible_collections.gds.commission.plugins.module_utils.core.files import listdir, read_text
from ansible_collections.gds.commission.plugins.module_utils.core.numbers import BadNumber, counter, decimal
from ansible_collections.gds.commission.plugins.module_utils.core.proc import run as proc_run

MIB = 1 << 20
MAX_GPU_INDEX = 1023  # more GPUs than any node has: a larger index is garbage
# numbers as \S+ and read by core/numbers (re's \d takes any script's digits)
_PER_GPU = re.compile(r"^GPU\s+(\S+)\s+Read:(.*?)\bWrite:(.*?)\bBufRegister:(.*)$")
_POOL = re.compile(r"^GPU\s*:?\s*(\S+)\s+pool_size_MiB\s*:\s*(\S+)\s+usage\s*:\s*(\S+?)\s*/\s*(\S+)\s+used_MiB\s*:\s*(\S+)")
_POSIX_POOL = re.compile(r"^GPU\s+(\S+)\s+(.*)$")
_PAIR = re.compile(r"([A-Za-z_(%)]+)=(\S*)")
_SLAB = re.compile(r"(\S+?)\(KiB\)\s*:\s*(\S+?)\s*/\s*(\S+)")
_GPU_LINE = {"PER_GPU STATS": _PER_GPU, "PER_GPU POOL BUFFER STATS": _POOL, "PER_GPU POSIX POOL BUFFER STATS": _POSIX_POOL}


class GdsStatsError(ValueError):
    """gds_stats printed something that is not its statistics; the message names the line."""


def _pairs(text):
    return {k: decimal(v) for k, v in _PAIR.findall(text)}


def _index(text):
    index = counter(text, 32)
    if index > MAX_GPU_INDEX:
        raise BadNumber("GPU index %d is above %d" % (index, MAX_GPU_INDEX))
    return index


def parse_gds_stats(text):
    """{version, gpus: {index: {read_mib, write_mib, read_ops, write_ops, read_posix, write_posix,
    read_errors, write_errors, bufreg_n, bufreg_mib}}, pool: {index: {pool_size_mib, used, total,
    used_mib}}, posix_pool: {index: {slab KiB: [used, total]}}} from ``gds_stats -l 3`` output;
    GdsStatsError names the line that is not."""
    out = {"version": None, "gpus": {}, "pool": {}, "posix_pool": {}}
    section = None
    for number, raw in enumerate((text or "").splitlines(), 1):
        line = raw.strip()
        try:
            section = _parse_line(out, section, line)
        except BadNumber as exc:
            raise GdsStatsError("line %d: %s" % (number, exc))
    return out


def _parse_line(out, section, line):
    """One line of ``gds_stats -l 3`` into ``out``; the section it opens or is in."""
    if line.startswith("cuFile STATS VERSION"):
        out["version"] = line.split(":", 1)[-1].strip()
    elif line.endswith("STATS:") or line.endswith("MRSTATS:") or line.endswith("HISTOGRAM :"):
        section = line.rstrip(":").strip()
    elif section in _GPU_LINE and line.startswith("GPU") and not _GPU_LINE[section].match(line):
        raise BadNumber("a %s line cut short or garbled: %r" % (section, line[:120]))
    elif section == "PER_GPU STATS":
        match = _PER_GPU.match(line)
        if match:
            read, write, reg = (_pairs(match.group(i)) for i in (2, 3, 4))
            out["gpus"][_index(match.group(1))] = {
                "read_mib": read.get("MiB", 0), "write_mib": write.get("MiB", 0),
                "read_ops": int(read.get("n", 0)), "write_ops": int(write.get("n", 0)),
                "read_posix": int(read.get("posix", 0)), "write_posix": int(write.get("posix", 0)),
                "read_errors": int(read.get("err", 0)), "write_errors": int(write.get("err", 0)),
                "bufreg_n": int(reg.get("n", 0)), "bufreg_mib": reg.get("MiB", 0)}
    elif section == "PER_GPU POOL BUFFER STATS":
        match = _POOL.match(line)
        if match:
            size, used, total, used_mib = (counter(match.group(i)) for i in (2, 3, 4, 5))
            out["pool"][_index(match.group(1))] = {"pool_size_mib": size, "used": used, "total": total,
                                                   "used_mib": used_mib}
    elif section == "PER_GPU POSIX POOL BUFFER STATS":
        match = _POSIX_POOL.match(line)
        if match:
            out["posix_pool"][_index(match.group(1))] = {
                counter(kib): [counter(used), counter(total)] for kib, used, total in _SLAB.findall(match.group(2))}
    return section


def merge(snapshots):
    """One per-GPU view summed over the benchmark's processes (each has its own cuFile)."""
    summed = {"gpus": {}, "pool": {}}
    for snap in snapshots:
        for section, into_section in summed.items():
            for index, entry in snap[section].items():
                into = into_section.setdefault(index, dict.fromkeys(entry, 0))
                for key, value in entry.items():
                    into[key] += value
    return summed["gpus"], summed["pool"]


def placement(snapshots, source):
    """The ``watch.cufile`` entry: {gpus: [{index, read_bytes, write_bytes, ops, posix_ops,
    pool_used, pool_total, pool_used_mib}], io_gpus, buffer_gpus, source}."""
    gpus, pool = merge(snapshots)
    rows = []
    for index in sorted(set(gpus) | set(pool)):
        g, p = gpus.get(index) or {}, pool.get(index) or {}
        rows.append({"index": index, "read_bytes": int(g.get("read_mib", 0) * MIB),
                     "write_bytes": int(g.get("write_mib", 0) * MIB),
                     "ops": int(g.get("read_ops", 0) + g.get("write_ops", 0)),
                     "posix_ops": int(g.get("read_posix", 0) + g.get("write_posix", 0)),
                     "pool_used": p.get("used"), "pool_total": p.get("total"), "pool_used_mib": p.get("used_mib")})
    return {"gpus": rows, "source": source,
            "io_gpus": [r["index"] for r in rows if r["read_bytes"] or r["write_bytes"] or r["ops"]],
            "buffer_gpus": [r["index"] for r in rows if r["pool_used"]]}


def group_pids(procfs_root, pgid):
    """The processes of process group ``pgid`` that mapped libcufile (gds_stats has nothing to read
    in the others)."""
    out = []
    for name in listdir(procfs_root):
        if not name.isdigit():
            continue
        stat = read_text(os.path.join(procfs_root, name, "stat")) or ""
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[2] == str(pgid) and "libcufile" in (
                read_text(os.path.join(procfs_root, name, "maps")) or ""):
            out.append(int(name))
    return sorted(out)


def stats_level_note(path):
    """Why gds_stats may read nothing, from cufile.json: None when ``profile.cufile_stats`` is 3."""
    try:
        dummy, config = read_config(path)
    except CufileError as exc:
        return "cufile.json unreadable (%s)" % exc
    level = (config.get("profile") or {}).get("cufile_stats", 0)
    if level == 3:
        return None
    return "%s has profile.cufile_stats %s: gds_stats -l 3 needs 3" % (path, level)


class GdsStatsWatcher(object):
    """``gds_stats -p PID -l 3`` on each cuFile process of a running benchmark every ``interval``
    seconds, in a thread beside it; keeps each process's last snapshot that had per-GPU stats."""

    def __init__(self, binary, procfs_root="/proc", interval=2.0, timeout=10):
        self.binary, self.procfs_root, self.interval, self.timeout = binary, procfs_root, interval, timeout
        self.last, self.answers = {}, {}
        self._stop = threading.Event()
        self._thread = None
        self.polls = 0
        self.last_at = None
        self.failure = None  # why a poll broke off (the thread keeps polling)

    def start(self, pgid):
        self.pgid = pgid
        self._thread = threading.Thread(target=self._run, name="gds-stats")
        self._thread.daemon = True
        self._thread.start()

    def _run(self):
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self):
        """One read of every cuFile process of the group; never raises (a poll that broke off is
        ``failure``, named when nothing was read)."""
        self.polls += 1
        try:
            for pid in group_pids(self.procfs_root, self.pgid):
                res = proc_run([self.binary, "-p", str(pid), "-l", "3"], self.timeout)
                try:
                    snap = parse_gds_stats(res.stdout) if res.rc == 0 else None
                except GdsStatsError as exc:
                    self.answers[pid] = "unreadable output: %s" % exc
                    continue
                if snap and (snap["gpus"] or snap["pool"]):
                    self.last[pid] = snap
                    self.last_at = time.monotonic()
                else:
                    self.answers[pid] = (res.error or "exit %s: %s" % (
                        res.rc, (res.stderr or res.stdout).strip()[-200:]))
        except Exception as exc:  # the thread must go on, and the reason must be the real one
            self.failure = "gds_stats poll failed: %s: %s" % (exc.__class__.__name__, exc)

    def stop(self, why_not=None):
        """The job's ``watch.cufile`` entry, or {unknown: why}; ``why_not`` is a likely reason to
        add when nothing was read (cufile.json's profile.cufile_stats below 3)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(self.timeout + self.interval)
        if self.last:
            ago = time.monotonic() - self.last_at
            return placement(list(self.last.values()),
                             "gds_stats -p PID -l 3 on %d process(es), last read %.1f s before the job ended"
                             % (len(self.last), ago))
        if not self.polls:
            why = "the job ended before gds_stats could read it (every %g s)" % self.interval
        elif self.failure:
            why = self.failure
        elif self.answers:
            why = "gds_stats printed no per-GPU stats: %s" % "; ".join(
                "pid %d: %s" % item for item in sorted(self.answers.items())[:3])
        else:
            why = "no process of the job had libcufile mapped"
        return {"unknown": why + ("; %s" % why_not if why_not else "")}
