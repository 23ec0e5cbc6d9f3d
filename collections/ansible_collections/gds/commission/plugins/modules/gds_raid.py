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
author: gds-commission contributors (!UNKNOWN)
options:
  topology:
    description: The C(gds_topology) facts (module gds_topology); C(nvme) and C(groups) are used.
    type: dict
    required: true
  enabled:
    description:
      - "C(false) plans and changes nothing, and returns only a C(raid: plan) SKIP check saying so
        (the options are still validated)."
    type: bool
    default: true
  group_by:
    description:
      - C(affinity) plans one array per topology group with data drives.
      - C(switch) plans one array per PCIe switch from the drives' C(switch) field (nodes without
        GPUs, such as the QEMU guest); drives behind no switch join no array.
    type: str
    choices: [affinity, switch]
    default: affinity
  mount_prefix:
    description:
      - Mount points are this prefix followed by the array number (C(/raid1), C(/raid2)...).
      - An absolute, normalised path (no C(.) or C(..) component, no C(//), no spaces or shell
        characters), not C(/), and not inside a system directory (C(/boot), C(/etc), C(/usr),
        C(/var), C(/dev), C(/proc), C(/sys), C(/run), C(/root), C(/bin), C(/sbin), C(/lib*),
        C(/snap)). Anything else fails before anything is read or planned.
    type: str
    default: /raid
  name_prefix:
    description:
      - md array names are this prefix followed by the array number (C(/dev/md/raid1)).
      - Letters, digits, C(_), C(-) and C(.), starting with a letter or digit, no C(..), not only
        digits, at most 29 characters (mdadm names have at most 32, the number takes up to 3), so
        that every array stays a name under C(/dev/md/).
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
  p2pdma:
    description:
      - "The node uses GDS through PCI P2PDMA, which NVIDIA does not support on md RAID. The arrays
        are planned but never created, and the check C(raid: md RAID with P2PDMA) FAILs when md
        data arrays exist."
    type: bool
    default: false
  refused_verdict:
    description: "Verdict of the C(raid: plan) check when part of the plan is refused."
    type: str
    choices: [WARN, FAIL]
    default: WARN
  plan_only:
    description:
      - Only plan; run no command at all, not even read-only probes (simulated nodes, whose procfs
        is a fixture tree, and a command would act on the controller's devices).
      - Required when O(procfs_root) is not the running system's C(/proc), unless in check mode.
    type: bool
    default: false
  mdadm_conf:
    description: mdadm.conf to persist the arrays in; default C(/etc/mdadm/mdadm.conf) when
      C(/etc/mdadm) exists (Debian, Ubuntu), else C(/etc/mdadm.conf).
    type: path
  update_initramfs:
    description: Refresh the initramfs (update-initramfs -u, or dracut -f) when mdadm.conf changed.
    type: bool
    default: true
  mkfs_options:
    description:
      - Extra mkfs.ext4 arguments, placed before the device, one argument per item (C([-m, "0"])).
      - Items are single words (no spaces, quotes or shell characters); an item that is not an
        option must be the value of the mke2fs option before it, so that no item can name another
        device to format.
    type: list
    elements: str
    default: []
notes:
  - "Below I(procfs_root) it reads C(mdstat), C(mounts) and C(swaps); below I(sysfs_root), the block
    devices' holders and slaves."
  - Check mode returns the full plan (what would be unmounted, stopped, wiped, created, formatted
    and mounted, with the commands) and changes nothing; it runs read-only probes (mdadm --detail,
    wipefs without --all, blkid) on a live node.
  - Commands run as argument lists through run_command, never through a shell.
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
  - gds.commission.gds.sysfs
  - gds.commission.gds.procfs
"""

EXAMPLES = r"""
- name: Show what regrouping would do
  gds.commission.gds_raid:
    topology: "{{ ansible_facts['gds_topology'] }}"
  check_mode: true
  register: raid_plan

- name: Regroup the DGX data drives per PCIe switch (destroys the old /raid array)
  gds.commission.gds_raid:
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
checks:
  description:
    - "The report checks C({name, verdict, expected, actual, detail?}): C(raid: plan) (or
      C(raid: md RAID with P2PDMA) with O(p2pdma)) and one C(raid: <name> (GPUs ...)) per planned
      array."
    - Verdicts follow how the module ran (applied, check mode, plan only) and O(refused_verdict).
  returned: always
  type: list
  elements: dict
drift:
  description: Differences between the planned and the present arrays that this run would change
    (empty with plan_only).
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule, SYSFS_ROOT, PROCFS_ROOT  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import ProcfsError
from ansible_collections.gds.commission.plugins.module_utils.tune.raid import RaidError
from ansible_collections.gds.commission.plugins.module_utils.tune.raid_host import RaidHost

ARGUMENT_SPEC = dict(
    topology=dict(type="dict", required=True),
    enabled=dict(type="bool", default=True),
    group_by=dict(type="str", default="affinity", choices=["affinity", "switch"]),
    mount_prefix=dict(type="str", default="/raid"),
    name_prefix=dict(type="str", default="raid"),
    chunk_kb=dict(type="int", default=512),
    allow_destroy=dict(type="bool", default=False),
    allow_unmount=dict(type="bool", default=False),
    plan_only=dict(type="bool", default=False),
    p2pdma=dict(type="bool", default=False),
    refused_verdict=dict(type="str", default="WARN", choices=["WARN", "FAIL"]),
    procfs_root=PROCFS_ROOT,
    sysfs_root=SYSFS_ROOT,
    mdadm_conf=dict(type="path"),
    update_initramfs=dict(type="bool", default=True),
    mkfs_options=dict(type="list", elements="str", default=[]),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = RaidHost(module).run()
    except (RaidError, ProcfsError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
