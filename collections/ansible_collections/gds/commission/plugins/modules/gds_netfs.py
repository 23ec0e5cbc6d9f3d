#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_netfs
short_description: Audit the network file system mounts GDS reads (NFS, Lustre, WekaFS, GPFS, BeeGFS)
description:
  - Reads every nfs, nfs4, lustre, beegfs, gpfs and wekafs mount from C(/proc/self/mountinfo), with
    server, export, transport (C(proto=rdma) or tcp; Lustre from its NIDs' LNet network),
    port, vers, rsize/wsize, nconnect/max_connect.
  - Routes the server address as the kernel does (C(ip -j route get) on a live node, else the
    longest prefix in C(/proc/net/route) or C(/proc/net/ipv6_route)), follows a bond or VLAN
    down through its sysfs C(lower_*) links, and names the RDMA device whose netdevs include
    the egress netdev, with the GPUs paired with that NIC in the topology.
  - NFS C(proto) is an RPC netid, C(rdma6), C(tcp6) and C(udp6) being RDMA, TCP and UDP over IPv6.
    A link-local server (C(fe80::1%ib8) in the source, or C(addr=fe80::1%3), a zone that is an
    ifindex, as the kernel prints it) leaves through the interface its zone names; one without a
    zone is not guessed.
  - "An option the kernel prints with a value found without one, or a number that is not the
    kernel's unsigned decimal (C(rsize=-1)), is an error of that mount (C(errors), the ERROR check
    C(netfs: <mount> mount options)); the other mounts are still judged."
  - Returns the report checks, named C(netfs) colon ...; changes nothing.
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
options:
  topology:
    description: The C(gds_topology) facts; C(nics), C(gpus) and C(matrix) are used (checked; a wrong
      shape fails naming the key, e.g. C(topology.gpus[0].index)).
    type: dict
    required: true
  use_ip:
    description:
      - Ask C(ip -j route get) for the route (policy routing, source address). Only on the
        running system (O(procfs_root) C(/proc)); elsewhere the procfs tables decide.
    type: bool
    default: true
  interface_addresses:
    description: IPv4/IPv6 addresses per netdev (C(ib0) to a list such as C([10.0.0.5]); C(10.0.0.5/24) is taken
      as C(10.0.0.5)), for the client address where the route gives none. A key that is not an
      interface name or a value that is not an address fails naming the entry.
    type: dict
    default: {}
  gpu_map:
    description: "Which GPUs read which mount, a dict of mount point to a list of GPU indices; a mount not listed
      is read by every GPU. A key that matches no network mount gives the WARN check C(netfs: gpu_map)."
    type: dict
    default: {}
  expect_rdma:
    description: The profile wants RDMA transport; a TCP mount then gets O(tcp_verdict).
    type: bool
    default: false
  tcp_verdict:
    description: Verdict of a mount that is not RDMA where O(expect_rdma).
    type: str
    choices: [WARN, FAIL]
    default: WARN
  far_verdict:
    description: Verdict of a mount whose NIC is far (not in O(near_classes)) from every GPU that reads it.
    type: str
    choices: [WARN, FAIL]
    default: WARN
  io_size_verdict:
    description: Verdict of an NFS mount whose rsize or wsize is below O(min_io_size).
    type: str
    choices: [WARN, FAIL]
    default: WARN
  min_io_size:
    description: Smallest rsize/wsize in bytes (the guide mounts with 1048576).
    type: int
    default: 1048576
  near_classes:
    description: Link classes from GPU to NIC that count as paired.
    type: list
    elements: str
    default: [PIX, PXB]
notes:
  - "Below I(procfs_root) it reads C(self/mountinfo), C(net/route) and C(net/ipv6_route); below
    I(sysfs_root), C(class/net/DEV/lower_*) of bonds and VLANs."
  - The procfs route tables hold the main table only; with policy routing on a node the live
    C(ip route get) answer is the one that counts.
  - A mount of the node's own address (a loopback mount) is routed through C(lo) by the kernel;
    its interface is the one that holds the address (C(ip -j addr show to <addr>)).
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
  - gds.commission.gds.facts
  - gds.commission.gds.sysfs
  - gds.commission.gds.procfs
"""

EXAMPLES = r"""
- name: Audit the network mounts against the NICs of the GPUs
  gds.commission.gds_netfs:
    topology: "{{ ansible_facts['gds_topology'] }}"
    expect_rdma: true
    tcp_verdict: FAIL
  register: netfs
"""

RETURN = r"""
ansible_facts:
  description: C(gds_netfs) with C(mounts).
  returned: always
  type: dict
  contains:
    gds_netfs:
      description: C({mounts}).
      returned: always
      type: dict
mounts:
  description:
    - One entry per network mount, C({mountpoint, fstype, fs, source, server, server_address,
      export, options, transport, rdma, port, vers, rsize, wsize, nconnect, max_connect, netdev,
      lower_netdevs, nics, nic, client_address, route, gpus, errors}).
    - C(fs) is the cufile.json C(fs) section (nfs, lustre, weka, gpfs, beegfs); C(nic) the RDMA
      device the mount leaves through (null for a netdev without one); C(gpus) the GPUs paired
      with that NIC; C(route) C({dev, source, gateway, via}) or C({dev, reason}).
    - C(server_address) of a link-local server carries its zone as the interface name
      (C(fe80::1%ib8)); C(errors) lists the options that are not as the kernel prints them
      (C(rsize has no value), C(port=70000 is not a whole number from 0 to 65535)).
  returned: always
  type: list
  elements: dict
checks:
  description: The report checks C({name, verdict, expected, actual, detail}), named C(netfs) colon ....
  returned: always
  type: list
  elements: dict
"""

import os
import socket

from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule, SYSFS_ROOT, PROCFS_ROOT  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.tune.mounts import NetfsError, audit, mount_checks


def _resolver(host):
    try:
        return socket.getaddrinfo(host, None)[0][4][0]
    except (OSError, IndexError):
        return None


def _ip_runner(module, ip):
    def run(args):
        return module.run_command([ip] + args)
    return run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            topology=dict(type="dict", required=True),
            procfs_root=PROCFS_ROOT,
            sysfs_root=SYSFS_ROOT,
            use_ip=dict(type="bool", default=True),
            interface_addresses=dict(type="dict", default={}),
            gpu_map=dict(type="dict", default={}),
            expect_rdma=dict(type="bool", default=False),
            tcp_verdict=dict(type="str", choices=["WARN", "FAIL"], default="WARN"),
            far_verdict=dict(type="str", choices=["WARN", "FAIL"], default="WARN"),
            io_size_verdict=dict(type="str", choices=["WARN", "FAIL"], default="WARN"),
            min_io_size=dict(type="int", default=1048576),
            near_classes=dict(type="list", elements="str", default=["PIX", "PXB"]),
        ),
        supports_check_mode=True, check_area="netfs",
    )
    p = module.params
    live = os.path.realpath(p["procfs_root"]) == "/proc"
    run_ip, resolve = None, None
    if live:
        resolve = _resolver
        ip = module.get_bin_path("ip") if p["use_ip"] else None
        if ip:
            run_ip = _ip_runner(module, ip)
    try:
        mounts = audit(p["procfs_root"], p["sysfs_root"], p["topology"], run_ip=run_ip,
                       resolve=resolve, interface_addresses=p["interface_addresses"])
        checks = mount_checks(mounts, p["topology"], gpu_map=p["gpu_map"],
                              expect_rdma=p["expect_rdma"], tcp_verdict=p["tcp_verdict"],
                              far_verdict=p["far_verdict"], io_size_verdict=p["io_size_verdict"],
                              min_io_size=p["min_io_size"], near_classes=p["near_classes"])
    except NetfsError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, mounts=mounts, checks=checks,
                     ansible_facts={"gds_netfs": {"mounts": mounts}})


if __name__ == "__main__":
    main()
