"""The facts held against the vendor's view: nvidia-smi topo -m / -mp text (hw/smi_topo.py), and
the NVLinks from NVML (hw/nvml.nvlink_peers) that topo -m's NV# cells count."""
import os

import pytest

from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.hw.nvml import nvlink_matrix, nvlink_peers
from ansible_collections.gds.commission.plugins.module_utils.hw.smi_topo import TopoTextError, compare, parse

# The guide's two DGX-2 listings, verbatim (section 3.1, and the NFS
# section's GPUs x NICs with a ". . ." gap)
GUIDE_3_1 = """
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
GUIDE_NFS = """
        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    . . . mlx5_0    mlx5_1  mlx5_2  mlx5_3
GPU0     X      PIX     PXB     PXB     NODE    NODE    NODE    NODE    . . . PIX       PXB     NODE    NODE
GPU1    PIX      X      PXB     PXB     NODE    NODE    NODE    NODE    . . . PIX       PXB     NODE    NODE
GPU2    PXB     PXB      X      PIX     NODE    NODE    NODE    NODE    . . . PXB       PIX     NODE    NODE
GPU3    PXB     PXB     PIX      X      NODE    NODE    NODE    NODE    . . . PXB       PIX     NODE    NODE
GPU4    NODE    NODE    NODE    NODE     X      PIX     PXB     PXB     . . . NODE      NODE    PIX     PXB
GPU5    NODE    NODE    NODE    NODE    PIX      X      PXB     PXB     . . . NODE      NODE    PIX     PXB
GPU6    NODE    NODE    NODE    NODE    PXB     PXB      X      PIX     . . . NODE      NODE    PXB     PIX
GPU7    NODE    NODE    NODE    NODE    PXB     PXB     PIX      X      . . . NODE      NODE    PXB     PIX
mlx5_0  PIX     PIX     PXB     PXB     NODE    NODE    NODE    NODE    . . .  X        PXB     NODE    NODE
mlx5_1  PXB     PXB     PIX     PIX     NODE    NODE    NODE    NODE    . . . PXB        X      NODE    NODE
mlx5_2  NODE    NODE    NODE    NODE    PIX     PIX     PXB     PXB     . . . NODE      NODE     X      PXB
mlx5_3  NODE    NODE    NODE    NODE    PXB     PXB     PIX     PIX     . . . NODE      NODE    PXB      X

"""

# The driver's layout (580.x on an H100 pair, as scripts/capture-node.py stored it): tabs, an
# underlined header, affinity columns, NICs as NIC<n> with a legend.
DRIVER_TOPO_M = (
    "\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV18\tSYS\t0-47\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tSYS\t48-95\t1\t\tN/A\n"
    "NIC0\tSYS\tSYS\t X \t\t\t\t\n\n"
    "Legend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n\n"
    "NIC Legend:\n\n  NIC0: mlx5_0\n")


@pytest.fixture
def dgx2(sim_node):
    root = sim_node("dgx2")
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    return facts


def test_the_guides_dgx2_listings_agree_with_the_facts(dgx2):
    """Section 3.1 (GPUs and four NICs) and the NFS section (its ". . ." gap, NIC columns and
    NIC-NIC cells): every cell nvidia-smi printed is the facts' class."""
    compared, differences = compare(dgx2, topo_mp=GUIDE_3_1)
    assert differences == [] and compared == 20 * 8
    compared, differences = compare(dgx2, topo_mp=GUIDE_NFS)
    assert differences == [] and compared == 12 * 12


def test_a_wrong_class_is_named(dgx2):
    text = GUIDE_3_1.replace("GPU1    PIX     X ", "GPU1    PXB     X ")
    compared, differences = compare(dgx2, topo_mp=text)
    assert differences == ["topo -mp GPU1/GPU0: nvidia-smi PXB, facts PIX"], differences


def test_the_drivers_layout_with_nic_legend_and_affinity():
    parsed = parse(DRIVER_TOPO_M)
    assert parsed["matrix"]["GPU0"] == {"GPU0": "X", "GPU1": "NV18", "mlx5_0": "SYS"}
    assert parsed["matrix"]["mlx5_0"]["GPU1"] == "SYS"
    assert parsed["affinity"]["GPU1"] == {"CPU Affinity": "48-95", "NUMA Affinity": "1", "GPU NUMA ID": "N/A"}


def facts(nvlink, numa=(0, 1)):
    return {"gpus": [{"index": i, "numa_node": n} for i, n in enumerate(numa)],
            "matrix": {"GPU0": {"GPU0": "X", "GPU1": "SYS", "mlx5_0": "SYS"},
                       "GPU1": {"GPU0": "SYS", "GPU1": "X", "mlx5_0": "SYS"},
                       "mlx5_0": {"GPU0": "SYS", "GPU1": "SYS", "mlx5_0": "X"}},
            "nvlink": nvlink}


def test_nvlink_cells_against_nvml_and_numa_against_the_facts():
    compared, differences = compare(facts({"GPU0": {"GPU1": 18}, "GPU1": {"GPU0": 18}}), topo_m=DRIVER_TOPO_M)
    assert differences == [] and compared == 9 + 2
    _, differences = compare(facts({"GPU0": {"GPU1": 12}, "GPU1": {"GPU0": 18}}, numa=(0, 0)), topo_m=DRIVER_TOPO_M)
    assert differences == ["topo -m GPU0/GPU1: nvidia-smi NV18, facts NV12",
                           "topo -m GPU1 NUMA Affinity: nvidia-smi 1, facts 0"]


def test_nvlinks_unknown_without_nvml_and_an_unknown_numa_node_is_not_compared():
    compared, differences = compare(facts(None, numa=(-1, None)), topo_m=DRIVER_TOPO_M)
    assert differences == ["topo -m GPU0/GPU1: nvidia-smi NV18, the facts' NVLinks unknown (no NVML)",
                           "topo -m GPU1/GPU0: nvidia-smi NV18, the facts' NVLinks unknown (no NVML)"]
    assert compared == 9


def test_a_device_the_facts_do_not_have_is_named():
    text = DRIVER_TOPO_M.replace("NIC0: mlx5_0", "NIC0: mlx5_7")
    _, differences = compare(facts({"GPU0": {"GPU1": 18}, "GPU1": {"GPU0": 18}}), topo_m=text)
    assert "topo -m: mlx5_7 is not a device of the facts" in differences
    assert "topo -m GPU0/mlx5_7: nvidia-smi SYS, not in the facts' matrix" in differences


def test_text_without_a_matrix_is_refused():
    with pytest.raises(TopoTextError):
        parse("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n\nLegend:\n")


HOSTILE_CELLS = [
    # a NUMA cell that str.isdigit() takes and int() refuses, and one of 5000 digits
    (lambda t: t.replace("\t1\t\tN/A", "\t\u00b2\t\tN/A"), "topo -m GPU1 NUMA Affinity: nvidia-smi \u00b2, facts 1"),
    (lambda t: t.replace("\t1\t\tN/A", "\t" + "9" * 5000 + "\t\tN/A"), "topo -m GPU1 NUMA Affinity: nvidia-smi 999"),
    (lambda t: t.replace("NV18", "NV" + "1" * 5000, 1), "not an NVLink count"),
    # a row or a cell missing: named, never fewer cells and no difference
    (lambda t: "\n".join(line for line in t.splitlines() if not line.startswith("GPU1")), "topo -m GPU1: no cell for"),
    (lambda t: "", "topo -m: no matrix in the text"),
]


@pytest.mark.parametrize("change,expected", HOSTILE_CELLS, ids=["superscript", "5000-digits", "nv-5000", "row-missing", "empty"])
def test_hostile_text_is_a_difference_never_a_traceback_or_no_difference(change, expected):
    _, differences = compare(facts({"GPU0": {"GPU1": 18}, "GPU1": {"GPU0": 18}}, numa=(0, 1)), topo_m=change(DRIVER_TOPO_M))
    assert any(expected in d for d in differences), differences


class NvlinkNvml(object):
    """pynvml's NVLink calls for GPUs at ``bdfs``: ``links[i]`` is a list of (far bdf or None,
    device type or None) per active link; ``p2p`` the pairs NVML reaches over NVLink."""
    NVML_NVLINK_MAX_LINKS = 36  # pynvml 12's constant: more than a GPU has

    def __init__(self, links, p2p=(), unsupported=()):
        self.links, self.p2p, self.unsupported = links, set(p2p), set(unsupported)

    def nvmlDeviceGetNvLinkState(self, handle, link):
        if handle in self.unsupported or link >= len(self.links[handle]):
            raise RuntimeError("NVMLError_InvalidArgument")
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle, link):
        bdf = self.links[handle][link][0]
        if bdf is None:
            raise RuntimeError("NVMLError_NotSupported")
        return type("Pci", (), {"busId": bdf.upper().encode()})()

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link):
        kind = self.links[handle][link][1]
        if kind is None:
            raise RuntimeError("NVMLError_NotSupported")
        return kind

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        assert index == 2  # NVML_P2P_CAPS_INDEX_NVLINK
        return 0 if (a, b) in self.p2p or (b, a) in self.p2p else 4


BDFS = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0"]


def test_direct_links_count_for_their_peer():
    fake = NvlinkNvml([[(BDFS[1], 0)] * 4 + [(BDFS[2], 0)] * 2, [(BDFS[0], 0)] * 4, [(BDFS[0], 0)] * 2])
    assert nvlink_peers(fake, [0, 1, 2], BDFS) == [{BDFS[1]: 4, BDFS[2]: 2}, {BDFS[0]: 4}, {BDFS[0]: 2}]


def test_behind_nvswitches_every_link_counts_for_each_reachable_peer():
    """HGX H100: 18 links a GPU, all to NVSwitches; a rented VM shows no switch (no far address)."""
    switch = [("0000:c1:00.0", 2)] * 18
    hidden = [(None, None)] * 18
    fake = NvlinkNvml([switch, hidden, switch], p2p=[(0, 1), (0, 2), (1, 2)])
    assert nvlink_peers(fake, [0, 1, 2], BDFS) == [{BDFS[1]: 18, BDFS[2]: 18}, {BDFS[0]: 18, BDFS[2]: 18},
                                                   {BDFS[0]: 18, BDFS[1]: 18}]
    fake.p2p = {(0, 1)}
    assert nvlink_peers(fake, [0, 1, 2], BDFS)[2] == {}


def test_a_gpu_without_nvlink_has_none_and_the_matrix_is_by_index():
    fake = NvlinkNvml([[(BDFS[1], 0)] * 2, [(BDFS[0], 0)] * 2, []], unsupported={2})
    peers = nvlink_peers(fake, [0, 1, 2], BDFS)
    assert peers[2] == {}
    nvml = [{"bdf": bdf, "nvlinks": p} for bdf, p in zip(BDFS, peers)]
    gpus = [{"index": i, "bdf": bdf} for i, bdf in enumerate(BDFS)]
    assert nvlink_matrix(gpus, nvml) == {"GPU0": {"GPU1": 2}, "GPU1": {"GPU0": 2}, "GPU2": {}}
    assert nvlink_matrix(gpus, None) is None
