"""NFS in the guest: nfsd exports /srv/gds-nfs, mounted by the guest itself over RDMA and TCP.

The prepare step (molecule/vm/files/rdma-nfs.sh) names the mounts as the GDS guide does,
/mnt/nfs/<client-if>/data/<server-n>: server address 0 of the second NIC over RDMA
(vers=3,proto=rdma,port=20049,rsize=wsize=1 MiB), server address 1 over TCP; both in fstab, so
they come back after the reboot. What it set up, and the kernel's messages if the RDMA mount
failed, is in <run dir>/rdma-nfs.json.
"""
import re

import pytest

from test_guest_rdma import IFACES, ifname_of, sections

EXPORT = "/srv/gds-nfs"
MIB = 1048576


def _mounts(lines):
    """{target: (source, fstype, {option: value or True})} from /proc/mounts lines."""
    out = {}
    for line in lines:
        src, target, fstype, opts = line.split()[:4]
        options = {}
        for opt in opts.split(","):
            key, _, value = opt.partition("=")
            options[key] = value or True
        out[target] = (src, fstype, options)
    return out


def _expected(ifname, nic):
    return {"rdma": ("/mnt/nfs/%s/data/0" % ifname, nic["addresses"][0]),
            "tcp": ("/mnt/nfs/%s/data/1" % ifname, nic["addresses"][1])}


def _rdma_mount_failed(setup):
    if setup.get("rdma_error"):
        pytest.fail("NFS over RDMA failed at prepare: %s\nkernel: %s"
                    % (setup["rdma_error"], "\n".join(setup.get("rdma_dmesg") or [])))


def test_nfs_server_exports_and_listens_for_rdma(guest):
    got = sections(guest.out("echo '== ports'; cat /proc/fs/nfsd/portlist; echo '== exports'; exportfs -v; "
                             "echo '== active'; systemctl is-active nfs-server"))
    assert "rdma 20049" in got["ports"] and "tcp 2049" in got["ports"], got["ports"]
    assert any(re.match(r"^%s\s" % re.escape(EXPORT), line) for line in got["exports"]), got["exports"]
    assert got["active"] == ["active"], got


@pytest.mark.parametrize("proto", ["tcp", "rdma"])
def test_nfs_mount_by_transport(guest, nic, rdma_nfs, proto):
    if proto == "rdma":
        _rdma_mount_failed(rdma_nfs)
    got = sections(guest.out("echo '== ifaces'; %s; echo '== mounts'; cat /proc/mounts; echo '== fstab'; cat /etc/fstab"
                             % IFACES))
    target, server = _expected(ifname_of(got["ifaces"], nic["mac"]), nic)[proto]
    mounts = _mounts(got["mounts"])
    assert target in mounts, "%s is not mounted; NFS mounts: %s" % (
        target, {t: m[0] for t, m in mounts.items() if m[1].startswith("nfs")})
    src, fstype, opts = mounts[target]
    assert (src, fstype) == ("%s:%s" % (server, EXPORT), "nfs"), mounts[target]
    assert opts.get("vers") == "3" and opts.get("proto") == proto and opts.get("addr") == server, opts
    assert int(opts["rsize"]) == MIB and int(opts["wsize"]) == MIB, opts
    if proto == "rdma":
        assert opts.get("port") == "20049", opts
    # persistent: the node mounts it again at boot
    assert any(re.match(r"^%s:%s\s+%s\s+nfs\s" % (re.escape(server), EXPORT, re.escape(target)), line)
               for line in got["fstab"]), got["fstab"]


def _xprt(stats, target):
    """The transport and the per-operation lines of a mount in /proc/self/mountstats."""
    block = stats.split("mounted on %s with fstype nfs" % target, 1)
    assert len(block) == 2, "%s not in mountstats" % target
    block = block[1].split("\ndevice ", 1)[0]
    ops = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s*(READ|WRITE):\s+(\d+)", block, re.M)}
    return re.search(r"^\s*xprt:\s*(\S+)", block, re.M).group(1), ops


def test_file_written_through_rdma_reads_back(guest, nic, rdma_nfs):
    """O_DIRECT write through the RDMA mount, read back through it, through TCP and on the export."""
    _rdma_mount_failed(rdma_nfs)
    ifname = ifname_of(sections(guest.out("echo '== ifaces'; " + IFACES))["ifaces"], nic["mac"])
    (rdma, _), (tcp, _) = _expected(ifname, nic)["rdma"], _expected(ifname, nic)["tcp"]
    cmd = ("set -eu; name=verify-$(cat /proc/sys/kernel/random/uuid).bin; src=/root/$name; "
           "trap 'rm -f $src %(export)s/$name' EXIT; "
           "dd if=/dev/urandom of=$src bs=1M count=8 status=none; "
           "echo \"== want $(sha256sum < $src | cut -d' ' -f1)\"; "
           "dd if=$src of=%(rdma)s/$name bs=1M oflag=direct status=none; sync; echo 3 > /proc/sys/vm/drop_caches; "
           "echo \"== rdma $(dd if=%(rdma)s/$name bs=1M iflag=direct status=none | sha256sum | cut -d' ' -f1)\"; "
           "echo \"== tcp $(sha256sum < %(tcp)s/$name | cut -d' ' -f1)\"; "
           "echo \"== export $(sha256sum < %(export)s/$name | cut -d' ' -f1)\"; "
           "echo '== mountstats'; cat /proc/self/mountstats"
           % {"export": EXPORT, "rdma": rdma, "tcp": tcp})
    out = guest.out("bash -c '%s'" % cmd.replace("'", "'\"'\"'"))
    got = sections(out)
    sums = {name.split()[0]: name.split()[1] for name in got if len(name.split()) == 2}
    assert set(sums) == {"want", "rdma", "tcp", "export"}, sums
    assert sums["rdma"] == sums["want"], "read back through the RDMA mount differs: %s" % sums
    assert sums["tcp"] == sums["want"] and sums["export"] == sums["want"], sums
    stats = "\n".join(got["mountstats"])
    kind, ops = _xprt(stats, rdma)
    assert kind == "rdma" and ops.get("WRITE", 0) > 0 and ops.get("READ", 0) > 0, (kind, ops)
    assert _xprt(stats, tcp)[0] == "tcp"
