# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for the procfs files that tell which block devices hold the running OS.

One place for /proc/mounts, /proc/swaps and /proc/mdstat: the topology model uses them to flag
system drives, the RAID planner to see the arrays that exist. Every parser takes text and returns
plain data, so it can be tested on the guide's outputs; the ``read_*`` helpers add the file access
and raise ProcfsError naming the file at fault.
"""
from __future__ import annotations

import os
import re

from ansible.module_utils.gds_files import listdir

# Mount points whose backing drives are "system": the contract names /, /boot and swap; /boot/efi,
# /usr and /var are the same thing split out by some installers.
SYSTEM_MOUNTPOINTS = ("/", "/boot", "/boot/efi", "/usr", "/var")

_MD_LINE = re.compile(r"^(md[\w/]+)\s*:\s*(\S+)\s*(.*)$")
_MD_MEMBER = re.compile(r"^([\w/.-]+)\[(\d+)\]((?:\([A-Z]\))*)$")
_PARTITION = re.compile(r"^(nvme\d+n\d+)p\d+$|^((?:sd|vd|xvd|hd)[a-z]+)\d+$|^(md\d+)p\d+$")


class ProcfsError(Exception):
    """A procfs file is missing or malformed; the message names the file."""


def _unescape(field):
    # /proc/mounts escapes space, tab, newline and backslash as octal.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mounts(text):
    """/proc/mounts (or /proc/self/mounts) -> [{source, target, fstype, options}]."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mounts.append({
            "source": _unescape(fields[0]),
            "target": _unescape(fields[1]),
            "fstype": fields[2],
            "options": fields[3].split(","),
        })
    return mounts


def parse_swaps(text):
    """/proc/swaps -> [{filename, type}] (the header line is skipped)."""
    swaps = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 2:
            swaps.append({"filename": _unescape(fields[0]), "type": fields[1]})
    return swaps


def parse_mdstat(text):
    """/proc/mdstat -> {name: {state, level, members: [{device, role, flags}], ...}}.

    ``level`` is None for an inactive array (mdstat omits it); ``flags`` holds the single-letter
    markers such as ``F`` (faulty) and ``S`` (spare).
    """
    arrays = {}
    current = None
    for line in text.splitlines():
        match = _MD_LINE.match(line)
        if match:
            name, state, rest = match.groups()
            words = rest.split()
            level = None
            readonly = False
            while words and words[0].startswith("("):
                readonly = readonly or words[0] in ("(read-only)", "(auto-read-only)")
                words.pop(0)
            if words and not _MD_MEMBER.match(words[0]):
                level = words.pop(0)
            members = []
            for word in words:
                member = _MD_MEMBER.match(word)
                if not member:
                    raise ProcfsError("unexpected member %r in mdstat line %r" % (word, line))
                members.append({"device": member.group(1), "role": int(member.group(2)),
                                "flags": re.findall(r"[A-Z]", member.group(3))})
            members.sort(key=lambda m: m["role"])
            current = {"name": name, "state": state, "level": level, "readonly": readonly,
                       "members": members, "blocks": None, "chunk_kb": None}
            arrays[name] = current
            continue
        if current is not None and line.startswith(" "):
            blocks = re.search(r"(\d+) blocks", line)
            if blocks and current["blocks"] is None:
                current["blocks"] = int(blocks.group(1))
            chunk = re.search(r"(\d+)k chunks?", line)
            if chunk:
                current["chunk_kb"] = int(chunk.group(1))
        elif not line.strip():
            current = None
    return arrays


def base_disk(name):
    """``nvme0n1p2`` -> ``nvme0n1``, ``sda3`` -> ``sda``; whole disks are returned unchanged."""
    match = _PARTITION.match(name)
    if match:
        return next(g for g in match.groups() if g)
    return name


def _read(path):
    try:
        with open(path, "r") as handle:
            return handle.read()
    except OSError as exc:
        raise ProcfsError("cannot read %s: %s" % (path, exc.strerror or exc))


def read_mounts(procfs_root):
    for rel in ("self/mounts", "mounts"):
        path = os.path.join(procfs_root, rel)
        if os.path.exists(path):
            return parse_mounts(_read(path))
    raise ProcfsError("cannot read %s: no such file" % os.path.join(procfs_root, "mounts"))


def read_swaps(procfs_root):
    path = os.path.join(procfs_root, "swaps")
    if not os.path.exists(path):
        return []  # kernels built without swap have no /proc/swaps
    return parse_swaps(_read(path))


def read_mdstat(procfs_root):
    path = os.path.join(procfs_root, "mdstat")
    if not os.path.exists(path):
        return {}  # md driver not loaded: no arrays
    try:
        return parse_mdstat(_read(path))
    except ProcfsError as exc:
        raise ProcfsError("%s: %s" % (path, exc))


def _device_name(source, sysfs_root):
    """Kernel name of the block device behind a mount source or swap file name, or None."""
    if not source.startswith("/dev/"):
        return None
    name = source[len("/dev/"):]
    if name.startswith("mapper/"):
        # device-mapper: find dm-N whose dm/name matches
        wanted = name[len("mapper/"):]
        block = os.path.join(sysfs_root, "block")
        for entry in _listdir(block):
            if entry.startswith("dm-"):
                try:
                    with open(os.path.join(block, entry, "dm", "name")) as handle:
                        if handle.read().strip() == wanted:
                            return entry
                except OSError:
                    continue
        return None
    if name.startswith("md/"):
        # /dev/md/<name> is a udev link to /dev/mdN: only the live /dev can resolve it
        if os.path.realpath(sysfs_root) == "/sys" and os.path.exists(source):
            return os.path.basename(os.path.realpath(source))
        return "md" + name[3:] if name[3:].isdigit() else None
    return name


_listdir = listdir


def _underlying_disks(name, sysfs_root, mdstat, seen=None):
    """Whole disks under a block device: md members (mdstat), dm/md slaves (sysfs), partitions."""
    seen = set() if seen is None else seen
    if name in seen:
        return set()
    seen.add(name)
    disks = set()
    lower = []
    if name in mdstat:
        lower = [m["device"] for m in mdstat[name]["members"]]
    else:
        lower = _listdir(os.path.join(sysfs_root, "class", "block", name, "slaves"))
        if not lower and name.startswith("md") and os.path.isdir(os.path.join(sysfs_root, "block", name)):
            lower = _listdir(os.path.join(sysfs_root, "block", name, "slaves"))
    if lower:
        for dev in lower:
            disks |= _underlying_disks(dev, sysfs_root, mdstat, seen)
        return disks
    disks.add(base_disk(name))
    return disks


def system_disks(procfs_root, sysfs_root, mounts=None, swaps=None, mdstat=None):
    """Names of the whole disks (``nvme0n1``, ``sda``) that hold the running OS.

    Mounted /, /boot (and the other SYSTEM_MOUNTPOINTS), active swap, and every member of an md
    array or device-mapper volume that carries one of them.
    """
    mounts = read_mounts(procfs_root) if mounts is None else mounts
    swaps = read_swaps(procfs_root) if swaps is None else swaps
    mdstat = read_mdstat(procfs_root) if mdstat is None else mdstat
    sources = [m["source"] for m in mounts if m["target"] in SYSTEM_MOUNTPOINTS]
    sources += [s["filename"] for s in swaps if s["type"] == "partition"]
    disks = set()
    for source in sources:
        name = _device_name(source, sysfs_root)
        if name:
            disks |= _underlying_disks(name, sysfs_root, mdstat)
    return disks


def mounted_disks(procfs_root, sysfs_root, mounts=None, mdstat=None):
    """{whole disk: [mount points]} for every mounted block device, through md and dm layers."""
    mounts = read_mounts(procfs_root) if mounts is None else mounts
    mdstat = read_mdstat(procfs_root) if mdstat is None else mdstat
    result = {}
    for mount in mounts:
        name = _device_name(mount["source"], sysfs_root)
        if not name:
            continue
        for disk in _underlying_disks(name, sysfs_root, mdstat):
            result.setdefault(disk, []).append(mount["target"])
    return result
