"""hw/p2pdma.py: the kernel's P2PDMA decision repeated from the product's facts.

The rules are drivers/pci/p2pdma.c's (calc_map_type_and_dist, host_bridge_whitelist,
cpu_supports_p2pdma); the answers on a real kernel are held in tests/integration/test_guest_p2pdma.py.
Here: the fixture machines, and each rule on a small tree of the kernel's shape.
"""
import os

import pytest

from ansible_collections.gds.commission.plugins.module_utils.hw import p2pdma
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.tune.driver import p2pdma_pairs_check

INTEL, AMD_ZEN, AMD_OLD = ({"vendor": "GenuineIntel", "family": 6}, {"vendor": "AuthenticAMD", "family": 25},
                           {"vendor": "AuthenticAMD", "family": 15})
RR_CR = p2pdma.ACS_RR | p2pdma.ACS_CR


class Dev(object):
    def __init__(self, chain, vendor=0x1b36, device=0x0010):
        self.chain, self.vendor, self.device, self.bdf = tuple(chain), vendor, device, chain[-1]


class Tree(object):
    """The part of hw/pci.PciTree the model reads: devices with their chains and ids, ACS state."""

    def __init__(self, chains, ids=None, acs=None):
        self.devices = {c[-1]: Dev(c, *(ids or {}).get(c[-1], ())) for c in chains}
        self._acs = acs or {}

    def acs(self, bdf):
        ctrl = self._acs.get(bdf)
        if ctrl == "unreadable":
            return {"bdf": bdf, "acs_ctrl": None, "acs_unknown": "%s/config: short read" % bdf}
        return {"bdf": bdf, "acs_ctrl": ctrl, "acs_unknown": None}


def switch_tree(acs=None, host_ids=None, second_root=False):
    """pci0000:00 with a host bridge at 00.0, root port 00:01.0, a switch (02:00.0 up, 03:00.0 and
    03:01.0 down) with a drive below each port, and a drive on a second root port 00:02.0 (or on a
    root port of a second host bridge pci0000:80)."""
    chains = [("pci0000:00", "0000:00:00.0"), ("pci0000:00", "0000:00:01.0"),
              ("pci0000:00", "0000:00:01.0", "0000:02:00.0"),
              ("pci0000:00", "0000:00:01.0", "0000:02:00.0", "0000:03:00.0"),
              ("pci0000:00", "0000:00:01.0", "0000:02:00.0", "0000:03:01.0"),
              ("pci0000:00", "0000:00:01.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"),
              ("pci0000:00", "0000:00:01.0", "0000:02:00.0", "0000:03:01.0", "0000:05:00.0")]
    if second_root:
        chains += [("pci0000:80", "0000:80:00.0"), ("pci0000:80", "0000:80:01.0"),
                   ("pci0000:80", "0000:80:01.0", "0000:81:00.0")]
    else:
        chains += [("pci0000:00", "0000:00:02.0"), ("pci0000:00", "0000:00:02.0", "0000:06:00.0")]
    ids = {bdf: ids for bdf, ids in (host_ids or {}).items()}
    return Tree(chains, ids, acs)


OTHER = "0000:06:00.0"


def test_below_one_switch_without_acs_is_a_bus_address_route_four_hops():
    got = p2pdma.map_type(switch_tree(), "0000:04:00.0", "0000:05:00.0", INTEL, (7, 3, 4))
    assert (got["map"], got["distance"], got["common"], got["acs_redirect"]) == ("bus_address", 4, "0000:02:00.0", [])


def test_a_function_with_itself_is_distance_zero():
    got = p2pdma.map_type(switch_tree(), "0000:04:00.0", "0000:04:00.0", INTEL, (7, 3, 4))
    assert (got["map"], got["distance"]) == ("bus_address", 0)


def test_acs_redirect_is_listed_as_the_kernel_lists_it_provider_side_and_common_first():
    """The order and members the kernel's pci=disable_acs_redir= hint gives (seen in the guest:
    provider's port, the common bridge, then the client's port)."""
    tree = switch_tree(acs={"0000:03:00.0": RR_CR, "0000:03:01.0": RR_CR, "0000:02:00.0": RR_CR,
                            "0000:00:01.0": RR_CR})
    got = p2pdma.map_type(tree, "0000:05:00.0", "0000:04:00.0", AMD_OLD, (7, 3, 4))
    assert got["acs_redirect"] == ["0000:03:01.0", "0000:02:00.0", "0000:03:00.0"]  # not the root port above
    assert p2pdma.kernel_parameter(got) == "pci=disable_acs_redir=0000:03:01.0;0000:02:00.0;0000:03:00.0"
    assert got["map"] == "refused" and "8086:29c0 not whitelisted" not in got["reason"] and "not whitelisted" in got["reason"]


@pytest.mark.parametrize("bit, redirects", [(p2pdma.ACS_RR, True), (p2pdma.ACS_CR, True), (p2pdma.ACS_EC, True),
                                            (0x0001 | 0x0010 | 0x0002 | 0x0040, False)])  # SV UF TB DT
def test_only_request_completion_redirect_and_egress_control_count(bit, redirects):
    got = p2pdma.map_type(switch_tree(acs={"0000:03:00.0": bit}), "0000:04:00.0", "0000:05:00.0", INTEL, (7, 3, 4))
    assert (got["map"] != "bus_address") is redirects, got


def test_no_common_bridge_on_a_zen_cpu_goes_through_the_host_bridge():
    got = p2pdma.map_type(switch_tree(), "0000:04:00.0", OTHER, AMD_ZEN, (6, 8, 0))
    assert got["map"] == "host_bridge" and got["common"] is None and "AMD Zen CPU" in got["reason"]
    assert got["distance"] == 6  # the kernel counts every function walked: 4 on the provider side, 2 on the client


def test_amd_before_zen_and_intel_need_a_whitelisted_host_bridge():
    for cpu in (AMD_OLD, INTEL):
        assert p2pdma.map_type(switch_tree(), "0000:04:00.0", OTHER, cpu, (7, 3, 4))["map"] == "refused"
    skylake = switch_tree(host_ids={"0000:00:00.0": (0x8086, 0x2020)})
    assert p2pdma.map_type(skylake, "0000:04:00.0", OTHER, INTEL, (7, 3, 4))["map"] == "host_bridge"


def test_same_host_bridge_entries_refuse_two_host_bridges():
    """Xeon E5 (8086:3c00) is whitelisted only for two devices under one host bridge."""
    ids = {"0000:00:00.0": (0x8086, 0x3c00), "0000:80:00.0": (0x8086, 0x3c00)}
    assert p2pdma.map_type(switch_tree(host_ids=ids), "0000:04:00.0", OTHER, INTEL, (6, 8))["map"] == "host_bridge"
    got = p2pdma.map_type(switch_tree(host_ids=ids, second_root=True), "0000:04:00.0", "0000:81:00.0", INTEL, (6, 8))
    assert got["map"] == "refused" and "under one host bridge only" in got["reason"]


def test_a_newer_whitelist_entry_on_an_older_kernel_is_unknown_not_allowed():
    ids = {"0000:00:00.0": (0x10DE, 0x2f95)}  # NVIDIA CPU: on 7.3.4's list, not the original nine
    assert p2pdma.map_type(switch_tree(host_ids=ids), "0000:04:00.0", OTHER, INTEL, (7, 3, 4))["map"] == "host_bridge"
    got = p2pdma.map_type(switch_tree(host_ids=ids), "0000:04:00.0", OTHER, INTEL, (6, 8, 0))
    assert got["map"] == "unknown" and "may lack it" in got["reason"]


def test_what_cannot_be_read_is_unknown():
    unreadable = switch_tree(acs={"0000:03:01.0": "unreadable"})
    got = p2pdma.map_type(unreadable, "0000:04:00.0", "0000:05:00.0", INTEL, (7, 3, 4))
    assert got["map"] == "unknown" and "short read" in got["reason"]
    assert p2pdma.map_type(switch_tree(), "0000:04:00.0", OTHER, {}, (7, 3, 4))["map"] == "unknown"
    assert p2pdma.map_type(switch_tree(), "0000:04:00.0", OTHER, {"vendor": "AuthenticAMD"}, None)["map"] == "unknown"


def test_a_root_bus_without_device_00_0_has_no_host_bridge_to_whitelist():
    tree = switch_tree(host_ids={"0000:00:00.0": (0x8086, 0x2020)})
    del tree.devices["0000:00:00.0"]
    got = p2pdma.map_type(tree, "0000:04:00.0", OTHER, INTEL, (7, 3, 4))
    assert got["map"] == "refused" and "no device 00.0 to whitelist" in got["reason"]


def test_a_vmd_domain_ends_the_walk_at_its_own_root_bus():
    tree = Tree([("pci0000:00", "0000:00:0e.0", "pci10000:00", "10000:00:02.0", "10000:01:00.0"),
                 ("pci0000:00", "0000:00:0e.0", "pci10000:00", "10000:00:03.0", "10000:02:00.0"),
                 ("pci0000:00", "0000:00:0e.0")])
    assert p2pdma.upward(tree, "10000:01:00.0") == ["10000:01:00.0", "10000:00:02.0"]
    assert p2pdma.root_bus(tree, "10000:01:00.0") == "pci10000:00"
    got = p2pdma.map_type(tree, "10000:01:00.0", "10000:02:00.0", INTEL, (7, 3, 4))
    assert got["map"] == "refused" and "pci10000:00 has no device 00.0" in got["reason"]


def _facts(sim_node, fixture):
    root = sim_node(fixture)
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    return facts


def test_dgx_a100_on_epyc_routes_every_pair_through_the_host_bridge_at_worst(sim_node):
    facts = _facts(sim_node, "dgx-a100")["p2pdma"]
    assert facts["cpu_allows"] is True and len(facts["providers"]) == 8  # the GPUs
    assert {p["map"] for p in facts["pairs"]} == {"host_bridge"}  # ACS is on in the fixture's switches


def test_hgx_h100_names_the_bridge_whose_acs_refuses_a_pair(sim_node):
    facts = _facts(sim_node, "hgx-h100")
    pairs = {(p["provider"], p["client"]): p for p in facts["p2pdma"]["pairs"]}
    assert pairs[("0000:18:00.0", "0000:1a:00.0")]["map"] == "bus_address"
    refused = pairs[("0000:3a:00.0", "0000:3c:00.0")]
    assert refused["map"] == "refused" and p2pdma.kernel_parameter(refused) == "pci=disable_acs_redir=0000:39:02.0"
    check = p2pdma_pairs_check(facts)
    assert check["verdict"] == "FAIL" and "pci=disable_acs_redir=0000:39:02.0" in check["detail"]


def test_dgx2_without_cpuinfo_is_never_judged_allowed(sim_node):
    facts = _facts(sim_node, "dgx2")
    assert {p["map"] for p in facts["p2pdma"]["pairs"]} == {"unknown"}
    assert p2pdma_pairs_check(facts)["verdict"] == "WARN"


def test_each_function_is_read_once_however_many_pairs_cross_it():
    """PciTree.acs warns at each read of an unreadable bridge: pairs() asks once a function."""
    tree = switch_tree(acs={"0000:02:00.0": "unreadable"})
    reads = []
    acs = tree.acs
    tree.acs = lambda bdf: reads.append(bdf) or acs(bdf)
    known = {}  # as pairs() shares it between the pairs of a node
    facts = {"pairs": [p2pdma.map_type(tree, p, c, INTEL, (7, 3, 4), known)
                       for p in ("0000:04:00.0", "0000:05:00.0") for c in ("0000:04:00.0", "0000:05:00.0", OTHER)]}
    assert sorted(reads) == sorted(set(reads)), reads
    maps = {(p["provider"], p["client"]): p["map"] for p in facts["pairs"]}
    assert maps[("0000:04:00.0", "0000:05:00.0")] == "unknown"  # the common switch's ACS is unread
    assert maps[("0000:04:00.0", "0000:04:00.0")] == "bus_address"  # never reaches it


# --------------------------------------------------------------------------------------------
# The QEMU guest captured (scripts/capture-node.py) with the kernel's answer for every pair
# --------------------------------------------------------------------------------------------
P2PDMA_FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "p2pdma")


@pytest.fixture(scope="module")
def guest_capture(tmp_path_factory):
    """tests/fixtures/p2pdma/qemu-p2pdma.tgz: the guest booted with vmctl.py start --acs-pair
    (-cpu max, iommu=pt, kernel 7.3.4), and .kernel.json: what its kernel did with each pair,
    from gdsbench reads into each drive's p2pmem (how: in the file)."""
    import json
    import tarfile
    root = tmp_path_factory.mktemp("capture")
    with tarfile.open(os.path.join(P2PDMA_FIXTURES, "qemu-p2pdma.tgz")) as tar:
        tar.extractall(str(root), filter="tar")
    with open(os.path.join(P2PDMA_FIXTURES, "qemu-p2pdma.kernel.json")) as handle:
        return str(root / "qemu-p2pdma"), json.load(handle)


def test_the_captured_guest_is_predicted_as_its_kernel_answered(guest_capture, module_runner):
    root, kernel = guest_capture
    rc, result = module_runner("gds_topology", {"sysfs_root": os.path.join(root, "sys"),
                                                "procfs_root": os.path.join(root, "proc")})
    assert rc == 0, result
    facts = result["ansible_facts"]["gds_topology"]["p2pdma"]
    predicted = {"%s %s" % (p["provider"], p["client"]): p for p in facts["pairs"]}
    assert sorted(predicted) == sorted(kernel["pairs"])  # 7 providers (every data drive's CMB) x 7 clients
    for pair, answer in kernel["pairs"].items():
        p = predicted[pair]
        assert (p["map"] in p2pdma.ALLOWED) is answer["moved"], (pair, p, answer)
        provider = pair.split()[0]
        if not answer["moved"]:
            assert any("cannot be used for peer-to-peer DMA as the client and provider (%s)" % provider in line
                       for line in answer["kernel_log"]), answer
        for line in answer["kernel_log"]:  # the kernel's own list of ACS functions is the product's
            if "pci=disable_acs_redir=" in line:
                assert line.endswith(p2pdma.kernel_parameter(p)), (line, p)
    assert sum(answer["moved"] for answer in kernel["pairs"].values()) == 11  # 7 self, 4 below a switch
