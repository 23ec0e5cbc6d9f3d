"""PCIe link training in the guest: the kernel's view of the emulated links, and the report.

scripts/vm/vmctl.py puts a second root port (0b:00.0) below root port 00:07.0, above the
gds-keep drive, both with Link Capabilities of x4 8 GT/s (QEMU's x-speed/x-width), while every
emulated link trains at x1 2.5 GT/s: the link between them is the one hop below the best both
ends support. Every other port is capped at what its device can do. Commissioning must FAIL
exactly that hop (`pcie: link 0000:00:07.0`) and PASS every other link, except where the kernel
cannot read a port's capability (QEMU 7.2's x3130 downstream ports, and the drives below them):
unknown, WARN, never FAIL.
"""
import json
import os

REPORTS = os.environ.get("GDS_REPORTS_DIR", os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), "reports"))


# Soft-RoCE in this guest: a perftest bandwidth run now and then moves nothing in its window
# (0.00 Gb/s in 1 of 4 runs on 2026-11-26, the same command before and after at 0.33-0.41 Gb/s;
# cause not found). The product FAILs such a row, as it should for a stalled port; the guest
# tests let exactly that row through, and nothing else.
STALL = "0.00 Gb/s is below "


def rxe_stall(check_or_row):
    """A host-memory bandwidth check or row of a soft-RoCE device that moved nothing."""
    why = str(check_or_row.get("detail") or check_or_row.get("reason") or "")
    name = str(check_or_row.get("name") or "rdma: bench %s" % check_or_row.get("nic"))
    return check_or_row.get("verdict") == "FAIL" and name.startswith("rdma: bench rxe") and why.startswith(STALL)


def _link(guest, bdf):
    """What the kernel shows in sysfs: {current,max}_{width,speed_gts} ("2.5 GT/s PCIe" -> 2.5;
    "Unknown" and width 0 -> None)."""
    out = {}
    for side in ("current", "max"):
        speed, width = guest.out("cat /sys/bus/pci/devices/%s/%s_link_speed /sys/bus/pci/devices/%s/%s_link_width"
                                 % (bdf, side, bdf, side)).splitlines()[:2]
        out["%s_speed_gts" % side] = None if speed.startswith("Unknown") else float(speed.split()[0])
        out["%s_width" % side] = int(width) or None
    return out


def _bridges_and_drives(topo):
    switch_ports = [b for sw in topo["switches"] for b in [sw["upstream"]] + sw["downstream"]]
    return switch_ports + [d["bdf"] for d in topo["drives"].values()]


def _nic_path(topo):
    """The second NIC and its switch downstream port: links on an RDMA NIC's path."""
    return [b for n in topo["nics"].values() for b in (n["downstream"], n["bdf"])]


def _unknown_max(guest, topo):
    """Ports whose Link Capabilities the kernel cannot read: QEMU 7.2's x3130 downstream ports
    have none filled in (max_link_width 0, max_link_speed "Unknown"); newer QEMU fills in x1."""
    return {bdf for bdf in _bridges_and_drives(topo) + _nic_path(topo)
            if None in (_link(guest, bdf)["max_width"], _link(guest, bdf)["max_speed_gts"])}


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
    downstream = {b for sw in topo["switches"] for b in sw["downstream"]}
    downstream |= {n["downstream"] for n in topo["nics"].values()}
    for bdf in _bridges_and_drives(topo) + _nic_path(topo):
        link = _link(guest, bdf)
        assert (link["current_width"], link["current_speed_gts"]) == (1, 2.5), (bdf, link)
        if bdf in downstream and link["max_width"] is None:
            continue  # QEMU 7.2's x3130 downstream port: no Link Capabilities to compare with
        assert (link["max_width"], link["max_speed_gts"]) == (1, 2.5), (bdf, link)


def _host_report():
    path = os.path.join(REPORTS, "latest", "gds-vm.json")
    assert os.path.exists(path), "%s missing: the commissioning report was not written" % path
    with open(path) as f:
        return json.load(f)


def test_commissioning_fails_exactly_the_degraded_hop(guest, topo):
    doc = _host_report()
    links = {c["name"][len("pcie: link "):]: c for c in doc["checks"] if c["name"].startswith("pcie: link ")}
    [slow] = topo["degraded_links"]
    want = {rp["bdf"] for rp in topo["root_ports"]} | set(_bridges_and_drives(topo))
    assert want <= set(links), "links without a `pcie: link` check: %s" % sorted(want - set(links))
    # the NIC's links are checked once its soft-RoCE device is placed by its netdev; judged alike
    assert set(links) <= want | set(_nic_path(topo)), sorted(set(links) - want - set(_nic_path(topo)))
    assert links[slow]["verdict"] == "FAIL", links[slow]
    # a port whose capability the kernel cannot read, and the device below it, are unknown
    # (WARN), never a failure; every other link PASSes
    unknown = _unknown_max(guest, topo)
    below = {d["bdf"] for d in doc.get("pcie_links") or [] if d.get("upstream") in unknown}
    for bdf, check in links.items():
        if bdf == slow:
            continue
        allowed = ("PASS", "WARN") if bdf in unknown | below else ("PASS",)
        assert check["verdict"] in allowed, (bdf, check)
    for bdf in unknown & set(links):  # the ports in `want` are all there (above)
        assert links[bdf]["verdict"] == "WARN", links[bdf]
    # that hop is the run's only failure: the host FAILs for it and for nothing else
    failing = [c["name"] for c in doc["checks"] if c["verdict"] in ("FAIL", "ERROR", "UNREACHABLE") and not rxe_stall(c)]
    assert failing == ["pcie: link %s" % slow] and doc["verdict"] == "FAIL", failing


def test_report_names_the_slow_end(topo):
    [slow] = topo["degraded_links"]
    rp = [r for r in topo["root_ports"] if r["bdf"] == slow][0]
    named = {link["bdf"]: link["slow"] for link in _host_report().get("pcie_links") or [] if link.get("slow")}
    assert named == {slow: "root port %s x%d of x%d, %.1f GT/s of %.1f GT/s" % (
        slow, rp["current_link"]["width"], rp["max_link"]["width"],
        rp["current_link"]["speed_gts"], rp["max_link"]["speed_gts"])}, named
    with open(os.path.join(REPORTS, "latest", "gds-vm.html")) as f:
        page = f.read()
    assert "degraded: %s" % named[slow] in page
