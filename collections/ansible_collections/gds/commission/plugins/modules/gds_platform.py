#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_platform
short_description: Platform facts GPUDirect Storage depends on (kernel, IOMMU, NVIDIA drivers, udev)
description:
  - Reads the running platform once and returns C(gds_platform) facts that the tuning roles
    compare with the desired state - kernel release and architecture, the kernel command line,
    the IOMMU as it runs (C(/sys/class/iommu) units, IOMMU groups and their default domain type),
    the NVIDIA driver version and whether it is the open kernel module, the RegistryDwords the
    driver runs with, nvidia-fs (loaded, version, IO statistics), nvidia_peermem or nv_peer_mem,
    P2PDMA support, NVMe native multipath, kernel lockdown, vfio-bound devices, md arrays, DGX OS
    packages that already manage ACS, and the udev database entries of the data drives.
  - cuFile looks up the block device behind a file in the udev database
    (C(/run/udev/data/b<major>:<minor>)); without an entry it cannot register the file and fails
    or falls back to compat mode. C(udev.missing) names the drives without one.
  - GPU names, memory and BAR1 sizes come from NVML (pynvml, package nvidia-ml-py) when
    I(gpu_source) allows it.
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
options:
  root:
    description:
      - The root file system the node's C(/run/udev), C(/etc/dgx-release), C(/var/lib/dpkg/status)
        and C(/lib/modules) are read below; a simulated node's root directory also works.
    type: path
    default: /
  block_devices:
    description:
      - Block devices that hold GDS data (C(nvme0n1)); their udev entries are checked, and those
        of the md arrays built on them (C(md1)).
      - Left out, the data NVMe drives of the topology (read from sysfs); an empty list means
        the node has none.
    type: list
    elements: str
  gpu_source:
    description:
      - Where GPU facts come from. C(nvml) requires NVML and fails without it; C(none) skips GPU
        facts; C(auto) uses NVML on a live node (I(procfs_root) is C(/proc)) when it is usable.
    type: str
    choices: [auto, nvml, none]
    default: auto
notes:
  - "Below I(sysfs_root) and I(procfs_root) it reads the platform as the kernel runs it (the release
    and command line, the IOMMU units and groups, the NVIDIA and nvidia-fs modules and their
    statistics, vfio devices, lockdown)."
  - Supports check mode; it only reads.
  - A missing file is a fact (null or false), never a failure.
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
  - gds.commission.gds.facts
  - gds.commission.gds.sysfs
  - gds.commission.gds.procfs
seealso:
  - module: gds.commission.gds_topology
  - module: gds.commission.pcie_acs
"""

EXAMPLES = r"""
- name: Read the platform facts
  gds.commission.gds_platform:
    block_devices: "{{ ansible_facts['gds_topology']['nvme'] | rejectattr('system') | map(attribute='name') | list }}"

- name: Refuse P2PDMA on a kernel without it
  ansible.builtin.assert:
    that: ansible_facts['gds_platform']['p2pdma']['supported']
    fail_msg: "P2PDMA needs Linux 6.2+ and the open NVIDIA kernel module"

- name: Read a simulated node
  gds.commission.gds_platform:
    sysfs_root: /srv/sim/node1/sys
    procfs_root: /srv/sim/node1/proc
    root: /srv/sim/node1
    gpu_source: none
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: complex
  contains:
    gds_check_mode:
      description:
        - Whether this task ran in check mode, as Ansible told the module (C(--check), or a play's
          or task's C(check_mode) keyword; the variable C(ansible_check_mode) follows only
          C(--check)). Every tuning step changes the node only when this is false.
      returned: always
      type: bool
    gds_platform:
      description:
        - The platform of the node.
        - Described as a whole, every key and which may be null, by the JSON schema
          C(plugins/module_utils/hw/facts_schema.py) (docs/modules.md, The facts schema).
      returned: always
      type: complex
      contains:
        kernel:
          description: Release, where it was read (osrelease, cmdline, uname) and the numeric version.
          type: dict
          sample: {release: 6.8.0-60-generic, release_source: osrelease, version: [6, 8, 0]}
        arch:
          description: Machine architecture (x86_64, aarch64), null when unknown.
          type: str
        cpu:
          description: CPU vendor and model, architecture implied by /proc/cpuinfo, and whether it is NVIDIA Grace.
          type: dict
          sample: {vendor: GenuineIntel, model: "Intel(R) Xeon(R) Platinum 8480C", arch: x86_64, grace: false}
        cmdline:
          description: The kernel command line as text and as a list of arguments.
          type: dict
        iommu:
          description:
            - Running C(mode) (off, pt, on), the mode the command line C(requested) (null - kernel default),
              C(units), the number of C(groups), C(group_types) counts and the IOMMU C(cmdline) parameters.
          type: dict
          sample: {mode: pt, requested: pt, units: [dmar0], groups: 92, group_types: {identity: 92}, cmdline: {iommu: pt}}
        nvidia_driver:
          description: NVIDIA kernel driver (loaded, version, open, banner, registry_dwords, registry).
          type: dict
          sample: {loaded: true, version: 550.54.15, open: true, registry_dwords: "RMForceStaticBar1=1;", registry: {RMForceStaticBar1: "1"}}
        gpus:
          description: GPUs from NVML (index, bdf, name, uuid, memory_total_bytes, bar1_total_bytes, driver_version,
            cuda_driver_version, open_kernel_module).
          type: list
          elements: dict
        nvml:
          description: Whether NVML was used, and why not.
          type: dict
        nvidia_fs:
          description: nvidia-fs loaded, version, proc_version (the /proc entry exists), rw_stats_enabled, stats header.
          type: dict
          sample: {loaded: true, version: 2.17.5, proc_version: true, rw_stats_enabled: true}
        modules:
          description: Kernel modules loaded, shipped with the running kernel (null without modules.dep), and the peer-memory module name to use.
          type: dict
          sample: {loaded: {nvidia_fs: true}, shipped: {nvidia_peermem: true}, peermem: nvidia_peermem}
        nvme_multipath:
          description: The nvme_core multipath parameter (Y or N), null when nvme_core is not loaded.
          type: str
        p2pdma:
          description:
            - P2PDMA prerequisites (kernel >= 6.2, p2pdma_pgmap_ops in kallsyms, CONFIG_PCI_P2PDMA of the running
              kernel as C(config) and C(built_in), open driver) and the verdict.
          type: dict
        acs_cmdline:
          description: Which ACS kernel parameters the running kernel understands (config_acs, disable_acs_redir), and whether it
            parses lists of several devices in them (device_lists, false on 6.11 to 6.13).
          type: dict
        udev:
          description: /run/udev readable, the udev entry of each data block device, and the devices missing one.
          type: dict
          sample: {path: /run/udev, readable: true, devices: [{name: nvme0n1, dev: "259:0", present: true}], missing: []}
        md_arrays:
          description: md arrays from /proc/mdstat (name, level, state, members as whole disks).
          type: list
          elements: dict
        vfio_devices:
          description: PCI addresses bound to vfio-pci.
          type: list
          elements: str
        lockdown:
          description: Kernel lockdown mode (none, integrity, confidentiality), null without the lockdown LSM.
          type: str
        packages:
          description: Installed packages of interest (nvidia-acs-disable, nvidia-fs, ...) with versions; null without dpkg.
          type: dict
        dgx_release:
          description: /etc/dgx-release as a dict, null on a node that is not DGX OS.
          type: dict
"""

import os

from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule, SYSFS_ROOT, PROCFS_ROOT  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.core.files import is_live_root
from ansible_collections.gds.commission.plugins.module_utils.hw.nvml import NvmlUnavailable
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import TopologyError
from ansible_collections.gds.commission.plugins.module_utils.hw.platform import collect
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import ProcfsError


def default_block_devices(sysfs_root, procfs_root):
    """Data NVMe drives of the topology."""
    facts, dummy = discover(sysfs_root, procfs_root)
    return [d["name"] for d in facts["nvme"] if not d["system"]]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=SYSFS_ROOT,
            procfs_root=PROCFS_ROOT,
            root=dict(type="path", default="/"),
            block_devices=dict(type="list", elements="str"),
            gpu_source=dict(type="str", default="auto", choices=["auto", "nvml", "none"]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for key in ("sysfs_root", "procfs_root", "root"):
        if not os.path.isdir(params[key]):
            module.fail_json(msg="%s: %s does not exist or is not a directory" % (key, params[key]))
    block_devices = params["block_devices"]
    # the roles pass the data drives from the gds_topology facts (an empty list means none);
    # only a standalone call without the option reads the topology itself
    if block_devices is None:
        try:
            block_devices = default_block_devices(params["sysfs_root"], params["procfs_root"])
        except (TopologyError, ProcfsError) as exc:
            module.fail_json(msg="block_devices is empty and the topology cannot be read: %s" % exc)
    source = params["gpu_source"]
    if source == "auto":
        source = "auto" if is_live_root(params["procfs_root"], "/proc") else "none"
    try:
        facts, warnings = collect(params["sysfs_root"], params["procfs_root"], params["root"],
                                  block_devices=block_devices, gpu_source=source)
    except NvmlUnavailable as exc:
        module.fail_json(msg="gpu_source=nvml but NVML is unusable: %s" % exc)
    for warning in warnings:
        module.warn(warning)
    # the mode this task runs under, as Ansible hands it to the module: the tuning steps decide from
    # it whether they may change the node (ansible_check_mode follows only --check, not a play's
    # check_mode keyword)
    module.exit_json(changed=False, ansible_facts={"gds_platform": facts, "gds_check_mode": module.check_mode})


if __name__ == "__main__":
    main()
