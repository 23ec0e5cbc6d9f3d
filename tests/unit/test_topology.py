"""gds_topology on the fixture topologies: the guide's tables are the expected answers."""
import os

import pytest

from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import PciTree, find_ext_capability, read_acs

# nvidia-smi topo -mp on the DGX-2, verbatim from the guide (section 3.1): first 8 columns.
DGX2_TOPO_MP = """
        GPU0   GPU1   GPU2   GPU3   GPU4   GPU5   GPU6   GPU7
GPU0     X     PIX    PXB    PXB    NODE   NODE   NODE   NODE
GPU1    PIX     X     PXB    PXB    NODE   NODE   NODE   NODE
GPU2    PXB    PXB     X     PIX    NODE   NODE   NODE   NODE
GPU3    PXB    PXB    PIX     X     NODE   NODE   NODE   NODE
GPU4    NODE   NODE   NODE   NODE    X     PIX    PXB    PXB
GPU5    NODE   NODE   NODE   NODE   PIX     X     PXB    PXB
GPU6    NODE   NODE   NODE   NODE   PXB    PXB     X     PIX
GPU7    NODE   NODE   NODE   NODE   PXB    PXB    PIX     X
GPU8    SYS    SYS    SYS    SYS    SYS    SYS    SYS    SYS
GPU9    SYS    SYS    SYS    SYS    SYS    SYS    SYS    SYS
GPU10   SYS    SYS    SYS    SYS    SYS    SYS    SYS    SYS
GPU11   SYS    SYS    SYS    SYS    SYS    SYS    SYS    SYS
GPU12   SYS    SYS    SYS    SYS    SYS    SYS    SYS    SYS
GPU13   SYS    SYS    SYS    SYS    SYS    SYS    SYS    SYS
GPU14   SYS    SYS    SYS    SYS    SYS    SYS    SYS    SYS
GPU15   SYS    SYS    SYS    SYS    SYS    SYS    SYS    SYS
mlx5_0  PIX    PIX    PXB    PXB    NODE   NODE   NODE   NODE
mlx5_1  PXB    PXB    PIX    PIX    NODE   NODE   NODE   NODE
mlx5_2  NODE   NODE   NODE   NODE   PIX    PIX    PXB    PXB
mlx5_3  NODE   NODE   NODE   NODE   PXB    PXB    PIX    PIX
"""


def topology(sim_node, fixture):
    root = sim_node(fixture)
    facts, warnings = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    return facts, warnings


def groups_by_controller(facts):
    return [(g["gpus"], [n[:-2] for n in g["nvme"]]) for g in facts["groups"]]


def test_dgx2_groups_equal_table_1(sim_node):
    facts, warnings = topology(sim_node, "dgx2")
    assert warnings == []
    assert groups_by_controller(facts) == [
        ([0, 1, 2, 3], ["nvme2", "nvme3"]),
        ([4, 5, 6, 7], ["nvme4", "nvme5"]),
        ([8, 9, 10, 11], ["nvme6", "nvme7"]),
        ([12, 13, 14, 15], ["nvme8", "nvme9"]),
    ]
    # Table 1's bus columns: GPUs 12-15 at 0xe0 0xe2 0xe5 0xe7 with nvme8/9 at 0xda 0xdb
    gpu_bus = {g["index"]: g["bdf"][5:7] for g in facts["gpus"]}
    assert [gpu_bus[i] for i in (12, 13, 14, 15)] == ["e0", "e2", "e5", "e7"]
    assert {d["name"]: d["bdf"][5:7] for d in facts["nvme"]}["nvme8n1"] == "da"


def test_dgx2_classes_equal_guide_topo_mp(sim_node):
    facts, _ = topology(sim_node, "dgx2")
    lines = [line.split() for line in DGX2_TOPO_MP.strip().splitlines()]
    columns = lines[0]
    compared = 0
    for row in lines[1:]:
        for column, expected in zip(columns, row[1:]):
            assert facts["matrix"][row[0]][column] == expected, (row[0], column)
            compared += 1
    assert compared == 20 * 8


def test_dgx2_nvswitches_are_not_gpus(sim_node):
    facts, _ = topology(sim_node, "dgx2")
    assert len(facts["gpus"]) == 16
    assert all(g["device_id"] == "0x1db8" for g in facts["gpus"])


def test_dgx2_os_drives_are_system_through_md(sim_node):
    facts, _ = topology(sim_node, "dgx2")
    system = sorted(d["name"] for d in facts["nvme"] if d["system"])
    assert system == ["nvme0n1", "nvme1n1"]


def test_dgx_a100_groups_equal_tables_4_and_5(sim_node):
    facts, warnings = topology(sim_node, "dgx-a100")
    assert warnings == []
    assert groups_by_controller(facts) == [
        ([0, 1], ["nvme0", "nvme1"]),
        ([2, 3], ["nvme4", "nvme5"]),
        ([4, 5], ["nvme6", "nvme7"]),
        ([6, 7], ["nvme8", "nvme9"]),
    ]
    buses = [[facts["gpus"][i]["bdf"][5:7] for i in g["gpus"]] for g in facts["groups"]]
    assert buses == [["07", "0f"], ["47", "4e"], ["87", "90"], ["b7", "bd"]]


def test_dgx_a100_os_drives_flagged_and_in_no_group(sim_node):
    facts, _ = topology(sim_node, "dgx-a100")
    system = sorted(d["name"] for d in facts["nvme"] if d["system"])
    assert system == ["nvme2n1", "nvme3n1"]
    grouped = {n for g in facts["groups"] for n in g["nvme"]}
    assert not grouped & set(system)


def test_h100_multipath_layout_and_vmd(sim_node):
    facts, warnings = topology(sim_node, "hgx-h100")
    assert warnings == []
    by_name = {d["name"]: d for d in facts["nvme"]}
    assert sorted(by_name) == ["nvme%dn1" % i for i in range(10)]
    assert by_name["nvme3n1"]["controller"] == "nvme3"
    assert by_name["nvme8n1"]["bdf"] == "10000:01:00.0"  # behind Intel VMD
    assert by_name["nvme8n1"]["system"] and by_name["nvme9n1"]["system"]
    assert [g["link"] for g in facts["groups"]] == ["PIX"] * 4
    assert facts["groups"][0]["nics"] == ["mlx5_0", "mlx5_1"]
    assert facts["matrix"]["GPU0"]["GPU4"] == "SYS"
    assert facts["matrix"]["GPU0"]["GPU2"] == "NODE"


def test_cloud_vm_root_bus_devices_and_unknown_numa(sim_node):
    facts, _ = topology(sim_node, "cloud-vm")
    assert facts["gpus"][0]["numa_node"] == -1
    assert facts["matrix"]["GPU0"]["nvme1n1"] == "PHB"
    assert facts["groups"] == [{"id": 1, "gpus": [0], "nvme": ["nvme1n1"], "nics": [],
                                "numa_node": -1, "link": "PHB"}]
    assert facts["bridges"] == []


def test_matrix_is_symmetric_with_x_on_diagonal(sim_node):
    facts, _ = topology(sim_node, "dgx-a100")
    matrix = facts["matrix"]
    for a in matrix:
        assert matrix[a][a] == "X"
        for b in matrix[a]:
            assert matrix[a][b] == matrix[b][a]


def test_group_nics_exclude_sys(sim_node):
    fixture = {"host_bridges": {"0000:00": 0, "0000:80": 1},
               "bridges": {"0000:00:01.0": 0x01, "0000:00:02.0": 0x02, "0000:80:01.0": 0x81},
               "gpus": {"bdfs": ["0000:01:00.0"]},
               "nvme": [{"bdf": "0000:02:00.0", "ctrl": "nvme0"}],
               "nics": [{"bdf": "0000:81:00.0", "rdma": "mlx5_0", "netdev": "ib0"}]}
    facts, _ = topology(sim_node, fixture)
    assert facts["matrix"]["GPU0"]["mlx5_0"] == "SYS"
    assert facts["groups"][0]["nics"] == []
    assert facts["groups"][0]["nvme"] == ["nvme0n1"]  # PHB: through the host bridge


def test_gpu_with_only_sys_drives_gets_an_empty_group(sim_node):
    fixture = {"host_bridges": {"0000:00": 0, "0000:80": 1},
               "bridges": {"0000:00:01.0": 0x01, "0000:80:01.0": 0x81},
               "gpus": {"bdfs": ["0000:01:00.0"]},
               "nvme": [{"bdf": "0000:81:00.0", "ctrl": "nvme0"}]}
    facts, _ = topology(sim_node, fixture)
    assert facts["groups"] == [{"id": 1, "gpus": [0], "nvme": [], "nics": [], "numa_node": 0, "link": None}]


def test_bridges_report_acs_state(sim_node):
    facts, _ = topology(sim_node, "hgx-h100")
    enabled = [b["bdf"] for b in facts["bridges"] if b["acs_ctrl"]]
    assert enabled == ["0000:39:02.0"]
    ports = {b["bdf"]: b for b in facts["bridges"]}
    assert ports["0000:38:00.0"]["port_type"] == "upstream" and ports["0000:38:00.0"]["acs_cap"] is None
    assert ports["0000:37:01.0"]["port_type"] == "root_port" and ports["0000:37:01.0"]["acs_offset"] == 0x148
    # the OS drives' VMD root ports are not on any GPU-storage path
    assert not [b for b in facts["bridges"] if b["bdf"].startswith("10000:")]


def test_gpu_order_follows_nvml_when_given(sim_node):
    root = sim_node("dgx-a100")
    nvml_order = ["00000000:0F:00.0", "00000000:07:00.0", "00000000:47:00.0", "00000000:4E:00.0",
                  "00000000:87:00.0", "00000000:90:00.0", "00000000:B7:00.0", "00000000:BD:00.0"]
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"), nvml_bus_ids=nvml_order)
    assert [g["bdf"] for g in facts["gpus"]][:2] == ["0000:0f:00.0", "0000:07:00.0"]


def test_nvml_mismatch_falls_back_to_pci_order_with_warning(sim_node):
    root = sim_node("dgx-a100")
    facts, warnings = discover(os.path.join(root, "sys"), os.path.join(root, "proc"),
                               nvml_bus_ids=["00000000:01:00.0"])
    assert [g["bdf"] for g in facts["gpus"]][0] == "0000:07:00.0"
    assert any("NVML bus ids" in w for w in warnings)


def test_acs_walk_follows_the_chain(sim_node):
    root = sim_node("dgx-a100")
    with open(os.path.join(root, "sys/bus/pci/devices/0000:04:10.0/config"), "rb") as handle:
        config = handle.read()
    assert find_ext_capability(config, 0x0001) == 0x100
    assert read_acs(config) == (0x148, 0x005F, 0x001D)
    with pytest.raises(ValueError):
        read_acs(config[:64])


def test_numa_minus_one_inherits_from_parent(sim_node):
    root = sim_node("dgx-a100")
    with open(os.path.join(root, "sys/bus/pci/devices/0000:07:00.0/numa_node"), "w") as handle:
        handle.write("-1\n")
    tree = PciTree(os.path.join(root, "sys"))
    assert tree.devices["0000:07:00.0"].numa_node == 0


def test_this_machine_runs_without_error(module_runner):
    rc, result = module_runner("gds_topology", {})
    assert rc == 0, result
    topo = result["ansible_facts"]["gds_topology"]
    assert topo["gpus"] == []  # no GPU on the development and CI machines
    if not os.listdir("/sys/class/nvme") if os.path.isdir("/sys/class/nvme") else True:
        assert topo["nvme"] == []
