"""Native NVMe multipath placed through sysfs links, never through the nvmeXcYnZ name."""
import copy
import os

from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover

# Two PCIe switches on one host bridge: switch A (upstream 0000:01:00.0) holds GPU0, nvme0,
# nvme1; switch B (upstream 0000:10:00.0) holds GPU1, nvme2, nvme3.
TWO_SWITCHES = {
    "nvme_multipath": True,
    "host_bridges": {"0000:00": 0},
    "bridges": {"0000:00:01.0": 0x01, "0000:01:00.0": 0x02, "0000:02:00.0": 0x03,
                "0000:02:01.0": 0x04, "0000:02:02.0": 0x05,
                "0000:00:02.0": 0x10, "0000:10:00.0": 0x11, "0000:11:00.0": 0x12,
                "0000:11:01.0": 0x13, "0000:11:02.0": 0x14},
    "gpus": {"bdfs": ["0000:03:00.0", "0000:12:00.0"]},
    "nvme": [{"bdf": "0000:04:00.0", "ctrl": "nvme0"},
             {"bdf": "0000:05:00.0", "ctrl": "nvme1"},
             {"bdf": "0000:13:00.0", "ctrl": "nvme2"},
             {"bdf": "0000:14:00.0", "ctrl": "nvme3"}],
    "proc": {"mounts": "/dev/sda1 / ext4 rw 0 0\n"},
}
SWITCH_A, SWITCH_B = "0000:01:00.0", "0000:10:00.0"


def build(sim_node, **changes):
    fixture = copy.deepcopy(TWO_SWITCHES)
    cntlids = changes.pop("cntlids", {})
    subsys = changes.pop("subsys", {})
    for drive in fixture["nvme"]:
        if drive["ctrl"] in cntlids:
            drive["cntlid"] = cntlids[drive["ctrl"]]
        if drive["ctrl"] in subsys:
            drive["subsys"] = subsys[drive["ctrl"]]
    fixture.update(changes)
    root = sim_node(fixture)
    facts, warnings = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    return root, facts, warnings


# Before 2019 the c-number was the controller's cntlid: nvme0's path is nvme0c2n1 (nvme2 sits on
# the other switch), nvme1's is nvme1c33n1 (there is no nvme33), nvme2's and nvme3's c1 (nvme1).
CNTLIDS = {"nvme0": 2, "nvme1": 33, "nvme2": 1, "nvme3": 1}


def check_placement(root, facts, warnings):
    by_name = {d["name"]: d for d in facts["nvme"]}
    assert sorted(by_name) == ["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"]
    assert {n: (d["controller"], d["bdf"], d["switch"]) for n, d in by_name.items()} == {
        "nvme0n1": ("nvme0", "0000:04:00.0", SWITCH_A), "nvme1n1": ("nvme1", "0000:05:00.0", SWITCH_A),
        "nvme2n1": ("nvme2", "0000:13:00.0", SWITCH_B), "nvme3n1": ("nvme3", "0000:14:00.0", SWITCH_B)}
    assert [(g["gpus"], g["nvme"], g["link"]) for g in facts["groups"]] == [
        ([0], ["nvme0n1", "nvme1n1"], "PIX"), ([1], ["nvme2n1", "nvme3n1"], "PIX")]
    assert warnings == []


def test_path_names_with_cntlid_are_placed_by_links(sim_node):
    root, facts, warnings = build(sim_node, cntlids=CNTLIDS, nvme_path_names="cntlid")
    assert os.path.isdir(os.path.join(root, "sys/class/nvme/nvme0/nvme0c2n1"))
    check_placement(root, facts, warnings)
    assert facts["nvme"][0]["paths"] == [{"name": "nvme0c2n1", "controller": "nvme0",
                                          "bdf": "0000:04:00.0", "switch": SWITCH_A}]


def test_kernel_without_multipath_directory_finds_paths_through_the_subsystem(sim_node):
    root, facts, warnings = build(sim_node, cntlids=CNTLIDS, nvme_path_names="cntlid",
                                  nvme_multipath="nolinks")
    assert not os.path.exists(os.path.join(root, "sys/block/nvme0n1/multipath"))
    check_placement(root, facts, warnings)


def test_dual_port_drive_second_controller_is_a_path(sim_node):
    # nvme0 and nvme2 are the two ports of one drive (one subsystem, head nvme0n1), on
    # different switches: its second controller is a path, not a controller without namespaces.
    root, facts, warnings = build(sim_node, subsys={"nvme2": 0}, cntlids={"nvme0": 1, "nvme2": 2},
                                  nvme_path_names="cntlid")
    assert sorted(os.listdir(os.path.join(root, "sys/block/nvme0n1/multipath"))) == ["nvme0c1n1", "nvme0c2n1"]
    by_name = {d["name"]: d for d in facts["nvme"]}
    assert sorted(by_name) == ["nvme0n1", "nvme1n1", "nvme3n1"]
    drive = by_name["nvme0n1"]
    assert drive["controllers"] == ["nvme0", "nvme2"]
    assert [(p["name"], p["bdf"], p["switch"]) for p in drive["paths"]] == [
        ("nvme0c1n1", "0000:04:00.0", SWITCH_A), ("nvme0c2n1", "0000:13:00.0", SWITCH_B)]
    assert not [w for w in warnings if "no namespace" in w]
    # each GPU reaches the drive through the port on its own switch
    assert facts["matrix"]["GPU0"]["nvme0n1"] == "PIX"
    assert facts["matrix"]["GPU1"]["nvme0n1"] == "PIX"
    # both ports' bridges carry GPU-storage traffic
    bridges = {b["bdf"] for b in facts["bridges"]}
    assert {"0000:02:01.0", "0000:11:01.0"} <= bridges


def test_a_controller_without_namespaces_is_still_warned(sim_node):
    root, facts, warnings = build(sim_node)
    os.remove(os.path.join(root, "sys/block/nvme3n1"))
    facts, warnings = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    assert any("nvme3" in w and "no namespace" in w for w in warnings)


def test_without_multipath_directory_nor_controller_links(sim_node):
    root, _, _ = build(sim_node, cntlids=CNTLIDS, nvme_path_names="cntlid", nvme_multipath="nolinks")
    subsystems = os.path.join(root, "sys/devices/virtual/nvme-subsystem")
    for subsys in os.listdir(subsystems):
        for entry in os.listdir(os.path.join(subsystems, subsys)):
            if os.path.islink(os.path.join(subsystems, subsys, entry)):
                os.remove(os.path.join(subsystems, subsys, entry))
    facts, warnings = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    check_placement(root, facts, warnings)
