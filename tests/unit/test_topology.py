"""gds_topology on the fixture topologies: the guide's tables are the expected answers."""
import os

import pytest

from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import PciTree, find_ext_capability, read_acs


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


def test_rented_two_gpu_vm_finds_the_virtio_data_disk_and_its_function(sim_node):
    """The lab's two-GPU machine: GPUs on the root bus, NUMA -1, the data disk a virtio-blk
    function without link files. The disk is in the facts with the function its data crosses,
    and that function's link is on pcie_links with the reason its rate is unknown."""
    facts, warnings = topology(sim_node, "cloud-vm-2gpu")
    assert warnings == []
    assert [(g["index"], g["bdf"], g["numa_node"], g["switch"]) for g in facts["gpus"]] == [
        (0, "0000:00:06.0", -1, None), (1, "0000:00:07.0", -1, None)]
    assert facts["nvme"] == []
    assert facts["disks"] == [{"name": "vda", "kind": "virtio", "bdf": "0000:00:01.0", "system": False,
                               "numa_node": -1, "switch": None, "size_bytes": 500000000000}]
    # no NVMe: each GPU is a group of its own with no drive in it
    assert [(g["gpus"], g["nvme"]) for g in facts["groups"]] == [([0], []), ([1], [])]
    links = {link["bdf"]: link for link in facts["pcie_links"]}
    assert sorted(links) == ["0000:00:01.0", "0000:00:06.0", "0000:00:07.0"]  # not the virtio NIC
    disk = links["0000:00:01.0"]
    assert disk["kind"] == "disk" and disk["upstream"] is None and disk["current_width"] is None
    assert "0000:00:01.0/{current_link_speed," in disk["problem"] and "rate is unknown" in disk["problem"]
    assert links["0000:00:06.0"]["current_speed_gts"] == 32.0 and links["0000:00:07.0"]["current_width"] == 16


def scsi_vm(root_on_sda=False):
    """A VM with a SAS HBA (class 0x010700) at 0000:03:00.0 below root port 0000:00:03.0 and two
    disks behind it, as mpt3sas lays them out (host0/port-0:0/end_device-0:0/target0:0:0/0:0:0:0)."""
    target = "host0/port-0:0/end_device-0:0/target0:0:%d/0:0:%d:0"
    return {"host_bridges": {"0000:00": 0}, "bridges": {"0000:00:03.0": 0x03},
            "gpus": {"bdfs": ["0000:00:04.0"]},
            "other": [{"bdf": "0000:03:00.0", "class": 0x010700, "vendor": 0x1000, "device": 0x00c9, "driver": "mpt3sas",
                       "block": {"name": "sda", "under": target % (0, 0), "devno": "8:0"}},
                      {"bdf": "0000:00:1f.2", "class": 0x010601, "driver": "ahci",
                       "block": {"name": "sdb", "under": "ata1/host1/target1:0:0/1:0:0:0", "devno": "8:16"}}],
            "proc": {"mounts": "/dev/sdb / ext4 rw 0 0\n"}}


def test_disks_behind_an_hba_and_ahci_are_placed_on_their_function(sim_node):
    facts, warnings = topology(sim_node, scsi_vm())
    assert warnings == []
    disks = {d["name"]: d for d in facts["disks"]}
    assert (disks["sda"]["kind"], disks["sda"]["bdf"], disks["sda"]["system"]) == ("scsi", "0000:03:00.0", False)
    assert (disks["sdb"]["kind"], disks["sdb"]["bdf"], disks["sdb"]["system"]) == ("ata", "0000:00:1f.2", True)
    links = {link["bdf"]: link for link in facts["pcie_links"]}
    # every disk's function is on the links, the system disk's AHCI too (a job on it has a path limit)
    assert links["0000:03:00.0"]["kind"] == "disk" and links["0000:03:00.0"]["upstream"] == "0000:00:03.0"
    assert links["0000:03:00.0"]["current_width"] == 4
    assert links["0000:00:1f.2"]["kind"] == "disk"


def test_nvme_over_fabrics_names_its_nic_where_the_controller_does(sim_node, tmp_path):
    """A fabrics controller has no PCI function: its namespace is a disk whose data crosses the NIC
    its address names (host_iface, nvme-tcp), else an unknown with the reason."""
    import simtree
    fixture = {"host_bridges": {"0000:00": 0}, "gpus": {"bdfs": ["0000:00:04.0"]},
               "nics": [{"bdf": "0000:00:05.0", "rdma": "mlx5_0", "netdev": "enp0s5"}]}
    root = simtree.build(fixture, str(tmp_path / "node"))
    sys_root = os.path.join(root, "sys")
    for number, address in ((1, "traddr=10.0.0.9,trsvcid=4420,host_iface=enp0s5"), (2, "traddr=10.0.0.9,trsvcid=4420")):
        ctl = os.path.join(sys_root, "devices", "virtual", "nvme-fabrics", "ctl", "nvme%d" % number)
        os.makedirs(os.path.join(ctl, "nvme%dn1" % number))
        with open(os.path.join(ctl, "transport"), "w") as handle:
            handle.write("tcp\n")
        with open(os.path.join(ctl, "address"), "w") as handle:
            handle.write(address + "\n")
        for where in ("class/nvme", "block"):
            os.makedirs(os.path.join(sys_root, where), exist_ok=True)
        os.symlink(os.path.relpath(ctl, os.path.join(sys_root, "class", "nvme")),
                   os.path.join(sys_root, "class", "nvme", "nvme%d" % number))
        os.symlink(os.path.relpath(os.path.join(ctl, "nvme%dn1" % number), os.path.join(sys_root, "block")),
                   os.path.join(sys_root, "block", "nvme%dn1" % number))
    facts, _ = discover(sys_root, os.path.join(root, "proc"))
    disks = {d["name"]: d for d in facts["disks"]}
    tcp = disks["nvme1n1"]
    assert (tcp["kind"], tcp["transport"], tcp["nic"], tcp["bdf"]) == ("fabrics", "tcp", "enp0s5", "0000:00:05.0")
    unnamed = disks["nvme2n1"]
    assert unnamed["bdf"] is None and "names no local interface" in unnamed["unknown"] and "10.0.0.9" in unnamed["unknown"]
