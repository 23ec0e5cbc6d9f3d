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
