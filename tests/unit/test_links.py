"""PCIe link facts (gds_topology's pcie_links) and the ``pcie: link <bdf>`` checks."""
import copy
import os

import pytest

from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.hw.health import gen_of_speed, link_checks, speed_gts

# One root port, one switch (upstream port 01:00.0, downstream ports 02:00.0-02:02.0), a GPU, an
# NVMe drive and a NIC below it: every position a link can train down at.
ROOT_PORT, SWITCH_UP = "0000:00:01.0", "0000:01:00.0"
DSP_GPU, DSP_NVME, DSP_NIC = "0000:02:00.0", "0000:02:01.0", "0000:02:02.0"
GPU, NVME, NIC = "0000:03:00.0", "0000:04:00.0", "0000:05:00.0"
ONE_SWITCH = {
    "host_bridges": {"0000:00": 0},
    "bridges": {ROOT_PORT: 0x01, SWITCH_UP: 0x02, DSP_GPU: 0x03, DSP_NVME: 0x04, DSP_NIC: 0x05},
    "gpus": {"bdfs": [GPU]},
    "nvme": [{"bdf": NVME, "ctrl": "nvme0"}],
    "nics": [{"bdf": NIC, "rdma": "mlx5_0", "netdev": "ibp5s0"}],
    "proc": {"mounts": "/dev/sda1 / ext4 rw 0 0\n"},
}


def links_of(sim_node, links=None, edit=None):
    fixture = copy.deepcopy(ONE_SWITCH)
    fixture["links"] = links or {}
    root = sim_node(fixture)
    if edit:
        edit(os.path.join(root, "sys", "bus", "pci", "devices"))
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    return {link["bdf"]: link for link in facts["pcie_links"]}, facts["pcie_links"]


def verdicts(checks):
    return {c["name"][len("pcie: link "):]: c["verdict"] for c in checks}


def test_every_device_and_port_on_the_paths_once_sorted(sim_node):
    by_bdf, links = links_of(sim_node)
    assert [link["bdf"] for link in links] == [ROOT_PORT, SWITCH_UP, DSP_GPU, DSP_NVME, DSP_NIC, GPU, NVME, NIC]
    assert [by_bdf[b]["kind"] for b in (ROOT_PORT, SWITCH_UP, GPU, NVME, NIC)] == ["bridge", "bridge", "gpu", "nvme", "nic"]
    assert [by_bdf[b]["port"] for b in (ROOT_PORT, SWITCH_UP, DSP_NVME, NVME)] == [
        "root_port", "upstream", "downstream", "endpoint"]
    assert by_bdf[ROOT_PORT]["upstream"] is None and by_bdf[SWITCH_UP]["upstream"] == ROOT_PORT
    assert by_bdf[NVME]["upstream"] == DSP_NVME and by_bdf[DSP_NVME]["upstream"] == SWITCH_UP
    # a x4 drive below a x16-capable port runs at full rate: x4 is the best both ends support
    assert by_bdf[NVME] == dict(by_bdf[NVME], current_speed_gts=16.0, max_speed_gts=16.0, current_width=4,
                                max_width=4, expected_speed_gts=16.0, expected_width=4, degraded=False, problem=None)
    assert (by_bdf[DSP_NVME]["max_width"], by_bdf[DSP_NVME]["expected_width"], by_bdf[DSP_NVME]["degraded"]) == (16, 4, False)
    assert set(verdicts(link_checks(links)).values()) == {"PASS"}


@pytest.mark.parametrize("position, bdf, setting, detail", [
    ("device", NVME, {"width": 2}, "NVMe controller 0000:04:00.0 x2 of x4"),
    ("switch downstream port", DSP_NVME, {"speed": 8.0}, "switch downstream port 0000:02:01.0 8.0 GT/s of 16.0 GT/s"),
    ("switch upstream port", SWITCH_UP, {"width": 8}, "switch upstream port 0000:01:00.0 x8 of x16"),
    ("root port", ROOT_PORT, {"width": 8}, "root port 0000:00:01.0 x8 of x16"),
    ("NIC", NIC, {"speed": "5.0 GT/s PCIe"}, "NIC 0000:05:00.0 5.0 GT/s of 16.0 GT/s"),
])
def test_a_downtrained_link_fails_exactly_that_hop_naming_the_slow_end(sim_node, position, bdf, setting, detail):
    by_bdf, links = links_of(sim_node, {bdf: setting})
    assert by_bdf[bdf]["degraded"] is True
    assert [b for b, link in by_bdf.items() if link["degraded"]] == [bdf]
    checks = link_checks(links)
    assert {b for b, v in verdicts(checks).items() if v != "PASS"} == {bdf}
    failed = [c for c in checks if c["verdict"] == "FAIL"][0]
    assert failed["name"] == "pcie: link " + bdf
    assert failed["detail"].startswith(detail), failed
    assert "the other end" in failed["detail"]


def test_a_link_downtrained_on_both_ends_fails_both(sim_node):
    # what the kernel shows: both ends of the root port - switch link report x8
    _, links = links_of(sim_node, {ROOT_PORT: {"width": 8}, SWITCH_UP: {"width": 8}})
    checks = {c["name"]: c for c in link_checks(links)}
    assert {n for n, c in checks.items() if c["verdict"] == "FAIL"} == {"pcie: link " + ROOT_PORT, "pcie: link " + SWITCH_UP}
    assert checks["pcie: link " + SWITCH_UP]["expected"] == "x16 16.0 GT/s"
    assert checks["pcie: link " + SWITCH_UP]["actual"] == "x8 16.0 GT/s"


def test_a_port_capable_of_less_than_the_device_lowers_the_expectation(sim_node):
    # a Gen3 x8 slot with a Gen4 x16 NIC in it: x8 Gen3 is the best both ends support
    by_bdf, links = links_of(sim_node, {DSP_NIC: {"max_speed": 8.0, "max_width": 8}})
    assert (by_bdf[NIC]["current_width"], by_bdf[NIC]["current_speed_gts"]) == (8, 8.0)
    assert (by_bdf[NIC]["expected_width"], by_bdf[NIC]["expected_speed_gts"], by_bdf[NIC]["degraded"]) == (8, 8.0, False)
    assert set(verdicts(link_checks(links)).values()) == {"PASS"}


def test_an_idle_gpu_below_its_speed_passes_its_width_is_always_judged(sim_node):
    idle = {GPU: {"speed": 2.5}, DSP_GPU: {"speed": 2.5}}
    by_bdf, links = links_of(sim_node, idle)
    assert by_bdf[GPU]["degraded"] is True  # the fact says what sysfs shows
    checks = {c["name"]: c for c in link_checks(links)}
    for bdf in (GPU, DSP_GPU):  # both ends of the GPU's link show its idle speed
        assert checks["pcie: link " + bdf]["verdict"] == "PASS"
        assert "idle: speed judged under load only" in checks["pcie: link " + bdf]["detail"]
    _, links = links_of(sim_node, dict(idle, **{GPU: {"speed": 2.5, "width": 8}}))
    checks = {c["name"]: c for c in link_checks(links)}
    assert checks["pcie: link " + GPU]["verdict"] == "FAIL"
    assert checks["pcie: link " + GPU]["detail"].startswith("GPU 0000:03:00.0 x8 of x16")


@pytest.mark.parametrize("seen, verdict", [(4, "PASS"), (3, "FAIL")])
def test_gpu_speed_is_judged_under_load(sim_node, seen, verdict):
    _, links = links_of(sim_node, {GPU: {"speed": 2.5}, DSP_GPU: {"speed": 2.5}})
    load = {GPU: {"max_gen_seen": seen, "max_width_seen": 16, "max_gen": 4, "max_width": 16, "samples": 20}}
    checks = {c["name"]: c for c in link_checks(links, gpu_load=load)}
    assert checks["pcie: link " + GPU]["verdict"] == verdict
    assert checks["pcie: link " + DSP_GPU]["verdict"] == verdict
    assert "under load" in checks["pcie: link " + GPU]["detail"]


def _write(name, text):
    def edit(devices):
        bdf, attr = name.split("/")
        path = os.path.join(devices, bdf, attr)
        os.remove(path)
        if text is not None:
            with open(path, "w") as handle:
                handle.write(text)
    return edit


@pytest.mark.parametrize("edit, problem", [
    (_write(NVME + "/current_link_speed", "Unknown\n"), "current_link_speed reads 'Unknown', not a speed"),
    (_write(NVME + "/current_link_speed", "Unknown speed\n"), "current_link_speed reads 'Unknown speed'"),
    (_write(NVME + "/current_link_width", "0\n"), "current_link_width reads 0 (link down or width unknown)"),
    (_write(NVME + "/max_link_width", None), "max_link_width is missing"),
    (_write(NVME + "/max_link_speed", "garbage\n"), "max_link_speed reads 'garbage'"),
])
def test_unknown_zero_missing_values_are_reported_not_raised(sim_node, edit, problem):
    by_bdf, links = links_of(sim_node, edit=edit)
    link = by_bdf[NVME]
    assert problem in link["problem"] and NVME in link["problem"]
    assert link["degraded"] is None
    checks = {c["name"]: c for c in link_checks(links)}
    assert checks["pcie: link " + NVME]["verdict"] == "WARN"
    assert problem in checks["pcie: link " + NVME]["detail"]
    assert "unknown" in checks["pcie: link " + NVME]["detail"]


def test_an_unreadable_link_file_is_reported(sim_node):
    def edit(devices):
        path = os.path.join(devices, DSP_NVME, "max_link_width")
        os.remove(path)
        os.mkdir(path)  # reading it fails like an unreadable attribute
    by_bdf, links = links_of(sim_node, edit=edit)
    assert "cannot read" in by_bdf[DSP_NVME]["problem"] and "max_link_width" in by_bdf[DSP_NVME]["problem"]
    # the drive's expected width needs the port's maximum: unknown too, and said so
    assert by_bdf[NVME]["expected_width"] is None and by_bdf[NVME]["degraded"] is None
    assert DSP_NVME in by_bdf[NVME]["problem"]
    assert verdicts(link_checks(links))[DSP_NVME] == "WARN"


def test_links_without_any_link_files_old_kernel(sim_node):
    def edit(devices):
        for bdf in os.listdir(devices):
            for name in ("current_link_speed", "max_link_speed", "current_link_width", "max_link_width"):
                path = os.path.join(devices, bdf, name)
                if os.path.exists(path):
                    os.remove(path)
    by_bdf, links = links_of(sim_node, edit=edit)
    assert all(link["degraded"] is None and " are missing: " in link["problem"] for link in links)
    assert set(verdicts(link_checks(links)).values()) == {"WARN"}


def test_vmd_paths_end_at_the_root_port_of_the_vmd_domain_and_multipath_lists_every_controller(sim_node):
    root = sim_node("hgx-h100")
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    bdfs = [link["bdf"] for link in facts["pcie_links"]]
    assert len(bdfs) == len(set(bdfs))
    assert "0000:00:0e.5" not in bdfs  # the VMD endpoint hosts the domain, it is no port of a link
    vmd_ports = [link for link in facts["pcie_links"] if link["bdf"].startswith("10000:00:")]
    assert vmd_ports and all(link["upstream"] is None for link in vmd_ports)
    ctrl_bdfs = {p["bdf"] for d in facts["nvme"] for p in d["paths"]}
    assert ctrl_bdfs <= {link["bdf"] for link in facts["pcie_links"] if link["kind"] == "nvme"}
    gen5 = [link for link in facts["pcie_links"] if link["kind"] == "gpu"]
    assert {(link["current_speed_gts"], link["current_width"]) for link in gen5} == {(32.0, 16)}
    assert set(verdicts(link_checks(facts["pcie_links"])).values()) == {"PASS"}


def test_dual_port_drive_lists_both_controllers(sim_node):
    fixture = copy.deepcopy(ONE_SWITCH)
    fixture["bridges"]["0000:02:03.0"] = 0x06
    fixture["nvme_multipath"] = True
    fixture["nvme"] = [{"bdf": NVME, "ctrl": "nvme0", "subsys": 0}, {"bdf": "0000:06:00.0", "ctrl": "nvme1", "subsys": 0}]
    root = sim_node(fixture)
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    nvme_links = [link["bdf"] for link in facts["pcie_links"] if link["kind"] == "nvme"]
    assert nvme_links == [NVME, "0000:06:00.0"]
    assert "0000:02:03.0" in [link["bdf"] for link in facts["pcie_links"]]


@pytest.mark.parametrize("text, gts, gen", [
    ("16.0 GT/s PCIe", 16.0, 4), ("8 GT/s", 8.0, 3), ("2.5 GT/s", 2.5, 1), ("5.0 GT/s PCIe", 5.0, 2),
    ("32.0 GT/s PCIe\n", 32.0, 5), ("64.0 GT/s PCIe", 64.0, 6), ("Unknown", None, None),
    ("Unknown speed", None, None), ("", None, None), (None, None, None),
])
def test_speed_text(text, gts, gen):
    assert speed_gts(text) == gts
    assert gen_of_speed(gts) == gen


def test_link_checks_take_entries_with_only_the_contract_keys():
    """Entries built by another module (bdf, kind, speeds, widths, expected, degraded, upstream,
    problem; no partner, no port): the port above an idle GPU is judged like the GPU."""
    def entry(bdf, kind, speed, width, upstream):
        return {"bdf": bdf, "kind": kind, "current_speed_gts": speed, "max_speed_gts": 16.0,
                "current_width": width, "max_width": 16, "expected_speed_gts": 16.0, "expected_width": 16,
                "degraded": speed < 16.0 or width < 16, "upstream": upstream, "problem": None}
    links = [entry("0000:00:01.0", "bridge", 2.5, 16, None), entry("0000:01:00.0", "gpu", 2.5, 16, "0000:00:01.0"),
             entry("0000:00:02.0", "bridge", 16.0, 8, None), entry("0000:02:00.0", "nvme", 16.0, 16, "0000:00:02.0")]
    checks = {c["name"]: c for c in link_checks(links)}
    assert checks["pcie: link 0000:00:01.0"]["verdict"] == "PASS"
    assert checks["pcie: link 0000:01:00.0"]["verdict"] == "PASS"
    assert checks["pcie: link 0000:00:02.0"]["verdict"] == "FAIL"
    assert checks["pcie: link 0000:00:02.0"]["detail"].startswith("root port 0000:00:02.0 x8 of x16")
    assert checks["pcie: link 0000:02:00.0"]["verdict"] == "PASS"
