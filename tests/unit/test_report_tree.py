"""The PCIe tree of a host's page (fleet/report_tree.py) from what HOST.json may hold: every box
placed once, links that loop or name nothing drawn as far as they go, never an exception."""
import pytest

from ansible_collections.gds.commission.plugins.module_utils.fleet.report_html import COLORS
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_tree import Tree, job_paths, tree_html


def link(bdf, upstream=None, port=None, kind="bridge", **extra):
    return dict({"bdf": bdf, "upstream": upstream, "port": port, "kind": kind, "verdict": "PASS",
                 "current_width": 16, "current_speed_gts": 16.0, "max_width": 16, "max_speed_gts": 16.0}, **extra)


SWITCH = [link("0000:00:01.0", port="root_port", groups=[1]), link("0000:01:00.0", "0000:00:01.0", "upstream", groups=[1]),
          link("0000:02:00.0", "0000:01:00.0", "downstream"), link("0000:02:01.0", "0000:01:00.0", "downstream"),
          link("0000:03:00.0", "0000:02:00.0", "endpoint", "gpu", groups=[1]),
          link("0000:04:00.0", "0000:02:01.0", "endpoint", "nvme", groups=[1], verdict="FAIL", current_width=2, max_width=4)]
TOPOLOGY = {"gpus": [{"index": 0, "bdf": "0000:03:00.0"}], "nvme": [{"name": "nvme0n1", "bdf": "0000:04:00.0"}]}


def test_a_switch_is_one_box_with_its_downstream_ports_folded_in():
    tree = Tree(SWITCH, TOPOLOGY)
    assert sorted(tree.boxes) == ["0000:00:01.0", "0000:01:00.0", "0000:03:00.0", "0000:04:00.0", "pci0000:00"]
    assert tree.boxes["0000:01:00.0"]["children"] == ["0000:03:00.0", "0000:04:00.0"]
    assert tree.boxes["0000:03:00.0"]["label"] == "GPU0" and tree.boxes["0000:04:00.0"]["label"] == "nvme0n1"
    # a link is the downstream port's and the device's: the worst of the two ends, named by the port
    assert tree.links["0000:04:00.0"]["verdict"] == "FAIL" and tree.links["0000:04:00.0"]["port"] == "0000:02:01.0"
    assert tree.boxes["0000:01:00.0"]["x"] == (tree.boxes["0000:03:00.0"]["x"] + tree.boxes["0000:04:00.0"]["x"]) / 2


@pytest.mark.parametrize("links", [
    [link("0000:01:00.0", "0000:02:00.0", "upstream"), link("0000:02:00.0", "0000:01:00.0", "upstream")],  # a loop
    [link("0000:01:00.0", "0000:01:00.0", "upstream")],  # its own parent
    [link("0000:03:00.0", "0000:09:09.9", "endpoint", "gpu")],  # a parent not in the links
    [{"bdf": 5}, "x", None, {"bdf": "0000:03:00.0", "groups": ["a", True, 2], "upstream": ["x"]}],
    [link("zzz", "0000:00:01.0", "upstream", current_width="x16", current_speed_gts=float("nan"))],
])
def test_odd_links_draw_what_they_can_and_never_raise(links):
    tree = Tree(links, {"gpus": "x", "nvme": [{"bdf": "0000:03:00.0", "paths": [{"bdf": 7}]}], "nics": [None]})
    placed = [b for b in tree.boxes.values() if "x" in b and "y" in b]
    assert len(placed) == len(tree.boxes)  # every box placed once: a loop is cut, not followed
    doc = {"pcie_links": links, "topology": {}, "bench": [{"name": "j", "watch": {"limit": {"drives": [{"name": "nvme0n1"}]}}}]}
    assert isinstance(tree_html(doc, COLORS), str)


def test_a_job_whose_path_is_unknown_says_why():
    doc = {"pcie_links": SWITCH, "topology": TOPOLOGY, "bench": [
        {"name": "raid1 seq_read", "watch": {"limit": {"unknown": "a simulated node: the job ran on this machine's disk"}}},
        {"name": "nvme0n1 read", "record": {"bytes": 4e9},
         "watch": {"limit": {"gpu": {"index": 0}, "drives": [{"name": "nvme0n1"}], "bottleneck": ["0000:04:00.0"]}}}]}
    paths = job_paths(doc, doc["bench"])
    assert paths[0][5] == "a simulated node: the job ran on this machine's disk"
    # GPU and drive meet in the switch: the bytes cross the drive's link and the GPU's, not the
    # switch's upstream link
    assert paths[1][2] == {"0000:04:00.0": 4e9, "0000:03:00.0": 4e9}
    page = tree_html(doc, COLORS)
    assert "Paths not drawn: a simulated node" in page and 'href="#path-1"' in page and 'id="path-1"' in page
    assert page.count('class="bottleneck"') == 1


def test_no_links_no_tree():
    assert tree_html({"pcie_links": [], "topology": TOPOLOGY}, COLORS) == ""
    assert tree_html({"topology": "x"}, COLORS) == ""
