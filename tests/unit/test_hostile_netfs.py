"""Hostile input to the network-storage path and at every module's boundary.

Module runs go through conftest.run_module, which reads the result with ansible-core's own
module-result decoder: a result that is not valid UTF-8 fails there as it fails a real task.
"""
import glob
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gds.commission.plugins.module_utils.tune.mounts import Router, audit, mount_checks, split_source
from conftest import COLLECTION, ROOT, run_module
from test_netfs_mounts import guide_topology, proc_tree

NFS_OPTS = ("rw,vers=3,rsize=1048576,wsize=1048576,namlen=255,hard,proto=rdma,port=20049,"
            "timeo=600,retrans=2,sec=sys,mountaddr=192.168.0.10,mountvers=3,mountproto=tcp,"
            "local_lock=none,addr=192.168.0.10")
GOOD = "301 21 0:61 / /mnt/nfs/ib9/data/0 rw,relatime shared:150 - nfs 192.168.0.10:/e %s\n" % NFS_OPTS


def nfs_line(mountpoint, source, options, mount_id=310):
    return "%d 21 0:%d / %s rw,relatime shared:160 - nfs %s %s\n" % (
        mount_id, mount_id, mountpoint, source, options)


def tree(tmp_path, lines, ipv6=None):
    """A proc tree with the guide's routes and the given mountinfo lines (str or bytes)."""
    proc = proc_tree(tmp_path, "guide-nfs-mountinfo", ipv6=ipv6)
    data = b"".join(line if isinstance(line, bytes) else line.encode() for line in lines)
    with open(os.path.join(proc, "self", "mountinfo"), "wb") as handle:
        handle.write(data)
    return proc


def by_name(checks):
    return {c["name"]: c for c in checks}


# --------------------------------------------------------------------------------------------
# 1. Bytes that are not UTF-8 never fail a task: escaped, and the file and field named
# --------------------------------------------------------------------------------------------
def test_topology_rate_not_utf8_is_escaped_and_named(sim_node):
    root = sim_node("rdma-mix")
    rate = sorted(glob.glob(os.path.join(root, "sys/class/infiniband/*/ports/1/rate")))[0]
    with open(rate, "wb") as handle:
        handle.write(b"400 Gb/sec (4X \xff\xfeNDR)\n")
    rc, result = run_module("gds_topology", {"sysfs_root": os.path.join(root, "sys"),
                                             "procfs_root": os.path.join(root, "proc")})
    assert rc == 0 and not result.get("failed"), result.get("msg")
    rates = [p["rate"] for n in result["ansible_facts"]["gds_topology"]["nics"] for p in n["ports"]]
    assert "400 Gb/sec (4X \\xff\\xfeNDR)" in rates
    real = os.path.realpath(rate)
    assert any(real in w and "nics[0].ports[0].rate" in w for w in result["warnings"]), result["warnings"]
    found = by_name(result["checks"])["topology: node data is valid UTF-8"]
    assert found["verdict"] == "WARN" and real in found["actual"]


def test_netfs_mount_point_not_utf8_is_escaped_and_named(tmp_path):
    proc = tree(tmp_path, [GOOD.encode().replace(b"/data/0 ", b"/data/\xe9t\xe9 ")])
    rc, result = run_module("gds_netfs", {"topology": guide_topology(), "procfs_root": proc,
                                          "sysfs_root": str(tmp_path / "sys")})
    assert rc == 0 and not result.get("failed"), result.get("msg")
    assert [m["mountpoint"] for m in result["mounts"]] == ["/mnt/nfs/ib9/data/\\xe9t\\xe9"]
    mountinfo = os.path.join(proc, "self", "mountinfo")
    assert any(mountinfo in w and "mounts[0].mountpoint" in w for w in result["warnings"])
    checks = by_name(result["checks"])
    assert checks["netfs: node data is valid UTF-8"]["actual"] == mountinfo
    assert "netfs: /mnt/nfs/ib9/data/\\xe9t\\xe9 NIC affinity" in checks


def test_platform_cmdline_not_utf8_is_escaped(sim_node):
    root = sim_node("dgx-a100")
    with open(os.path.join(root, "proc", "cmdline"), "wb") as handle:
        handle.write(b"BOOT_IMAGE=/vmlinuz-\xff ro iommu=pt\n")
    rc, result = run_module("gds_platform", {"sysfs_root": os.path.join(root, "sys"),
                                             "procfs_root": os.path.join(root, "proc"), "root": root})
    assert rc == 0 and not result.get("failed"), result.get("msg")
    cmdline = result["ansible_facts"]["gds_platform"]["cmdline"]["text"]
    assert cmdline == "BOOT_IMAGE=/vmlinuz-\\xff ro iommu=pt"
    assert any(os.path.join(root, "proc", "cmdline") in w for w in result["warnings"])


MODULE = '''
from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule
module = AnsibleModule(argument_spec={"fail": {"type": "bool", "default": False}})
bad = b"x\\xff\\xc3(".decode("utf-8", "surrogateescape")
module.warn("warned about " + bad)
if module.params["fail"]:
    module.fail_json(msg="failed on " + bad, path=bad)
module.exit_json(changed=False, value=bad, nested={bad: [bad, 1, None, "\\ud800"]})
'''


@pytest.mark.parametrize("fail", [False, True])
def test_every_exit_warning_and_key_is_utf8(tmp_path, fail):
    """GdsModule itself: results, failures, warnings and keys, through ansible-core's decoder."""
    from ansible.module_utils.common.json import Direction, get_module_decoder
    path = tmp_path / "probe.py"
    path.write_text(MODULE)
    env = dict(os.environ, ANSIBLE_MODULE_UTILS=os.path.join(ROOT, "module_utils"),
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "tests", "shim")] + sys.path))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env,
                          input=json.dumps({"ANSIBLE_MODULE_ARGS": {"fail": fail}}), timeout=60)
    result = json.loads(proc.stdout, cls=get_module_decoder("legacy", Direction.MODULE_TO_CONTROLLER))
    warnings = [str(w.event.msg) for w in result["warnings"]]
    assert "warned about x\\xff\\xc3(" in warnings
    assert any("escaped as \\xNN" in w for w in warnings)
    if fail:
        assert (result["msg"], result["path"]) == ("failed on x\\xff\\xc3(", "x\\xff\\xc3(")
    else:
        assert result["value"] == "x\\xff\\xc3("
        assert result["nested"] == {"x\\xff\\xc3(": ["x\\xff\\xc3(", 1, None, "\\ud800"]}


@pytest.mark.parametrize("module", sorted(
    os.path.basename(p)[:-3] for p in glob.glob(os.path.join(COLLECTION, "plugins", "modules", "*.py"))
    # (a module file that only documents an action plugin of its name runs nothing on a node)
    if not os.path.exists(os.path.join(COLLECTION, "plugins", "action", os.path.basename(p)))))
def test_every_module_returns_through_the_utf8_boundary(module):
    with open(os.path.join(COLLECTION, "plugins", "modules", module + ".py")) as handle:
        text = handle.read()
    assert "from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule" in text
    assert "module_utils.basic import AnsibleModule" not in text


def test_json_safe_names_fields_and_keys():
    from ansible_collections.gds.commission.plugins.module_utils.core.files import json_safe
    bad = b"\xff".decode("utf-8", "surrogateescape")
    value, fields = json_safe({"a": [{"b": bad}], bad: ("ok", bad)})
    assert value == {"a": [{"b": "\\xff"}], "\\xff": ["ok", "\\xff"]}
    assert fields == ["a[0].b", "(value) key \\xff", "\\xff[1]"]


def test_listdir_names_a_directory_with_an_entry_not_utf8(tmp_path):
    from ansible_collections.gds.commission.plugins.module_utils.core.files import listdir, undecodable_files
    os.mkdir(os.path.join(str(tmp_path).encode(), b"ib\xff0"))
    assert len(listdir(str(tmp_path))) == 1
    assert str(tmp_path) in undecodable_files()


# --------------------------------------------------------------------------------------------
# 2. Options without a value, bad numbers, junk arguments: an error naming it, no traceback
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("option", ["addr", "proto", "rsize", "wsize", "port", "vers", "nconnect",
                                    "clientaddr"])
def test_option_without_value_is_an_error_of_that_mount(tmp_path, option):
    opts = NFS_OPTS + ",nconnect=4,clientaddr=192.168.0.5"
    words = [w if w.partition("=")[0] != option else option for w in opts.split(",")]
    proc = tree(tmp_path, [GOOD, nfs_line("/mnt/bad", "192.168.0.11:/e", ",".join(words))])
    topo = guide_topology()
    mounts = {m["mountpoint"]: m for m in audit(proc, str(tmp_path / "sys"), topo)}
    bad = mounts["/mnt/bad"]
    assert bad["errors"] == ["%s has no value" % option]
    assert bad.get(option) is None  # never True, never 1
    checks = by_name(mount_checks(list(mounts.values()), topo, expect_rdma=True))
    error = checks["netfs: /mnt/bad mount options"]
    assert error["verdict"] == "ERROR" and option in error["actual"]
    # the other mount is still judged
    assert checks["netfs: /mnt/nfs/ib9/data/0 transport"]["verdict"] == "PASS"
    assert "netfs: /mnt/nfs/ib9/data/0 mount options" not in checks


@pytest.mark.parametrize("option, value", [
    ("rsize", "-1048576"), ("wsize", "+1048576"), ("rsize", "1e6"), ("wsize", "0x100000"),
    ("rsize", ""), ("rsize", "1_048_576"), ("rsize", "4294967296"), ("port", "65536"),
    ("port", "-1"), ("nconnect", "-2"), ("rsize", "１０２４"),
])
def test_bad_number_is_an_error_naming_option_and_value(tmp_path, option, value):
    words = [w if w.partition("=")[0] != option else "%s=%s" % (option, value)
             for w in (NFS_OPTS + ",nconnect=4").split(",")]
    proc = tree(tmp_path, [nfs_line("/mnt/bad", "192.168.0.11:/e", ",".join(words))])
    topo = guide_topology()
    mount = audit(proc, str(tmp_path / "sys"), topo)[0]
    assert mount[option] is None
    assert mount["errors"] and "%s=%s" % (option, value) in mount["errors"][0]
    checks = by_name(mount_checks([mount], topo))
    assert checks["netfs: /mnt/bad mount options"]["verdict"] == "ERROR"
    if option in ("rsize", "wsize"):
        sizes = checks["netfs: /mnt/bad rsize/wsize"]
        assert sizes["verdict"] == "ERROR" and "%s=%s" % (option, value) in sizes["actual"]


def test_module_option_without_value_gives_an_error_check(tmp_path):
    proc = tree(tmp_path, [GOOD.replace(",addr=192.168.0.10", ",addr").replace("rsize=1048576", "rsize")])
    rc, result = run_module("gds_netfs", {"topology": guide_topology(), "procfs_root": proc,
                                          "sysfs_root": str(tmp_path / "sys")})
    assert rc == 0 and not result.get("failed"), result.get("msg")
    check = by_name(result["checks"])["netfs: /mnt/nfs/ib9/data/0 mount options"]
    assert check["verdict"] == "ERROR"
    assert "addr has no value" in check["actual"] and "rsize has no value" in check["actual"]
    assert result["mounts"][0]["rsize"] is None and result["mounts"][0]["netdev"] == "ib9"


@pytest.mark.parametrize("addresses, words", [
    ({"ib9": 5}, ["interface_addresses[ib9]", "5"]),
    ({"ib9": [5]}, ["interface_addresses[ib9]", "5"]),
    ({"ib9": ["not-an-address"]}, ["interface_addresses[ib9]", "not-an-address"]),
    ({"ib9": [{"a": 1}]}, ["interface_addresses[ib9]", "'a'"]),
    ({"ib9": {"a": 1}}, ["interface_addresses[ib9]"]),
    ({"ib9": ["10.0.0.5/99"]}, ["interface_addresses[ib9]", "10.0.0.5/99"]),
    ({"../../etc": ["10.0.0.5"]}, ["interface_addresses", "../../etc"]),
    ({"": ["10.0.0.5"]}, ["interface_addresses", "''"]),
])
def test_junk_interface_addresses_fail_naming_the_entry(tmp_path, addresses, words):
    proc = tree(tmp_path, [GOOD])
    rc, result = run_module("gds_netfs", {"topology": guide_topology(), "procfs_root": proc,
                                          "interface_addresses": addresses})
    assert rc != 0 and result.get("failed")
    assert "Traceback" not in result["msg"]
    for word in words:
        assert word in result["msg"], result["msg"]


def test_good_interface_addresses_give_the_client_address(tmp_path):
    proc = tree(tmp_path, [GOOD])
    mount = audit(proc, str(tmp_path / "sys"), guide_topology(),
                  interface_addresses={"ib9": ["fd00::9", "192.168.0.21/24"]})[0]
    assert mount["client_address"] == "192.168.0.21"


@pytest.mark.parametrize("topology, words", [
    ({"nics": "mlx5_0"}, ["topology.nics", "list"]),
    ({"nics": [1]}, ["topology.nics[0]", "1"]),
    ({"nics": [{"name": 5}]}, ["topology.nics[0].name", "5"]),
    ({"nics": [{"name": "mlx5_0", "netdevs": "ib0"}]}, ["topology.nics[0].netdevs", "'ib0'"]),
    ({"nics": [{"name": "mlx5_0", "ports": [3]}]}, ["topology.nics[0].ports[0]", "3"]),
    ({"gpus": [{"index": "0"}]}, ["topology.gpus[0].index", "'0'"]),
    ({"gpus": [{"index": True}]}, ["topology.gpus[0].index", "True"]),
    ({"gpus": [{}]}, ["topology.gpus[0].index", "None"]),
    ({"gpus": [{"index": 0, "nics": "mlx5_0"}]}, ["topology.gpus[0].nics"]),
    ({"gpus": {"0": {}}}, ["topology.gpus", "list"]),
    ({"matrix": [1]}, ["topology.matrix", "a mapping"]),
    ({"matrix": {"GPU0": "PIX"}}, ["topology.matrix.GPU0", "PIX"]),
    ([1, 2], ["topology"]),
])
def test_topology_of_the_wrong_shape_fails_naming_the_key(tmp_path, topology, words):
    proc = tree(tmp_path, [GOOD])
    rc, result = run_module("gds_netfs", {"topology": topology, "procfs_root": proc})
    assert rc != 0 and result.get("failed")
    assert "Traceback" not in result["msg"]
    for word in words:
        assert word in result["msg"], result["msg"]


# --------------------------------------------------------------------------------------------
# 3. NFS over RDMA on IPv6 is RDMA
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("proto, transport", [("rdma6", "rdma"), ("rdma", "rdma"), ("tcp6", "tcp"),
                                              ("udp6", "udp"), ("RDMA6", "rdma"), ("rdma7", None),
                                              ("", None)])
def test_rpc_netid_over_ipv6_is_the_same_transport(tmp_path, proto, transport):
    proc = tree(tmp_path, [GOOD.replace("proto=rdma", "proto=" + proto)])
    topo = guide_topology()
    mount = audit(proc, str(tmp_path / "sys"), topo)[0]
    assert (mount["transport"], mount["rdma"]) == (transport, transport == "rdma")
    checks = by_name(mount_checks([mount], topo, expect_rdma=True, tcp_verdict="FAIL"))
    verdict = checks["netfs: /mnt/nfs/ib9/data/0 transport"]["verdict"]
    assert verdict == {"rdma": "PASS", None: "SKIP"}.get(transport, "FAIL")
    if transport is None:  # not a netid the kernel prints: an error of the mount, not TCP
        assert "proto=" in checks["netfs: /mnt/nfs/ib9/data/0 mount options"]["actual"]


# --------------------------------------------------------------------------------------------
# 4. IPv6 link-local servers: the zone names the interface
# --------------------------------------------------------------------------------------------
LINK_LOCAL_ROUTES = "".join(
    "fe800000000000000000000000000000 40 00000000000000000000000000000000 00 "
    "00000000000000000000000000000000 00000100 00000001 00000000 00000001 %8s\n" % dev
    for dev in ("ib9", "ib8", "ib0"))


def sysfs_net(tmp_path, ifindex):
    for dev, index in ifindex.items():
        path = tmp_path / "sys" / "class" / "net" / dev
        path.mkdir(parents=True)
        (path / "ifindex").write_text("%d\n" % index)
    return str(tmp_path / "sys")


@pytest.mark.parametrize("source, addr", [
    ("[fe80::1%ib8]:/e", "fe80::1%12"),     # what the kernel prints: addr's zone is the ifindex
    ("[fe80::1%ib8]:/e", None),             # the source's zone alone
    ("[fe80::1%12]:/e", None),              # a numeric zone in the source
    ("[fe80::1]:/e", "fe80::1%12"),         # addr's zone alone
    ("[fe80::1%ib8]:/e", "fe80::1"),        # addr without zone, the source's zone
])
def test_link_local_server_leaves_through_its_zone(tmp_path, source, addr):
    sys_ = sysfs_net(tmp_path, {"ib9": 11, "ib8": 12, "ib0": 3})
    opts = NFS_OPTS.replace(",addr=192.168.0.10", ",addr=%s" % addr if addr else "")
    proc = tree(tmp_path, [nfs_line("/mnt/ll", source, opts)], ipv6=LINK_LOCAL_ROUTES)
    topo = guide_topology()
    mount = audit(proc, sys_, topo)[0]
    assert (mount["server_address"], mount["netdev"], mount["nic"]) == ("fe80::1%ib8", "ib8", "mlx5_8")
    assert mount["route"]["via"] == "zone %ib8"
    assert mount["gpus"] == [12, 13]


@pytest.mark.parametrize("source, addr, reason", [
    ("[fe80::1]:/e", None, "names no interface"),
    ("[fe80::1%44]:/e", None, "no interface has ifindex 44"),
    ("[fe80::1%ib44]:/e", None, "no such interface"),
    ("[fe80::1%a/b]:/e", None, "not an interface name"),
    ("[fe80::1]:/e", "fe80::1%", "not an interface name"),
])
def test_link_local_server_without_a_usable_zone_is_not_guessed(tmp_path, source, addr, reason):
    sys_ = sysfs_net(tmp_path, {"ib9": 11, "ib8": 12})
    opts = NFS_OPTS.replace(",addr=192.168.0.10", ",addr=%s" % addr if addr else "")
    proc = tree(tmp_path, [nfs_line("/mnt/ll", source, opts)], ipv6=LINK_LOCAL_ROUTES)
    topo = guide_topology()
    mount = audit(proc, sys_, topo)[0]
    assert mount["netdev"] is None and reason in mount["route"]["reason"]
    affinity = by_name(mount_checks([mount], topo))["netfs: /mnt/ll NIC affinity"]
    assert affinity["verdict"] == "SKIP" and reason in affinity["detail"]


def test_link_local_zone_on_a_live_node_asks_ip_for_that_interface(tmp_path):
    calls = []

    def run_ip(args):
        calls.append(args)
        return 0, '[{"dst":"fe80::1","dev":"ib8","prefsrc":"fe80::8","flags":[]}]', ""
    route = Router(str(tmp_path), run_ip).route("fe80::1", "ib8")
    assert route == {"dev": "ib8", "source": "fe80::8", "gateway": None, "via": "zone %ib8"}
    assert calls == [["-j", "route", "get", "fe80::1", "oif", "ib8"]]


# --------------------------------------------------------------------------------------------
# Weak spots: a stray gpu_map key, Lustre IPv6 NIDs
# --------------------------------------------------------------------------------------------
def test_gpu_map_key_matching_no_mount_is_reported(tmp_path):
    topo = guide_topology()
    mounts = audit(tree(tmp_path, [GOOD]), str(tmp_path / "sys"), topo)
    checks = by_name(mount_checks(mounts, topo, gpu_map={"/mnt/nfs/ib9/data/0/": [14],
                                                         "/mnt/nfs/ib9/dta/1": [15]}))
    stray = checks["netfs: gpu_map"]
    assert stray["verdict"] == "WARN" and stray["actual"] == "/mnt/nfs/ib9/dta/1"
    assert "/mnt/nfs/ib9/data/0" in stray["detail"]
    # with no network mount at all, still said
    none = by_name(mount_checks([], topo, gpu_map={"/mnt/x": [0]}))
    assert none["netfs: gpu_map"]["actual"] == "/mnt/x"
    # a map whose keys all match says nothing more
    assert "netfs: gpu_map" not in by_name(mount_checks(mounts, topo, gpu_map={"/mnt/nfs/ib9/data/0": [14]}))


@pytest.mark.parametrize("source, host, transport", [
    ("[fd00::1]@o2ib:/lfs", "fd00::1", "rdma"),
    ("[fd00::1]@o2ib1,[fd00::2]@o2ib1:[fd00::3]@o2ib:/lfs", "fd00::1", "rdma"),
    ("fd00::1@tcp:/lfs", "fd00::1", "tcp"),
    ("192.168.12.20@o2ib,192.168.13.20@o2ib1:192.168.12.21@o2ib:/lfs", "192.168.12.20", "rdma"),
    ("10.0.0.1:10.0.0.2:/lfs", "10.0.0.1", None),
    ("[fd00::1:/lfs", None, None),
])
def test_lustre_nids(source, host, transport):
    assert split_source("lustre", source, {}) == (host, "lfs", transport)


def test_lustre_ipv6_nid_is_routed(tmp_path):
    ipv6 = ("fd000000000000000000000000000000 40 00000000000000000000000000000000 00 "
            "00000000000000000000000000000000 00000100 00000001 00000000 00000001      ib2\n")
    line = "320 21 0:80 / /lustre/lfs01 rw shared:170 - lustre [fd00::1]@o2ib:/lfs01 rw,flock\n"
    mount = audit(tree(tmp_path, [line], ipv6=ipv6), str(tmp_path / "sys"), guide_topology())[0]
    assert (mount["server_address"], mount["transport"], mount["netdev"], mount["nic"]) == (
        "fd00::1", "rdma", "ib2", "mlx5_2")


@pytest.mark.parametrize("field, mountpoint", [
    ("/mnt/nfs\\043a", "/mnt/nfs#a"),            # '#', escaped by newer kernels' mangle()
    ("/mnt/a\\040b\\011c\\012d", "/mnt/a b\tc\nd"),
    ("/mnt/a\\134043", "/mnt/a\\043"),            # an escaped backslash, then digits
])
def test_mount_point_escapes_as_mangle_writes_them(tmp_path, field, mountpoint):
    proc = tree(tmp_path, [GOOD.replace("/mnt/nfs/ib9/data/0", field)])
    assert [m["mountpoint"] for m in audit(proc, str(tmp_path / "sys"), guide_topology())] == [mountpoint]
