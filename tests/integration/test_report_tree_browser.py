"""Each host's PCIe tree (fleet/report_tree.py) drawn in headless Chromium and read back from the
page's geometry: the boxes each link joins, held against the guide's DGX-2 `lspci -tv` listing
(tests/fixtures/dgx2.yml keeps its addresses) and a captured H100 machine; a job's path shown on a
click, with its bytes per link and the hop that bounds it."""
import json
import os
import tarfile

import pytest

from ansible_collections.gds.commission.plugins.module_utils.fleet.report import host_document, host_page
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.hw.health import link_checks
from ansible_collections.gds.commission.plugins.module_utils.measure.pathlimit import path_limit
from conftest import ROOT
from devtools import BROWSER, DevTools

pytestmark = pytest.mark.skipif(not BROWSER, reason="chromium is not installed (make test installs Debian's chromium)")

# The guide's DGX-2 listing (section 3.1): drive and GPU up to their host bridge, as lspci -tv nests
# them (the switch drawn as one box named by its upstream port)
GUIDE_CHAINS = {
    "0000:2e:00.0": ["0000:2c:00.0", "0000:2b:00.0", "pci0000:2b"],                  # nvme2, first-level switch
    "0000:2f:00.0": ["0000:2c:00.0", "0000:2b:00.0", "pci0000:2b"],                  # nvme3
    "0000:34:00.0": ["0000:32:00.0", "0000:2c:00.0", "0000:2b:00.0", "pci0000:2b"],  # GPU 0, second level
    "0000:3b:00.0": ["0000:37:00.0", "0000:2c:00.0", "0000:2b:00.0", "pci0000:2b"],  # GPU 3
    "0000:e0:00.0": ["0000:de:00.0", "0000:d8:00.0", "0000:d7:00.0", "pci0000:d7"],  # GPU 12
}
PAIR = ["nvme2n1", "nvme3n1"]

# the drawn tree read back: each box by its address, each link's two ends, in page pixels
READ_TREE = """(function () {
  var svg = document.querySelector('svg.tree');
  function centre(r, end) { return [Math.round(r.left + r.width / 2), Math.round(end === 'top' ? r.top : r.bottom)]; }
  var boxes = {};
  svg.querySelectorAll('g.box').forEach(function (g) {
    var r = g.querySelector('rect').getBoundingClientRect();
    boxes[g.dataset.bdf] = {kind: g.dataset.kind, label: g.querySelector('text.name').textContent,
                            top: centre(r, 'top'), bottom: centre(r, 'bottom'), fill: g.querySelector('rect').getAttribute('fill'),
                            groups: g.dataset.groups};
  });
  var links = {};
  svg.querySelectorAll('line.link, line.bus').forEach(function (l, i) {
    var ctm = l.getScreenCTM();
    function at(x, y) { var p = svg.createSVGPoint(); p.x = x; p.y = y; p = p.matrixTransform(ctm); return [Math.round(p.x), Math.round(p.y)]; }
    links[l.dataset.bdf || ('bus' + i)] = {from: at(+l.getAttribute('x1'), +l.getAttribute('y1')),
      to: at(+l.getAttribute('x2'), +l.getAttribute('y2')), verdict: l.dataset.verdict || null,
      stroke: l.getAttribute('stroke'), title: (l.querySelector('title') || {}).textContent || null};
  });
  return {boxes: boxes, links: links};
})()"""


def parents(tree):
    """{box: the box above it} from the drawing alone: a line's lower end on a box's top, its upper
    end on another box's bottom."""
    by_top = {tuple(b["top"]): bdf for bdf, b in tree["boxes"].items()}
    by_bottom = {tuple(b["bottom"]): bdf for bdf, b in tree["boxes"].items()}
    out = {}
    for line in tree["links"].values():
        lower, upper = by_top.get(tuple(line["to"])), by_bottom.get(tuple(line["from"]))
        assert lower and upper, line  # every line joins two boxes
        assert lower not in out, lower  # a box hangs from one line
        out[lower] = upper
    return out


def chain(parent, bdf):
    out = []
    while bdf in parent:
        bdf = parent[bdf]
        out.append(bdf)
    return out


@pytest.fixture(scope="module")
def dgx2_topology(tmp_path_factory):
    import simtree
    root = simtree.build("dgx2", str(tmp_path_factory.mktemp("dgx2")))
    topology, dummy = discover(root + "/sys", root + "/proc")
    return topology


@pytest.fixture
def browser(tmp_path):
    devtools = DevTools(BROWSER, str(tmp_path / "profile"))
    yield devtools
    devtools.close()


def open_page(browser, tmp_path, name, doc, fragment=""):
    page = tmp_path / ("%s.html" % name)
    page.write_text(host_page(name, doc, "r1"))
    browser.open("file://%s%s" % (page, fragment))


def guide_job(topology):
    """The guide's GPU 12 read of nvme2/nvme3 (tests/fixtures/watch/), its limit from these facts."""
    with open(os.path.join(ROOT, "tests", "fixtures", "watch", "dgx2-gpu12-result.json")) as handle:
        result = json.load(handle)
    result["watch"]["limit"] = path_limit(topology, 12, PAIR)
    return result


def test_the_dgx2_tree_as_the_guides_listing(dgx2_topology, browser, tmp_path):
    topology = dgx2_topology
    checks = link_checks(topology["pcie_links"])
    doc = host_document("dgx2", {"checks": checks, "topology": topology}, {})
    open_page(browser, tmp_path, "dgx2", doc)
    tree = browser.js(READ_TREE)
    parent = parents(tree)
    for bdf, expected in GUIDE_CHAINS.items():
        assert chain(parent, bdf) == expected, bdf
    kinds = [b["kind"] for b in tree["boxes"].values()]
    assert kinds.count("gpu") == len(topology["gpus"]) == 16
    assert kinds.count("nvme") == len({d["bdf"] for d in topology["nvme"]}) == 10
    assert kinds.count("nic") == len(topology["nics"])
    assert kinds.count("switch") == len([l for l in topology["pcie_links"] if l.get("port") == "upstream"])
    assert sorted(b["label"] for b in tree["boxes"].values() if b["kind"] == "gpu") == sorted("GPU%d" % i for i in range(16))
    # each affinity group one fill, the groups' boxes each filled with their own
    for group in topology["groups"]:
        bdfs = [g["bdf"] for g in topology["gpus"] if g["index"] in group["gpus"]]
        bdfs += [d["bdf"] for d in topology["nvme"] if d["name"] in group["nvme"]]
        assert len({tree["boxes"][b]["fill"] for b in bdfs}) == 1, group
    fills = {tree["boxes"]["0000:34:00.0"]["fill"], tree["boxes"]["0000:57:00.0"]["fill"],
             tree["boxes"]["0000:b7:00.0"]["fill"], tree["boxes"]["0000:e0:00.0"]["fill"]}
    assert len(fills) == 4  # GPU 0, 4, 8, 12: four groups, four colours
    # a link's hover names both ends, its width and speed against its maximum
    assert tree["links"]["0000:2e:00.0"]["title"].startswith("0000:2d:00.0 - 0000:2e:00.0: x4 8.0 GT/s (max x4 8.0 GT/s)")


def test_a_degraded_link_is_drawn_in_its_verdicts_colour(dgx2_topology, browser, tmp_path):
    import copy
    topology = copy.deepcopy(dgx2_topology)
    for link in topology["pcie_links"]:
        if link["bdf"] == "0000:2c:00.0":  # the first-level switch's upstream link trained at x4
            link["current_width"] = 4
    doc = host_document("dgx2", {"checks": link_checks(topology["pcie_links"]), "topology": topology}, {})
    open_page(browser, tmp_path, "dgx2", doc)
    links = browser.js(READ_TREE)["links"]
    assert links["0000:2c:00.0"]["verdict"] == "FAIL" and links["0000:2c:00.0"]["stroke"] == "#c62828"
    assert "x4 8.0 GT/s (max x16 8.0 GT/s) FAIL" in links["0000:2c:00.0"]["title"]
    assert {l["verdict"] for b, l in links.items() if b != "0000:2c:00.0" and l["verdict"]} == {"PASS"}


def test_a_jobs_path_with_its_bytes_and_bounding_hop_on_a_click(dgx2_topology, browser, tmp_path):
    topology = dgx2_topology
    job = guide_job(topology)
    doc = host_document("dgx2", {"checks": link_checks(topology["pcie_links"]), "topology": topology, "bench": [job]}, {})
    open_page(browser, tmp_path, "dgx2", doc)
    shown = "getComputedStyle(document.querySelector('g.job')).display"
    assert browser.js(shown) == "none"  # drawn only when asked for
    browser.click("a[href='#path-0']")
    browser.wait_for(shown + " !== 'none'")
    drawn = browser.js("Array.prototype.slice.call(document.querySelectorAll('g.job line.path'))"
                       ".map(function(l){return [l.dataset.bdf, l.nextSibling.textContent];})")
    by_link = dict(drawn)
    # each drive's link half the bytes, the first-level switch's upstream link and GPU 12's all of them
    total = job["record"]["bytes"]
    assert set(by_link) >= {"0000:2e:00.0", "0000:2f:00.0", "0000:2c:00.0", "0000:e0:00.0"}
    half = browser.js("document.querySelector('g.job line.path[data-bdf=\"0000:2e:00.0\"]').nextSibling.textContent")
    assert half == by_link["0000:2f:00.0"] and half != by_link["0000:2c:00.0"]
    assert float(half.split()[0]) == pytest.approx(total / 2 / 1e9, rel=0.01)
    # the hop that bounds it: the drives' x4 links (pathlimit's bottleneck), ringed
    rings = browser.js("Array.prototype.slice.call(document.querySelectorAll('g.job circle.bottleneck')).map(function(c){return c.dataset.bdf;})")
    assert sorted(rings) == job["watch"]["limit"]["bottleneck"] == ["0000:2e:00.0", "0000:2f:00.0"]
    # it crosses the root complex between sockets: both host bridges outlined
    assert browser.js("document.querySelectorAll('g.job rect.crossed').length") == 2


@pytest.mark.parametrize("name", ["h100x4-vm"])
def test_a_captured_machine_without_switches(browser, tmp_path, name):
    """Four H100s of a cloud machine, each on a root port of its own (or on the root bus): every
    GPU drawn, each under a host bridge."""
    with tarfile.open(os.path.join(ROOT, "tests", "fixtures", "captured", name + ".tgz")) as tar:
        tar.extractall(tmp_path, filter="tar")
    root = str(tmp_path / name)
    topology, dummy = discover(root + "/sys", root + "/proc")
    doc = host_document(name, {"checks": link_checks(topology["pcie_links"]), "topology": topology}, {})
    open_page(browser, tmp_path, name, doc)
    tree = browser.js(READ_TREE)
    parent = parents(tree)
    gpus = [g["bdf"] for g in topology["gpus"]]
    assert len(gpus) == 4 and all(b in tree["boxes"] and tree["boxes"][b]["kind"] == "gpu" for b in gpus)
    assert all(chain(parent, b)[-1].startswith("pci") for b in gpus)
