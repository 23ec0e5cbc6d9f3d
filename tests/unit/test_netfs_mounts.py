"""Network mounts: the guide's NFS client, NFSv4 over TCP, Lustre, routes, NIC pairing, checks."""
import os
import shutil

import pytest

from ansible_collections.gds.commission.plugins.module_utils.tune.mounts import (
    NetfsError, Router, audit, best_route, mount_checks, parse_ipv6_route, parse_route,
    split_source,
)
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import parse_mountinfo

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "netfs")
CLASSES = ("PIX", "PXB", "PHB", "NODE", "SYS")


def guide_topology():
    """The NFS chapter's DGX-2 client: 16 GPUs, mlx5_N with netdev ibN; each used NIC on the
    switch of two GPUs (PIX), its sibling NIC of the same tree PXB, NODE within the NUMA node,
    SYS across (the pattern of its `nvidia-smi topo -mp`)."""
    pix = {0: (0, 1), 1: (2, 3), 2: (4, 5), 3: (6, 7), 6: (8, 9), 7: (10, 11), 8: (12, 13),
           9: (14, 15), 4: (), 5: ()}
    tree = {0: 0, 1: 0, 2: 1, 3: 1, 6: 2, 7: 2, 8: 3, 9: 3, 4: 4, 5: 4}
    nics = [{"name": "mlx5_%d" % n, "netdev": "ib%d" % n, "netdevs": ["ib%d" % n],
             "numa_node": 0 if n < 4 else 1, "ports": [{"port": 1, "netdev": "ib%d" % n}]}
            for n in sorted(pix)]
    matrix, gpus = {}, []
    for g in range(16):
        row = {}
        gtree = g // 4
        for n in sorted(pix):
            if g in pix[n]:
                row["mlx5_%d" % n] = "PIX"
            elif tree[n] == gtree:
                row["mlx5_%d" % n] = "PXB"
            elif (n < 4) == (g < 8):
                row["mlx5_%d" % n] = "NODE"
            else:
                row["mlx5_%d" % n] = "SYS"
        matrix["GPU%d" % g] = row
        best = sorted(row, key=lambda n: CLASSES.index(row[n]))
        gpus.append({"index": g, "numa_node": 0 if g < 8 else 1, "nics": best[:1],
                     "nic_link": row[best[0]]})
    return {"gpus": gpus, "nics": nics, "matrix": matrix}


def proc_tree(tmp_path, mountinfo, route="guide-route", ipv6=None):
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "net").mkdir()
    shutil.copy(os.path.join(FIXTURES, mountinfo), str(proc / "self" / "mountinfo"))
    if route:
        shutil.copy(os.path.join(FIXTURES, route), str(proc / "net" / "route"))
    if ipv6 is not None:
        (proc / "net" / "ipv6_route").write_text(ipv6)
    return str(proc)


def by_mount(mounts):
    return {m["mountpoint"]: m for m in mounts}


# --------------------------------------------------------------------------------------------
# The guide's mount output
# --------------------------------------------------------------------------------------------
def test_guide_nfs_mounts_facts(tmp_path):
    topo = guide_topology()
    mounts = by_mount(audit(proc_tree(tmp_path, "guide-nfs-mountinfo"), str(tmp_path / "sys"), topo))
    assert sorted(mounts) == ["/mnt/nfs/ib8/data/0", "/mnt/nfs/ib8/data/1",
                              "/mnt/nfs/ib9/data/0", "/mnt/nfs/ib9/data/1"]
    m = mounts["/mnt/nfs/ib9/data/1"]
    assert (m["server"], m["server_address"], m["export"]) == ("192.168.0.11", "192.168.0.11",
                                                              "/mnt/nfs_11/11")
    assert (m["transport"], m["rdma"], m["port"], m["vers"]) == ("rdma", True, 20049, "3")
    assert (m["rsize"], m["wsize"], m["nconnect"], m["fs"]) == (1048576, 1048576, None, "nfs")
    # 192.168.0.0/24 on ib9 beats the management port's 192.168.0.0/16
    assert (m["netdev"], m["nic"], m["gpus"]) == ("ib9", "mlx5_9", [14, 15])
    assert m["route"]["via"].endswith("net/route")
    assert mounts["/mnt/nfs/ib8/data/0"]["nic"] == "mlx5_8"
    assert mounts["/mnt/nfs/ib8/data/0"]["gpus"] == [12, 13]


def test_guide_nfs_checks_pass_for_the_gpus_of_the_nic(tmp_path):
    topo = guide_topology()
    mounts = audit(proc_tree(tmp_path, "guide-nfs-mountinfo"), str(tmp_path / "sys"), topo)
    gpu_map = {"/mnt/nfs/ib9/data/0": [14, 15], "/mnt/nfs/ib9/data/1": [14],
               "/mnt/nfs/ib8/data/0": [12], "/mnt/nfs/ib8/data/1": [13]}
    checks = mount_checks(mounts, topo, gpu_map=gpu_map, expect_rdma=True, tcp_verdict="FAIL",
                          far_verdict="FAIL")
    assert {c["verdict"] for c in checks} == {"PASS"}, checks
    names = [c["name"] for c in checks]
    assert "netfs: /mnt/nfs/ib9/data/0 transport" in names
    assert "netfs: /mnt/nfs/ib9/data/0 rsize/wsize" in names
    assert "netfs: /mnt/nfs/ib9/data/0 NIC affinity" in names


def test_far_nic_names_mount_nic_and_gpus(tmp_path):
    # the guide's penalty case: GPU 0 (mlx5_0's switch) reading through ib9
    topo = guide_topology()
    mounts = audit(proc_tree(tmp_path, "guide-nfs-mountinfo"), str(tmp_path / "sys"), topo)
    checks = mount_checks(mounts, topo, gpu_map={"/mnt/nfs/ib9/data/0": [0, 10]},
                          far_verdict="FAIL")
    far = next(c for c in checks if c["name"] == "netfs: /mnt/nfs/ib9/data/0 NIC affinity")
    assert far["verdict"] == "FAIL"
    assert "mlx5_9 (ib9)" in far["detail"] and "GPU0,GPU10" in far["detail"]
    assert "GPU0: mlx5_0" in far["detail"]
    assert far["actual"] == "GPU0 SYS, GPU10 NODE"  # mlx5_9 sits on NUMA node 1
    # the same with the profile's WARN
    warn = mount_checks(mounts, topo, gpu_map={"/mnt/nfs/ib9/data/0": [0]}, far_verdict="WARN")
    assert next(c for c in warn if c["name"].endswith("ib9/data/0 NIC affinity"))["verdict"] == "WARN"


def test_mount_named_for_another_interface_warns(tmp_path):
    topo = guide_topology()
    proc = proc_tree(tmp_path, "guide-nfs-mountinfo")
    # the route to 192.168.0.0/24 moved to ib7: the name /mnt/nfs/ib9/... no longer tells the path
    text = open(os.path.join(proc, "net", "route")).read().replace("ib9\t", "ib7\t")
    open(os.path.join(proc, "net", "route"), "w").write(text)
    checks = mount_checks(audit(proc, str(tmp_path / "sys"), topo), topo)
    named = next(c for c in checks if c["name"] == "netfs: /mnt/nfs/ib9/data/0 interface")
    assert (named["verdict"], named["expected"], named["actual"]) == ("WARN", "ib9", "ib7")


# --------------------------------------------------------------------------------------------
# NFSv4 over TCP, bonds, Lustre
# --------------------------------------------------------------------------------------------
def _route_line(dev, dest, mask, gateway="0.0.0.0", flags=1, metric=0):
    import socket
    import struct

    def h(a):
        return "%08X" % struct.unpack("=I", socket.inet_aton(a))[0]
    return "%s\t%s\t%s\t%04X\t0\t0\t%d\t%s\t0\t0\t0\n" % (dev, h(dest), h(gateway), flags, metric,
                                                        h(mask))


def test_nfs4_tcp_through_a_bond(tmp_path):
    topo = guide_topology()
    proc = proc_tree(tmp_path, "nfs4-tcp-mountinfo", route=None)
    with open(os.path.join(proc, "net", "route"), "w") as out:
        out.write("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n")
        out.write(_route_line("bond0", "10.20.0.0", "255.255.0.0"))
    sys_ = tmp_path / "sys"
    # a bond over ib2 and ib3: the kernel's lower_<dev> links (netdev_adjacent)
    for dev in ("bond0", "ib2", "ib3"):
        (sys_ / "devices" / "virtual" / "net" / dev).mkdir(parents=True)
    (sys_ / "class" / "net").mkdir(parents=True)
    for dev in ("bond0", "ib2", "ib3"):
        os.symlink("../../devices/virtual/net/" + dev, str(sys_ / "class" / "net" / dev))
    for lower in ("ib2", "ib3"):
        os.symlink("../" + lower, str(sys_ / "devices" / "virtual" / "net" / "bond0" / ("lower_" + lower)))
    m = audit(proc, str(sys_), topo)[0]
    assert (m["fstype"], m["fs"], m["vers"], m["transport"], m["nconnect"]) == ("nfs4", "nfs", "4.2", "tcp", 8)
    assert (m["netdev"], m["lower_netdevs"], m["nics"]) == ("bond0", ["ib2", "ib3"], ["mlx5_2", "mlx5_3"])
    assert m["client_address"] == "10.20.0.21"  # NFSv4's clientaddr
    assert m["gpus"] == [4, 5, 6, 7]
    checks = {c["name"]: c for c in mount_checks([m], topo, expect_rdma=True, tcp_verdict="FAIL")}
    assert checks["netfs: /mnt/data transport"]["verdict"] == "FAIL"
    assert checks["netfs: /mnt/data transport"]["actual"] == "tcp"
    assert checks["netfs: /mnt/data rsize/wsize"]["verdict"] == "WARN"
    assert checks["netfs: /mnt/data rsize/wsize"]["actual"] == "rsize=524288,wsize=524288"
    # without the RDMA expectation TCP is what the profile wants
    relaxed = {c["name"]: c for c in mount_checks([m], topo, expect_rdma=False)}
    assert relaxed["netfs: /mnt/data transport"]["verdict"] == "PASS"


def test_lustre_over_o2ib_and_tcp(tmp_path):
    topo = guide_topology()
    mounts = by_mount(audit(proc_tree(tmp_path, "lustre-mountinfo"), str(tmp_path / "sys"), topo))
    lfs = mounts["/lustre/lfs01"]
    assert (lfs["fs"], lfs["server_address"], lfs["export"], lfs["transport"]) == (
        "lustre", "192.168.12.20", "lfs01", "rdma")
    assert (lfs["netdev"], lfs["nic"], lfs["gpus"]) == ("ib2", "mlx5_2", [4, 5])
    scratch = mounts["/lustre/scratch"]
    assert (scratch["transport"], scratch["netdev"], scratch["nic"]) == ("tcp", "enp134s0f0", None)
    checks = {c["name"]: c for c in mount_checks(list(mounts.values()), topo, expect_rdma=True)}
    assert checks["netfs: /lustre/scratch transport"]["verdict"] == "WARN"
    assert "no RDMA device" in checks["netfs: /lustre/scratch NIC affinity"]["detail"]
    assert "netfs: /lustre/lfs01 rsize/wsize" not in checks


def test_no_network_mounts_skip(tmp_path):
    proc = tmp_path / "proc" / "self"
    proc.mkdir(parents=True)
    (proc / "mountinfo").write_text("21 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n")
    mounts = audit(str(tmp_path / "proc"), str(tmp_path / "sys"), guide_topology())
    checks = mount_checks(mounts, guide_topology())
    assert [(c["name"], c["verdict"]) for c in checks] == [("netfs: mounts", "SKIP")]
    assert "nfs" in checks[0]["detail"]


# --------------------------------------------------------------------------------------------
# Routes
# --------------------------------------------------------------------------------------------
def test_route_prefers_longest_prefix_then_metric():
    text = open(os.path.join(FIXTURES, "guide-route")).read()
    routes = parse_route(text)
    assert best_route(routes, "192.168.0.10")["dev"] == "ib9"
    assert best_route(routes, "192.168.5.1")["dev"] == "enp134s0f0"  # the /16
    assert best_route(routes, "8.8.8.8")["gateway"] == "10.0.0.1"


def test_ipv6_route_table():
    text = ("fd000000000000000000000000000000 40 00000000000000000000000000000000 00 "
            "00000000000000000000000000000000 00000100 00000001 00000000 00000001     ib1\n"
            "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
            "fd000000000000000000000000000001 00000400 00000003 00000000 00000003     eth0\n"
            "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
            "00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n")
    routes = parse_ipv6_route(text)
    assert best_route(routes, "fd00::20")["dev"] == "ib1"
    assert best_route(routes, "2001:db8::1")["dev"] == "eth0"


def test_ip_route_get_wins_on_a_live_node(tmp_path):
    proc = proc_tree(tmp_path, "guide-nfs-mountinfo")
    calls = []

    def run_ip(args):
        calls.append(args)
        return 0, '[{"dst":"%s","dev":"ib8","prefsrc":"192.168.1.20","flags":[]}]' % args[-1], ""
    router = Router(proc, run_ip)
    assert router.route("192.168.0.10") == {"dev": "ib8", "source": "192.168.1.20",
                                            "gateway": None, "via": "ip route get"}
    assert calls == [["-j", "route", "get", "192.168.0.10"]]


def test_source_forms():
    assert split_source("nfs", "[fd00::5]:/export", {})[:2] == ("fd00::5", "/export")
    assert split_source("wekafs", "backend1,backend2/fs01", {"net": "udp"}) == ("backend1", "fs01", "udp")
    assert split_source("gpfs", "gpfs0", {}) == (None, "gpfs0", None)


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------
def test_unreadable_mountinfo_names_the_file(tmp_path):
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mountinfo").mkdir()  # a directory: cannot be read as a file
    with pytest.raises(NetfsError) as err:
        audit(str(proc), str(tmp_path / "sys"), guide_topology())
    assert "mountinfo" in str(err.value)


def test_missing_mount_table_names_the_file(tmp_path):
    with pytest.raises(NetfsError) as err:
        audit(str(tmp_path / "proc"), str(tmp_path / "sys"), guide_topology())
    assert "proc" in str(err.value) and "mounts" in str(err.value)


def test_malformed_route_line_names_file_and_line(tmp_path):
    proc = proc_tree(tmp_path, "guide-nfs-mountinfo")
    with open(os.path.join(proc, "net", "route"), "a") as out:
        out.write("ib5\tnothex\n")
    with pytest.raises(NetfsError) as err:
        audit(proc, str(tmp_path / "sys"), guide_topology())
    assert "net/route line 13" in str(err.value)


@pytest.mark.parametrize("gpu_map, words", [
    ({"/mnt/nfs/ib9/data/0": [16]}, ["gpu_map[/mnt/nfs/ib9/data/0]", "16"]),
    ({"/mnt/nfs/ib9/data/0": "0,1"}, ["gpu_map[/mnt/nfs/ib9/data/0]", "list"]),
    ({"mnt/x": [0]}, ["mnt/x", "absolute"]),
    ({"/mnt/x": [True]}, ["True"]),
])
def test_bad_gpu_map_is_refused_by_name(tmp_path, gpu_map, words):
    topo = guide_topology()
    mounts = audit(proc_tree(tmp_path, "guide-nfs-mountinfo"), str(tmp_path / "sys"), topo)
    with pytest.raises(NetfsError) as err:
        mount_checks(mounts, topo, gpu_map=gpu_map)
    for word in words:
        assert word in str(err.value)


def test_mountinfo_super_options_are_kept():
    line = open(os.path.join(FIXTURES, "guide-nfs-mountinfo")).read().splitlines()[4]
    info = parse_mountinfo(line)[0]
    assert info["options"] == ["rw", "relatime"]
    assert "proto=rdma" in info["super_options"] and "addr=192.168.0.10" in info["super_options"]


def test_loopback_mount_names_the_nic_that_owns_the_address(tmp_path):
    """A node that mounts its own export: `ip route get` says `local ... dev lo`; the mount's
    interface is the NIC holding the address, as `ip addr show to` finds it."""
    proc = proc_tree(tmp_path, "guide-nfs-mountinfo")
    calls = []

    def run_ip(args):
        calls.append(args)
        if args[1] == "route":
            return 0, ('[{"type":"local","dst":"%s","dev":"lo","prefsrc":"10.0.3.15","flags":[],'
                       '"uid":0,"cache":["local"]}]' % args[-1]), ""
        # what a guest's iproute2 prints: empty objects for what the filter drops
        return 0, ('[{},{"ifindex":3,"ifname":"enp6s0","flags":["UP"],"addr_info":[{},{"family":"inet",'
                   '"local":"10.0.3.16","prefixlen":24,"secondary":true}]},{}]'), ""
    router = Router(proc, run_ip)
    assert router.route("10.0.3.16") == {"dev": "enp6s0", "source": "10.0.3.15", "gateway": None,
                                         "via": "ip addr show (local address)"}
    assert calls[-1] == ["-j", "addr", "show", "to", "10.0.3.16/32"]


def test_address_on_lo_itself_stays_on_lo(tmp_path):
    proc = proc_tree(tmp_path, "guide-nfs-mountinfo")

    def run_ip(args):
        if args[1] == "route":
            return 0, '[{"type":"local","dst":"127.0.0.1","dev":"lo","prefsrc":"127.0.0.1","flags":[]}]', ""
        return 0, '[{"ifindex":1,"ifname":"lo","addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8}]}]', ""
    assert Router(proc, run_ip).route("127.0.0.1")["dev"] == "lo"
