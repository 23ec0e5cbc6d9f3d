# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The md RAID regrouping on one node: what ``plugins/modules/gds_raid.py`` runs.

:class:`RaidHost` reads what the planning needs (procfs through ``hw/procfs``, block device
holders from sysfs, and on a live node read-only probes: ``mdadm --detail --export``, ``blkid``,
``wipefs`` without ``--all``), plans with ``gds_raid``, applies the plan (mdadm, wipefs, mkfs.ext4,
mdadm.conf, initramfs), and returns the module result with the drift items and report checks.
Commands are argument lists run through the module's bounded ``run_command`` (core/module.py),
never a shell.
"""
from __future__ import annotations

import errno
import os
import tempfile

from ansible_collections.gds.commission.plugins.module_utils.core.files import UnreadableFile, is_live_root, listdir, read_file
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import (
    base_disk, mounted_disks, read_mdstat, read_mounts, read_swaps, system_disks,
)
from ansible_collections.gds.commission.plugins.module_utils.tune.raid import (
    command, describe, desired_arrays, existing_arrays, parse_detail_export, plan, raid_checks,
    update_mdadm_conf, validate_options,
)

# the plan's operations this module runs itself; mount and fstab are the role's (ansible.posix)
EXECUTED_OPS = ("umount", "stop", "zero_superblock", "wipe", "create", "mkfs")
DEV_MD = "/dev/md"
CHANGE_TIMEOUT = 3600  # seconds, for each command that changes the node  # udev's links /dev/md/<name> -> /dev/mdN


def _default_mdadm_conf():
    return "/etc/mdadm/mdadm.conf" if os.path.isdir("/etc/mdadm") else "/etc/mdadm.conf"


class Runner(object):
    """Runs commands through the module and keeps the list of those that change something."""

    def __init__(self, module):
        self.module = module
        self.executed = []

    def probe(self, argv):
        """A read-only command; returns (rc, stdout)."""
        rc, out, _err = self.module.run_command(argv, check_rc=False)
        return rc, out

    def run(self, argv, **extra):
        # what changes the node may take long (mkfs discarding a large array, the initramfs):
        # still bounded, never stalled
        rc, out, err = self.module.run_command(argv, check_rc=False, timeout=CHANGE_TIMEOUT)
        self.executed.append(argv)
        if rc != 0:
            self.module.fail_json(msg="%s failed (rc=%d): %s" % (" ".join(argv), rc,
                                                                 (err or out).strip()),
                                  cmd=argv, rc=rc, stdout=out, stderr=err,
                                  executed=self.executed, **extra)
        return out


class RaidHost(object):
    """One node's arrays: read, plan, apply, report. ``run()`` returns the module result."""

    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.runner = Runner(module)
        self.live = is_live_root(self.params["procfs_root"], "/proc")
        self.probing = self.live and not self.params["plan_only"]
        self.conf_path = self.params["mdadm_conf"] or _default_mdadm_conf()

    # -- the steps, in order ------------------------------------------------------------------
    def run(self):
        p = self.params
        validate_options(p["name_prefix"], p["mount_prefix"], p["mkfs_options"], p["chunk_kb"])
        if not p["enabled"]:
            return self.disabled_result()
        if not self.live and not p["plan_only"] and not self.module.check_mode:
            self.module.fail_json(
                msg="procfs_root %s is not this system's /proc: commands would act on the "
                    "controller's own devices, not on that tree; use plan_only=true"
                    % p["procfs_root"])
        state = self.read_state()
        desired = desired_arrays(p["topology"], p["group_by"], p["mount_prefix"], p["name_prefix"])
        the_plan, existing = self.make_plan(desired, state)
        result = self.base_result(the_plan, existing)
        arrays = [dict(a) for a in the_plan["result"]]
        if self.applying():
            self.apply(the_plan, result)
        else:
            for array in arrays:
                if array["status"] == "created":
                    array["status"] = "planned"
            pending = [a for a in the_plan["actions"] if a["op"] in EXECUTED_OPS + ("mount",)]
            result["changed"] = bool(self.module.check_mode and pending
                                     and not (p["plan_only"] or p["p2pdma"]))
        result["mounts"] = self.persistent_mounts(arrays, desired, the_plan, state["mounts"])
        result["arrays"] = arrays
        result["checks"] = raid_checks(the_plan, self.md_data_arrays(existing, state["system"]),
                                       p["group_by"], self.run_mode(),
                                       changed=result["changed"], p2pdma=p["p2pdma"],
                                       refused_verdict=p["refused_verdict"])
        return result

    def applying(self):
        p = self.params
        return not (self.module.check_mode or p["plan_only"] or p["p2pdma"])

    def run_mode(self):
        if self.applying():
            return "apply"
        if self.params["plan_only"] or self.params["p2pdma"]:
            return "plan_only" if self.live else "simulated"
        return "check"

    def read_state(self):
        """procfs: arrays, mounts, the drives that hold the OS (procfs and facts), mounted drives."""
        p = self.params
        mdstat = read_mdstat(p["procfs_root"])
        mounts = read_mounts(p["procfs_root"])
        swaps = read_swaps(p["procfs_root"])
        system = system_disks(p["procfs_root"], p["sysfs_root"], mounts=mounts, swaps=swaps,
                              mdstat=mdstat)
        system |= {d.get("name") for d in p["topology"].get("nvme") or []
                   if isinstance(d, dict) and d.get("system")}
        disk_mounts = mounted_disks(p["procfs_root"], p["sysfs_root"], mounts=mounts,
                                    mdstat=mdstat)
        return {"mdstat": mdstat, "mounts": mounts, "system": system, "disk_mounts": disk_mounts}

    def md_data_arrays(self, existing, system):
        """Devices of the md arrays that hold data drives (topology NVMe, not the OS's)."""
        data = {d.get("name") for d in self.params["topology"].get("nvme") or []
                if isinstance(d, dict)} - set(system)
        return [e["device"] for e in existing
                if set(e["members"]) & data and not set(e["members"]) & set(system)]

    def make_plan(self, desired, state):
        p = self.params
        mdstat = state["mdstat"]
        planned_disks = sorted({d for a in desired for d in a["members"]})
        in_arrays = {base_disk(m["device"]) for info in mdstat.values() for m in info["members"]}
        probes = {"details": None, "aliases": None, "fstypes": None, "signatures": None}
        if self.probing:
            probes = self.probe(mdstat, [d for d in planned_disks if d not in in_arrays])
        holders = self.holders(list(mdstat) + planned_disks)
        existing = existing_arrays(mdstat, state["mounts"], details=probes["details"],
                                   aliases=probes["aliases"], disk_mounts=state["disk_mounts"],
                                   holders=holders)
        the_plan = plan(desired, existing, system=state["system"],
                        disk_mounts=state["disk_mounts"], mounts=state["mounts"],
                        signatures=probes["signatures"], disk_holders=holders,
                        fstypes=probes["fstypes"], allow_destroy=p["allow_destroy"],
                        allow_unmount=p["allow_unmount"], chunk_kb=p["chunk_kb"],
                        topology=p["topology"])
        if any(a["op"] in ("create", "stop") for a in the_plan["actions"]):
            the_plan["actions"].append({"op": "persist", "path": self.conf_path})
        for action in the_plan["actions"]:
            action["text"] = describe(action) if action["op"] != "persist" else (
                "record the arrays in %s and refresh the initramfs%s" % (
                    self.conf_path, "" if p["update_initramfs"] else " (disabled)"))
            action["cmd"] = command(action, p["mkfs_options"])
        the_plan["group_by"] = p["group_by"]
        return the_plan, existing

    def base_result(self, the_plan, existing):
        return dict(changed=False, plan=the_plan, existing=existing,
                    executed=self.runner.executed,
                    fstab_remove=[a["path"] for a in the_plan["actions"]
                                  if a["op"] == "fstab_remove"],
                    mdadm_conf={"path": self.conf_path, "changed": False},
                    initramfs={"needed": False, "ran": None},
                    drift=[] if self.params["plan_only"] else drift_items(the_plan, existing))

    def disabled_result(self):
        the_plan = {"arrays": [], "actions": [], "refused": [], "stops": [], "summary": [],
                    "result": [], "group_by": self.params["group_by"]}
        return dict(changed=False, plan=the_plan, existing=[], executed=[], fstab_remove=[],
                    mdadm_conf={"path": self.conf_path, "changed": False},
                    initramfs={"needed": False, "ran": None}, drift=[], mounts=[], arrays=[],
                    checks=raid_checks(the_plan, [], self.params["group_by"], "disabled"))

    # -- reading the node ---------------------------------------------------------------------
    def probe(self, mdstat, candidates):
        """Details of each array, /dev/md/<name> aliases, array fstypes, signatures of free drives."""
        module, runner = self.module, self.runner
        mdadm = module.get_bin_path("mdadm")
        details, aliases, fstypes, signatures = {}, {}, {}, {}
        for name in mdstat:
            if mdadm:
                rc, out = runner.probe([mdadm, "--detail", "--export", "/dev/" + name])
                if rc == 0:
                    details[name] = parse_detail_export(out)
        for entry in listdir(DEV_MD):
            real = os.path.realpath(os.path.join(DEV_MD, entry))
            aliases["/dev/md/" + entry] = os.path.basename(real)
        blkid = module.get_bin_path("blkid")
        for name in mdstat:
            devname = details.get(name, {}).get("MD_DEVNAME")
            device = "/dev/md/" + devname if devname else "/dev/" + name
            fstypes[device] = None
            if blkid:
                rc, out = runner.probe([blkid, "-p", "-o", "value", "-s", "TYPE", "/dev/" + name])
                fstypes[device] = (out.strip() or None) if rc == 0 else None
        wipefs = module.get_bin_path("wipefs", required=True)
        for disk in candidates:
            rc, out = runner.probe([wipefs, "--noheadings", "--output", "TYPE", "/dev/" + disk])
            if rc != 0:
                module.fail_json(msg="cannot probe /dev/%s for signatures (wipefs rc=%d)"
                                 % (disk, rc))
            signatures[disk] = sorted({t.strip() for t in out.splitlines() if t.strip()})
        return {"details": details, "aliases": aliases, "fstypes": fstypes,
                "signatures": signatures}

    def holders(self, names):
        """{block device: [holders]} from sysfs, a partition's holders counting for its disk
        (LVM or dm on nvme0n1p1 holds nvme0n1 too)."""
        result = {}
        for name in names:
            block = os.path.join(self.params["sysfs_root"], "block", name)
            result[name] = listdir(os.path.join(block, "holders"))
            for part in listdir(block):
                if part.startswith(name):
                    result[name] += listdir(os.path.join(block, part, "holders"))
        return result

    def fs_uuid(self, device):
        blkid = self.module.get_bin_path("blkid")
        if not blkid:
            return None
        rc, out = self.runner.probe([blkid, "-p", "-o", "value", "-s", "UUID", device])
        return (out.strip() or None) if rc == 0 else None

    # -- changing the node --------------------------------------------------------------------
    def apply(self, the_plan, result):
        module, runner = self.module, self.runner
        pending = [a for a in the_plan["actions"] if a["op"] in EXECUTED_OPS]
        for tool in sorted({a["cmd"][0] for a in pending}):
            if not module.get_bin_path(tool):
                module.fail_json(msg="%s is not installed on this node; the plan needs it (%s)"
                                 % (tool, "; ".join(the_plan["summary"])), plan=the_plan)
        settle = module.get_bin_path("udevadm")
        for action in pending:
            runner.run(action["cmd"])
            if action["op"] == "create" and settle:
                runner.run([settle, "settle"])
        created = [a["device"] for a in pending if a["op"] == "create"]
        if created or the_plan["stops"]:
            conf_changed = self.persist(created, the_plan["stops"])
            result["mdadm_conf"]["changed"] = conf_changed
            if conf_changed and self.params["update_initramfs"]:
                result["initramfs"] = {"needed": True, "ran": self.refresh_initramfs()}
        result["changed"] = bool(runner.executed)

    def persist(self, created, stops):
        """mdadm.conf entries for created arrays, none for stopped ones. Returns changed."""
        module, conf_path = self.module, self.conf_path
        try:
            before = read_file(conf_path, 1 << 20)
        except UnreadableFile as exc:
            if exc.errno != errno.ENOENT:
                module.fail_json(msg=str(exc), executed=self.runner.executed)
            before = ""
        lines = []
        for device in created:
            out = self.runner.run(["mdadm", "--detail", "--brief", device])
            lines.extend(line for line in out.splitlines() if line.startswith("ARRAY"))
        after = update_mdadm_conf(before, [s["uuid"] for s in stops], lines)
        if after == before:
            return False
        if before and os.path.exists(conf_path):
            module.backup_local(conf_path)
        directory = os.path.dirname(conf_path) or "."
        if not os.path.isdir(directory):
            os.makedirs(directory)
        fd, tmp = tempfile.mkstemp(prefix=".mdadm.conf.", dir=directory)
        with os.fdopen(fd, "w") as handle:
            handle.write(after)
        os.chmod(tmp, 0o644)
        module.atomic_move(tmp, conf_path)
        return True

    def refresh_initramfs(self):
        """update-initramfs -u, or dracut -f; the argv run, or None (with a warning)."""
        tool = self.module.get_bin_path("update-initramfs")
        argv = [tool, "-u"] if tool else None
        if not argv and self.module.get_bin_path("dracut"):
            argv = [self.module.get_bin_path("dracut"), "-f"]
        if argv:
            self.runner.run(argv)
        else:
            self.module.warn("mdadm.conf changed but neither update-initramfs nor dracut was "
                             "found: refresh the initramfs by hand")
        return argv

    def persistent_mounts(self, arrays, desired, the_plan, mounts):
        """The arrays mounted at a planned mount point (new or ours from before), for fstab."""
        planned_mounts = {a["mount"] for a in desired}
        mount_actions = [a for a in the_plan["actions"] if a["op"] == "mount"]
        out = []
        for array in arrays:
            if array["status"] == "existing" or array["mount"] not in planned_mounts:
                continue
            uuid = self.fs_uuid(array["device"]) \
                if self.probing and array["status"] != "planned" else None
            fstype = next((a["fstype"] for a in mount_actions if a["device"] == array["device"]),
                          None) or next((m["fstype"] for m in mounts
                                         if m["target"] == array["mount"]), "ext4")
            out.append({"path": array["mount"],
                        "src": "UUID=" + uuid if uuid else array["device"],
                        "fstype": fstype, "device": array["device"], "name": array["name"]})
        return out


def drift_items(the_plan, existing):
    """``[{setting, expected, actual}]`` for each planned array that does not exist yet and each
    kept array that is not mounted where planned."""
    by_disk = {d: e for e in existing for d in e["members"]}
    items = []
    for entry in the_plan["arrays"]:
        if entry["action"] != "create":
            continue
        holders = {by_disk[d]["name"] for d in entry["members"] if d in by_disk}
        actual = "; ".join("%s: %s" % (e["name"], ",".join(e["members"]))
                           for e in existing if e["name"] in holders) or "no array"
        items.append({"setting": "raid: %s members" % entry["name"],
                      "expected": "%s at %s" % (",".join(entry["members"]), entry["mount"]),
                      "actual": actual})
    created = {a["device"] for a in the_plan["actions"] if a["op"] == "create"}
    for action in the_plan["actions"]:
        if action["op"] == "mount" and action["device"] not in created:
            items.append({"setting": "raid: %s mount" % action["device"],
                          "expected": action["path"], "actual": "not mounted"})
    return items
