"""One GPU-NIC pairing rule (hw/affinity.paired_nics) for the three places that say it: the rdma
module's pairing, the network mounts' paired GPUs and the report's paired-GPUs column."""
import random

import pytest

from ansible_collections.gds.commission.plugins.module_utils.fleet.report_html import network_rows
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import pair_nics, paired_nics
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import LINK_CLASSES
from ansible_collections.gds.commission.plugins.module_utils.tune.mounts import paired_gpus
from ansible_collections.gds.commission.plugins.module_utils.tune.rdma import pairing


def topology(classes):
    """A topology from {GPU index: {NIC name: class}}, its gpus[].nics ranked as discovery ranks them."""
    names = sorted({nic for row in classes.values() for nic in row})
    nics = [{"name": n, "bdf": "0000:%02x:00.0" % (0x80 + i), "ports": [{"port": 1}]} for i, n in enumerate(names)]
    gpus = [{"index": i, "bdf": "0000:%02x:00.0" % (0x10 + i)} for i in sorted(classes)]
    matrix = {"GPU%d" % i: dict(row) for i, row in classes.items()}
    pair_nics(matrix, gpus, nics)
    return {"gpus": gpus, "nics": nics, "matrix": matrix}


def three_views(topo):
    """{GPU: set of NICs} as the rdma module, the mounts and the report each say it."""
    rdma = dict((row["gpu"], set(row["nics"])) for row in pairing(topo))
    names = [n["name"] for n in topo["nics"]]
    mounts = dict((g["index"], {n for n in names if g["index"] in paired_gpus(topo, [n])}) for g in topo["gpus"])
    report = dict((g["index"], set()) for g in topo["gpus"])
    for row in network_rows({"topology": topo}):
        for gpu in (row["gpus"].split(", ") if row["gpus"] != "-" else []):
            report[int(gpu[3:])].add(row["nic"])
    return rdma, mounts, report


def test_a_gpu_is_paired_with_its_best_nics_and_never_across_the_sockets():
    topo = topology({0: {"mlx5_0": "PIX", "mlx5_1": "PIX", "mlx5_2": "SYS"},
                     1: {"mlx5_0": "NODE", "mlx5_1": "NODE", "mlx5_2": "PXB"},
                     2: {"mlx5_0": "SYS", "mlx5_1": "SYS", "mlx5_2": "SYS"}})
    assert paired_nics(topo) == {0: ["mlx5_0", "mlx5_1"], 1: ["mlx5_2"], 2: []}
    rdma, mounts, report = three_views(topo)
    assert rdma == mounts == report == {0: {"mlx5_0", "mlx5_1"}, 1: {"mlx5_2"}, 2: set()}
    # the rdma module still names each GPU's best NIC, SYS or not: that is the pairing check's input
    assert [(row["nic"], row["link"]) for row in pairing(topo)] == [("mlx5_0", "PIX"), ("mlx5_2", "PXB"), ("mlx5_0", "SYS")]


def test_without_a_matrix_entry_a_gpu_is_paired_with_nothing():
    topo = topology({0: {"mlx5_0": "PIX"}})
    del topo["matrix"]["GPU0"]
    assert paired_nics(topo) == {0: []}
    assert paired_gpus(topo, ["mlx5_0"]) == []


@pytest.mark.parametrize("seed", range(40))
def test_the_three_places_agree_on_any_topology(seed):
    rng = random.Random(seed)
    names = ["mlx5_%d" % i for i in range(rng.randint(1, 4))]
    classes = dict((g, dict((n, rng.choice(LINK_CLASSES)) for n in names)) for g in range(rng.randint(1, 8)))
    topo = topology(classes)
    rdma, mounts, report = three_views(topo)
    assert rdma == mounts == report
    for gpu, row in classes.items():
        best = min(row.values(), key=LINK_CLASSES.index)
        assert rdma[gpu] == (set() if best == "SYS" else {n for n, c in row.items() if c == best})
