"""Soft-RoCE in the guest: the second NIC behind PCIe switch 1, rxe0 on it, perftest loopback.

scripts/vm/vmctl.py puts a virtio-net function on a third downstream port of switch 1, next to
that switch's two NVMe drives (RDMA_NIC); the prepare step (molecule/vm/files/rdma-nfs.sh) runs
`rdma link add rxe0 type rxe netdev <if>` on it and a unit re-creates it at every boot. The guest
has no GPU, so what it can show of the pairing is the NIC's place: on the switch of sw1's drives
(PIX), across the host bridge from every other drive (PHB).
Each test reads the guest with one shell command: under software emulation every command over
SSH costs seconds.
"""
import re

import pytest

PORT = 1
BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def sections(text):
    """{name: [lines]} from output whose sections start with '== name'."""
    out, name = {}, None
    for line in text.splitlines():
        if line.startswith("== "):
            name = line[3:].strip()
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return out


def pci_chain(path):
    """The PCI functions of a sysfs device path, root port first."""
    return [p for p in path.split("/") if BDF.match(p)]


def ifname_of(lines, mac):
    """The interface with this MAC from 'NAME MAC DEVICE-PATH' lines."""
    names = [line.split()[0] for line in lines if line.split()[1:2] == [mac]]
    assert len(names) == 1, "one interface with MAC %s expected, found %s in %s" % (mac, names, lines)
    return names[0]


IFACES = "for d in /sys/class/net/*; do echo $(basename $d) $(cat $d/address) $(readlink -f $d/device); done"


def ipv4_gid(addr):
    """The RoCE v2 GID of an IPv4 address as sysfs shows it (::ffff:a.b.c.d)."""
    return "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % tuple(int(o) for o in addr.split("."))


def test_second_nic_sits_behind_switch_one(guest, topo, nic):
    [sw] = [s for s in topo["switches"] if s["id"] == nic["switch"]]
    bdfs = [topo["drives"][serial]["bdf"] for serial in sw["drives"]]
    got = sections(guest.out("echo '== ifaces'; %s; echo '== drives'; for b in %s; do readlink -f /sys/bus/pci/devices/$b; done; "
                             "echo '== addrs'; ip -4 -o addr show" % (IFACES, " ".join(bdfs))))
    ifname = ifname_of(got["ifaces"], nic["mac"])
    # /sys/class/net/<if>/device of a virtio NIC is its virtio device; the PCI function is above
    path = [line.split()[2] for line in got["ifaces"] if line.split()[0] == ifname][0]
    chain = pci_chain(path)
    assert chain == [sw["root_port"], sw["upstream"], nic["downstream"], nic["bdf"]], path
    # below the same switch upstream port as that switch's drives: the NIC-drive class is PIX
    for serial, drive_path in zip(sw["drives"], got["drives"]):
        drive = pci_chain(drive_path)
        assert drive[:2] == chain[:2] and drive[2] != chain[2] and drive[-1] == topo["drives"][serial]["bdf"], (
            serial, drive, chain)
        assert nic["link_class"][serial] == "PIX"
    assert {c for s, c in nic["link_class"].items() if s not in sw["drives"]} == {"PHB"}
    addrs = [line for line in got["addrs"] if line.split()[1:2] == [ifname]]
    for addr in nic["addresses"]:
        assert any(" inet %s/" % addr in line for line in addrs), (addr, addrs)


def test_rxe0_on_the_nic_is_active(guest, nic):
    dev = nic["rdma_dev"]
    base = "/sys/class/infiniband/%s" % dev
    got = sections(guest.out(
        "echo '== ifaces'; %s; echo '== link'; rdma link show %s/%d; echo '== state'; cat %s/ports/%d/state; "
        "echo '== link_layer'; cat %s/ports/%d/link_layer; echo '== parent'; cat %s/parent; "
        "echo '== device'; test -e %s/device && echo present || echo absent; "
        "echo '== gids'; grep -H . %s/ports/%d/gids/* 2>/dev/null | grep -v ':0000:0000:0000:0000:0000:0000:0000:0000$'; "
        "echo '== devinfo'; ibv_devinfo -d %s"
        % (IFACES, dev, PORT, base, PORT, base, PORT, base, base, base, PORT, dev)))
    ifname = ifname_of(got["ifaces"], nic["mac"])
    link = " ".join(got["link"])
    assert re.search(r"\bstate ACTIVE\b", link) and re.search(r"\bphysical_state LINK_UP\b", link), link
    assert re.search(r"\bnetdev %s\b" % re.escape(ifname), link), link
    assert got["state"] == ["4: ACTIVE"] and got["link_layer"] == ["Ethernet"], got
    # a software device: no PCI function of its own; `parent` names its netdev
    assert got["parent"] == [ifname] and got["device"] == ["absent"], got
    info = "\n".join(got["devinfo"])
    assert re.search(r"state:\s+PORT_ACTIVE", info) and re.search(r"link_layer:\s+Ethernet", info), info
    gids = {line.split(":", 1)[1] for line in got["gids"]}  # "<sysfs path>:<gid>"
    for addr in nic["addresses"]:
        assert ipv4_gid(addr) in gids, (addr, got["gids"])


def parse_perftest(text):
    """(bytes, average bandwidth in Gb/s) from perftest's result table."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "BW average" not in line:
            continue
        header = re.split(r"\s{2,}", line.strip())
        unit = re.search(r"BW average\[([^\]]+)\]", line).group(1)
        col = header.index("BW average[%s]" % unit)
        for row in lines[i + 1:]:
            cols = row.split()
            if len(cols) == len(header) and re.match(r"^\d+$", cols[0]):
                value = float(cols[col])
                gbps = {"Gb/sec": value, "MB/sec": value * 8 * 1.048576 / 1000,
                        "MiB/sec": value * 8 * 1.048576 / 1000}[unit]
                return int(cols[0]), gbps
    raise AssertionError("no bandwidth in perftest's output:\n%s" % text)


def test_parse_perftest_table():
    """The parser on perftest's own table (4.5, --report_gbits) and on the MB/sec form."""
    gbits = ("---------------------------------------------------------------------------------------\n"
             " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
             " 65536      500           0.049159            0.049134            0.000094\n"
             "---------------------------------------------------------------------------------------\n")
    assert parse_perftest(gbits) == (65536, 0.049134)
    mb = (" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
          " 65536      1000             300.00             250.00               0.004000\n")
    size, gbps = parse_perftest(mb)
    assert size == 65536 and abs(gbps - 250 * 8 * 1.048576 / 1000) < 1e-9
    with pytest.raises(AssertionError):
        parse_perftest("Couldn't connect to 10.0.3.15:18515\n")


@pytest.mark.parametrize("tool", ["ib_write_bw", "ib_read_bw"])
def test_perftest_loopback_on_rxe0(guest, nic, tool):
    """Server and client on the guest, host memory, pinned with numactl to the NIC's node."""
    dev, addr = nic["rdma_dev"], nic["addresses"][0]
    # the GID index of the address (RoCE v2), and the NIC's NUMA node (-1: none, node 0)
    cmd = (
        "set -u; cd /sys/class/infiniband/%(dev)s/ports/%(port)d; "
        "gid=$(grep -lx %(gid)s gids/* 2>/dev/null | while read f; do i=${f#gids/}; "
        "[ \"$(cat gid_attrs/types/$i)\" = 'RoCE v2' ] && echo $i; done | head -n1); "
        "[ -n \"$gid\" ] || { echo 'no RoCE v2 GID for %(addr)s' >&2; exit 2; }; "
        "node=$(cat /sys/bus/pci/devices/%(bdf)s/numa_node); [ \"$node\" -ge 0 ] || node=0; "
        "pin=\"numactl --cpunodebind=$node --membind=$node\"; "
        "args=\"-d %(dev)s -i %(port)d -x $gid -s 65536 -n 300 -F --report_gbits\"; "
        "echo \"== gid $gid node $node\"; "
        "timeout 150 $pin %(tool)s $args >/tmp/%(tool)s.server 2>&1 & server=$!; sleep 3; "
        "timeout 140 $pin %(tool)s $args %(addr)s; rc=$?; wait $server; src=$?; "
        "echo '== server'; cat /tmp/%(tool)s.server; exit $((rc | src))"
        % {"dev": dev, "port": PORT, "gid": ipv4_gid(addr), "addr": addr, "bdf": nic["bdf"], "tool": tool})
    res = guest.host.run("bash -c %s" % _quote(cmd))
    assert res.rc == 0, "%s loopback on %s failed (rc %d):\n%s\n%s" % (tool, dev, res.rc, res.stdout, res.stderr)
    size, gbps = parse_perftest(res.stdout.split("== server")[0])
    assert size == 65536 and gbps > 0, res.stdout
    print("%s on %s (%s, loopback, host memory, %d B x 300): %.3f Gb/s" % (tool, dev, addr, size, gbps))


def _quote(text):
    return "'" + text.replace("'", "'\"'\"'") + "'"
