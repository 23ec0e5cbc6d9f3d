"""Machines we commissioned for real, captured by scripts/capture-node.py (tests/fixtures/captured/
NAME.tgz, with NAME.expected.json: NVML's view of the same machine): discovery on the capture
agrees with the vendor's view, so each machine stays covered after it is gone."""
import json
import os
import tarfile

import pytest
from conftest import ROOT

CAPTURED = os.path.join(ROOT, "tests", "fixtures", "captured")
NAMES = sorted(f[:-4] for f in os.listdir(CAPTURED) if f.endswith(".tgz")) if os.path.isdir(CAPTURED) else []


@pytest.fixture(params=NAMES)
def machine(request, tmp_path, module_runner):
    name = request.param
    with tarfile.open(os.path.join(CAPTURED, name + ".tgz")) as tar:
        tar.extractall(tmp_path, filter="tar")
    root = tmp_path / name
    with open(os.path.join(CAPTURED, name + ".expected.json")) as handle:
        expected = json.load(handle)
    rc, result = module_runner("gds_topology", {"sysfs_root": str(root / "sys"), "procfs_root": str(root / "proc")})
    assert rc == 0, result
    return result["ansible_facts"]["gds_topology"], expected


def test_every_gpu_at_nvmls_index_and_address(machine):
    topology, expected = machine
    assert [(g["index"], g["bdf"]) for g in topology["gpus"]] == [(g["index"], g["bdf"]) for g in expected["gpus"]]


def test_numa_node_of_every_gpu_as_nvml_says(machine):
    topology, expected = machine
    ours = {g["bdf"]: g.get("numa_node") for g in topology["gpus"]}
    for gpu in expected["gpus"]:
        if "numa_node" in gpu:  # NVML's -1 and sysfs's -1 both say: not known
            assert ours[gpu["bdf"]] == gpu["numa_node"], gpu


def test_gpu_pairs_as_nvidia_smi_topo_mp(machine):
    topology, expected = machine
    for pair, level in expected["gpu_pairs"].items():
        a, b = pair.split()
        assert topology["matrix"][a][b] == level, (pair, topology["matrix"][a][b], level)


def test_the_matrix_and_nvlinks_as_nvidia_smi_printed_them(machine):
    """Every cell of the captured `nvidia-smi topo -mp` (GPUs and NICs) is the facts' class, and
    every NV# cell of `topo -m` the NVLinks NVML gave at the capture (what gds_topology reports on
    the live machine; captures before it lack them, and only -mp is held)."""
    from ansible_collections.gds.commission.plugins.module_utils.hw.smi_topo import compare
    topology, expected = machine
    topology = dict(topology, nvlink=expected.get("nvlink"))
    compared, differences = compare(topology, topo_mp=expected["nvidia-smi topo -mp"],
                                    topo_m=expected["nvidia-smi topo -m"] if "nvlink" in expected else None)
    assert differences == []
    assert compared >= len(topology["gpus"]) ** 2


def test_every_gpu_is_in_one_affinity_group_and_no_group_claims_a_system_drive(machine):
    topology, _ = machine
    grouped = sorted(i for group in topology["groups"] for i in group["gpus"])
    assert grouped == sorted(g["index"] for g in topology["gpus"])
    system = {d["name"] for d in (topology.get("disks") or []) + (topology.get("nvme") or []) if d.get("system")}
    assert not system & {d for group in topology["groups"] for d in group["nvme"]}


def test_every_disk_has_its_pci_function_and_the_root_disk_is_a_system_drive(machine):
    """The data disks of a rented machine (virtio) are found with the PCI function their data
    crosses, and the disk under / is never a data drive."""
    topology, _ = machine
    disks = topology.get("disks") or []
    assert disks
    for disk in disks:
        assert disk.get("bdf"), disk
    assert any(d.get("system") for d in disks + (topology.get("nvme") or []))


def test_the_paths_limit_of_every_disk_is_its_own_reason(machine):
    """A job on any disk, the system disk too (the rented VM's data directory sits on it), has a
    path; a virtual function without link files makes the limit unknown for that reason, never
    'not on the PCIe links'."""
    from ansible_collections.gds.commission.plugins.module_utils.measure.pathlimit import path_limit
    topology, _ = machine
    for disk in topology["disks"]:
        limit = path_limit(topology, topology["gpus"][0]["index"], [disk["name"]], {}, None)
        assert "not on the PCIe links" not in str(limit), limit
        assert "bytes_per_s" in limit or disk["bdf"] in limit.get("unknown", ""), limit


def test_p2pdma_judges_the_gpus_as_providers_and_skips_without_a_drive_beside_them(machine):
    """The captured cloud machines have no NVMe and no RDMA NIC: the GPUs are the providers, there
    is no pair to judge, and the P2PDMA mode's pair check says so rather than passing."""
    from ansible_collections.gds.commission.plugins.module_utils.tune.driver import p2pdma_pairs_check
    topology, expected = machine
    facts = topology["p2pdma"]
    assert facts["providers"] == [g["bdf"] for g in expected["gpus"]]
    clients = [d for d in topology["nvme"] if not d["system"]] + topology["nics"]
    assert len(facts["pairs"]) == len(facts["providers"]) * len(clients)
    if not clients:
        assert p2pdma_pairs_check(topology)["verdict"] == "SKIP"
