# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""md RAID0 arrays regrouped by PCIe affinity: desired arrays, the plan, and the commands.

Everything here is a pure function of plain data (the ``gds_topology`` facts, parsed
/proc/mdstat and /proc/mounts, optional ``mdadm --detail --export`` and ``wipefs`` probes), so
that the planning can be tested on the guide's systems without a kernel.
``tune/raid_host.RaidHost`` reads the inputs on the node, calls :func:`plan`, runs :func:`command`
for each action it executes and turns the outcome into report checks (:func:`raid_checks`).

Names and paths that come from variables are validated before anything is planned
(:func:`validate_options`): md names are plain names that stay under /dev/md/, mount points are
absolute, normalised and outside the OS's directories, mkfs options are separate words that
cannot name another device.

Naming: a created array is ``/dev/md/<name_prefix>N`` (``--name=<name_prefix>N`` in the
superblock), mounted at ``<mount_prefix>N`` (the guide's Table 5: /raid1 ... /raid4). N counts the
planned arrays in order (group id order for affinity grouping; first drive for switch grouping),
so on a node where every group has drives N is the affinity group id. Named arrays keep their
``/dev/md/`` name across reboots and renumbering, which ``/dev/mdN`` numbers do not.

Safety rules, applied per *component*: the planned arrays and the existing
arrays that share drives with them, since stopping one existing array affects every planned array
that takes one of its drives. A component is refused, with the reason, when an existing array in it
holds a system drive, holds a drive that no planned array uses, is used by another block layer
(device-mapper, LVM), is mounted and ``allow_unmount`` is false, or when anything in it would be
destroyed (stopping an array, wiping a drive that carries a signature) and ``allow_destroy`` is
false. An existing array whose members equal a planned array is kept as it is.
"""
from __future__ import annotations

import os
import re

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.files import natural_key
from ansible_collections.gds.commission.plugins.module_utils.core.spec import RoleSpec, Var, on_node
from ansible_collections.gds.commission.plugins.module_utils.core.variables import given_int, is_list
from ansible_collections.gds.commission.plugins.module_utils.hw.facts_schema import TOPOLOGY, fact_error
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import base_disk

DEFAULT_CHUNK_KB = 512          # DGX OS creates its data RAID0 with 512 KiB chunks
FS_BLOCK_BYTES = 4096           # mkfs.ext4 -b 4096: stride/stripe_width are counted in these


class RaidError(Exception):
    """Invalid planning input; the message names the offending option or fact."""


# the gds_raid role's variable behind each module flag, named in refusals so that the reason
# says what to set whichever way the module was called
ROLE_FLAGS = {"allow_destroy": "gds_raid_allow_destroy", "allow_unmount": "gds_raid_allow_unmount"}


def flag_hint(flag, value=None):
    """``allow_destroy is false (role variable gds_raid_allow_destroy)``, or without the value."""
    text = flag if value is None else "%s is %s" % (flag, str(value).lower())
    return "%s (role variable %s)" % (text, ROLE_FLAGS[flag])


def _sorted(names):
    return sorted(set(names), key=natural_key)


def _int_list(values):
    return ",".join(str(v) for v in values) if values else "-"


# --------------------------------------------------------------------------------------------
# Geometry and desired arrays
# --------------------------------------------------------------------------------------------
def validate_chunk(chunk_kb):
    if not isinstance(chunk_kb, int) or isinstance(chunk_kb, bool) or chunk_kb < 4 \
            or chunk_kb & (chunk_kb - 1):
        raise RaidError("chunk_kb must be a power of two >= 4 (KiB), got %r" % (chunk_kb,))
    return chunk_kb


def stripe_geometry(chunk_kb, ndisks, block_bytes=FS_BLOCK_BYTES):
    """ext4 ``stride`` (filesystem blocks per chunk) and ``stripe_width`` (stride x data disks)."""
    validate_chunk(chunk_kb)
    stride = max(1, chunk_kb * 1024 // block_bytes)
    return {"stride": stride, "stripe_width": stride * ndisks}


# --------------------------------------------------------------------------------------------
# Names and paths from variables: they end up in device paths, mount points and command lines
# --------------------------------------------------------------------------------------------
NAME_MAX = 32                   # mdadm refuses longer array names
NAME_PREFIX_MAX = NAME_MAX - 3  # room for the array number (up to 999 arrays)
DEV_MD = "/dev/md"
# mdadm's portable names; a leading "-" or "." would read as an option or a hidden file
_NAME_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# kernel block device names as they appear under /sys/block (nvme0n1, sda, vdb)
_DISK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
# no whitespace (fstab separates its fields with it) and nothing a shell or fstab would read
_MOUNT_PATH = re.compile(r"^/[A-Za-z0-9_.+@:,/-]*$")
# where a data array must never be mounted: the OS's own trees
SYSTEM_DIRS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
               "/root", "/run", "/sbin", "/snap", "/sys", "/usr", "/var")
# one mkfs argument: option letters, values such as stride=8,^has_journal or a file path
_MKFS_WORD = re.compile(r"^[A-Za-z0-9_.,:=+%^@/-]+$")
# mke2fs options that take the next argument as their value (its getopt string)
MKFS_OPTIONS_WITH_VALUE = "bdegilmorstCEGIJLMNORTUz"


def validate_name_prefix(prefix):
    """``name_prefix`` makes ``/dev/md/<prefix>N`` and ``--name=<prefix>N``: a plain name."""
    if not isinstance(prefix, str) or not prefix:
        raise RaidError("name_prefix must be a non-empty string, got %r" % (prefix,))
    if ".." in prefix or "/" in prefix or not _NAME_PREFIX.match(prefix):
        raise RaidError("name_prefix %r: an md array name takes letters, digits, '_', '-' and '.' "
                        "(starting with a letter or digit, no '..', no '/')" % (prefix,))
    if prefix.isdigit():
        raise RaidError("name_prefix %r: a numeric md name means /dev/md<N>, the kernel's own "
                        "numbering; start it with a letter" % (prefix,))
    if len(prefix) > NAME_PREFIX_MAX:
        raise RaidError("name_prefix %r is %d characters: mdadm takes names of at most %d, and the "
                        "array number needs 3" % (prefix, len(prefix), NAME_MAX))
    return prefix


def validate_mount_prefix(prefix):
    """``mount_prefix`` makes ``<prefix>N``: absolute, normalised, outside the OS's trees.

    Returns the prefix without trailing slashes (``/data/gds/`` -> ``/data/gds``)."""
    if not isinstance(prefix, str) or not prefix.startswith("/"):
        raise RaidError("mount_prefix must be an absolute path, got %r" % (prefix,))
    stripped = prefix.rstrip("/")
    if not stripped:
        raise RaidError("mount_prefix %r: the arrays cannot be mounted at the root directory"
                        % (prefix,))
    if not _MOUNT_PATH.match(stripped):
        raise RaidError("mount_prefix %r: a mount point takes letters, digits and _ . + @ : , - / "
                        "only (no spaces, quotes or shell characters)" % (prefix,))
    parts = stripped.split("/")[1:]
    if any(part in ("", ".", "..") for part in parts):
        raise RaidError("mount_prefix %r is not a normalised path (no '.', '..' or '//')"
                        % (prefix,))
    first = stripped + "1"
    system = system_dir(first)
    if system:
        raise RaidError("mount_prefix %r: %s is in the system directory %s, which a data "
                        "array must not cover" % (prefix, first, system))
    return stripped


def system_dir(path):
    """The system directory (SYSTEM_DIRS, or / itself) that holds ``path``, or None: the one
    rule for where an array or a network file system must not be mounted."""
    path = "/" + path.strip("/")
    if path == "/":
        return "/"
    return next((system for system in SYSTEM_DIRS if path == system or path.startswith(system + "/")), None)


def validate_mkfs_options(options):
    """``mkfs_options``: separate arguments for mkfs.ext4 that cannot name another device.

    Every argument is one word; a word that is not an option must be the value of the option
    before it (``-m 0``), so that the array stays mkfs's only device argument."""
    if not isinstance(options, (list, tuple)):
        raise RaidError("mkfs_options must be a list of strings, got %r" % (options,))
    previous = None
    for index, word in enumerate(options):
        where = "mkfs_options[%d] %r" % (index, word)
        if not isinstance(word, str) or not word:
            raise RaidError("%s: each argument must be a non-empty string" % where)
        if not _MKFS_WORD.match(word):
            raise RaidError("%s: one argument per item, without spaces, quotes or shell "
                            "characters" % where)
        if word.startswith("-"):
            previous = word
            continue
        takes_value = previous is not None and len(previous) == 2 \
            and previous[1] in MKFS_OPTIONS_WITH_VALUE
        if not takes_value:
            raise RaidError("%s is not the value of an option: mkfs.ext4 would take it as the "
                            "device to format" % where)
        if word.startswith("/dev/"):
            raise RaidError("%s: a device path has no place in mkfs options" % where)
        previous = None
    return list(options)


def validate_disk_name(name, where):
    """A drive name from the facts: it becomes ``/dev/<name>`` in commands."""
    if not isinstance(name, str) or ".." in name or not _DISK_NAME.match(name):
        raise RaidError("%s: %r is not a block device name (such as nvme0n1)" % (where, name))
    return name


def validate_options(name_prefix="raid", mount_prefix="/raid", mkfs_options=(),
                     chunk_kb=DEFAULT_CHUNK_KB):
    """Every name and path option at once, before anything is probed or planned."""
    validate_name_prefix(name_prefix)
    validate_mount_prefix(mount_prefix)
    validate_mkfs_options(list(mkfs_options))
    validate_chunk(chunk_kb)


def validate_vars(values, host=None, hosts=()):
    """The gds_raid role's variables (gds_raid_*) by the rules the gds_raid module applies to the
    same options, taken as the argument specs take them (text, a whole number from ``-e``):
    [message naming the variable and the value]."""
    def text(name, default):
        value = values.get(name, default)
        return value if value is None else str(value)

    mkfs = values.get("gds_raid_mkfs_options", [])
    chunk = values.get("gds_raid_chunk_kb", DEFAULT_CHUNK_KB)
    rules = [(validate_name_prefix, text("gds_raid_name_prefix", "raid")),
             (validate_mount_prefix, text("gds_raid_mount_prefix", "/raid")),
             (validate_chunk, chunk if given_int(chunk) is None else given_int(chunk))]
    out = []
    if is_list(mkfs):
        rules.append((validate_mkfs_options, [str(word) for word in mkfs]))
    else:
        # the argument specs would take a string as a one-item list: mkfs would get "-m 0" as one word
        out.append("gds_raid_mkfs_options %r: a list of arguments is expected, such as ['-m', '0']" % (mkfs,))
    for rule, value in rules:
        try:
            rule(value)
        except RaidError as exc:
            out.append("gds_raid_%s" % exc)  # each rule's message starts with the module's option
    return out


def desired_arrays(topology, group_by="affinity", mount_prefix="/raid", name_prefix="raid"):
    """The arrays the node should have: [{index, name, device, mount, members, gpus, group}].

    ``affinity``: one array per topology group with data drives (the guide's Table 5).
    ``switch``: one array per PCIe switch, from the data drives' ``switch`` field; drives behind
    no switch join no array. GPUs of an array are those of the affinity groups its drives belong
    to (none on a node without GPUs). System drives never join, whatever the facts say.
    """
    if not isinstance(topology, dict):
        raise RaidError("topology must be the gds_topology facts (a dict)")
    for key in ("nvme", "groups"):
        if not isinstance(topology.get(key), list):
            raise RaidError("topology.%s is missing or not a list: pass ansible_facts['gds_topology']"
                            % key)
    problem = fact_error(topology, TOPOLOGY, "topology", keys=("nvme", "groups"))  # the one schema
    if problem:
        raise RaidError(problem)
    validate_name_prefix(name_prefix)
    mount_base = validate_mount_prefix(mount_prefix)
    drives = {}
    for index, drive in enumerate(topology["nvme"]):
        if not isinstance(drive, dict) or "name" not in drive:
            raise RaidError("topology.nvme entries need a name: %r" % (drive,))
        drives[validate_disk_name(drive["name"], "topology.nvme[%d].name" % index)] = drive
    data = {name for name, d in drives.items() if not d.get("system")}
    gpus_of_drive = {}
    for group in topology["groups"]:
        for name in group.get("nvme") or []:
            gpus_of_drive.setdefault(name, set()).update(group.get("gpus") or [])

    sets = []
    if group_by == "affinity":
        for group in sorted(topology["groups"], key=lambda g: g.get("id", 0)):
            members = _sorted(n for n in group.get("nvme") or [] if n in data)
            if members:
                sets.append((group.get("id"), members, sorted(group.get("gpus") or [])))
    elif group_by == "switch":
        by_switch = {}
        for name in data:
            switch = drives[name].get("switch")
            if switch:
                by_switch.setdefault(switch, []).append(name)
        for switch, names in by_switch.items():
            members = _sorted(names)
            gpus = sorted({g for n in members for g in gpus_of_drive.get(n, ())})
            sets.append((switch, members, gpus))
        sets.sort(key=lambda s: natural_key(s[1][0]))
    else:
        raise RaidError("group_by must be 'affinity' or 'switch', got %r" % (group_by,))

    result = []
    for index, (group, members, gpus) in enumerate(sets, start=1):
        name = "%s%d" % (name_prefix, index)
        device, mount = DEV_MD + "/" + name, "%s%d" % (mount_base, index)
        # what the validation above promises, checked on the result
        if os.path.dirname(os.path.normpath(device)) != DEV_MD or len(name) > NAME_MAX \
                or os.path.dirname(os.path.normpath(mount)) != os.path.dirname(mount_base):
            raise RaidError("name_prefix %r / mount_prefix %r give %s at %s, outside %s or the "
                            "mount base" % (name_prefix, mount_prefix, device, mount, DEV_MD))
        result.append({"index": index, "name": name, "device": device, "mount": mount,
                       "members": members, "gpus": gpus, "group": group})
    return result


# --------------------------------------------------------------------------------------------
# What exists: mdstat + mounts (+ mdadm --detail --export)
# --------------------------------------------------------------------------------------------
def parse_detail_export(text):
    """``mdadm --detail --export DEV`` -> {KEY: value} (MD_LEVEL, MD_UUID, MD_DEVNAME, ...)."""
    result = {}
    for line in text.splitlines():
        if "=" in line:
            key, dummy, value = line.strip().partition("=")
            result[key] = value.strip().strip("'\"")
    return result


def md_short_name(md_name):
    """Superblock name ``host:raid1`` -> ``raid1``."""
    return md_name.split(":", 1)[-1] if md_name else md_name


def _mount_source_array(source, aliases):
    """Kernel md name behind a mount source (/dev/md1, /dev/md1p1, /dev/md/raid1), or None."""
    if source in aliases:
        return aliases[source]
    if not source.startswith("/dev/"):
        return None
    name = base_disk(source[len("/dev/"):])
    return name if re.match(r"^md\d+$", name) else None


def existing_arrays(mdstat, mounts, details=None, aliases=None, disk_mounts=None, holders=None):
    """The md arrays present: [{name, device, md_name, level, state, uuid, chunk_kb, members,
    member_devices, mounts, holders}] sorted by name.

    ``members`` are whole disks (``nvme1n1p2`` counts as ``nvme1n1``); ``mounts`` are the mount
    points of the array itself (any partition, any alias in ``aliases`` such as /dev/md/raid1)
    plus those of other layers on its member disks (``disk_mounts``, from
    hw/procfs.mounted_disks). ``details`` maps md name -> parsed ``mdadm --detail --export``.
    """
    details = details or {}
    aliases = aliases or {}
    disk_mounts = disk_mounts or {}
    holders = holders or {}
    own_mounts = {}
    for mount in mounts or []:
        array = _mount_source_array(mount["source"], aliases)
        if array:
            own_mounts.setdefault(array, []).append(mount["target"])
    arrays = []
    for name in sorted(mdstat, key=natural_key):
        info = mdstat[name]
        detail = details.get(name) or {}
        member_devices = [m["device"] for m in info.get("members") or []]
        members = _sorted(base_disk(d) for d in member_devices)
        targets = set(own_mounts.get(name, []))
        for disk in members:
            targets.update(disk_mounts.get(disk, []))
        devname = detail.get("MD_DEVNAME")
        device = "/dev/md/" + devname if devname else "/dev/" + name
        level = detail.get("MD_LEVEL") or info.get("level")
        arrays.append({
            "name": name, "device": device, "md_name": md_short_name(detail.get("MD_NAME")),
            "level": level, "state": info.get("state"), "uuid": detail.get("MD_UUID"),
            "chunk_kb": info.get("chunk_kb"), "members": members,
            "member_devices": member_devices, "mounts": sorted(targets, key=lambda t: (len(t), t)),
            "holders": sorted(h for h in holders.get(name, []) if not h.startswith("md")),
        })
    return arrays


# --------------------------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------------------------
def _components(desired, existing):
    """Connected components of planned and existing arrays that share a drive."""
    parent = {}

    def find(node):
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def union(a, b):
        parent[find(a)] = find(b)

    owner = {}
    for i, arr in enumerate(desired):
        parent[("p", i)] = ("p", i)
        for disk in arr["members"]:
            owner.setdefault(disk, []).append(("p", i))
    for j, arr in enumerate(existing):
        parent[("e", j)] = ("e", j)
        for disk in arr["members"]:
            owner.setdefault(disk, []).append(("e", j))
    for nodes in owner.values():
        for node in nodes[1:]:
            union(nodes[0], node)
    comps = {}
    for node in parent:
        comps.setdefault(find(node), []).append(node)
    result = []
    for nodes in comps.values():
        planned = sorted(i for kind, i in nodes if kind == "p")
        present = sorted(j for kind, j in nodes if kind == "e")
        if planned:  # existing arrays that no plan touches are left alone
            result.append((planned, present))
    result.sort(key=lambda c: c[0][0])
    return result


def _switch_count(drives, disks):
    switches = {drives.get(d, {}).get("switch") for d in disks}
    return len(switches - {None})


def _plural(count, word, suffix="s"):
    return "%d %s%s" % (count, word, suffix if count != 1 else "")


class ArrayPlanner(object):
    """Builds the plan one component at a time (see the module docstring for the rules).

    A component whose single planned array equals its single existing array is kept
    (:meth:`keep`); any other is checked for reasons to refuse (:meth:`refusals`) and then either
    refused as a whole (:meth:`refuse`) or regrouped (:meth:`regroup`)."""

    def __init__(self, desired, existing, system=(), disk_mounts=None, mounts=None,
                 signatures=None, disk_holders=None, fstypes=None, allow_destroy=False,
                 allow_unmount=False, chunk_kb=DEFAULT_CHUNK_KB, topology=None, fstype="ext4"):
        self.desired = desired
        self.existing = existing
        self.system = set(system or ())
        self.disk_mounts = disk_mounts or {}
        self.disk_holders = disk_holders or {}
        self.mounts = mounts or []
        self.signatures = signatures
        self.fstypes = fstypes
        self.allow_destroy = allow_destroy
        self.allow_unmount = allow_unmount
        self.chunk_kb = validate_chunk(chunk_kb)
        self.fstype = fstype
        self.drives = {d["name"]: d for d in (topology or {}).get("nvme", [])}
        self.planned_disks = {d for arr in desired for d in arr["members"]}
        self.entries, self.actions, self.refused = [], [], []
        self.stops, self.summary, self.result = [], [], []

    def plan(self):
        for planned_idx, present_idx in _components(self.desired, self.existing):
            planned = [dict(self.desired[i]) for i in planned_idx]
            present = [self.existing[j] for j in present_idx]
            # the OS's own array is never kept as a data array: it is refused below
            if len(planned) == 1 and len(present) == 1 \
                    and set(planned[0]["members"]) == set(present[0]["members"]) \
                    and not set(present[0]["members"]) & self.system:
                self.keep(planned[0], present[0])
                continue
            reasons, free_mounts = self.refusals(planned, present)
            head = self.headline(planned, present)
            if reasons:
                self.refuse(planned, present, head, "; ".join(_unique(reasons)))
            else:
                self.regroup(planned, present, head, free_mounts)
        return {"arrays": self.entries, "actions": self.actions, "refused": self.refused,
                "stops": self.stops, "summary": self.summary, "result": self.result}

    # -- an existing array that already is the planned array ---------------------------------
    def keep(self, p, e):
        entry = dict(p, action="keep", device=e["device"], md=e["name"], reason=None,
                     replaces=[], notes=[])
        if e["level"] and e["level"] != "raid0":
            entry["notes"].append("%s is %s, not raid0: kept as found" % (e["name"], e["level"]))
        members = ",".join(p["members"])
        if e["mounts"]:
            entry["mount"] = e["mounts"][0]
            self.summary.append("keep %s (%s) at %s for GPUs %s"
                                % (e["name"], members, entry["mount"], _int_list(p["gpus"])))
        else:
            fs = self.fstypes.get(e["device"]) if self.fstypes is not None else None
            unformatted = self.fstypes is not None and not fs
            if unformatted and not self.allow_destroy:
                reason = "%s has no filesystem; formatting it needs %s" % (
                    e["name"], flag_hint("allow_destroy"))
                self._refuse_entry(entry, p, reason, "keep %s (%s) unmounted; refused: %s"
                                   % (e["name"], members, reason))
                return
            conflict = _mount_conflict(p["mount"], self.mounts, set())
            if conflict:
                reason = "%s is already a mount point of %s" % (p["mount"], conflict)
                self._refuse_entry(entry, p, reason, "keep %s unmounted; refused: %s"
                                   % (e["name"], reason))
                return
            if unformatted:  # only once it is sure to be mounted
                self.actions.append(_mkfs_action(e["device"], p["name"], len(p["members"]),
                                                 e.get("chunk_kb") or self.chunk_kb, self.fstype))
            self.actions.append({"op": "mount", "device": e["device"], "path": p["mount"],
                                 "fstype": fs or self.fstype})
            self.summary.append("keep %s (%s) and mount it at %s for GPUs %s"
                                % (e["name"], members, p["mount"], _int_list(p["gpus"])))
        self.entries.append(entry)
        self.result.append({"device": e["device"], "mount": entry["mount"],
                            "members": p["members"], "gpus": p["gpus"], "name": p["name"],
                            "md": e["name"], "status": "kept"})

    def _refuse_entry(self, entry, p, reason, line):
        entry.update(action="refuse", reason=reason)
        self.refused.append({"array": p["name"], "members": p["members"], "reason": reason})
        self.summary.append(line)
        self.entries.append(entry)

    # -- what would stop a regrouping -------------------------------------------------------
    def refusals(self, planned, present):
        """Reasons to refuse the component, and the mounted free drives it would unmount."""
        reasons, needs_destroy, needs_unmount = [], [], []
        for e in present:
            reasons += self._array_refusals(e)
            if e["mounts"]:
                needs_unmount.append("%s is mounted at %s" % (e["name"], ",".join(e["mounts"])))
            needs_destroy.append("stopping %s destroys its data" % e["name"])
        in_arrays = {d for e in present for d in e["members"]}
        free_mounts = {}
        for p in planned:
            for disk in p["members"]:
                if disk in self.system:
                    reasons.append("%s is a system drive" % disk)
                if disk in in_arrays:
                    continue
                held = [h for h in self.disk_holders.get(disk, []) if not h.startswith("md")]
                if held:
                    reasons.append("%s is in use by %s" % (disk, ",".join(held)))
                if self.disk_mounts.get(disk):
                    free_mounts[disk] = self.disk_mounts[disk]
                    needs_unmount.append("%s is mounted at %s"
                                         % (disk, ",".join(self.disk_mounts[disk])))
                    needs_destroy.append("%s holds a mounted filesystem" % disk)
                elif self.signatures is not None and self.signatures.get(disk):
                    needs_destroy.append("%s carries %s" % (disk, ",".join(self.signatures[disk])))
        reasons += self._name_and_mount_refusals(planned, {e["name"] for e in present}
                                                 | set(free_mounts))
        if needs_unmount and not self.allow_unmount:
            reasons.append("; ".join(needs_unmount) + " and " + flag_hint("allow_unmount", False))
        if needs_destroy and not self.allow_destroy:
            reasons.append("; ".join(needs_destroy) + " and " + flag_hint("allow_destroy", False))
        return reasons, free_mounts

    def _array_refusals(self, e):
        """An existing array that must never be stopped, whatever the flags."""
        reasons = []
        sys_members = [d for d in e["members"] if d in self.system]
        if sys_members:
            reasons.append("%s holds system drive%s %s" % (
                e["name"], "s" if len(sys_members) > 1 else "", ",".join(sys_members)))
        stray = [d for d in e["members"] if d not in self.planned_disks]
        if stray:
            reasons.append("%s also holds %s, which no planned array uses"
                           % (e["name"], ",".join(stray)))
        if e["holders"]:
            reasons.append("%s is in use by %s" % (e["name"], ",".join(e["holders"])))
        return reasons

    def _name_and_mount_refusals(self, planned, going):
        reasons = []
        for p in planned:
            conflict = _mount_conflict(p["mount"], self.mounts, going)
            if conflict:
                reasons.append("%s is already a mount point of %s" % (p["mount"], conflict))
            taken = [e for e in self.existing if e["name"] not in going
                     and (e["md_name"] == p["name"] or e["device"] == p["device"])]
            if taken:
                reasons.append("the name %s is taken by %s" % (p["name"], taken[0]["name"]))
        return reasons

    def headline(self, planned, present):
        if not present:
            return "; ".join("create %s from %s at %s for GPUs %s" % (
                p["name"], ",".join(p["members"]), p["mount"], _int_list(p["gpus"]))
                for p in planned)
        in_arrays = {d for e in present for d in e["members"]}
        drives_txt = _plural(len(in_arrays), "drive")
        nsw = _switch_count(self.drives, in_arrays)
        if nsw:
            drives_txt += " across " + _plural(nsw, "switch", "es")
        return "regroup %s (%s) into %s (%s)" % (
            ",".join(e["name"] for e in present), drives_txt, _plural(len(planned), "array"),
            ", ".join(p["name"] for p in planned))

    # -- refused: the existing data arrays stay, serving the GPUs of the plans they block ----
    def refuse(self, planned, present, head, reason):
        self.summary.append("%s; refused: %s" % (head, reason))
        for p in planned:
            self.entries.append(dict(p, action="refuse", reason=reason, md=None,
                                     replaces=[e["name"] for e in present], notes=[]))
            self.refused.append({"array": p["name"], "members": p["members"], "reason": reason})
        for e in present:
            if any(d in self.system for d in e["members"]):
                continue
            gpus = sorted({g for p in planned if set(p["members"]) & set(e["members"])
                           for g in p["gpus"]})
            self.result.append({"device": e["device"],
                                "mount": e["mounts"][0] if e["mounts"] else None,
                                "members": e["members"], "gpus": gpus,
                                "name": e["md_name"] or e["name"], "md": e["name"],
                                "status": "existing"})

    # -- regroup: unmount, stop, zero, wipe, then create/mkfs/mount per array ----------------
    def regroup(self, planned, present, head, free_mounts):
        self.summary.append(head)
        in_arrays = {d for e in present for d in e["members"]}
        targets = [t for e in present for t in e["mounts"]]
        targets += [t for ts in free_mounts.values() for t in ts]
        for target in sorted(set(targets), key=lambda t: (-len(t), t)):
            self.actions.append({"op": "umount", "path": target})
        for e in present:
            self.actions.append({"op": "stop", "device": "/dev/" + e["name"], "md": e["name"],
                                 "members": e["members"], "uuid": e["uuid"]})
            self.stops.append({"md": e["name"], "device": e["device"], "uuid": e["uuid"],
                               "members": e["members"], "mounts": e["mounts"]})
        for e in present:
            for member in e["member_devices"]:
                self.actions.append({"op": "zero_superblock", "device": "/dev/" + member})
        for p in planned:
            for disk in p["members"]:
                if disk in in_arrays or disk in free_mounts or \
                        (self.signatures is not None and self.signatures.get(disk)):
                    self.actions.append({"op": "wipe", "device": "/dev/" + disk})
        for p in planned:
            self.create(p, present)
        planned_mounts = {p["mount"] for p in self.desired}
        for e in present:
            for target in e["mounts"]:
                if target not in planned_mounts:
                    self.actions.append({"op": "fstab_remove", "path": target})

    def create(self, p, present):
        self.actions.append({"op": "create", "device": p["device"], "name": p["name"],
                             "members": ["/dev/" + d for d in p["members"]],
                             "chunk_kb": self.chunk_kb})
        self.actions.append(_mkfs_action(p["device"], p["name"], len(p["members"]),
                                         self.chunk_kb, self.fstype))
        self.actions.append({"op": "mount", "device": p["device"], "path": p["mount"],
                             "fstype": self.fstype})
        notes = [] if self.signatures is not None else \
            ["signatures on %s are probed before applying" % ",".join(p["members"])]
        self.entries.append(dict(p, action="create", reason=None, md=None,
                                 replaces=[e["name"] for e in present], notes=notes))
        self.result.append({"device": p["device"], "mount": p["mount"], "members": p["members"],
                            "gpus": p["gpus"], "name": p["name"], "md": None, "status": "created"})


def plan(desired, existing, system=(), disk_mounts=None, mounts=None, signatures=None,
         disk_holders=None, fstypes=None, allow_destroy=False, allow_unmount=False,
         chunk_kb=DEFAULT_CHUNK_KB, topology=None, fstype="ext4"):
    """Compare desired with existing arrays and return the plan.

    ``signatures``: {disk: [signature types]} from a probe, or None when unknown (a simulated
    node): unknown signatures are not held against a drive here and are probed again at apply.
    ``fstypes``: {device: fstype} of existing arrays (probe), None when unknown.
    Returns {arrays, actions, refused, stops, summary, result}: ``arrays`` is one entry per
    planned array with its ``action`` (keep, create, refuse) and reason; ``actions`` the ordered
    steps to apply; ``result`` the arrays as they are after applying (the module's ``arrays``).
    """
    return ArrayPlanner(desired, existing, system=system, disk_mounts=disk_mounts, mounts=mounts,
                        signatures=signatures, disk_holders=disk_holders, fstypes=fstypes,
                        allow_destroy=allow_destroy, allow_unmount=allow_unmount,
                        chunk_kb=chunk_kb, topology=topology, fstype=fstype).plan()


def _unique(items):
    seen, out = set(), []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _mount_conflict(path, mounts, going):
    """Source of a current mount at ``path`` that this plan does not remove, or None."""
    for mount in mounts:
        if mount["target"] != path:
            continue
        source = mount["source"]
        name = base_disk(source[len("/dev/"):]) if source.startswith("/dev/") else source
        if name not in going:
            return source
    return None


def _mkfs_action(device, label, ndisks, chunk_kb, fstype):
    geometry = stripe_geometry(chunk_kb, ndisks)
    return {"op": "mkfs", "device": device, "label": label, "fstype": fstype,
            "stride": geometry["stride"], "stripe_width": geometry["stripe_width"]}


# --------------------------------------------------------------------------------------------
# Commands (argument lists, never a shell)
# --------------------------------------------------------------------------------------------
def command(action, mkfs_options=()):
    """The argv that executes one action, or None for steps the role does (mount, fstab)."""
    op = action["op"]
    if op == "umount":
        return ["umount", action["path"]]
    if op == "stop":
        return ["mdadm", "--stop", action["device"]]
    if op == "zero_superblock":
        return ["mdadm", "--zero-superblock", action["device"]]
    if op == "wipe":
        return ["wipefs", "--all", action["device"]]
    if op == "create":
        members = action["members"]
        argv = ["mdadm", "--create", action["device"], "--run", "--level=0",
                "--chunk=%dK" % action["chunk_kb"], "--metadata=1.2",
                "--name=%s" % action["name"], "--raid-devices=%d" % len(members)]
        if len(members) == 1:
            argv.append("--force")  # mdadm wants --force for a one-drive RAID0
        return argv + list(members)
    if op == "mkfs":
        if action["fstype"] != "ext4":
            raise RaidError("only ext4 is supported, got %r" % action["fstype"])
        return (["mkfs.ext4", "-F", "-q", "-b", str(FS_BLOCK_BYTES), "-L", action["label"],
                 "-E", "stride=%d,stripe_width=%d" % (action["stride"], action["stripe_width"])]
                + validate_mkfs_options(list(mkfs_options)) + [action["device"]])
    return None


def describe(action):
    """One line per action, for the plan in the report."""
    op = action["op"]
    if op == "umount":
        return "unmount %s" % action["path"]
    if op == "stop":
        return "stop %s (%s)" % (action["md"], ",".join(action["members"]))
    if op == "zero_superblock":
        return "zero the md superblock on %s" % action["device"]
    if op == "wipe":
        return "wipe signatures on %s" % action["device"]
    if op == "create":
        return "create %s RAID0 chunk %dK from %s" % (action["device"], action["chunk_kb"],
                                                      " ".join(action["members"]))
    if op == "mkfs":
        return "mkfs.%s %s stride=%d stripe_width=%d" % (action["fstype"], action["device"],
                                                         action["stride"], action["stripe_width"])
    if op == "mount":
        return "mount %s at %s (persistent)" % (action["device"], action["path"])
    if op == "fstab_remove":
        return "remove %s from fstab" % action["path"]
    return op


# --------------------------------------------------------------------------------------------
# mdadm.conf
# --------------------------------------------------------------------------------------------
_UUID = re.compile(r"\bUUID=([0-9a-fA-F:]+)")


def update_mdadm_conf(text, remove_uuids=(), add_lines=()):
    """Drop the ARRAY entries (with their indented continuation lines) whose UUID is in
    ``remove_uuids`` and append the ``add_lines`` whose UUID is not present yet."""
    remove = {u.lower() for u in remove_uuids if u}
    entries = []  # [lines]: one entry per ARRAY/keyword line with its continuation lines
    for line in text.splitlines():
        if entries and line[:1].isspace() and line.strip() and entries[-1][0].startswith("ARRAY"):
            entries[-1].append(line)
        else:
            entries.append([line])

    def uuid_of(entry):
        match = _UUID.search(" ".join(entry)) if entry[0].startswith("ARRAY") else None
        return match.group(1).lower() if match else None

    kept = [e for e in entries if uuid_of(e) not in remove or uuid_of(e) is None]
    present = {uuid_of(e) for e in kept} - {None}
    for line in add_lines:
        uuid = uuid_of([line.strip()])
        if uuid and uuid in present:
            continue
        present.add(uuid)
        kept.append([line.strip()])
    out = [line for entry in kept for line in entry]
    return "\n".join(out) + ("\n" if out else "")


# --------------------------------------------------------------------------------------------
# Report checks
# --------------------------------------------------------------------------------------------
# How the module ran, for the checks: applied, check mode, planned only on a live node (plan_only),
# planned only on a fixture tree (a simulated node), or not at all (disabled).
RUN_MODES = ("apply", "check", "plan_only", "simulated", "disabled")


def plan_text(the_plan):
    """The plan as one line: its summary and the text of each action."""
    return "; ".join(list(the_plan.get("summary") or [])
                     + [a.get("text") or describe(a) for a in the_plan.get("actions") or []])


def raid_checks(the_plan, md_data_arrays=(), group_by="affinity", run_mode="apply",
                changed=False, p2pdma=False, refused_verdict="WARN"):
    """The report checks: ``raid: plan`` (or ``raid: md RAID with P2PDMA``) and one per array.

    ``md_data_arrays``: the devices of the md arrays on the node that hold data drives (what
    exists, since with P2PDMA nothing is applied). ``p2pdma``: the node uses GDS through PCI
    P2PDMA, which NVIDIA does not support on md RAID, so arrays are only planned and any md data
    array is a FAIL.
    """
    if run_mode not in RUN_MODES:
        raise RaidError("run mode must be one of %s, got %r" % (", ".join(RUN_MODES), run_mode))
    if refused_verdict not in ("WARN", "FAIL"):
        raise RaidError("refused_verdict must be WARN or FAIL, got %r" % (refused_verdict,))
    per = "affinity group" if group_by == "affinity" else "PCIe switch"
    expected = "one RAID0 per %s" % per
    if run_mode == "disabled":
        return [check("raid: plan", "SKIP", expected, "disabled",
                      "regrouping is turned off (enabled=false); nothing was planned or checked")]
    text = plan_text(the_plan)
    pending = bool(the_plan.get("actions"))
    checks = []
    if p2pdma:
        present = list(md_data_arrays)
        checks.append(check(
            "raid: md RAID with P2PDMA", "FAIL" if present else "SKIP",
            "no md RAID (gds_mode p2pdma)", ",".join(present) or "none",
            "NVIDIA does not support GDS P2PDMA on md RAID: use the drives directly or gds_mode "
            "nvfs; plan not applied: " + text))
    elif the_plan.get("refused"):
        checks.append(check("raid: plan", refused_verdict, expected, "refused", text))
    elif not the_plan.get("arrays"):
        checks.append(check("raid: plan", "SKIP", expected, "nothing to plan",
                            "no data drive in any " + per))
    elif pending and run_mode == "simulated":
        checks.append(check("raid: plan", "SKIP", expected, "planned (simulated node)", text))
    elif pending and run_mode == "plan_only":
        checks.append(check("raid: plan", "SKIP", expected, "planned (plan_only)", text))
    elif pending and run_mode == "check":
        checks.append(check("raid: plan", "WARN", expected, "would change (check mode)", text))
    else:
        checks.append(check("raid: plan", "PASS", expected,
                            "applied" if changed else "in place", text))
    for entry in the_plan.get("arrays") or []:
        checks.append(_array_check(entry, run_mode, p2pdma))
    return checks


def _array_check(entry, run_mode, p2pdma):
    members = entry.get("members")
    # the array as found or made: its device, mount point and members are what the PASS says
    judged = {"mount": entry.get("mount"), "members": members if isinstance(members, list) and members else None}
    if entry["action"] == "keep":
        verdict, actual = "PASS", "kept %s at %s" % (entry.get("md"), entry.get("mount"))
        judged["md"] = entry.get("md")
    elif entry["action"] == "refuse":
        verdict, actual = "SKIP", "refused (see raid: plan)"
    elif p2pdma or run_mode in ("simulated", "plan_only"):
        verdict, actual = "SKIP", "planned, not applied"
    elif run_mode == "check":
        verdict, actual = "WARN", "would be created"
    else:
        verdict, actual = "PASS", "created %s at %s" % (entry.get("device"), entry.get("mount"))
        judged["device"] = entry.get("device")
    name = "raid: %s (GPUs %s)" % (entry["name"], ",".join(str(g) for g in entry["gpus"]) or "none")
    return check(name, verdict, "+".join(map(str, members)) if isinstance(members, list) else None, actual,
                 entry.get("reason"), inputs=judged)


# The role gds_raid: its variables, the one source of its defaults/main.yml, meta/argument_specs.yml
# and its table in docs/variables.md (make roles)
ROLE_SPEC = RoleSpec(
    'gds_raid', 'gds_raid_',
    short_description='Regroup the NVMe data drives into one md RAID0 per GPU affinity group',
    description=("Plans one md RAID0 per affinity group (or PCIe switch) from ansible_facts['gds_topology'], "
                 'applies it on a live node when the allow flags permit, and records the report checks in the host '
                 'fact gds_raid_checks.',
                 'Sets the host fact gds_raid_arrays ([{device, mount, members, gpus}], mount under gds_root).',),
    variables=[
        Var('gds_raid_enabled', 'bool',
            'Plan and apply the md RAID0 arrays at all (false: the role records nothing and changes nothing).',
            True),
        Var('gds_raid_group_by', 'str',
            'affinity: one array per GPU/NVMe affinity group; switch: one per PCIe switch (nodes without GPUs).',
            'affinity',
            choices=('affinity', 'switch')),
        Var('gds_raid_mount_prefix', 'str',
            'Mount points are this prefix and the array number: /raid1, /raid2 ... (Table 5 of [the GDS '
            'guide](architecture.md#source-material)). An absolute, normalised path, no `~` expansion, not `/` and '
            'not under `/bin /boot /dev /etc /lib* /proc /root /run /sbin /snap /sys /usr /var`.',
            '/raid'),
        Var('gds_raid_name_prefix', 'str',
            'md array names are this prefix and the array number: /dev/md/raid1 ... Letters, digits, `_`, `-`, '
            '`.`; starts with a letter or digit; no `..`; at most 29 characters.',
            'raid'),
        Var('gds_raid_chunk_kb', 'int',
            'RAID0 chunk size in KiB (DGX OS default 512); ext4 stride/stripe_width follow from it.',
            512),
        Var('gds_raid_allow_destroy', 'bool',
            'Allow stopping existing arrays and wiping drives that carry data: destroys their data.',
            False),
        Var('gds_raid_allow_unmount', 'bool',
            'Allow unmounting a mounted array or drive that is regrouped (needs gds_raid_allow_destroy too).',
            False),
        Var('gds_raid_mount_opts', 'str',
            'Mount options of the persistent (fstab) mounts of the arrays.',
            'defaults,nofail,noatime'),
        Var('gds_raid_mkfs_options', 'list',
            "Extra mkfs.ext4 arguments (before the device), e.g. ['-m', '0'].",
            [],
            elements='str'),
        Var('gds_raid_mdadm_conf', 'str',
            'mdadm.conf to persist the arrays in; empty: /etc/mdadm/mdadm.conf or /etc/mdadm.conf, as found.',
            ''),
        Var('gds_raid_update_initramfs', 'bool',
            'Refresh the initramfs (update-initramfs -u or dracut -f) when mdadm.conf changed.',
            True),
        Var('gds_raid_refused_verdict', 'str',
            'Verdict of the report check when the regrouping is refused (allow flags off, array in use).',
            'WARN',
            choices=('WARN', 'FAIL')),
        Var('gds_raid_procfs_root', 'path',
            'Where procfs is mounted on the node (mdstat, mounts, swaps).',
            on_node('/proc')),
        Var('gds_raid_sysfs_root', 'path',
            'Where sysfs is mounted on the node (block device holders).',
            on_node('/sys')),
    ],
    entry_points={
        'validate': "main",
        'steps': "main",
    },
    renamed_from='nvme_raid',
)
