"""RDMA NIC facts from the one PCI model: ports, netdevs, firmware, software devices, pairing."""
import os

import pytest

from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover, port_rate_gbps


@pytest.fixture
def rdma_mix(sim_node):
    root = sim_node("rdma-mix")
    facts, warnings = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    return facts, warnings, root


def _nic(facts, name):
    return next(n for n in facts["nics"] if n["name"] == name)


@pytest.mark.parametrize("text, gbps", [
    ("400 Gb/sec (4X NDR)\n", 400.0), ("200 Gb/sec (4X HDR)", 200.0), ("2.5 Gb/sec (1X SDR)", 2.5),
    ("100 Gb/sec (4X EDR)", 100.0), ("", None), ("Unknown", None), (None, None),
])
def test_port_rate_parses_the_kernels_rate_file(text, gbps):
    assert port_rate_gbps(text) == gbps


def test_ib_port_state_rate_and_link_layer_from_sysfs(rdma_mix):
    facts, _, _ = rdma_mix
    nic = _nic(facts, "mlx5_0")
    assert nic["fw_ver"] == "28.39.1002" and nic["numa_node"] == 0 and nic["software"] is False
    port = nic["ports"][0]
    assert (port["port"], port["state"], port["phys_state"], port["rate_gbps"], port["link_layer"],
            port["netdev"]) == (1, "ACTIVE", "LinkUp", 400.0, "InfiniBand", "ibp5s0f0")
    assert port["gid"].startswith("fe80:")


def test_down_port_keeps_the_kernels_state_names(rdma_mix):
    facts, _, _ = rdma_mix
    port = _nic(facts, "mlx5_5")["ports"][0]
    assert (port["state"], port["phys_state"]) == ("DOWN", "Disabled")


def test_roce_port_takes_its_netdev_from_the_gid_table(rdma_mix):
    facts, _, root = rdma_mix
    nic = _nic(facts, "mlx5_2")
    assert nic["ports"][0]["link_layer"] == "Ethernet"
    assert nic["ports"][0]["netdev"] == "enp16s0f0np0"
    # the GID table wins over dev_port: a RoCE LAG names the bond there
    ndev = os.path.join(root, "sys", "class", "infiniband", "mlx5_2", "ports", "1", "gid_attrs", "ndevs", "0")
    with open(ndev, "w") as handle:
        handle.write("bond0\n")
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    nic = _nic(facts, "mlx5_2")
    assert nic["ports"][0]["netdev"] == "bond0"
    assert nic["netdevs"] == ["bond0", "enp16s0f0np0"] and nic["netdev"] == "bond0"


def test_dual_port_function_maps_netdevs_by_dev_port(rdma_mix):
    facts, _, _ = rdma_mix
    nic = _nic(facts, "mlx5_4")
    assert [(p["port"], p["netdev"], p["rate_gbps"]) for p in nic["ports"]] == [
        (1, "ibp134s0", 400.0), (2, "ibp134s0d1", 200.0)]
    # an IPoIB child interface is a netdev of the NIC, not a port's
    assert nic["netdevs"] == ["ibp134s0", "ibp134s0d1", "ibp134s0.8001"]
    assert nic["netdev"] == "ibp134s0"


def test_sriov_vfs_with_their_own_rdma_device_are_not_nics(rdma_mix):
    facts, warnings, _ = rdma_mix
    names = [n["name"] for n in facts["nics"]]
    assert "mlx5_6" not in names and "mlx5_7" not in names
    assert _nic(facts, "mlx5_2")["vfs"] == 2
    assert not [w for w in warnings if "mlx5_6" in w]


def test_soft_roce_is_placed_by_its_netdevs_pci_device(rdma_mix):
    facts, _, _ = rdma_mix
    nic = _nic(facts, "rxe0")
    assert nic["software"] is True
    assert nic["bdf"] == "0000:20:00.0"  # the virtio function below which virtio3/net/enp32s0 sits
    assert nic["netdevs"] == ["enp32s0"] and nic["numa_node"] == 0
    assert nic["ports"][0]["link_layer"] == "Ethernet" and nic["ports"][0]["netdev"] == "enp32s0"
    assert facts["matrix"]["rxe0"]["GPU0"] == "PHB"
    assert any(link["bdf"] == "0000:20:00.0" and link["kind"] == "nic" for link in facts["pcie_links"])


def test_soft_roce_without_parent_file_uses_the_gid_table(sim_node):
    fixture = {
        "host_bridges": {"0000:00": 0}, "bridges": {"0000:00:02.0": 0x01},
        "other": [{"bdf": "0000:01:00.0", "class": 0x020000, "netdev": "eth1", "virtio": "virtio1"}],
        "soft_rdma": [{"name": "siw0", "netdev": "eth1", "rxe_parent": False}],
    }
    root = sim_node(fixture)
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    assert [(n["name"], n["bdf"], n["software"]) for n in facts["nics"]] == [("siw0", "0000:01:00.0", True)]


def test_soft_roce_on_a_netdev_without_pci_device_is_warned_not_listed(sim_node):
    fixture = {"host_bridges": {"0000:00": 0}, "soft_rdma": [{"name": "rxe0", "netdev": "veth0"}]}
    root = sim_node(fixture)
    vdir = os.path.join(root, "sys", "devices", "virtual", "net", "veth0")
    os.makedirs(vdir)
    os.makedirs(os.path.join(root, "sys", "class", "net"), exist_ok=True)
    os.symlink(vdir, os.path.join(root, "sys", "class", "net", "veth0"))
    facts, warnings = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    assert facts["nics"] == []
    assert any("rxe0" in w and "veth0" in w for w in warnings)


def test_gpus_pair_with_nics_best_class_first(rdma_mix):
    facts, _, _ = rdma_mix
    gpus = {g["index"]: g for g in facts["gpus"]}
    assert gpus[0]["nics"][:2] == ["mlx5_0", "mlx5_1"] and gpus[0]["nic_link"] == "PIX"
    assert gpus[2]["nics"][0] == "mlx5_4" and gpus[2]["nic_link"] == "PIX"
    assert gpus[3]["nics"][0] == "mlx5_4" and gpus[3]["nic_link"] == "PXB"  # a nested switch
    # every NIC listed once, ordered by class: far NICs last
    assert sorted(gpus[0]["nics"]) == sorted(n["name"] for n in facts["nics"])
    classes = [facts["matrix"]["GPU0"][n] for n in gpus[0]["nics"]]
    order = ["PIX", "PXB", "PHB", "NODE", "SYS"]
    assert classes == sorted(classes, key=order.index)


def test_gpu_without_nics_has_no_nic_link(sim_node):
    root = sim_node("cloud-vm")
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    assert all(g["nics"] == [] and g["nic_link"] is None for g in facts["gpus"])


def test_dgx_a100_gpus_pair_with_their_switch_nic(sim_node):
    root = sim_node("dgx-a100")
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    gpu0 = facts["gpus"][0]
    assert gpu0["nic_link"] in ("PIX", "PXB")
    assert gpu0["nics"][0] in facts["groups"][0]["nics"]


def test_topology_module_returns_nic_ports(module_runner, sim_node):
    root = sim_node("rdma-mix")
    rc, result = module_runner("gds_topology", {"sysfs_root": os.path.join(root, "sys"),
                                                "procfs_root": os.path.join(root, "proc")})
    assert rc == 0, result
    topo = result["ansible_facts"]["gds_topology"]
    assert [p["state"] for n in topo["nics"] for p in n["ports"]] == [
        "ACTIVE", "ACTIVE", "ACTIVE", "ACTIVE", "ACTIVE", "DOWN", "ACTIVE"]
    assert topo["gpus"][0]["nic_link"] == "PIX"


def test_soft_roce_port_without_gid_entry_takes_the_parent_netdev(sim_node):
    fixture = {
        "host_bridges": {"0000:00": 0}, "bridges": {"0000:00:02.0": 0x01},
        "other": [{"bdf": "0000:01:00.0", "class": 0x020000, "netdev": "eth1", "virtio": "virtio1"}],
        "soft_rdma": [{"name": "rxe0", "netdev": "eth1"}],
    }
    root = sim_node(fixture)
    os.remove(os.path.join(root, "sys", "devices", "virtual", "infiniband", "rxe0", "ports", "1",
                           "gid_attrs", "ndevs", "0"))
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    nic = facts["nics"][0]
    assert nic["bdf"] == "0000:01:00.0" and nic["ports"][0]["netdev"] == "eth1"
