# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for the procfs files that tell which block devices hold the running OS.

One place for /proc/self/mountinfo (or /proc/mounts), /proc/swaps and /proc/mdstat: the topology
model uses them to flag system drives, the RAID planner to see the arrays that exist. Every parser
takes text and returns plain data, so it can be tested on the guide's outputs; the ``read_*``
helpers add the file access and raise ProcfsError naming the file at fault.

A mounted device is identified by its major:minor (mountinfo's third field), followed through
/sys/dev/block/MAJ:MIN to its sysfs directory: the name it is mounted under (``/dev/root``, a
udev alias, a /dev/mapper name) does not matter. From there dm/md ``slaves`` lead to the devices
below, and a partition (a directory with a ``partition`` file) to its disk, the directory above.
Device names are the fallback when mountinfo or the sysfs links are missing.
"""
from __future__ import annotations

import os
import re

from ansible_collections.gds.commission.plugins.module_utils.core.files import UnreadableFile, is_live_root, listdir, read_file, read_text

# Mount points whose backing drives are "system": the contract names /, /boot and swap; /boot/efi,
# /usr and /var are the same thing split out by some installers.
SYSTEM_MOUNTPOINTS = ("/", "/boot", "/boot/efi", "/usr", "/var")

_MD_LINE = re.compile(r"^(md[\w/]+)\s*:\s*(\S+)\s*(.*)$")
_MD_MEMBER = re.compile(r"^([\w/.-]+)\[(\d+)\]((?:\([A-Z]\))*)$")
_PARTITION = re.compile(r"^(nvme\d+n\d+)p\d+$|^((?:sd|vd|xvd|hd)[a-z]+)\d+$|^(md\d+)p\d+$")
_DEVNO = re.compile(r"^(\d+):(\d+)$")
# fs/proc_namespace.c's mangle() writes the characters it escapes as \ooo (seq_escape): space,
# tab, newline and backslash, and '#' on newer kernels (" \t\n\\#"). A backslash is always
# escaped, so every \ooo is one: all are decoded, whatever set the running kernel uses.
_MOUNT_ESCAPE = re.compile(r"\\([0-3][0-7][0-7])")


class ProcfsError(Exception):
    """A procfs file is missing or malformed; the message names the file."""


class DeviceLoop(ProcfsError, ValueError):
    """The sysfs ``slaves`` links of block devices lead back to a device on the way: the disks
    below are unknown (never "no disk"). A ValueError too, so that a step that takes bad input
    as its failure (gds_bench's job loop) reports it with the reason."""


def _unescape_char(match):
    code = int(match.group(1), 8)
    # a byte above 0x7f as core/files.decode would have kept it (surrogateescape)
    return chr(code) if code < 0x80 else chr(0xDC00 + code)


def _unescape(field):
    return _MOUNT_ESCAPE.sub(_unescape_char, field)


def _fields(line):
    # Split on spaces only: the kernel escapes space, tab and newline, but not other control
    # characters, which str.split() would also take for separators.
    return [field for field in line.split(" ") if field]


def parse_mounts(text):
    """/proc/mounts (or /proc/self/mounts) -> [{source, target, fstype, options, devno}]
    (``devno`` None: this file does not carry it)."""
    mounts = []
    for line in text.splitlines():
        fields = _fields(line)
        if len(fields) < 4:
            continue
        mounts.append({
            "source": _unescape(fields[0]),
            "target": _unescape(fields[1]),
            "fstype": fields[2],
            "options": fields[3].split(","),
            "devno": None,
        })
    return mounts


def parse_mountinfo(text):
    """/proc/self/mountinfo -> [{source, target, fstype, options, devno, root, super_options}].

    ``36 35 259:2 / / rw,relatime shared:1 - ext4 /dev/root rw``: mount id, parent id,
    major:minor, root, mount point, options, optional fields up to ``-``, fstype, source, super
    options (Documentation/filesystems/proc.rst).
    """
    mounts = []
    for line in text.splitlines():
        fields = _fields(line)
        if len(fields) < 7 or "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        if len(fields) < dash + 3 or not _DEVNO.match(fields[2]):
            continue
        mounts.append({
            "source": _unescape(fields[dash + 2]),
            "target": _unescape(fields[4]),
            "fstype": fields[dash + 1],
            "options": fields[5].split(","),
            "devno": fields[2],
            "root": _unescape(fields[3]),
            # the file system's own options (an NFS mount's proto, rsize, addr ...)
            "super_options": fields[dash + 3].split(",") if len(fields) > dash + 3 else [],
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
        return read_file(path)
    except UnreadableFile as exc:
        raise ProcfsError(str(exc))


def read_mounts(procfs_root):
    """The mount table: /proc/self/mountinfo (with each device's major:minor) when present,
    else /proc/self/mounts or /proc/mounts (names only)."""
    path = os.path.join(procfs_root, "self", "mountinfo")
    if os.path.exists(path):
        return parse_mountinfo(_read(path))
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


def kernel_root_device(procfs_root):
    """``root=`` of the kernel command line when it names a /dev path (``/dev/nvme0n1p2``)."""
    text = read_text(os.path.join(procfs_root, "cmdline")) or ""
    for word in text.split():
        if word.startswith("root=/dev/"):
            return word[len("root="):]
    return None


# --------------------------------------------------------------------------------------------
# From a mount source to the whole disks below it
# --------------------------------------------------------------------------------------------
def _sysfs_dir_by_devno(sysfs_root, devno):
    """Real sysfs directory of block device MAJ:MIN, or None (major 0: no block device)."""
    if not devno or devno.startswith("0:"):
        return None
    path = os.path.realpath(os.path.join(sysfs_root, "dev", "block", devno))
    return path if os.path.isdir(path) else None


def _sysfs_dir_by_name(sysfs_root, name):
    path = os.path.realpath(os.path.join(sysfs_root, "class", "block", name))
    if os.path.isdir(path):
        return path
    path = os.path.realpath(os.path.join(sysfs_root, "block", name))
    return path if os.path.isdir(path) else None


def _device_name(source, sysfs_root):
    """Kernel name of the block device behind a mount source or swap file name, or None."""
    if not source.startswith("/dev/"):
        return None
    name = source[len("/dev/"):]
    if name.startswith("mapper/"):
        # device-mapper: find dm-N whose dm/name matches
        wanted = name[len("mapper/"):]
        block = os.path.join(sysfs_root, "block")
        for entry in listdir(block):
            if entry.startswith("dm-"):
                text = read_text(os.path.join(block, entry, "dm", "name"))
                if text is not None and text.strip() == wanted:
                    return entry
        return None
    if name.startswith("md/"):
        # /dev/md/<name> is a udev link to /dev/mdN: only the live /dev can resolve it
        if is_live_root(sysfs_root, "/sys") and os.path.exists(source):
            return os.path.basename(os.path.realpath(source))
        return "md" + name[3:] if name[3:].isdigit() else None
    return name


def _disks_below_dir(path, seen, chain=()):
    """Whole disks under the block device whose sysfs directory is ``path``: dm/md ``slaves``
    followed down; a partition (it has a ``partition`` file) stands for the disk above it.
    ``chain``: the devices above on this way down; one met again is a loop (DeviceLoop): what
    is below it is unknown, not nothing."""
    if path in chain:
        names = [os.path.basename(p) for p in chain[chain.index(path):] + (path,)]
        raise DeviceLoop("%s: the slaves links of block devices form a loop (%s): the disks below %s are unknown"
                         % (os.path.dirname(path), " -> ".join(names), names[0]))
    if path in seen:
        return set()  # reached before by another way (two slaves on one device): counted there
    seen.add(path)
    chain += (path,)
    slaves = listdir(os.path.join(path, "slaves"))
    if slaves:
        disks = set()
        for slave in slaves:
            below = os.path.realpath(os.path.join(path, "slaves", slave))
            disks |= _disks_below_dir(below, seen, chain) if os.path.isdir(below) else {base_disk(slave)}
        return disks
    if os.path.exists(os.path.join(path, "partition")):
        return _disks_below_dir(os.path.dirname(path), seen, chain)  # the disk, or the md/dm it splits
    return {os.path.basename(path)}


def _disks_below_name(name, sysfs_root, mdstat, seen, chain=()):
    """The same by name, for trees without sysfs entries: mdstat members, then the name's disk."""
    path = _sysfs_dir_by_name(sysfs_root, name)
    if path is not None:
        return _disks_below_dir(path, seen)
    if name in chain:
        names = list(chain[chain.index(name):]) + [name]
        raise DeviceLoop("/proc/mdstat: the members of md arrays form a loop (%s): the disks below %s are unknown"
                         % (" -> ".join(names), names[0]))
    if name in seen:
        return set()
    seen.add(name)
    chain += (name,)
    if name in mdstat:
        disks = set()
        for member in mdstat[name]["members"]:
            disks |= _disks_below_name(member["device"], sysfs_root, mdstat, seen, chain)
        return disks
    base = base_disk(name)
    return {name} if base == name else _disks_below_name(base, sysfs_root, mdstat, seen, chain)


def source_disks(source, sysfs_root, mdstat, devno=None):
    """Whole disks below one mount source or swap device: by major:minor when known (the name a
    device is mounted under may be /dev/root or an alias), else by name. None when neither
    leads to a block device."""
    seen = set()
    path = _sysfs_dir_by_devno(sysfs_root, devno)
    if path is None and source.startswith("/dev/") and is_live_root(sysfs_root, "/sys"):
        try:
            rdev = os.stat(source).st_rdev
            path = _sysfs_dir_by_devno(sysfs_root, "%d:%d" % (os.major(rdev), os.minor(rdev)))
        except OSError:
            path = None
    if path is not None:
        return _disks_below_dir(path, seen)
    name = _device_name(source, sysfs_root)
    if not name:
        return None
    if (name == "root" or "/" in name) and name not in mdstat \
            and _sysfs_dir_by_name(sysfs_root, name) is None:
        # /dev/root is the kernel's placeholder, /dev/vg/lv or /dev/disk/by-*/ a udev alias:
        # no kernel name to go by
        return None
    return _disks_below_name(name, sysfs_root, mdstat, seen)


def system_disks(procfs_root, sysfs_root, mounts=None, swaps=None, mdstat=None, unresolved=None):
    """Names of the whole disks (``nvme0n1``, ``sda``) that hold the running OS.

    Mounted /, /boot (and the other SYSTEM_MOUNTPOINTS), active swap, and every member of an md
    array or device-mapper volume that carries one of them. A mount of ``/dev/root`` without a
    major:minor (no mountinfo) is taken from the kernel command line's ``root=``. Sources that
    lead to no block device are appended to ``unresolved`` (a list) as (mount point, source).
    """
    mounts = read_mounts(procfs_root) if mounts is None else mounts
    swaps = read_swaps(procfs_root) if swaps is None else swaps
    mdstat = read_mdstat(procfs_root) if mdstat is None else mdstat
    sources = [(m["target"], m["source"], m.get("devno")) for m in mounts
               if m["target"] in SYSTEM_MOUNTPOINTS]
    sources += [("swap", s["filename"], None) for s in swaps if s["type"] == "partition"]
    disks = set()
    for target, source, devno in sources:
        if not source.startswith("/dev/"):
            continue  # network, overlay or virtual file systems hold no local drive
        found = source_disks(source, sysfs_root, mdstat, devno)
        if found is None and source == "/dev/root":
            root = kernel_root_device(procfs_root)
            found = source_disks(root, sysfs_root, mdstat) if root else None
        if found is None:
            if unresolved is not None:
                unresolved.append((target, source))
            continue
        disks |= found
    return disks


def mounted_disks(procfs_root, sysfs_root, mounts=None, mdstat=None):
    """{whole disk: [mount points]} for every mounted block device, through md and dm layers."""
    mounts = read_mounts(procfs_root) if mounts is None else mounts
    mdstat = read_mdstat(procfs_root) if mdstat is None else mdstat
    result = {}
    for mount in mounts:
        if not mount["source"].startswith("/dev/") and not _sysfs_dir_by_devno(sysfs_root, mount.get("devno")):
            continue
        disks = source_disks(mount["source"], sysfs_root, mdstat, mount.get("devno"))
        if not disks and mount["source"] == "/dev/root":
            root = kernel_root_device(procfs_root)
            disks = source_disks(root, sysfs_root, mdstat) if root else None
        for disk in sorted(disks or ()):
            result.setdefault(disk, []).append(mount["target"])
    return result
