# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel's own answer to a P2PDMA pair, held against the product's prediction.

Where a function publishes peer-to-peer memory (``p2pmem``: an NVMe controller memory buffer),
gdsbench can read a file with O_DIRECT into it (``--peer-memory``, xfer 1): the kernel then moves
the data from the drives into that device, or refuses the pair. For each such provider and each
benchmark target (a data array or drive) this writes a file of gdsbench's verify pattern, reads it
into the provider's memory, checks every byte and keeps the kernel's log lines of the transfer.
The prediction for the target is the worst of its member drives' pairs (hw/p2pdma.py): md splits
a read among them, and each member's controller must reach the provider.

A check per provider and target says whether the two agree: PASS when a predicted route moved the
data (verified) or a predicted refusal failed, FAIL when they differ, WARN when the prediction was
unknown. The file is the probe's own (created, then removed only while it is still that file).
"""
from __future__ import annotations

import json
import os
import re

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.files import (
    UnsafeFile, new_regular_file, open_dir, remove_dir, remove_file,
)
from ansible_collections.gds.commission.plugins.module_utils.core import proc
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import controller_bdfs

PROBE_FILE = "gds-p2pdma-probe.dat"
WORST_FIRST = ("refused", "unknown", "host_bridge", "bus_address")
ALLOWED = ("host_bridge", "bus_address")
KMSG_RECORDS = 4000          # the most kernel log records read after one transfer
KERNEL_WORDS = re.compile(r"peer-to-peer|P2PDMA|ACS redirect|disable_acs_redir|DMAR|invalid error|I/O error")


def members_of(array, nvme):
    """(member names, their controllers' PCI addresses) of one benchmark target: its ``members``
    (drive names of the gds_topology facts), every path of a multipath drive; None for a member
    the facts do not place, so that its pair is unknown."""
    by_name = {d.get("name"): d for d in nvme if isinstance(d, dict)}
    names = [m for m in array.get("members") or [] if isinstance(m, str)]
    bdfs = []
    for name in names:
        bdfs += controller_bdfs(by_name.get(name)) or [None]
    return names, bdfs


def prediction(pairs, provider, clients):
    """The worst map of the provider with each client; unknown without clients or a pair."""
    decided = {(p.get("provider"), p.get("client")): p for p in pairs if isinstance(p, dict)}
    found = [decided.get((provider, client)) or {"map": "unknown", "reason": "no prediction for %s" % client}
             for client in clients] or [{"map": "unknown", "reason": "no member drive in the topology"}]
    worst = min(found, key=lambda p: WORST_FIRST.index(p.get("map")) if p.get("map") in WORST_FIRST else 1)
    return worst.get("map") if worst.get("map") in WORST_FIRST else "unknown", worst.get("reason")


class KernelLog(object):
    """The kernel log records printed after ``mark()``, from /dev/kmsg (root only); None when it
    cannot be read. Bounded: at most KMSG_RECORDS records a read, never blocking."""

    def __init__(self, path="/dev/kmsg"):
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            self.fd = None

    def mark(self):
        if self.fd is not None:
            os.lseek(self.fd, 0, os.SEEK_END)

    def since(self):
        if self.fd is None:
            return None
        lines = []
        for _record in range(KMSG_RECORDS):
            try:
                record = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except OSError:  # EPIPE: records overwritten meanwhile; the next read goes on
                continue
            if not record:
                break
            text = record.decode("utf-8", "replace").partition(";")[2].split("\n", 1)[0]
            if KERNEL_WORDS.search(text):
                lines.append(text)
        return lines

    def close(self):
        if self.fd is not None:
            os.close(self.fd)


def _gdsbench(binary, args, timeout):
    """(JSON record or None, error text) of one gdsbench run, bounded by ``timeout``."""
    res = proc.run([binary] + args + ["--json", "-"], timeout)
    if res.timed_out or res.error:
        return None, res.error or "gdsbench ran past %d s and was stopped" % timeout
    try:
        record = json.loads(res.stdout)
    except ValueError:
        return None, (res.stderr.strip() or "gdsbench printed no record (rc %s)" % res.rc)[-500:]
    return record, (record.get("error") or res.stderr.strip()[-500:] or None) if res.rc else None


def _moved(record, size):
    return bool(record) and record.get("exit_code") == 0 and record.get("errors") == 0 \
        and record.get("verify_errors") == 0 and record.get("bytes") == size


def _target_dir(array):
    return array.get("target") or os.path.join(str(array.get("mount") or "").rstrip("/"), "gds-bench")


def _close_made(made, remove=False):
    """Close the parents of the directories open_dir made (outermost last), removing each made
    directory first when asked (only while it is empty and still the one made)."""
    for parent, name, ident, _path in reversed(made):
        if remove:
            remove_dir(parent, name, ident)
        os.close(parent)


def probe_target(binary, array, providers, pairs, nvme, sysfs_root, size, timeout, log):
    """The answers for one target: {provider: {...}}, or the reason it could not be probed."""
    names, clients = members_of(array, nvme)
    directory = _target_dir(array)
    made = []
    try:
        dir_fd = open_dir(directory, made)
    except (UnsafeFile, OSError) as exc:
        _close_made(made)
        return None, "cannot use %s: %s" % (directory, getattr(exc, "reason", None) or exc)
    path = os.path.join(directory, PROBE_FILE)
    existed = new_regular_file(dir_fd, PROBE_FILE) is not None
    ours = None  # the file_id of the probe file this run wrote, the only file it removes
    answers = {}
    try:
        record, error = _gdsbench(binary, ["-f", path, "-x", "1", "-I", "1", "-s", str(size), "-i", "1M"], timeout)
        if not existed:
            ours = new_regular_file(dir_fd, PROBE_FILE)
        if error or not record:
            return None, "writing %s failed: %s" % (path, error)
        for provider in providers:
            predicted, reason = prediction(pairs, provider, clients)
            log.mark()
            allocate = os.path.join(sysfs_root, "bus", "pci", "devices", provider, "p2pmem", "allocate")
            record, error = _gdsbench(binary, ["-f", path, "-x", "1", "-I", "0", "-s", str(size), "-i", "1M", "-V",
                                               "--peer-memory", allocate], timeout)
            answers[provider] = {
                "provider": provider, "target": array.get("label") or array.get("mount"), "members": names,
                "clients": clients, "predicted": predicted, "reason": reason, "moved": _moved(record, size),
                "bytes": (record or {}).get("bytes"), "verify_errors": (record or {}).get("verify_errors"),
                "seconds": (record or {}).get("elapsed_s"), "error": error, "kernel_log": log.since()}
    finally:
        if ours is not None:
            remove_file(dir_fd, PROBE_FILE, ours)  # only while it is still the file written above
        os.close(dir_fd)
        _close_made(made, remove=True)
    return answers, None


def answer_check(answer):
    """``p2pdma: <target> into <provider>``: the prediction held against what the kernel did."""
    name = "p2pdma: %s into %s" % (answer.get("target"), answer.get("provider"))
    log = answer.get("kernel_log")
    kernel = "; ".join(map(str, log))[:600] if isinstance(log, list) else None
    moved, predicted = answer.get("moved"), answer.get("predicted")
    if moved is True:
        actual = "moved %s bytes, verified, in %s s" % (answer.get("bytes"), answer.get("seconds"))
    elif moved is False:
        actual = "not moved: %s" % (answer.get("error") or "%s verify errors" % answer.get("verify_errors"))
    else:
        actual = None
    detail = "predicted %s (%s); kernel: %s" % (predicted, answer.get("reason"),
                                                "log unread (not root)" if kernel is None else kernel or "no log lines")
    if predicted not in WORST_FIRST or predicted == "unknown" or not isinstance(moved, bool):
        return check(name, "WARN", "a prediction and the kernel's answer", actual, detail)
    agrees = moved == (predicted in ALLOWED)
    return check(name, "PASS" if agrees else "FAIL", predicted, actual,
                 detail if agrees else "the kernel did not do what the product predicted: " + detail,
                 inputs={"predicted": predicted, "moved": moved})


def probe(binary, arrays, topology, sysfs_root="/sys", size=4 << 20, timeout=60, kmsg="/dev/kmsg"):
    """(answers, checks) for every provider that publishes p2pmem and every target of ``arrays``."""
    facts = topology.get("p2pdma") if isinstance(topology, dict) else None
    facts = facts if isinstance(facts, dict) else {}
    providers = [p for p in facts.get("providers") or []
                 if os.path.exists(os.path.join(sysfs_root, "bus", "pci", "devices", p, "p2pmem", "allocate"))]
    if not providers:
        return [], [check("p2pdma: peer memory probe", "SKIP", "a provider", "none",
                          "no PCI function publishes p2pmem here (an NVMe controller memory buffer would): "
                          "the kernel's answer needs one")]
    if not arrays:
        return [], [check("p2pdma: peer memory probe", "SKIP", "a target", "none", "no benchmark target")]
    answers, checks = [], []
    log = KernelLog(kmsg)
    try:
        for array in arrays:
            found, problem = probe_target(binary, array, providers, facts.get("pairs") or [],
                                          topology.get("nvme") or [], sysfs_root, size, timeout, log)
            if problem:
                checks.append(check("p2pdma: %s" % (array.get("label") or array.get("mount")), "ERROR",
                                    "probed", None, problem))
                continue
            for answer in found.values():
                answers.append(answer)
                checks.append(answer_check(answer))
    finally:
        log.close()
    return answers, checks
