"""What discovery cannot see is said, never silently guessed: truncated config space, symlink
loops, unreadable bridge attributes; and SR-IOV virtual functions are no devices of their own."""
import copy
import os

import pytest

from ansible_collections.gds.commission.plugins.module_utils.tune.acs import AcsError, read_bridge
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover

from conftest import run_module

# One switch: GPU0, nvme0 and the NIC mlx5_0 (a PF with two VFs, mlx5_2 and mlx5_3, bound to
# mlx5_core like the PF); a second switch with GPU1, nvme1 and the NIC mlx5_1.
SRIOV = {
    "host_bridges": {"0000:00": 0},
    "bridges": {"0000:00:01.0": 0x01, "0000:01:00.0": 0x02, "0000:02:00.0": 0x03,
                "0000:02:01.0": 0x04, "0000:02:02.0": 0x05, "0000:00:02.0": 0x10,
                "0000:10:00.0": 0x11, "0000:11:00.0": 0x12, "0000:11:01.0": 0x13,
                "0000:11:02.0": 0x14},
    "gpus": {"bdfs": ["0000:03:00.0", "0000:12:00.0"]},
    "nvme": [{"bdf": "0000:04:00.0", "ctrl": "nvme0"}, {"bdf": "0000:14:00.0", "ctrl": "nvme1"}],
    "nics": [{"bdf": "0000:05:00.0", "rdma": "mlx5_0", "netdev": "ibp5s0",
              "vfs": [{"bdf": "0000:05:00.1", "rdma": "mlx5_2", "netdev": "ibp5s0v0"},
                      {"bdf": "0000:05:00.2", "rdma": "mlx5_3", "netdev": "ibp5s0v1"}]},
             {"bdf": "0000:13:00.0", "rdma": "mlx5_1", "netdev": "ibp19s0"}],
    "proc": {"mounts": "/dev/sda1 / ext4 rw 0 0\n"},
}


def topology(root):
    return discover(os.path.join(root, "sys"), os.path.join(root, "proc"))


# --------------------------------------------------------------------------------------------
# SR-IOV
# --------------------------------------------------------------------------------------------
def test_sriov_vfs_are_counted_under_their_pf_not_listed_as_nics(sim_node):
    root = sim_node(copy.deepcopy(SRIOV))
    sys_ = os.path.join(root, "sys")
    assert os.path.islink(os.path.join(sys_, "bus/pci/devices/0000:05:00.1/physfn"))
    assert os.path.isdir(os.path.join(sys_, "class/infiniband/mlx5_2"))
    facts, warnings = topology(root)
    assert [(n["name"], n["vfs"]) for n in facts["nics"]] == [("mlx5_0", 2), ("mlx5_1", 0)]
    assert "mlx5_2" not in facts["matrix"] and "mlx5_3" not in facts["matrix"]
    assert [g["nics"] for g in facts["groups"]] == [["mlx5_0"], ["mlx5_1"]]
    assert warnings == []


def test_vf_of_a_pf_without_rdma_device_is_warned_not_listed(sim_node):
    root = sim_node(copy.deepcopy(SRIOV))
    os.remove(os.path.join(root, "sys/class/infiniband/mlx5_0"))
    facts, warnings = topology(root)
    assert [n["name"] for n in facts["nics"]] == ["mlx5_1"]
    assert any("mlx5_2" in w and "virtual function" in w for w in warnings)


def test_gpu_virtual_functions_are_not_gpus(sim_node):
    fixture = copy.deepcopy(SRIOV)
    fixture["other"] = [{"bdf": "0000:03:00.4", "class": 0x030200, "vendor": 0x10DE, "device": 0x20b5,
                         "driver": "nvidia"}]
    root = sim_node(fixture)
    devices = os.path.join(root, "sys/bus/pci/devices")
    os.symlink("../0000:03:00.0", os.path.join(devices, "0000:03:00.4", "physfn"))
    facts, _ = topology(root)
    assert [g["bdf"] for g in facts["gpus"]] == ["0000:03:00.0", "0000:12:00.0"]


# --------------------------------------------------------------------------------------------
# Config space that cannot be read in full
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [0, 0x120])
def test_short_config_space_gives_acs_unknown_with_the_path(sim_node, size):
    root = sim_node("dgx-a100")
    path = os.path.join(root, "sys/bus/pci/devices/0000:04:10.0/config")
    with open(path, "rb") as handle:
        data = handle.read()
    with open(path, "wb") as handle:
        handle.write(data[:size])
    facts, warnings = topology(root)
    bridge = [b for b in facts["bridges"] if b["bdf"] == "0000:04:10.0"][0]
    assert bridge["acs_ctrl"] is None and bridge["acs_offset"] is None
    real = os.path.realpath(path)
    assert real in bridge["acs_unknown"] and "%d bytes" % size in bridge["acs_unknown"]
    assert any("0000:04:10.0" in w and "ACS state unknown" in w and real in w for w in warnings)
    with pytest.raises(AcsError, match="%d bytes" % size):
        read_bridge(os.path.join(root, "sys"), "0000:04:10.0")


def test_full_config_space_has_no_unknown_acs(sim_node):
    facts, warnings = topology(sim_node("dgx-a100"))
    assert all(b["acs_unknown"] is None for b in facts["bridges"])
    assert warnings == []


# --------------------------------------------------------------------------------------------
# Symlink loops on class entries
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("entry", ["class/nvme/nvme1", "class/infiniband/mlx5_1"])
def test_symlink_loop_on_a_class_entry_warns(sim_node, entry):
    root = sim_node("dgx-a100")
    path = os.path.join(root, "sys", entry)
    os.remove(path)
    os.symlink(os.path.basename(path), path)  # points at itself
    facts, warnings = topology(root)
    assert any(path in w and "symlink loop" in w for w in warnings), warnings
    rc, result = run_module("gds_topology", {"sysfs_root": os.path.join(root, "sys"),
                                             "procfs_root": os.path.join(root, "proc")})
    assert rc == 0 and any("symlink loop" in w for w in result["warnings"])


def test_symlink_loop_on_a_device_link_warns(sim_node):
    root = sim_node("dgx-a100")
    link = os.path.join(root, "sys/class/nvme/nvme4/device")
    os.remove(link)
    os.symlink("device", link)
    facts, warnings = topology(root)
    assert "nvme4n1" not in {d["name"] for d in facts["nvme"]}
    assert any(link in w and "symlink loop" in w for w in warnings)


# --------------------------------------------------------------------------------------------
# A switch port whose class cannot be read
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("also_config", [False, True])
def test_upstream_port_with_unreadable_class_is_still_a_switch(sim_node, also_config):
    root = sim_node("hgx-h100")
    port = os.path.join(root, "sys/bus/pci/devices/0000:16:00.0")
    os.remove(os.path.join(port, "class"))
    if also_config:  # then only its place in the tree tells: below a root port, an upstream port
        os.remove(os.path.join(port, "config"))
    facts, warnings = topology(root)
    assert any("0000:16:00.0" in w and "class" in w for w in warnings)
    assert facts["matrix"]["GPU0"]["GPU1"] == "PIX"
    assert facts["matrix"]["GPU0"]["nvme0n1"] == "PIX"
    assert [g["link"] for g in facts["groups"]] == ["PIX"] * 4


def test_sysfs_attribute_with_non_utf8_bytes_names_the_file(sim_node):
    root = sim_node("dgx-a100")
    path = os.path.join(root, "sys/bus/pci/devices/0000:07:00.0/class")
    with open(path, "wb") as handle:
        handle.write(b"0x03\xff\xfe00\n")
    facts, warnings = topology(root)
    assert len(facts["gpus"]) == 7
    real = os.path.realpath(path)
    assert any(real in w for w in warnings) and not any("codec" in w for w in warnings)


def test_skipped_downstream_port_keeps_its_place_in_the_acs_list(sim_node):
    root = sim_node("hgx-h100")
    port = os.path.join(root, "sys/bus/pci/devices/0000:39:02.0")
    os.remove(os.path.join(port, "vendor"))
    facts, warnings = topology(root)
    bridge = {b["bdf"]: b for b in facts["bridges"]}["0000:39:02.0"]
    assert bridge["port_type"] == "downstream" and bridge["acs_ctrl"] == 0x001d  # the drifted one
    os.remove(os.path.join(port, "config"))
    facts, warnings = topology(root)
    bridge = {b["bdf"]: b for b in facts["bridges"]}["0000:39:02.0"]
    assert bridge["acs_ctrl"] is None and "0000:39:02.0/config" in bridge["acs_unknown"]
    assert any("0000:39:02.0" in w and "ACS state unknown" in w for w in warnings)


def test_pcie_acs_on_topology_bridges_does_not_skip_an_unknown_one(sim_node):
    root = sim_node("dgx-a100")
    path = os.path.join(root, "sys/bus/pci/devices/0000:04:10.0/config")
    with open(path, "rb") as handle:
        data = handle.read(0x120)
    with open(path, "wb") as handle:
        handle.write(data)
    rc, result = run_module("pcie_acs", {"sysfs_root": os.path.join(root, "sys"),
                                         "procfs_root": os.path.join(root, "proc"), "state": "query"})
    assert rc != 0 and "0000:04:10.0" in result["msg"] and "288 bytes" in result["msg"], result


def test_module_returns_a_check_for_unknown_acs_state(sim_node):
    root = sim_node("dgx-a100")
    path = os.path.join(root, "sys/bus/pci/devices/0000:04:10.0/config")
    with open(path, "wb") as handle:
        handle.write(b"")
    rc, result = run_module("gds_topology", {"sysfs_root": os.path.join(root, "sys"),
                                             "procfs_root": os.path.join(root, "proc")})
    assert rc == 0
    checks = {c["name"]: c for c in result["checks"]}
    acs = checks["topology: ACS state readable on GPU/NVMe/NIC bridges"]
    assert acs["verdict"] == "WARN" and acs["actual"] == 1
    assert "0000:04:10.0" in acs["detail"] and os.path.realpath(path) in acs["detail"]
