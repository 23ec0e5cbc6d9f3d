"""The commissioning report of the guest's network side: what gds_facts, gds_rdma,
gds_rdma_bench and gds_netfs recorded about soft-RoCE rxe0 and the two NFS mounts.

The converge writes <reports>/latest/gds-vm.json (see test_guest_links.py). The profile's
thresholds are read from the vm profile itself (inventory/vm/group_vars/vm.yml).
"""
import os

import yaml

from test_guest_links import _host_report, rxe_stall
from test_guest_rdma import IFACES, PORT, ifname_of, sections

PROFILE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "inventory", "vm", "group_vars", "vm.yml")


def _profile():
    with open(PROFILE) as f:
        return yaml.safe_load(f)


def _checks(doc):
    return {c["name"]: c for c in doc["checks"]}


def test_report_places_rxe0_on_the_second_nic(nic):
    doc = _host_report()
    nics = {n["name"]: n for n in (doc.get("topology") or {}).get("nics") or []}
    assert nic["rdma_dev"] in nics, "no %s in the report's topology nics: %s" % (nic["rdma_dev"], sorted(nics))
    entry = nics[nic["rdma_dev"]]
    # soft RoCE has no PCI function of its own: placed by its netdev's, the NIC behind switch 1
    assert entry["software"] is True and entry["bdf"] == nic["bdf"], entry
    [port] = [p for p in entry["ports"] if p["port"] == PORT]
    assert str(port["state"]).split(":")[-1].strip() == "ACTIVE", port
    check = _checks(doc)["rdma: port %s/%d" % (nic["rdma_dev"], PORT)]
    assert check["verdict"] == "PASS", check


def test_report_rdma_bench_host_memory_against_the_vm_floor(nic):
    doc = _host_report()
    floor = _profile()["gds_rdma_bench_min_gbps"]
    rows = [r for r in doc.get("rdma_bench") or [] if r.get("nic") == nic["rdma_dev"]]
    for test in ("ib_write_bw", "ib_read_bw"):
        [host] = [r for r in rows if r["test"] == test and r["memory"] == "host"]
        assert isinstance(host["gbps"], (int, float)) and (host["gbps"] > 0 or rxe_stall(host)), host
        # a software device: the absolute floor only, never a fraction of rxe's nominal rate
        assert host["threshold_gbps"] == floor, host
        assert host["verdict"] in (("PASS", "WARN") if host["gbps"] >= floor else ("FAIL",)), host
        print("%s on %s (gds_rdma_bench, host memory): %.3f Gb/s, floor %g Gb/s: %s"
              % (test, nic["rdma_dev"], host["gbps"], floor, host["verdict"]))
    cuda = [r for r in rows if r["memory"] == "cuda"]
    assert cuda and {r["verdict"] for r in cuda} == {"SKIP"}, cuda  # no GPU in the guest


def test_report_judges_the_nfs_mounts_by_transport(guest, nic):
    doc = _host_report()
    ifname = ifname_of(sections(guest.out("echo '== ifaces'; " + IFACES))["ifaces"], nic["mac"])
    checks = _checks(doc)
    rdma = checks["netfs: /mnt/nfs/%s/data/0 transport" % ifname]
    tcp = checks["netfs: /mnt/nfs/%s/data/1 transport" % ifname]
    assert rdma["verdict"] == "PASS", rdma
    assert tcp["verdict"] == _profile()["gds_netfs_tcp_verdict"] == "WARN", tcp
