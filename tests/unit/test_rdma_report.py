"""The network section of the report: RDMA ports, GPU-NIC pairing, RDMA benchmark results, and the
rdma checks in JUnit; HOST.json carries the benchmark results under rdma_bench."""
import os
import xml.etree.ElementTree as ET

from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.tune.rdma import rdma_checks
from ansible_collections.gds.commission.plugins.module_utils.fleet.report import (
    host_document, junit, network_html, network_rows, pairing_rows, rdma_bench_rows, host_page, summary,
)

BENCH = [
    {"nic": "mlx5_0", "port": 1, "test": "ib_write_bw", "memory": "host", "gpu": None, "affine": None,
     "gbps": 390.5, "lat_us": None, "threshold_gbps": 372.0, "verdict": "PASS", "reason": None},
    {"nic": "mlx5_0", "port": 1, "test": "ib_write_bw", "memory": "cuda", "gpu": 0, "affine": True,
     "gbps": 351.4, "lat_us": None, "threshold_gbps": 372.0, "verdict": "FAIL", "reason": "below 93 % of 400 Gb/s"},
    {"nic": "mlx5_0", "port": 1, "test": "ib_write_bw", "memory": "cuda", "gpu": 2, "affine": False,
     "gbps": 180.0, "lat_us": None, "threshold_gbps": None, "verdict": "PASS", "reason": "far GPU: penalty"},
]


def _host(sim_node, bench=None):
    root = sim_node("rdma-mix")
    topo, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    checks = rdma_checks(topo, link_max="PIX", rate_gbps=400)
    return host_document("gpu1", {"checks": checks, "topology": topo, "rdma_bench": bench}, {})


def test_network_rows_show_port_state_rate_pcie_and_paired_gpus(sim_node):
    doc = _host(sim_node)
    rows = {(r["nic"], r["port"]): r for r in network_rows(doc)}
    assert rows[("mlx5_0", 1)]["state"] == "ACTIVE / LinkUp" and rows[("mlx5_0", 1)]["rate"] == "400 Gb/s"
    assert rows[("mlx5_0", 1)]["gpus"] == "GPU0, GPU1"
    assert rows[("mlx5_0", 1)]["pcie"] == "0000:05:00.0 (x16 16.0 GT/s)"
    assert rows[("mlx5_5", 1)]["verdict"] == "FAIL" and rows[("mlx5_5", 1)]["state"] == "DOWN / Disabled"
    assert rows[("mlx5_4", 2)]["verdict"] == "FAIL" and rows[("mlx5_4", 2)]["gpus"] == "GPU2, GPU3"
    assert rows[("rxe0 (software)", 1)]["netdev"] == "enp32s0"
    pairs = {r["gpu"]: r for r in pairing_rows(doc)}
    assert pairs["GPU3"] == {"gpu": "GPU3", "gpu_bdf": "0000:88:00.0", "nic": "mlx5_4", "nic_bdf": "0000:86:00.0",
                             "link": "PXB", "verdict": "FAIL"}


def test_rdma_bench_results_against_threshold_host_vs_gpu(sim_node):
    doc = _host(sim_node, BENCH)
    assert doc["rdma_bench"] == BENCH  # HOST.json keeps them
    rows = rdma_bench_rows(doc)
    assert [r["vs_host"] for r in rows] == ["-", "90 %", "46 %"]
    assert rows[2]["gpu"] == "GPU2 (far)" and rows[1]["threshold"] == "372"
    page = network_html(doc)
    assert "RDMA benchmarks (host vs GPU memory)" in page and "351.4" in page and "below 93 %" in page
    assert "GPU-NIC pairing" in page
    full = host_page("gpu1", doc, "r")
    assert "Network (GPUDirect RDMA)" in full


def test_rdma_checks_go_to_junit(sim_node):
    doc = _host(sim_node)
    root = ET.fromstring(junit(summary("r", "s", "f", {"gpu1": doc})))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["rdma: port mlx5_5/1"].find("failure") is not None
    assert cases["rdma: GPU3 NIC pairing"].find("failure") is not None
    # the passing port is in its area's run of PASS, one test case of the suite "gpu1: rdma"
    passed = [c for name, c in cases.items() if name.startswith("rdma: ") and " PASS" in name]
    assert len(passed) == 1 and "rdma: port mlx5_0/1" in passed[0].findtext("system-out").split("\n")
    assert passed[0].get("classname") == "gpu1.rdma"


def test_node_without_nics_has_no_network_section(sim_node):
    root = sim_node("cloud-vm")
    topo, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    doc = host_document("vm", {"checks": rdma_checks(topo), "topology": topo}, {})
    assert network_html(doc) == ""
    assert {c["verdict"] for c in doc["checks"] if c["name"].startswith("rdma: ")} == {"SKIP"}
