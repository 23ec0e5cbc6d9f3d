#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_raid
short_description: Regroup NVMe md RAID0 arrays by PCIe switch / GPU affinity
description:
  - Plans one md RAID0 array per GPU-NVMe affinity group that has data drives (the GDS
    benchmarking guide's Tables 4 and 5), or one per PCIe switch, compares the plan with the arrays
    present (C(/proc/mdstat), C(mdadm --detail)) and applies it with mdadm, wipefs and mkfs.ext4.
  - Created arrays are C(/dev/md/<name_prefix>N) (named arrays, stable across reboots), formatted
    ext4 with C(stride) and C(stripe_width) from the chunk size, to be mounted at
    C(<mount_prefix>N). The module does not mount them itself; it returns C(mounts) (source, path,
    fstype) for M(ansible.posix.mount), which keeps fstab, check mode and diff in one place.
  - An existing array whose members equal a planned array is kept as it is, whatever its md name
    or mount point. A drive that no planned array uses is never touched.
  - Safety. Nothing is destroyed unless O(allow_destroy=true), neither by stopping an existing
    array nor by wiping a drive that carries a filesystem, partition table or md signature. A mounted array or drive
    is unmounted only with O(allow_unmount=true) as well. An array that holds a system drive (the
    running OS, from the topology facts and procfs), an array that also holds a drive no plan
    uses, and anything used by device-mapper/LVM are never touched. Refused parts of the plan are
    returned in C(plan.refused) with the reason; the rest is applied.
  - Persists the created arrays in mdadm.conf (and removes the entries of stopped arrays), then
    refreshes the initramfs with update-initramfs or dracut, whichever the distribution has.
version_added: "1.0.0"
author: gds-commission contributors
options:
  topology:
    description: The C(gds_topology) facts (module gds_topology); C(nvme) and C(groups) are used.
    type: dict
    required: true
  group_by:
    description:
      - C(affinity) plans one array per topology group with data drives.
      - C(switch) plans one array per PCIe switch from the drives' C(switch) field (nodes without
        GPUs, such as the QEMU guest); drives behind no switch join no array.
    type: str
    choices: [affinity, switch]
    default: affinity
  mount_prefix:
    description: Mount points are this prefix followed by the array number (C(/raid1), C(/raid2)...).
    type: path
    default: /raid
  name_prefix:
    description: md array names are this prefix followed by the array number (C(/dev/md/raid1)).
    type: str
    default: raid
  chunk_kb:
    description: RAID0 chunk size in KiB (a power of two); DGX OS uses 512.
    type: int
    default: 512
  allow_destroy:
    description: Allow stopping existing arrays and wiping drives that carry data signatures.
    type: bool
    default: false
  allow_unmount:
    description: Allow unmounting an array or drive that is regrouped (needs O(allow_destroy) too).
    type: bool
    default: false
  plan_only:
    description:
      - Only plan; run no command at all, not even read-only probes (simulated nodes, whose procfs
        is a fixture tree, and a command would act on the controller's devices).
      - Required when O(procfs_root) is not the running system's C(/proc), unless in check mode.
    type: bool
    default: false
  procfs_root:
    description: Where procfs is mounted (mdstat, mounts, swaps).
    type: path
    default: /proc
  sysfs_root:
    description: Where sysfs is mounted (block device holders and slaves).
    type: path
    default: /sys
  mdadm_conf:
    description: mdadm.conf to persist the arrays in; default C(/etc/mdadm/mdadm.conf) when
      C(/etc/mdadm) exists (Debian, Ubuntu), else C(/etc/mdadm.conf).
    type: path
  update_initramfs:
    description: Refresh the initramfs (update-initramfs -u, or dracut -f) when mdadm.conf changed.
    type: bool
    default: true
  mkfs_options:
    description: Extra mkfs.ext4 arguments, placed before the device.
    type: list
    elements: str
    default: []
notes:
  - Check mode returns the full plan (what would be unmounted, stopped, wiped, created, formatted
    and mounted, with the commands) and changes nothing; it runs read-only probes (mdadm --detail,
    wipefs without --all, blkid) on a live node.
  - Commands run as argument lists through run_command, never through a shell.
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Show what regrouping would do
  gds_raid:
    topology: "{{ ansible_facts['gds_topology'] }}"
  check_mode: true
  register: raid_plan

- name: Regroup the DGX data drives per PCIe switch (destroys the old /raid array)
  gds_raid:
    topology: "{{ ansible_facts['gds_topology'] }}"
    allow_destroy: true
    allow_unmount: true
  register: raid

- name: Mount what it created
  ansible.posix.mount:
    path: "{{ item.path }}"
    src: "{{ item.src }}"
    fstype: "{{ item.fstype }}"
    opts: defaults,nofail,noatime
    state: mounted
  loop: "{{ raid.mounts }}"
"""

RETURN = r"""
arrays:
  description:
    - The data arrays after this run, and which GPUs are local to each.
    - C(status) is C(kept) (existed already), C(created), C(planned) (check mode or plan_only) or
      C(existing) (an array the plan wanted to regroup but was refused; it stays as it is).
  returned: always
  type: list
  elements: dict
  sample: [{device: /dev/md/raid1, mount: /raid1, members: [nvme0n1, nvme1n1], gpus: [0, 1],
            name: raid1, md: null, status: created}]
plan:
  description: The plan; C(summary) lines, C(arrays) (per planned array C(action) keep, create or
    refuse, with C(reason)), ordered C(actions) (C(op), C(text), C(cmd)), C(refused), C(stops).
  returned: always
  type: dict
mounts:
  description: Persistent mounts for M(ansible.posix.mount) (path, src, fstype, device); src is
    C(UUID=...) once the filesystem exists.
  returned: always
  type: list
  elements: dict
fstab_remove:
  description: Mount points of stopped arrays whose fstab entries must go.
  returned: always
  type: list
  elements: str
existing:
  description: The md arrays found (name, device, level, members, mounts, uuid).
  returned: always
  type: list
  elements: dict
executed:
  description: The commands run, in order.
  returned: always
  type: list
  elements: list
mdadm_conf:
  description: The mdadm.conf path and whether it changed.
  returned: always
  type: dict
initramfs:
  description: Whether the initramfs was refreshed, and with which command.
  returned: always
  type: dict
drift:
  description: Differences between the planned and the present arrays that this run would change
    (empty with plan_only).
  returned: always
  type: list
  elements: dict
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gds_files import listdir
from ansible.module_utils.gds_procfs import (
    ProcfsError, base_disk, mounted_disks, read_mdstat, read_mounts, read_swaps, system_disks,
)
from ansible.module_utils.gds_raid import (
    RaidError, command, describe, desired_arrays, existing_arrays, parse_detail_export, plan,
    update_mdadm_conf,
)

EXECUTED_OPS = ("umount", "stop", "zero_superblock", "wipe", "create", "mkfs")


DEV_MD = "/dev/md"


def _is_live(procfs_root):
    """True when procfs_root is this system's /proc (commands then act on the devices it shows)."""
    return os.path.realpath(procfs_root) == "/proc"


_listdir = listdir


class Runner(object):
    def __init__(self, module):
        self.module = module
        self.executed = []

    def probe(self, argv):
        """A read-only command; returns (rc, stdout)."""
        rc, out, _err = self.module.run_command(argv, check_rc=False)
        return rc, out

    def run(self, argv, **extra):
        rc, out, err = self.module.run_command(argv, check_rc=False)
        self.executed.append(argv)
        if rc != 0:
            self.module.fail_json(msg="%s failed (rc=%d): %s" % (" ".join(argv), rc,
                                                                (err or out).strip()),
                                  cmd=argv, rc=rc, stdout=out, stderr=err,
                                  executed=self.executed, **extra)
        return out


def _probe_inputs(runner, mdstat, candidates):
    """Details of each array, /dev/md/<name> aliases, signatures of free drives, array fstypes."""
    mdadm = runner.module.get_bin_path("mdadm")
    details, aliases, fstypes, signatures = {}, {}, {}, {}
    for name in mdstat:
        if mdadm:
            rc, out = runner.probe([mdadm, "--detail", "--export", "/dev/" + name])
            if rc == 0:
                details[name] = parse_detail_export(out)
    for entry in _listdir(DEV_MD):
        real = os.path.realpath(os.path.join(DEV_MD, entry))
        aliases["/dev/md/" + entry] = os.path.basename(real)
    blkid = runner.module.get_bin_path("blkid")
    for name in mdstat:
        devname = details.get(name, {}).get("MD_DEVNAME")
        device = "/dev/md/" + devname if devname else "/dev/" + name
        fstypes[device] = None
        if blkid:
            rc, out = runner.probe([blkid, "-p", "-o", "value", "-s", "TYPE", "/dev/" + name])
            fstypes[device] = (out.strip() or None) if rc == 0 else None
    wipefs = runner.module.get_bin_path("wipefs", required=True)
    for disk in candidates:
        rc, out = runner.probe([wipefs, "--noheadings", "--output", "TYPE", "/dev/" + disk])
        if rc != 0:
            runner.module.fail_json(msg="cannot probe /dev/%s for signatures (wipefs rc=%d)"
                                    % (disk, rc))
        signatures[disk] = sorted({t.strip() for t in out.splitlines() if t.strip()})
    return details, aliases, fstypes, signatures


def _fs_uuid(runner, device):
    blkid = runner.module.get_bin_path("blkid")
    if not blkid:
        return None
    rc, out = runner.probe([blkid, "-p", "-o", "value", "-s", "UUID", device])
    return (out.strip() or None) if rc == 0 else None


def _default_mdadm_conf():
    return "/etc/mdadm/mdadm.conf" if os.path.isdir("/etc/mdadm") else "/etc/mdadm.conf"


def _persist(module, runner, conf_path, created, stops):
    """mdadm.conf entries for created arrays, none for stopped ones. Returns changed."""
    try:
        with open(conf_path) as handle:
            before = handle.read()
    except FileNotFoundError:
        before = ""
    except OSError as exc:
        module.fail_json(msg="cannot read %s: %s" % (conf_path, exc), executed=runner.executed)
    lines = []
    for device in created:
        out = runner.run(["mdadm", "--detail", "--brief", device])
        lines.extend(l for l in out.splitlines() if l.startswith("ARRAY"))
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


def _drift(the_plan, existing):
    by_disk = {d: e for e in existing for d in e["members"]}
    items = []
    for entry in the_plan["arrays"]:
        if entry["action"] == "refuse":
            continue
        members = ",".join(entry["members"])
        if entry["action"] == "create":
            holders = {by_disk[d]["name"] for d in entry["members"] if d in by_disk}
            actual = "; ".join("%s: %s" % (e["name"], ",".join(e["members"]))
                               for e in existing if e["name"] in holders) or "no array"
            items.append({"setting": "raid: %s members" % entry["name"],
                          "expected": "%s at %s" % (members, entry["mount"]), "actual": actual})
    for action in the_plan["actions"]:
        if action["op"] == "mount" and not any(a["op"] == "create" and a["device"] == action["device"]
                                               for a in the_plan["actions"]):
            items.append({"setting": "raid: %s mount" % action["device"],
                          "expected": action["path"], "actual": "not mounted"})
    return items


def main():
    module = AnsibleModule(
        argument_spec=dict(
            topology=dict(type="dict", required=True),
            group_by=dict(type="str", default="affinity", choices=["affinity", "switch"]),
            mount_prefix=dict(type="path", default="/raid"),
            name_prefix=dict(type="str", default="raid"),
            chunk_kb=dict(type="int", default=512),
            allow_destroy=dict(type="bool", default=False),
            allow_unmount=dict(type="bool", default=False),
            plan_only=dict(type="bool", default=False),
            procfs_root=dict(type="path", default="/proc"),
            sysfs_root=dict(type="path", default="/sys"),
            mdadm_conf=dict(type="path"),
            update_initramfs=dict(type="bool", default=True),
            mkfs_options=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    live = _is_live(p["procfs_root"])
    if not live and not p["plan_only"] and not module.check_mode:
        module.fail_json(msg="procfs_root %s is not this system's /proc: commands would act on the "
                             "controller's own devices, not on that tree; use plan_only=true"
                             % p["procfs_root"])
    probing = live and not p["plan_only"]
    runner = Runner(module)
    topology = p["topology"]
    try:
        mdstat = read_mdstat(p["procfs_root"])
        mounts = read_mounts(p["procfs_root"])
        swaps = read_swaps(p["procfs_root"])
        system = system_disks(p["procfs_root"], p["sysfs_root"], mounts=mounts, swaps=swaps,
                              mdstat=mdstat)
        disk_mounts = mounted_disks(p["procfs_root"], p["sysfs_root"], mounts=mounts, mdstat=mdstat)
    except ProcfsError as exc:
        module.fail_json(msg=str(exc))
    system |= {d.get("name") for d in topology.get("nvme") or [] if isinstance(d, dict)
               and d.get("system")}
    try:
        desired = desired_arrays(topology, p["group_by"], p["mount_prefix"], p["name_prefix"])
    except RaidError as exc:
        module.fail_json(msg=str(exc))
    planned_disks = sorted({d for a in desired for d in a["members"]})
    in_arrays = {base_disk(m["device"]) for info in mdstat.values() for m in info["members"]}
    details = aliases = fstypes = signatures = None
    if probing:
        details, aliases, fstypes, signatures = _probe_inputs(
            runner, mdstat, [d for d in planned_disks if d not in in_arrays])
    holders = {}
    for name in list(mdstat) + planned_disks:
        block = os.path.join(p["sysfs_root"], "block", name)
        holders[name] = _listdir(os.path.join(block, "holders"))
        for part in _listdir(block):  # partitions: LVM or dm on nvme0n1p1 holds nvme0n1 too
            if part.startswith(name):
                holders[name] += _listdir(os.path.join(block, part, "holders"))
    existing = existing_arrays(mdstat, mounts, details=details, aliases=aliases,
                               disk_mounts=disk_mounts, holders=holders)
    try:
        the_plan = plan(desired, existing, system=system, disk_mounts=disk_mounts, mounts=mounts,
                        signatures=signatures, disk_holders=holders, fstypes=fstypes,
                        allow_destroy=p["allow_destroy"], allow_unmount=p["allow_unmount"],
                        chunk_kb=p["chunk_kb"], topology=topology)
    except RaidError as exc:
        module.fail_json(msg=str(exc))
    conf_path = p["mdadm_conf"] or _default_mdadm_conf()
    if any(a["op"] in ("create", "stop") for a in the_plan["actions"]):
        the_plan["actions"].append({"op": "persist", "path": conf_path})
    for action in the_plan["actions"]:
        action["text"] = describe(action) if action["op"] != "persist" else (
            "record the arrays in %s and refresh the initramfs%s" % (
                conf_path, "" if p["update_initramfs"] else " (disabled)"))
        action["cmd"] = command(action, p["mkfs_options"])
    the_plan["group_by"] = p["group_by"]
    pending = [a for a in the_plan["actions"] if a["op"] in EXECUTED_OPS]
    mount_actions = [a for a in the_plan["actions"] if a["op"] == "mount"]
    result = dict(changed=False, plan=the_plan, existing=existing, executed=runner.executed,
                  fstab_remove=[a["path"] for a in the_plan["actions"] if a["op"] == "fstab_remove"],
                  mdadm_conf={"path": conf_path, "changed": False},
                  initramfs={"needed": False, "ran": None},
                  drift=[] if p["plan_only"] else _drift(the_plan, existing))
    arrays = [dict(a) for a in the_plan["result"]]
    applying = not (module.check_mode or p["plan_only"])
    if not applying:
        for array in arrays:
            if array["status"] == "created":
                array["status"] = "planned"
        result["changed"] = bool(module.check_mode and (pending or mount_actions)
                                 and not p["plan_only"])
    else:
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
            conf_changed = _persist(module, runner, conf_path, created, the_plan["stops"])
            result["mdadm_conf"]["changed"] = conf_changed
            if conf_changed and p["update_initramfs"]:
                tool = module.get_bin_path("update-initramfs")
                argv = [tool, "-u"] if tool else None
                if not argv and module.get_bin_path("dracut"):
                    argv = [module.get_bin_path("dracut"), "-f"]
                result["initramfs"] = {"needed": True, "ran": argv}
                if argv:
                    runner.run(argv)
                else:
                    module.warn("mdadm.conf changed but neither update-initramfs nor dracut was "
                                "found: refresh the initramfs by hand")
        result["changed"] = bool(runner.executed)
    # persistent mounts: the arrays mounted at the planned mount point (new or ours from before)
    planned_mounts = {a["mount"] for a in desired}
    mounts_out = []
    for array in arrays:
        if array["status"] == "existing" or array["mount"] not in planned_mounts:
            continue
        uuid = _fs_uuid(runner, array["device"]) if probing and array["status"] != "planned" else None
        fstype = next((a["fstype"] for a in mount_actions if a["device"] == array["device"]),
                      None) or next((m["fstype"] for m in mounts if m["target"] == array["mount"]),
                                    "ext4")
        mounts_out.append({"path": array["mount"], "src": "UUID=" + uuid if uuid else array["device"],
                           "fstype": fstype, "device": array["device"], "name": array["name"]})
    result["mounts"] = mounts_out
    result["arrays"] = arrays
    module.exit_json(**result)


if __name__ == "__main__":
    main()
