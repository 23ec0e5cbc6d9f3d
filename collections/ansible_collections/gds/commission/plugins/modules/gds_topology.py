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
  - Returns the PCIe link state of every GPU, NVMe controller, RDMA NIC and every bridge port on
    their paths to the root port (C(pcie_links)), and a C(pcie) colon C(link) check per entry, FAIL
    when a link trained below the best both of its ends support, naming the slow end.
  - With I(link_baseline), records the link states at commissioning and reports each link that
    changed since then as drift in check mode.
  - Says what it cannot see. A bridge whose config space is short gets C(acs_unknown); class
    entries whose links loop or dangle are warned about, never dropped silently.
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
options:
  gpu_index_source:
    description:
      - How GPU indices are numbered. C(nvml) uses NVML's order (what nvidia-smi shows) and fails
        when NVML is unusable; C(pci) uses ascending PCI bus id (nvidia-smi's default order);
        C(auto) uses NVML when it is usable and I(sysfs_root) is the live C(/sys), else PCI order.
    type: str
    choices: [auto, nvml, pci]
    default: auto
  link_baseline:
    description:
      - A JSON file with the link state of every C(pcie_links) entry (C(x16 16.0 GT/s); on both
        ends of a GPU's link C(x16 up to 16.0 GT/s), since a GPU trains its speed down when idle).
      - Not in check mode it is written (atomically, the previous file kept as a timestamped
        backup) when the states differ, which reports C(changed). In check mode nothing is written
        and every link that differs from the file is a C(drift) item, which also reports C(changed).
      - Unset, no baseline is read or written.
    type: path
notes:
  - "Below I(sysfs_root) it walks the PCI tree (a fixture tree or a simulated node's C(sys/) also
    works); below I(procfs_root), C(mounts), C(swaps) and C(mdstat) decide the system drives."
  - Supports check mode; it only reads sysfs, and writes only I(link_baseline), never in check mode.
  - Reading the ACS capability needs the full 4096-byte config space, which the kernel returns to
    root only; for other users the bridges' ACS fields are null, C(acs_unknown) says why and a
    warning names the file.
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
  - gds.commission.gds.facts
  - gds.commission.gds.sysfs
  - gds.commission.gds.procfs
"""

EXAMPLES = r"""
- name: Discover the PCIe topology
  gds.commission.gds_topology:

- name: Discover a simulated node's topology
  gds.commission.gds_topology:
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
      description:
        - The PCI model of the node.
        - Described as a whole, every key and which may be null, by the JSON schema
          C(plugins/module_utils/hw/facts_schema.py) (docs/modules.md, The facts schema).
      returned: always
      type: complex
      contains:
        gpus:
          description:
            - NVIDIA GPUs (index, bdf, numa_node, device_id, switch, driver, nics, nic_link, name when NVML is used).
            - C(nics) lists every NIC by link class to the GPU, best first (then by name); C(nic_link) is the
              class of the first, null without NICs.
          type: list
          elements: dict
          sample: [{index: 0, bdf: "0000:07:00.0", numa_node: 0, device_id: "0x20b0", switch: "0000:05:00.0",
                    nics: [mlx5_0, mlx5_1], nic_link: PXB}]
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
        disks:
          description:
            - Whole disks that are no PCIe NVMe namespace (name, kind, bdf, numa_node, system, switch,
              size_bytes, unknown), each with the PCI function its data crosses, the nearest above it in
              sysfs; C(kind) virtio, scsi (behind an HBA), ata, usb, other, or fabrics (NVMe over
              fabrics, with controller, transport, address and nic; C(bdf) that of the interface the
              address names with host_iface).
            - C(bdf) is null where no PCI function is known, and C(unknown) says why.
          type: list
          elements: dict
          sample: [{name: vda, kind: virtio, bdf: "0000:00:01.0", numa_node: -1, system: false, switch: null,
                    size_bytes: 500000000000}]
        nics:
          description:
            - RDMA devices of /sys/class/infiniband (name, netdev, netdevs, bdf, numa_node, switch, vfs, fw_ver,
              software, ports).
            - C(ports) has one entry per C(ports/<n>/) directory, C({port, state, phys_state, rate_gbps, rate,
              link_layer, netdev, gid}); C(state) and C(phys_state) without the kernel's number (C(ACTIVE),
              C(LinkUp)), C(rate_gbps) a float from C(rate) (C(400 Gb/sec (4X NDR))), C(gid) GID 0 when set.
            - A port's C(netdev) is the one its GID table names (RoCE), else the PCI function's netdev whose
              C(dev_port)/C(dev_id) maps to it (IPoIB), as C(ibdev2netdev) finds them; C(netdevs) lists the ports'
              netdevs and then the function's others; C(netdev) is the first.
            - C(software) is true for rxe and siw devices, which have no PCI function of their own; they are placed
              by the PCI function of their netdev (C(bdf)); one whose netdev has none is warned about and not listed.
            - SR-IOV virtual functions are not listed, even with an RDMA device of their own; C(vfs) is the
              number of virtual functions enabled on the physical function (0 without SR-IOV).
          type: list
          elements: dict
          sample: [{name: mlx5_0, netdev: ibp12s0, netdevs: [ibp12s0], bdf: "0000:0c:00.0", numa_node: 0, vfs: 0,
                    fw_ver: "20.39.1002", software: false,
                    ports: [{port: 1, state: ACTIVE, phys_state: LinkUp, rate_gbps: 200.0, rate: "200 Gb/sec (4X HDR)",
                             link_layer: InfiniBand, netdev: ibp12s0}]}]
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
        p2pdma:
          description:
            - What the kernel's P2PDMA will decide for each provider (GPU, function publishing p2pmem) and client
              (data drive controller, NIC) pair, from the tree, the ACS Control registers, the CPU and the kernel's
              host-bridge whitelist (docs/p2pdma.md).
            - C(map) is C(bus_address) (routed in the switch), C(host_bridge), C(refused) or C(unknown).
          type: dict
          sample: {cpu_allows: false, whitelist: "Linux 7.3.4 ...", providers: ["0000:04:00.0"],
                   pairs: [{provider: "0000:04:00.0", client: "0000:05:00.0", map: bus_address, distance: 4,
                            common: "0000:03:00.0", acs_redirect: [], reason: "below 0000:03:00.0, no ACS redirect"}]}
        index_source:
          description: Where the GPU indices come from, C(nvml) (NVML's order) or C(pci) (ascending PCI bus id).
          type: str
          sample: pci
        nvlink:
          description:
            - NVLinks between GPUs from NVML, as C(nvidia-smi topo -m) counts them (its NV# cells), C(GPU<i>)
              to C(GPU<j>) to the number of links. Behind NVSwitches every active link of a GPU
              counts for each peer NVML says it reaches over NVLink. A GPU without NVLink has an empty map.
            - Null when NVML was not used (a simulated tree, or NVML unusable), meaning unknown, not "no NVLink".
          type: dict
          sample: {GPU0: {GPU1: 18}, GPU1: {GPU0: 18}}
        pcie_links:
          description:
            - One entry per GPU, NVMe controller (every path of a drive), RDMA NIC, the PCI function
              of each data disk and bridge port on their paths to the root port, sorted by bdf, from
              C(current_link_speed), C(max_link_speed), C(current_link_width) and C(max_link_width).
            - C(kind) is gpu, nvme, nic, disk or bridge; C(port) the PCIe port type (endpoint, root_port,
              upstream, downstream). Speeds are floats in GT/s, widths ints; null when unreadable.
            - An endpoint or switch upstream port shows the link to the port above it (C(upstream));
              a root or downstream port the link to the device below. C(partner) is the other end
              of that link (null when it is on no path). C(expected_speed_gts)/C(expected_width)
              are the best both ends support (the lower of the two maxima; without a partner its
              own maximum).
            - C(degraded) is true when the current speed or width is below the expected, null when
              a value is unknown; C(problem) names the files that could not be read (missing,
              C(Unknown), width 0, unreadable), else null.
          type: list
          elements: dict
          sample: [{bdf: "0000:08:00.0", kind: nvme, port: endpoint, current_speed_gts: 16.0, max_speed_gts: 16.0,
                    current_width: 4, max_width: 4, expected_speed_gts: 16.0, expected_width: 4,
                    degraded: false, upstream: "0000:04:10.0", partner: "0000:04:10.0", problem: null}]
checks:
  description:
    - Report checks (name, verdict, expected, actual, detail) for what discovery could not see.
    - "C(topology: ACS state readable on GPU/NVMe/NIC bridges) is WARN when a bridge's ACS state is
      unknown, naming the bridges and config files."
    - "C(topology: sysfs and procfs read without warnings) is WARN when discovery warned (skipped
      devices, looping links, unresolvable system mounts)."
    - "C(topology: node data is valid UTF-8), only when a file held bytes that are not UTF-8: WARN
      naming the files; the bytes are escaped as C(\\xNN) in the facts, never a failed task."
    - "C(pcie: link <bdf>) for every C(pcie_links) entry: FAIL when the link runs below the best both
      ends support (the detail names the slow end, e.g. switch upstream port 0000:01:00.0 x8 of x16),
      WARN when a value could not be read. A GPU's link is judged on width only here (a GPU trains
      its speed down when idle; the benchmark judges its speed under load)."
  returned: always
  type: list
  elements: dict
  sample: [{name: "topology: ACS state readable on GPU/NVMe/NIC bridges", verdict: PASS, expected: 0, actual: 0}]
drift:
  description:
    - In check mode with I(link_baseline), one item per link whose state differs from the baseline,
      C(setting) C(pcie link <bdf>), C(expected) the baseline's state, C(actual) the current one
      (C(absent) for a link that appeared or vanished); one item C(pcie link baseline <path>) when
      the file is missing or unusable.
  returned: check mode with link_baseline
  type: list
  elements: dict
  sample: [{setting: "pcie link 0000:08:00.0", expected: "x4 16.0 GT/s", actual: "x2 16.0 GT/s"}]
backup_file:
  description: The previous baseline, kept when a new one replaced it.
  returned: when link_baseline was rewritten
  type: str
table:
  description: The affinity groups as text, one row per group (the guide's Table 5).
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule, SYSFS_ROOT, PROCFS_ROOT  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import affinity_table, discover, visibility_checks
from ansible_collections.gds.commission.plugins.module_utils.core.files import is_live_root
from ansible_collections.gds.commission.plugins.module_utils.hw.health import BaselineError, link_baseline, link_checks
from ansible_collections.gds.commission.plugins.module_utils.hw.nvml import NvmlUnavailable, nvlink_matrix, nvml_gpus

from ansible_collections.gds.commission.plugins.module_utils.hw.pci import TopologyError
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import ProcfsError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=SYSFS_ROOT,
            procfs_root=PROCFS_ROOT,
            gpu_index_source=dict(type="str", default="auto", choices=["auto", "nvml", "pci"]),
            link_baseline=dict(type="path"),
        ),
        supports_check_mode=True, check_area="topology",
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
    facts["nvlink"] = nvlink_matrix(facts["gpus"], nvml)
    facts["index_source"] = "nvml" if nvml else "pci"
    for warning in warnings:
        module.warn(warning)
    result = {"changed": False}
    if params["link_baseline"]:
        try:
            result = link_baseline(params["link_baseline"], facts["pcie_links"], module.check_mode)
        except BaselineError as exc:
            module.fail_json(msg=str(exc))
    module.exit_json(ansible_facts={"gds_topology": facts}, table=affinity_table(facts),
                     checks=visibility_checks(facts, warnings) + link_checks(facts["pcie_links"]), **result)


if __name__ == "__main__":
    main()
