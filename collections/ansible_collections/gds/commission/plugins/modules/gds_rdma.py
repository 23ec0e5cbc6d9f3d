#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_rdma
short_description: GPUDirect RDMA on a node - GPU peer memory, GPU-NIC pairing, RDMA port state and rate
description:
  - Puts GPU peer memory in place for the node's RDMA NICs and judges the network side of the node
    from the C(gds_topology) and C(gds_platform) facts.
  - Peer memory. C(auto) takes a loaded C(nvidia_peermem) or C(nv_peer_mem), else the one the kernel
    ships (C(nvidia_peermem) first), else DMA-BUF where Linux 5.12+ and the open NVIDIA kernel module
    provide it (no module needed). A module is persisted in O(modules_load_dir) (C(<module>.conf),
    written atomically, unless a file there already loads it) and loaded with C(modprobe) on a live
    node. Check mode changes nothing and returns each difference as a drift item.
  - Pairing. Each GPU's best NIC (C(gpus[].nics), C(gpus[].nic_link) of the topology) is judged against
    O(nic_link_max); a GPU whose best NIC is farther FAILs, naming the GPU and the NIC.
  - Ports. Every port of every RDMA device must be ACTIVE and LinkUp, and run at O(port_rate_gbps)
    when set; else FAIL naming the port. In check mode such a port is also a drift item.
  - A node without RDMA devices gets SKIP checks with that reason.
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
options:
  topology:
    description: The C(gds_topology) facts (gpus with nics and nic_link, nics with ports, matrix).
    type: dict
    required: true
  platform:
    description: The C(gds_platform) facts (kernel, nvidia_driver, modules); empty when unknown.
    type: dict
    default: {}
  modules_load_dir:
    description: The node's modules-load.d directory (below a simulated node's root there).
    type: path
    default: /etc/modules-load.d
  peermem:
    description:
      - GPU peer-memory method. C(auto) picks as described above; C(nvidia_peermem) or C(nv_peer_mem)
        insists on that module; C(dmabuf) requires DMA-BUF support and loads nothing; C(none) leaves
        peer memory alone (its check SKIPs).
    type: str
    choices: [auto, nvidia_peermem, nv_peer_mem, dmabuf, none]
    default: auto
  nic_link_max:
    description: The worst link class accepted between a GPU and its best NIC; unset, pairing is reported, not judged.
    type: str
    choices: [PIX, PXB, PHB, NODE, SYS]
  port_rate_gbps:
    description: The rate every RDMA port must run at, in Gb/s (400 for NDR); unset, any rate passes.
    type: float
  live:
    description: Whether modules can be loaded on this node (false for a simulated node; persisted only).
    type: bool
    default: true
notes:
  - "Below I(sysfs_root), C(module/NAME) tells whether a kernel module is loaded."
  - Supports check mode; it then changes nothing and returns C(drift).
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
  - gds.commission.gds.sysfs
"""

EXAMPLES = r"""
- name: Peer memory and the GPUDirect RDMA checks
  gds.commission.gds_rdma:
    topology: "{{ ansible_facts['gds_topology'] }}"
    platform: "{{ ansible_facts['gds_platform'] }}"
    nic_link_max: PXB
    port_rate_gbps: 400
"""

RETURN = r"""
checks:
  description:
    - "Report checks C(rdma: GPU<i> NIC pairing), C(rdma: port <nic>/<n>) and C(rdma: GPU peer memory)
      (name, verdict, expected, actual, detail); SKIP with the reason on a node without RDMA devices."
  returned: always
  type: list
  elements: dict
  sample: [{name: "rdma: port mlx5_0/1", verdict: PASS, expected: "ACTIVE, LinkUp, 400 Gb/s",
            actual: "ACTIVE, LinkUp, 400 Gb/s"}]
pairing:
  description: One row per GPU with its best NIC, {gpu, bdf, nic, nic_bdf, link, nics = every NIC of that class}.
  returned: always
  type: list
  elements: dict
  sample: [{gpu: 0, bdf: "0000:07:00.0", nic: mlx5_0, nic_bdf: "0000:0c:00.0", link: PXB, nics: [mlx5_0]}]
peermem:
  description:
    - The peer-memory state after the run, {want, method, reason, module, loaded, persisted, skip}.
    - C(method) is a module name, dmabuf, none, or null when nothing usable exists (C(reason) says why);
      C(persisted) lists the modules-load.d files that load the module; C(skip) is set without NICs or GPUs.
  returned: always
  type: dict
  sample: {want: auto, method: nvidia_peermem, module: nvidia_peermem, loaded: true,
           persisted: [/etc/modules-load.d/nvidia_peermem.conf], reason: null, skip: null}
drift:
  description:
    - One item per difference found, {setting, expected, actual} (what was changed, or in check mode
      what would be). The modules-load.d file of the module, C(rdma peer memory module) when it is not
      loaded, C(rdma port <nic>/<n>) for a port that is down or at another rate than O(port_rate_gbps).
    - In check mode any item makes the result C(changed), so the drift run reports it; otherwise a
      port item is a FAIL check only (nothing here can change a port).
  returned: always
  type: list
  elements: dict
  sample: [{setting: "rdma port mlx5_0/1", expected: "ACTIVE LinkUp 400 Gb/s", actual: "ACTIVE LinkUp 200 Gb/s"}]
"""

from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule, SYSFS_ROOT  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.tune.rdma import (
    PEERMEM_CHOICES, RdmaError, apply_peermem, pairing, peermem_state, port_drift, rdma_checks,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            topology=dict(type="dict", required=True),
            platform=dict(type="dict", default={}),
            sysfs_root=SYSFS_ROOT,
            modules_load_dir=dict(type="path", default="/etc/modules-load.d"),
            peermem=dict(type="str", default="auto", choices=list(PEERMEM_CHOICES)),
            nic_link_max=dict(type="str", choices=["PIX", "PXB", "PHB", "NODE", "SYS"]),
            port_rate_gbps=dict(type="float"),
            live=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    topology = params["topology"]
    for key in ("gpus", "nics", "matrix"):
        if not isinstance(topology.get(key), (list, dict)):
            module.fail_json(msg="topology.%s is missing or malformed: pass ansible_facts['gds_topology']" % key)
    if params["port_rate_gbps"] is not None and params["port_rate_gbps"] <= 0:
        module.fail_json(msg="port_rate_gbps must be a positive number of Gb/s, got %s" % params["port_rate_gbps"])

    def load(name):
        modprobe = module.get_bin_path("modprobe", required=True)
        rc, dummy, err = module.run_command([modprobe, name])
        if rc != 0:
            raise RdmaError("modprobe %s failed (rc %d): %s" % (name, rc, err.strip() or "no message"))

    state = peermem_state(topology, params["platform"], params["peermem"], params["sysfs_root"],
                          params["modules_load_dir"])
    try:
        changed, drift = apply_peermem(state, params["modules_load_dir"], module.check_mode, params["live"], load)
    except RdmaError as exc:
        module.fail_json(msg=str(exc), peermem=state)
    checks = rdma_checks(topology, params["platform"], params["nic_link_max"], params["port_rate_gbps"],
                         state, params["live"])
    drift += port_drift(topology, params["port_rate_gbps"])
    result = {"changed": changed, "checks": checks, "pairing": pairing(topology), "peermem": state, "drift": drift}
    if module.check_mode:
        # what a run would change, and the ports that differ from the profile: the drift run's items
        result["changed"] = bool(drift)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
