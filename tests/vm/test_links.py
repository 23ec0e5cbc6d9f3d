"""PCIe link training in the guest: the kernel's view of the emulated links, and the report.

scripts/vm/vmctl.py gives root port 00:07.0 (above the gds-keep drive) Link Capabilities of x4
8 GT/s through QEMU's x-speed/x-width while the drive below trains at x1 2.5 GT/s; every other
port is capped at what its device trains at. So exactly one hop sits below its capability, and
commissioning must FAIL exactly that hop (`pcie: link <bdf>`) and PASS every other link.
"""
import json
import os

REPORTS = os.environ.get("GDS_REPORTS_DIR", os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), "reports"))


def _link(guest, bdf):
    """What the kernel shows in sysfs: {current,max}_{width,speed_gts} (speed "2.5 GT/s PCIe" -> 2.5)."""
    out = {}
    for side in ("current", "max"):
        text = guest.out("cat /sys/bus/pci/devices/%s/%s_link_speed /sys/bus/pci/devices/%s/%s_link_width"
                         % (bdf, side, bdf, side)).splitlines()
        out["%s_speed_gts" % side] = float(text[0].split()[0])
        out["%s_width" % side] = int(text[1])
    return out


def _bridges_and_drives(topo):
    switch_ports = [b for sw in topo["switches"] for b in [sw["upstream"]] + sw["downstream"]]
    return switch_ports + [d["bdf"] for d in topo["drives"].values()]


def test_kernel_shows_the_root_ports_links(guest, topo):
    """Max from QEMU's x-speed/x-width, current from the device below: only the degraded port differs."""
    for rp in topo["root_ports"]:
        link = _link(guest, rp["bdf"])
        assert (link["max_width"], link["max_speed_gts"]) == (rp["max_link"]["width"], rp["max_link"]["speed_gts"]), (
            rp["bdf"], link)
        assert (link["current_width"], link["current_speed_gts"]) == (
            rp["current_link"]["width"], rp["current_link"]["speed_gts"]), (rp["bdf"], link)
    assert [rp["bdf"] for rp in topo["root_ports"] if rp["degraded"]] == topo["degraded_links"]
    assert len(topo["degraded_links"]) == 1


def test_every_other_link_at_its_capability(guest, topo):
    for bdf in _bridges_and_drives(topo):
        link = _link(guest, bdf)
        assert (link["current_width"], link["current_speed_gts"]) == (link["max_width"], link["max_speed_gts"]), (bdf, link)


def _host_report():
    path = os.path.join(REPORTS, "latest", "gds-vm.json")
    assert os.path.exists(path), "%s missing: the commissioning report was not written" % path
    with open(path) as f:
        return json.load(f)


def test_commissioning_fails_exactly_the_degraded_hop(topo):
    doc = _host_report()
    links = {c["name"][len("pcie: link "):]: c for c in doc["checks"] if c["name"].startswith("pcie: link ")}
    [slow] = topo["degraded_links"]
    judged = set(links)
    want = {rp["bdf"] for rp in topo["root_ports"]} | set(_bridges_and_drives(topo))
    assert want <= judged, "links without a `pcie: link` check: %s" % sorted(want - judged)
    assert links[slow]["verdict"] == "FAIL", links[slow]
    assert {b: c["verdict"] for b, c in links.items() if b != slow and c["verdict"] != "PASS"} == {}
    # that hop is the run's only failure: the host FAILs for it and for nothing else
    failing = [c["name"] for c in doc["checks"] if c["verdict"] in ("FAIL", "ERROR", "UNREACHABLE")]
    assert failing == ["pcie: link %s" % slow] and doc["verdict"] == "FAIL", failing


def test_report_names_the_slow_end(topo):
    [slow] = topo["degraded_links"]
    rp = [r for r in topo["root_ports"] if r["bdf"] == slow][0]
    named = {link["bdf"]: link["slow"] for link in _host_report().get("pcie_links") or [] if link.get("slow")}
    assert named == {slow: "root port %s x%d of x%d, %.1f GT/s of %.1f GT/s" % (
        slow, rp["current_link"]["width"], rp["max_link"]["width"],
        rp["current_link"]["speed_gts"], rp["max_link"]["speed_gts"])}, named
    with open(os.path.join(REPORTS, "latest", "report.html")) as f:
        page = f.read()
    assert "degraded: %s" % named[slow] in page
