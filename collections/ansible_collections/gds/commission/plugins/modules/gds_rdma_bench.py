#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_rdma_bench
short_description: Measure GPUDirect RDMA per NIC port with perftest and OSU, judged against the port rate
description:
  - Runs C(ib_write_bw), C(ib_read_bw) and C(ib_write_lat) (perftest) per RDMA NIC port as the
    node's own loopback (a server, then a client to O(address) on the same device and port),
    pinned with numactl to the NIC's NUMA node, with host memory and with GPU memory of the GPU
    nearest the NIC (C(--use_cuda_bus_id) or C(--use_cuda)) and of a far GPU (the non-affine
    penalty); C(osu_bw) and C(osu_latency) with device buffers (C(D D)) through mpirun where
    OMB with CUDA and MPI is installed.
  - Bandwidth is judged against O(bw_fraction) of the port's rate (at least O(min_gbps)),
    latency against O(lat_us_max). A row that cannot run SKIPs with the reason (no RDMA
    device, perftest built without CUDA, no GPU, OMB missing); one that broke is an ERROR.
  - Every process runs under O(timeout); every server is killed when its run ends.
  - "Two-node mode: O(mode=server) on the peer starts one server per row of the client's plan
    O(runs) (matched by the NIC's position, port, test, memory and near/far GPU) and kills them
    at their deadline; O(mode=client) here runs the clients against O(peer_address)."
version_added: "1.1.0"
author: gds-commission contributors (!UNKNOWN)
options:
  mode:
    description:
      - C(loopback) server and client on this node; C(plan) returns the plan and runs nothing;
        C(server) and C(client) are the two halves of the two-node mode.
    type: str
    choices: [loopback, plan, server, client]
    default: loopback
  topology:
    description: "This node's C(gds_topology) facts (C(nics) with C(ports), C(gpus), C(matrix))."
    type: dict
    required: true
  runs:
    description: The client's plan (C(runs) of O(mode=plan)); required in server and client modes.
    type: list
    elements: dict
  skip_reason:
    description: Run nothing; every row SKIPs with this reason (for example C(simulated node)).
    type: str
  tests:
    description: Tests to run.
    type: list
    elements: str
    default: [ib_write_bw, ib_read_bw, ib_write_lat, osu_bw, osu_latency]
  memory:
    description: Buffers to measure, C(host) and/or C(cuda) (OSU runs C(cuda) only).
    type: list
    elements: str
    default: [host, cuda]
  far_gpu:
    description: Also run the bandwidth tests with the GPU farthest from the NIC (the non-affine penalty).
    type: bool
    default: true
  perftest_dir:
    description: Directory of the perftest binaries (a CUDA build), looked in before PATH.
    type: str
    default: ""
  osu_dir:
    description: Directory of C(osu_bw) and C(osu_latency), looked in before PATH.
    type: str
    default: ""
  mpirun:
    description: The MPI launcher; empty skips the OSU tests.
    type: str
    default: mpirun
  osu_mpirun_args:
    description: Extra mpirun arguments (for example C(--allow-run-as-root)).
    type: list
    elements: str
    default: []
  osu_nic_args:
    description: mpirun arguments that select the NIC port; C({nic}) and C({port}) are replaced.
    type: list
    elements: str
    default: ["-x", "UCX_NET_DEVICES={nic}:{port}"]
  osu_lat_size:
    description: Message size in bytes whose C(osu_latency) figure is reported.
    type: int
    default: 8
  bw_fraction:
    description:
      - "Fraction of the port rate a bandwidth test must reach: a number, or a table keyed by the
        port rate in Gb/s with an optional C(default) (C({200: 0.90, 400: 0.90}))."
      - Not applied to a software device (rxe, siw), whose rate is its netdev's nominal speed.
    type: raw
    default: {default: 0.9}
  min_gbps:
    description: Absolute floor in Gb/s of every bandwidth test (0 none); the only one on a software device.
    type: float
    default: 0.0
  lat_us_max:
    description: Latency ceiling in microseconds of the latency tests (0 reports without judging).
    type: float
    default: 0.0
  affinity_gain:
    description: Near-GPU / far-GPU bandwidth as [reference, lower, upper, unit]; empty does not judge it.
    type: list
    elements: raw
    default: []
  msg_size:
    description: Message size in bytes of the perftest bandwidth tests.
    type: int
    default: 65536
  duration:
    description: Seconds each perftest bandwidth test runs (C(-D)).
    type: int
    default: 5
  lat_iters:
    description: Iterations of C(ib_write_lat) (C(-n)).
    type: int
    default: 1000
  timeout:
    description: Seconds any one benchmark process may run before it is killed.
    type: int
    default: 60
  start_timeout:
    description: Seconds a server has to listen (and a two-node client retries its connection).
    type: int
    default: 15
  port_base:
    description: First TCP port of the perftest connections; each row gets its own.
    type: int
    default: 18515
  address:
    description: Address the loopback clients connect to.
    type: str
    default: 127.0.0.1
  peer_address:
    description: The server host's address in the two-node mode.
    type: str
    default: ""
  extra_args:
    description: Extra perftest arguments on both sides (for example C(-x 3) for a RoCE GID index).
    type: list
    elements: str
    default: []
  numactl:
    description: numactl (name or path) used for NUMA pinning; empty or absent runs unpinned.
    type: str
    default: numactl
notes:
  - "Below I(procfs_root), a server is ready once C(net/tcp) or C(net/tcp6) lists its port."
  - In check mode nothing runs and every row SKIPs.
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
  - gds.commission.gds.procfs
"""

EXAMPLES = r"""
- name: GPUDirect RDMA loopback on every NIC port
  gds.commission.gds_rdma_bench:
    topology: "{{ ansible_facts['gds_topology'] }}"
    perftest_dir: /opt/perftest-cuda/bin
    bw_fraction: {default: 0.9, 400: 0.9}
    affinity_gain: [1.1, -0.1, null, x]
"""

RETURN = r"""
results:
  description: One row per NIC port, test, memory and GPU (the host fact C(gds_rdma_bench_results)).
  returned: always
  type: list
  elements: dict
  contains:
    nic: {description: RDMA device (null when the node has none)., type: str}
    port: {description: Port number., type: int}
    test: {description: "ib_write_bw, ib_read_bw, ib_write_lat, osu_bw or osu_latency.", type: str}
    memory: {description: host or cuda., type: str}
    gpu: {description: GPU index of a cuda row (null for host)., type: int}
    affine: {description: The GPU is the nearest to the NIC (false for the far GPU of the penalty)., type: bool}
    gbps: {description: Measured bandwidth in Gb/s (null for a latency test or when not measured)., type: float}
    lat_us: {description: Measured latency in microseconds., type: float}
    threshold_gbps: {description: The floor it was judged against (null when none applies)., type: float}
    verdict: {description: PASS WARN FAIL SKIP or ERROR., type: str}
    reason: {description: "Why: the shortfall, the skip reason, or the error with its output.", type: str}
    link: {description: PCIe link class GPU-NIC (PIX PXB PHB NODE SYS) of a cuda row., type: str}
    rate_gbps: {description: The port's rate., type: float}
    lat_us_max: {description: The latency ceiling of a latency row., type: float}
    cmd: {description: The client's (or mpirun's) command line., type: list}
    server_cmd: {description: The server's command line., type: list}
    source: {description: "Where the figure came from: json, text or osu.", type: str}
checks:
  description: "One check per row, C(rdma: bench <nic> port <n> <test> <memory>[ GPU<i>]), plus C(... affinity gain)."
  returned: always
  type: list
  elements: dict
runs:
  description: The plan with its pairing keys and TCP ports (the input of O(runs) in the two-node mode).
  returned: always
  type: list
  elements: dict
tools:
  description: "What the node has: C(perftest) ({test: path}), C(features) ({test: {out_json, use_cuda, use_cuda_bus_id,
    report_gbits}}), C(numactl), C(osu), C(osu_cuda), C(mpirun)."
  returned: when probed
  type: dict
"""

import copy

from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule, PROCFS_ROOT  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.measure.perftest import (
    DEFAULTS, BenchError, checks_for, pair_with_peer, plan, probe, public_rows, run_all, run_servers,
    settings_from,
)


def setting(key):
    """The default of an option: the area's (DEFAULTS, which the role's spec reads too)."""
    return copy.deepcopy(DEFAULTS[key])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["loopback", "plan", "server", "client"], default="loopback"),
            topology=dict(type="dict", required=True),
            runs=dict(type="list", elements="dict"),
            skip_reason=dict(type="str"),
            tests=dict(type="list", elements="str", default=setting("tests")),
            memory=dict(type="list", elements="str", default=setting("memory")),
            far_gpu=dict(type="bool", default=setting("far_gpu")),
            perftest_dir=dict(type="str", default=setting("perftest_dir")),
            osu_dir=dict(type="str", default=setting("osu_dir")),
            mpirun=dict(type="str", default=setting("mpirun")),
            osu_mpirun_args=dict(type="list", elements="str", default=setting("osu_mpirun_args")),
            osu_nic_args=dict(type="list", elements="str", default=setting("osu_nic_args")),
            osu_lat_size=dict(type="int", default=setting("osu_lat_size")),
            bw_fraction=dict(type="raw", default=setting("bw_fraction")),
            min_gbps=dict(type="float", default=setting("min_gbps")),
            lat_us_max=dict(type="float", default=setting("lat_us_max")),
            affinity_gain=dict(type="list", elements="raw", default=setting("affinity_gain")),
            msg_size=dict(type="int", default=setting("msg_size")),
            duration=dict(type="int", default=setting("duration")),
            lat_iters=dict(type="int", default=setting("lat_iters")),
            timeout=dict(type="int", default=setting("timeout")),
            start_timeout=dict(type="int", default=setting("start_timeout")),
            port_base=dict(type="int", default=setting("port_base")),
            address=dict(type="str", default=setting("address")),
            peer_address=dict(type="str", default=setting("peer_address")),
            extra_args=dict(type="list", elements="str", default=setting("extra_args")),
            numactl=dict(type="str", default=setting("numactl")),
            procfs_root=PROCFS_ROOT,
        ),
        supports_check_mode=True,
    )
    params = module.params
    mode = params["mode"]
    try:
        settings = settings_from(params)
        if mode in ("server", "client") and params["runs"] is None:
            raise BenchError("mode=%s needs runs (the client's plan)" % mode)
        if mode == "client" and not settings["peer_address"]:
            raise BenchError("mode=client needs peer_address (the server host)")
        if mode == "plan":
            runs = plan(params["topology"], settings)
            module.exit_json(changed=False, results=public_rows(runs), checks=[], runs=runs)
        if mode == "server":
            rows = pair_with_peer(params["runs"], params["topology"], settings)
            if params["skip_reason"] or module.check_mode:
                module.exit_json(changed=False, results=public_rows(rows), checks=[], runs=rows)
            found = probe(settings)
            rows = run_servers(rows, settings, found)
            module.exit_json(changed=False, results=public_rows(rows), checks=[], runs=rows, tools=found)
        rows, found = run_all(params["topology"], settings, mode=mode,
                              runs=params["runs"] if mode == "client" else None,
                              skip=params["skip_reason"], check_mode=module.check_mode)
    except BenchError as exc:
        module.fail_json(msg="gds_rdma_bench: %s" % exc)
    result = dict(changed=False, results=public_rows(rows), checks=checks_for(rows, settings), runs=rows)
    if found is not None:
        result["tools"] = found
    module.exit_json(**result)


if __name__ == "__main__":
    main()
