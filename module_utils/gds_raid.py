# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""md RAID0 arrays regrouped by PCIe affinity: desired arrays, the plan, and the commands.

Everything here is a pure function of plain data (the ``gds_topology`` facts, parsed
/proc/mdstat and /proc/mounts, optional ``mdadm --detail --export`` and ``wipefs`` probes), so
that the planning can be tested on the guide's systems without a kernel. ``library/gds_raid.py``
reads the inputs, calls :func:`plan`, and runs :func:`command` for each action it executes.

Naming: a created array is ``/dev/md/<name_prefix>N`` (``--name=<name_prefix>N`` in the
superblock), mounted at ``<mount_prefix>N`` (the guide's Table 5: /raid1 ... /raid4). N counts the
planned arrays in order (group id order for affinity grouping; first drive for switch grouping),
so on a node where every group has drives N is the affinity group id. Named arrays keep their
``/dev/md/`` name across reboots and renumbering, which ``/dev/mdN`` numbers do not.

Safety rules (docs/architecture.md, safety), applied per *component*: the planned arrays and the existing
arrays that share drives with them, since stopping one existing array affects every planned array
that takes one of its drives. A component is refused, with the reason, when an existing array in it
holds a system drive, holds a drive that no planned array uses, is used by another block layer
(device-mapper, LVM), is mounted and ``allow_unmount`` is false, or when anything in it would be
destroyed (stopping an array, wiping a drive that carries a signature) and ``allow_destroy`` is
false. An existing array whose members equal a planned array is kept as it is.
"""
from __future__ import annotations

import re

from ansible.module_utils.gds_procfs import base_disk

DEFAULT_CHUNK_KB = 512          # DGX OS creates its data RAID0 with 512 KiB chunks
FS_BLOCK_BYTES = 4096           # mkfs.ext4 -b 4096: stride/stripe_width are counted in these

_NATURAL = re.compile(r"(\d+)")


class RaidError(Exception):
    """Invalid planning input; the message names the offending option or fact."""


def natural_key(text):
    return [int(part) if part.isdigit() else part for part in _NATURAL.split(str(text))]


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
    drives = {}
    for drive in topology["nvme"]:
        if not isinstance(drive, dict) or "name" not in drive:
            raise RaidError("topology.nvme entries need a name: %r" % (drive,))
        drives[drive["name"]] = drive
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

    prefix = mount_prefix.rstrip("/") or "/raid"
    result = []
    for index, (group, members, gpus) in enumerate(sets, start=1):
        name = "%s%d" % (name_prefix, index)
        result.append({"index": index, "name": name, "device": "/dev/md/" + name,
                       "mount": "%s%d" % (prefix, index), "members": members, "gpus": gpus,
                       "group": group})
    return result


# --------------------------------------------------------------------------------------------
# What exists: mdstat + mounts (+ mdadm --detail --export)
# --------------------------------------------------------------------------------------------
def parse_detail_export(text):
    """``mdadm --detail --export DEV`` -> {KEY: value} (MD_LEVEL, MD_UUID, MD_DEVNAME, ...)."""
    result = {}
    for line in text.splitlines():
        if "=" in line:
            key, _, value = line.strip().partition("=")
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
    gds_procfs.mounted_disks). ``details`` maps md name -> parsed ``mdadm --detail --export``.
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
    validate_chunk(chunk_kb)
    system = set(system or ())
    disk_mounts = disk_mounts or {}
    disk_holders = disk_holders or {}
    mounts = mounts or []
    drives = {d["name"]: d for d in (topology or {}).get("nvme", [])}
    planned_disks = {d for arr in desired for d in arr["members"]}
    entries, actions, refused, stops, summary, result = [], [], [], [], [], []

    for planned_idx, present_idx in _components(desired, existing):
        planned = [dict(desired[i]) for i in planned_idx]
        present = [existing[j] for j in present_idx]
        names = ", ".join(p["name"] for p in planned)

        # 1. an existing array that already is the planned array: keep it as it is
        if len(planned) == 1 and len(present) == 1 \
                and set(planned[0]["members"]) == set(present[0]["members"]):
            p, e = planned[0], present[0]
            entry = dict(p, action="keep", device=e["device"], md=e["name"], reason=None,
                         replaces=[])
            notes = []
            if e["level"] and e["level"] != "raid0":
                notes.append("%s is %s, not raid0: kept as found" % (e["name"], e["level"]))
            own = [t for t in e["mounts"]]
            if own:
                entry["mount"] = own[0]
                summary.append("keep %s (%s) at %s for GPUs %s"
                               % (e["name"], ",".join(p["members"]), own[0], _int_list(p["gpus"])))
            else:
                fs = (fstypes or {}).get(e["device"]) if fstypes is not None else None
                if fstypes is not None and not fs:
                    if not allow_destroy:
                        reason = ("%s has no filesystem; formatting it needs allow_destroy"
                                  % e["name"])
                        entry.update(action="refuse", reason=reason)
                        refused.append({"array": p["name"], "members": p["members"],
                                        "reason": reason})
                        summary.append("keep %s (%s) unmounted; refused: %s"
                                       % (e["name"], ",".join(p["members"]), reason))
                        entries.append(entry)
                        continue
                    actions.append(_mkfs_action(e["device"], p["name"], len(p["members"]),
                                                e.get("chunk_kb") or chunk_kb, fstype))
                conflict = _mount_conflict(p["mount"], mounts, set())
                if conflict:
                    reason = "%s is already a mount point of %s" % (p["mount"], conflict)
                    entry.update(action="refuse", reason=reason)
                    refused.append({"array": p["name"], "members": p["members"], "reason": reason})
                    summary.append("keep %s unmounted; refused: %s" % (e["name"], reason))
                    entries.append(entry)
                    continue
                actions.append({"op": "mount", "device": e["device"], "path": p["mount"],
                                "fstype": fs or fstype})
                summary.append("keep %s (%s) and mount it at %s for GPUs %s"
                               % (e["name"], ",".join(p["members"]), p["mount"],
                                  _int_list(p["gpus"])))
            entry["notes"] = notes
            entries.append(entry)
            result.append({"device": e["device"], "mount": entry["mount"],
                           "members": p["members"], "gpus": p["gpus"], "name": p["name"],
                           "md": e["name"], "status": "kept"})
            continue

        # 2. create (fresh drives) or regroup (stop the arrays that hold the drives first)
        reasons = []
        needs_destroy, needs_unmount = [], []
        for e in present:
            sys_members = [d for d in e["members"] if d in system]
            if sys_members:
                reasons.append("%s holds system drive%s %s" % (
                    e["name"], "s" if len(sys_members) > 1 else "", ",".join(sys_members)))
            stray = [d for d in e["members"] if d not in planned_disks]
            if stray:
                reasons.append("%s also holds %s, which no planned array uses"
                               % (e["name"], ",".join(stray)))
            if e["holders"]:
                reasons.append("%s is in use by %s" % (e["name"], ",".join(e["holders"])))
            if e["mounts"]:
                needs_unmount.append("%s is mounted at %s" % (e["name"], ",".join(e["mounts"])))
            needs_destroy.append("stopping %s destroys its data" % e["name"])
        in_arrays = {d for e in present for d in e["members"]}
        free_mounts = {}
        for p in planned:
            for disk in p["members"]:
                if disk in system:
                    reasons.append("%s is a system drive" % disk)
                if disk in in_arrays:
                    continue
                held = [h for h in disk_holders.get(disk, []) if not h.startswith("md")]
                if held:
                    reasons.append("%s is in use by %s" % (disk, ",".join(held)))
                if disk_mounts.get(disk):
                    free_mounts[disk] = disk_mounts[disk]
                    needs_unmount.append("%s is mounted at %s" % (disk, ",".join(disk_mounts[disk])))
                    needs_destroy.append("%s holds a mounted filesystem" % disk)
                elif signatures is not None and signatures.get(disk):
                    needs_destroy.append("%s carries %s" % (disk, ",".join(signatures[disk])))
        stopping = {e["name"] for e in present}
        for p in planned:
            conflict = _mount_conflict(p["mount"], mounts, stopping | set(free_mounts))
            if conflict:
                reasons.append("%s is already a mount point of %s" % (p["mount"], conflict))
            taken = [e for e in existing if e["name"] not in stopping
                     and (e["md_name"] == p["name"] or e["device"] == p["device"])]
            if taken:
                reasons.append("the name %s is taken by %s" % (p["name"], taken[0]["name"]))
        if needs_unmount and not allow_unmount:
            reasons.append("; ".join(needs_unmount) + " and allow_unmount is false")
        if needs_destroy and not allow_destroy:
            reasons.append("; ".join(needs_destroy) + " and allow_destroy is false")

        if present:
            drives_txt = "%d drive%s" % (len(in_arrays), "s" if len(in_arrays) != 1 else "")
            nsw = _switch_count(drives, in_arrays)
            if nsw:
                drives_txt += " across %d switch%s" % (nsw, "es" if nsw != 1 else "")
            head = "regroup %s (%s) into %d array%s (%s)" % (
                ",".join(e["name"] for e in present), drives_txt, len(planned),
                "s" if len(planned) != 1 else "", names)
        else:
            head = "; ".join("create %s from %s at %s for GPUs %s" % (
                p["name"], ",".join(p["members"]), p["mount"], _int_list(p["gpus"]))
                for p in planned)

        if reasons:
            reason = "; ".join(_unique(reasons))
            summary.append("%s; refused: %s" % (head, reason))
            for p in planned:
                entries.append(dict(p, action="refuse", reason=reason, md=None,
                                    replaces=[e["name"] for e in present], notes=[]))
                refused.append({"array": p["name"], "members": p["members"], "reason": reason})
            # what stays: the existing data arrays, serving the GPUs of the plans they block
            for e in present:
                if any(d in system for d in e["members"]):
                    continue
                gpus = sorted({g for p in planned if set(p["members"]) & set(e["members"])
                               for g in p["gpus"]})
                result.append({"device": e["device"], "mount": e["mounts"][0] if e["mounts"] else None,
                               "members": e["members"], "gpus": gpus, "name": e["md_name"] or e["name"],
                               "md": e["name"], "status": "existing"})
            continue

        summary.append(head)
        targets = [t for e in present for t in e["mounts"]]
        targets += [t for ts in free_mounts.values() for t in ts]
        for target in sorted(set(targets), key=lambda t: (-len(t), t)):
            actions.append({"op": "umount", "path": target})
        for e in present:
            actions.append({"op": "stop", "device": "/dev/" + e["name"], "md": e["name"],
                            "members": e["members"], "uuid": e["uuid"]})
            stops.append({"md": e["name"], "device": e["device"], "uuid": e["uuid"],
                          "members": e["members"], "mounts": e["mounts"]})
        for e in present:
            for member in e["member_devices"]:
                actions.append({"op": "zero_superblock", "device": "/dev/" + member})
        for p in planned:
            for disk in p["members"]:
                if disk in in_arrays or disk in free_mounts or \
                        (signatures is not None and signatures.get(disk)):
                    actions.append({"op": "wipe", "device": "/dev/" + disk})
        for p in planned:
            actions.append({"op": "create", "device": p["device"], "name": p["name"],
                            "members": ["/dev/" + d for d in p["members"]], "chunk_kb": chunk_kb})
            actions.append(_mkfs_action(p["device"], p["name"], len(p["members"]), chunk_kb, fstype))
            actions.append({"op": "mount", "device": p["device"], "path": p["mount"],
                            "fstype": fstype})
            notes = [] if signatures is not None else \
                ["signatures on %s are probed before applying" % ",".join(p["members"])]
            entries.append(dict(p, action="create", reason=None, md=None,
                                replaces=[e["name"] for e in present], notes=notes))
            result.append({"device": p["device"], "mount": p["mount"], "members": p["members"],
                           "gpus": p["gpus"], "name": p["name"], "md": None, "status": "created"})
        for e in present:
            for target in e["mounts"]:
                if target not in {p["mount"] for p in desired}:
                    actions.append({"op": "fstab_remove", "path": target})
    return {"arrays": entries, "actions": actions, "refused": refused, "stops": stops,
            "summary": summary, "result": result}


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
                + list(mkfs_options) + [action["device"]])
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
