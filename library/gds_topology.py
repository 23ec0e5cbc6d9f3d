#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_topology
short_description: Discover GPUs, NVMe drives, RDMA NICs and their PCIe affinity from sysfs
description:
  - Reads the PCI tree from sysfs once and returns the C(gds_topology) facts that every later
    step of gds-commission takes its decisions from.
  - Classifies every GPU/NVMe/NIC pair the way C(nvidia-smi topo -mp) does (PIX, PXB, PHB, NODE,
    SYS) and builds the GPU-NVMe-NIC affinity groups of the NVIDIA GDS benchmarking guide.
  - Flags the NVMe drives that hold the running OS (mounted /, /boot, swap, or members of an md
    array or device-mapper volume that does) as C(system); they never join a group. Mounted
    devices are identified by major:minor (C(/proc/self/mountinfo), C(/sys/dev/block)), so
    C(/dev/root) and udev aliases count; without mountinfo, C(/proc/mounts) names and the kernel
    command line's C(root=) are used, and a system mount that leads to no block device is warned.
  - Understands the plain and the native-multipath NVMe sysfs layouts (path disks placed through
    the C(device) and C(multipath/) links, never through the C(nvmeXcYnZ) name; a dual-port drive
    is one drive with two paths), Intel VMD domains, devices straight on a root bus (cloud VMs),
    NVSwitches (NVIDIA functions that are not GPUs), SR-IOV virtual functions (counted under their
    physical function, never listed) and C(numa_node) -1.
  - Says what it cannot see. A bridge whose config space is short gets C(acs_unknown); class
    entries whose links loop or dangle are warned about, never dropped silently.
version_added: "1.0.0"
author: gds-commission contributors
options:
  sysfs_root:
    description: Where sysfs is mounted; a fixture tree or a simulated node's C(sys/) also works.
    type: path
    default: /sys
  procfs_root:
    description: Where procfs is mounted; its mounts, swaps and mdstat decide the system drives.
    type: path
    default: /proc
  gpu_index_source:
    description:
      - How GPU indices are numbered. C(nvml) uses NVML's order (what nvidia-smi shows) and fails
        when NVML is unusable; C(pci) uses ascending PCI bus id (nvidia-smi's default order);
        C(auto) uses NVML when it is usable and I(sysfs_root) is the live C(/sys), else PCI order.
    type: str
    choices: [auto, nvml, pci]
    default: auto
notes:
  - Supports check mode; it only reads.
  - Reading the ACS capability needs the full 4096-byte config space, which the kernel returns to
    root only; for other users the bridges' ACS fields are null, C(acs_unknown) says why and a
    warning names the file.
extends_documentation_fragment:
  - gds
  - gds.no_diff
  - gds.facts
"""

EXAMPLES = r"""
- name: Discover the PCIe topology
  gds_topology:

- name: Discover a simulated node's topology
  gds_topology:
    sysfs_root: /srv/sim/node1/sys
    procfs_root: /srv/sim/node1/proc

- name: Show the affinity groups
  ansible.builtin.debug:
    msg: "{{ ansible_facts['gds_topology']['groups'] }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: complex
  contains:
    gds_topology:
      description: The PCI model of the node.
      returned: always
      type: complex
      contains:
        gpus:
          description: NVIDIA GPUs (index, bdf, numa_node, device_id, switch, driver, name when NVML is used).
          type: list
          elements: dict
          sample: [{index: 0, bdf: "0000:07:00.0", numa_node: 0, device_id: "0x20b0", switch: "0000:05:00.0"}]
        nvme:
          description:
            - NVMe namespaces (name, controller, controllers, bdf, numa_node, model, size_bytes, system, switch, paths).
            - C(controller), C(bdf) and C(switch) are those of the first controller; C(paths) lists every
              controller the namespace is reached through (name of the path disk, controller, bdf, switch),
              one for a plain drive, two for a dual-port drive. The matrix takes the best path.
          type: list
          elements: dict
          sample: [{name: nvme0n1, controller: nvme0, controllers: [nvme0], bdf: "0000:08:00.0", system: false,
                    paths: [{name: nvme0n1, controller: nvme0, bdf: "0000:08:00.0", switch: "0000:05:00.0"}]}]
        nics:
          description:
            - RDMA devices on PCI (name, netdev, bdf, numa_node, switch, vfs).
            - SR-IOV virtual functions are not listed, even with an RDMA device of their own; C(vfs) is the
              number of virtual functions enabled on the physical function (0 without SR-IOV).
          type: list
          elements: dict
          sample: [{name: mlx5_0, netdev: ib0, bdf: "0000:0c:00.0", numa_node: 0, vfs: 0}]
        matrix:
          description: Link class between every pair of GPU<index>, NVMe names and NIC names (X on the diagonal).
          type: dict
          sample: {GPU0: {GPU1: PIX, nvme0n1: PXB}}
        groups:
          description: Affinity groups (id, gpus, nvme, nics, numa_node, link = worst GPU-drive class).
          type: list
          elements: dict
          sample: [{id: 1, gpus: [0, 1], nvme: [nvme0n1, nvme1n1], nics: [mlx5_0], numa_node: 0, link: PXB}]
        bridges:
          description:
            - Bridges above GPUs, data drives (every path) and NICs with their ACS capability and control
              (null without ACS).
            - C(acs_unknown) is null when the state was read, else why it could not be (naming the config
              file, e.g. a config space shorter than 4096 bytes, as non-root readers get 64); then the ACS
              fields are null too and the state is unknown, not absent.
          type: list
          elements: dict
          sample: [{bdf: "0000:04:10.0", port_type: downstream, acs_offset: 328, acs_cap: 95, acs_ctrl: 29, acs_unknown: null}]
        numa_nodes:
          description: NUMA node numbers seen on PCI devices (-1 where the firmware gives none).
          type: list
          elements: int
checks:
  description:
    - Report checks (name, verdict, expected, actual, detail) for what discovery could not see.
    - "C(topology: ACS state readable on GPU/NVMe/NIC bridges) is WARN when a bridge's ACS state is
      unknown, naming the bridges and config files."
    - "C(topology: sysfs and procfs read without warnings) is WARN when discovery warned (skipped
      devices, looping links, unresolvable system mounts)."
  returned: always
  type: list
  elements: dict
  sample: [{name: "topology: ACS state readable on GPU/NVMe/NIC bridges", verdict: PASS, expected: 0, actual: 0}]
table:
  description: The affinity groups as text, one row per group (the guide's Table 5).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gds_affinity import affinity_table, discover, visibility_checks
from ansible.module_utils.gds_files import is_live_root
from ansible.module_utils.gds_nvml import NvmlUnavailable, nvml_gpus
from ansible.module_utils.gds_pci import TopologyError
from ansible.module_utils.gds_procfs import ProcfsError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/sys"),
            procfs_root=dict(type="path", default="/proc"),
            gpu_index_source=dict(type="str", default="auto", choices=["auto", "nvml", "pci"]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    nvml = None
    live = is_live_root(params["sysfs_root"], "/sys")
    if params["gpu_index_source"] == "nvml" or (params["gpu_index_source"] == "auto" and live):
        try:
            nvml = nvml_gpus()
        except NvmlUnavailable as exc:
            if params["gpu_index_source"] == "nvml":
                module.fail_json(msg="gpu_index_source=nvml but NVML is unusable: %s" % exc)
    try:
        facts, warnings = discover(params["sysfs_root"], params["procfs_root"],
                                   nvml_bus_ids=[g["bdf"] for g in nvml] if nvml else None)
    except (TopologyError, ProcfsError) as exc:
        module.fail_json(msg=str(exc))
    if nvml:
        names = {g["bdf"]: g for g in nvml}
        for gpu in facts["gpus"]:
            if gpu["bdf"] in names:
                gpu["name"] = names[gpu["bdf"]]["name"]
    facts["index_source"] = "nvml" if nvml else "pci"
    for warning in warnings:
        module.warn(warning)
    module.exit_json(changed=False, ansible_facts={"gds_topology": facts}, table=affinity_table(facts),
                     checks=visibility_checks(facts, warnings))


if __name__ == "__main__":
    main()
