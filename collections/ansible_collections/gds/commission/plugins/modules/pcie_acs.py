#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: pcie_acs
short_description: Disable, enable or query PCIe Access Control Services (ACS) on bridges
description:
  - Finds the ACS extended capability (ID 0x000D) of each bridge by walking its config space from
    0x100, reads ACS Control at capability+6 and, when it differs from the desired state, writes it
    through the bridge's sysfs C(config) file, exactly what C(setpci -s BDF ECAP_ACS+0x6.w=0000)
    does. Every write is read back and the config space read again to verify it.
  - ACS routes peer-to-peer traffic (GPU to NVMe, GPU to NIC) up through the root complex; the
    NVIDIA GDS benchmarking guide gets its best results with ACS disabled on the bridges between
    GPUs, NVMe drives and NICs.
  - Refuses to change anything while devices are bound to vfio-pci (their isolation rests on ACS)
    unless I(allow_with_vfio=true), and when kernel lockdown forbids PCI config writes from user
    space; both refusals name the devices and the state found.
  - The change lasts until the next reboot; making it persistent (a boot-time unit, a kernel
    command-line drop-in) is the job of the C(pcie_acs) role.
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
options:
  state:
    description:
      - C(disabled) clears ACS Control (0x0000) on every bridge in scope.
      - C(enabled) sets the bits Linux itself enables at boot (SV, RR, CR, UF, where the capability
        has them), keeping any other bit already set.
      - C(query) reads and reports only.
    type: str
    choices: [disabled, enabled, query]
    default: disabled
  bridges:
    description:
      - PCI addresses (C(DDDD:BB:DD.F)) of the bridges to act on.
      - Empty (the default) means the bridges above GPUs, data NVMe drives and RDMA NICs that have
        an ACS capability (or whose ACS state could not be read), from I(topology_bridges) or, without
        them, from reading the topology as C(gds_topology) does.
      - A bridge without an ACS capability is reported with null values and left alone.
    type: list
    elements: str
    default: []
  topology_bridges:
    description:
      - The C(bridges) of the C(gds_topology) facts, which the C(pcie_acs) role passes
        (C(ansible_facts['gds_topology']['bridges'])). With I(bridges) empty the module takes its
        scope from them instead of reading the topology again.
    type: list
    elements: dict
  allow_with_vfio:
    description:
      - Change ACS even though devices are bound to vfio-pci. Without ACS, devices below one
        switch share an IOMMU group and can reach each other's memory, which breaks the isolation
        a VM passthrough relies on.
    type: bool
    default: false
notes:
  - "Below I(sysfs_root) it reads and writes the bridges' config space (a simulated node's config
    files are written); I(procfs_root) is read only when I(bridges) is empty and I(topology_bridges)
    not given, to tell the system drives (whose bridges are left alone) from the data drives."
  - Supports check mode and diff mode; check mode reads only and reports what would change.
  - Reading the ACS capability needs the full 4096-byte config space, which the kernel returns
    only to root.
  - Under kernel lockdown (C(integrity) or C(confidentiality), usually from Secure Boot) the kernel
    refuses config writes; disable ACS in the firmware setup or through the kernel command line
    (C(pci=config_acs=), Linux 6.11+) instead.
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.diff
  - gds.commission.gds.sysfs
  - gds.commission.gds.procfs
seealso:
  - module: gds.commission.gds_topology
"""

EXAMPLES = r"""
- name: Disable ACS on the bridges between GPUs, NVMe drives and NICs, as gds_topology found them
  gds.commission.pcie_acs:
    state: disabled
    topology_bridges: "{{ ansible_facts['gds_topology']['bridges'] }}"

- name: Show ACS on two bridges without changing anything
  gds.commission.pcie_acs:
    state: query
    bridges: ["0000:04:10.0", "0000:04:14.0"]
  register: acs

- name: Disable ACS on a simulated node's bridges (writes its config files)
  gds.commission.pcie_acs:
    sysfs_root: /srv/sim/node1/sys
    procfs_root: /srv/sim/node1/proc
"""

RETURN = r"""
bridges:
  description: Every bridge in scope with its ACS Control before and after (hex text, null without ACS).
  returned: always
  type: list
  elements: dict
  contains:
    bdf:
      description: PCI address of the bridge.
      type: str
    port_type:
      description: PCIe port type (root_port, upstream, downstream, ...), null when unknown.
      type: str
    acs_offset:
      description: Offset of the ACS capability in config space, null without ACS.
      type: int
    acs_cap:
      description: ACS Capability register.
      type: str
    before:
      description: ACS Control before the module ran.
      type: str
    after:
      description: ACS Control afterwards (what it would be, in check mode).
      type: str
  sample: [{bdf: "0000:04:10.0", port_type: downstream, acs_offset: 328, acs_cap: "0x005f", before: "0x001d", after: "0x0000"}]
changed:
  description: Whether a bridge was (or, in check mode, would be) written.
  returned: always
  type: bool
drift:
  description: One item per bridge whose ACS Control differs from the desired state (empty for C(query)).
  returned: always
  type: list
  elements: dict
  sample: [{setting: "acs: 0000:39:02.0 ACS control", expected: "0x0000", actual: "0x001d"}]
diff:
  description: ACS Control of every bridge before and after, one line per bridge.
  returned: always
  type: dict
vfio_devices:
  description: PCI addresses bound to vfio-pci (empty when no bridge is in scope, nothing then being changed).
  returned: always
  type: list
  elements: str
lockdown:
  description:
    - Kernel lockdown mode (none, integrity, confidentiality), null when the kernel has none or when
      no bridge is in scope (nothing then being changed).
  returned: always
  type: str
without_acs:
  description: Bridges in scope that have no ACS capability.
  returned: always
  type: list
  elements: str
written:
  description: Bridges actually written (also returned on a failure part-way).
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule, SYSFS_ROOT, PROCFS_ROOT  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.tune.acs import (
    LOCKED_DOWN, AcsError, AcsPlan, bridges_in_scope,
)
from ansible_collections.gds.commission.plugins.module_utils.hw.platform import lockdown_state, vfio_devices
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import TopologyError
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import ProcfsError


def _failed(result, **changes):
    """What a failure returns: the result so far with the failure's own values."""
    result.update(changes)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=SYSFS_ROOT,
            procfs_root=PROCFS_ROOT,
            state=dict(type="str", default="disabled", choices=["disabled", "enabled", "query"]),
            bridges=dict(type="list", elements="str", default=[]),
            topology_bridges=dict(type="list", elements="dict"),
            allow_with_vfio=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    sysfs_root, state = params["sysfs_root"], params["state"]
    result = dict(changed=False, bridges=[], drift=[], diff={}, written=[], without_acs=[],
                  vfio_devices=[], lockdown=None)

    topology_bridges = params["topology_bridges"]
    if not params["bridges"] and topology_bridges is None:
        try:
            topology_bridges = discover(sysfs_root, params["procfs_root"])[0]["bridges"]
        except (TopologyError, ProcfsError) as exc:
            module.fail_json(msg="bridges is empty and the topology cannot be read: %s" % exc, **result)
    try:
        scope = bridges_in_scope(params["bridges"], topology_bridges)
    except AcsError as exc:
        module.fail_json(msg=str(exc), **result)
    if not scope:
        module.exit_json(**result)  # nothing to change, so nothing that could stand in the way
    result.update(vfio_devices=vfio_devices(sysfs_root), lockdown=lockdown_state(sysfs_root))

    try:
        plan = AcsPlan(sysfs_root, scope, state)
    except AcsError as exc:
        module.fail_json(msg=str(exc), **result)
    todo = [e["bdf"] for e in plan.todo]
    result.update(drift=plan.drift(), without_acs=plan.without_acs, changed=bool(todo))

    if todo and result["vfio_devices"] and not params["allow_with_vfio"]:
        module.fail_json(
            msg="refusing to change ACS on %s: devices are bound to vfio-pci (%s); without ACS they lose "
                "the isolation their passthrough relies on. Unbind them, or set allow_with_vfio: true"
                % (", ".join(todo), ", ".join(result["vfio_devices"])),
            **_failed(result, bridges=plan.bridges(), changed=False))
    if todo and result["lockdown"] in LOCKED_DOWN:
        module.fail_json(
            msg="cannot change ACS on %s: kernel lockdown is '%s' (%s/kernel/security/lockdown), so the "
                "kernel refuses PCI config writes from user space. Disable ACS in the firmware setup, or "
                "through the kernel command line (pci=config_acs=, Linux 6.11+), or boot without lockdown"
                % (", ".join(todo), result["lockdown"], sysfs_root),
            **_failed(result, bridges=plan.bridges(), changed=False))

    if module.check_mode:
        plan.simulate()
    else:
        try:
            plan.apply(lockdown=result["lockdown"])
        except AcsError as exc:
            module.fail_json(msg=str(exc), **_failed(result, bridges=plan.bridges(), written=plan.written,
                                                     changed=bool(plan.written)))
        result["written"] = plan.written
    result.update(bridges=plan.bridges(), diff=plan.diff())
    if plan.without_acs:
        module.warn("no ACS capability on %s: nothing to change there" % ", ".join(plan.without_acs))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
