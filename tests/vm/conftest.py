"""Testinfra checks of the commissioned QEMU guest (molecule scenario `vm`).

Molecule runs these over SSH (testinfra's ansible connection, molecule's inventory) after the
converge/idempotence steps and again after the reboot side effect. Outside that scenario they are
collected but skipped, so `pytest tests` stays a controller-only run.

What the guest looks like is defined once, in scripts/vm/vmctl.py (ROOT_PORTS / topology()); what
the prepare step laid out before commissioning is read from <run dir>/prepare.json, and whether
the guest has rebooted from <run dir>/rebooted.json (both written by the scenario's playbooks).
"""
import json
import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission")
sys.path.insert(0, os.path.join(ROOT, "scripts", "vm"))

import vmctl  # noqa: E402

IN_SCENARIO = os.environ.get("MOLECULE_SCENARIO_NAME") == "vm"
RUN_DIR = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"), "gds-vm")

# The vm profile's mount prefix and the order of the arrays: one per switch, numbered in PCI
# order of the switches (as the guide's Table 5 numbers /raid1, /raid2 by group).
MOUNT_PREFIX = os.environ.get("GDS_VM_MOUNT_PREFIX", "/raid")


def pytest_collection_modifyitems(config, items):
    if IN_SCENARIO:
        return
    skip = pytest.mark.skip(reason="QEMU guest test: runs in `make vm-test` (molecule scenario vm)")
    for item in items:
        if str(item.fspath).startswith(HERE + os.sep):
            item.add_marker(skip)


def _load(name):
    path = os.path.join(RUN_DIR, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="session")
def topo():
    return vmctl.topology()


@pytest.fixture(scope="session")
def prepared():
    data = _load("prepare.json")
    if data is None:
        pytest.fail("%s/prepare.json missing: the prepare step did not run" % RUN_DIR)
    return data


@pytest.fixture(scope="session")
def nic(topo):
    """The second NIC (vmctl.RDMA_NIC): bdf, switch, downstream port, mac, addresses, rdma_dev."""
    [entry] = topo["nics"].values()
    return entry


@pytest.fixture(scope="session")
def rdma_nfs():
    """What the prepare step set up for RDMA and NFS (molecule/vm/files/rdma-nfs.sh)."""
    data = _load("rdma-nfs.json")
    if data is None:
        pytest.fail("%s/rdma-nfs.json missing: the prepare step did not set up RDMA and NFS" % RUN_DIR)
    return data


@pytest.fixture(scope="session")
def rebooted():
    return _load("rebooted.json")


@pytest.fixture(scope="session")
def expected_arrays(topo):
    """[{mount, switch, serials}] in the order the vm profile numbers them."""
    out = []
    for i, sw in enumerate(sorted(topo["switches"], key=lambda s: s["root_port"]), start=1):
        out.append({"mount": "%s%d" % (MOUNT_PREFIX, i), "switch": sw["id"], "root_port": sw["root_port"],
                    "serials": sorted(sw["drives"])})
    return out


class Guest(object):
    """Small helpers over a testinfra host: each reads the guest with the admin's own tools."""

    def __init__(self, host):
        self.host = host

    def out(self, cmd):
        res = self.host.run(cmd)
        assert res.rc == 0, "`%s` failed (rc %d): %s" % (cmd, res.rc, res.stderr)
        return res.stdout

    def serial_to_disk(self):
        """{serial: nvmeXnY} from /dev/disk/by-id."""
        text = self.out("for l in /dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_*; do "
                        "case $l in *_[0-9]) continue;; esac; echo ${l##*_Ctrl_} $(basename $(readlink -e $l)); done")
        return dict(line.split() for line in text.splitlines() if line.strip())

    def mdstat(self):
        """{mdN: {level, members: [disk]}} parsed from /proc/mdstat."""
        arrays = {}
        for line in self.out("cat /proc/mdstat").splitlines():
            m = re.match(r"^(md\S+)\s*:\s*(\S+)\s+(?:\(\S+\)\s+)?(raid\d+|linear)\s+(.*)$", line)
            if m:
                members = [re.sub(r"\[\d+\].*$", "", tok) for tok in m.group(4).split()]
                arrays[m.group(1)] = {"state": m.group(2), "level": m.group(3), "members": sorted(members)}
        return arrays

    def md_detail(self, dev):
        """`mdadm --detail DEV` as {level, state, uuid, members: [disk]}."""
        text = self.out("mdadm --detail %s" % dev)
        info = {"members": []}
        for line in text.splitlines():
            m = re.match(r"^\s*(Raid Level|State|UUID|Raid Devices)\s*:\s*(.*)$", line)
            if m:
                info[m.group(1).lower().replace(" ", "_")] = m.group(2).strip()
            m = re.match(r"^\s*\d+\s+\d+\s+\d+\s+\d+\s+\S.*\s(/dev/\S+)$", line)
            if m:
                info["members"].append(os.path.basename(self.out("readlink -e %s" % m.group(1)).strip()))
        info["members"].sort()
        return info

    def mount_source(self, path):
        res = self.host.run("findmnt -n -o SOURCE --mountpoint %s" % path)
        return res.stdout.strip() if res.rc == 0 else None

    def md_of_mount(self, path):
        src = self.mount_source(path)
        if not src:
            return None
        return os.path.basename(self.out("readlink -e %s" % src).strip())

    def sha256(self, path):
        return self.out("sha256sum %s" % path).split()[0]

    def netdev_of(self, mac):
        """The network interface with this MAC address."""
        out = self.out("for d in /sys/class/net/*; do echo $(basename $d) $(cat $d/address); done")
        names = [line.split()[0] for line in out.splitlines() if line.split()[1:] == [mac]]
        assert len(names) == 1, "one interface with MAC %s expected, found %s" % (mac, names)
        return names[0]

    def acs_ctrl(self, bdf):
        """ACS Control word read with setpci, or None where the bridge has no ACS capability."""
        res = self.host.run("setpci -s %s ECAP_ACS+6.w" % bdf)
        if res.rc != 0:
            return None
        return int(res.stdout.strip(), 16)


@pytest.fixture
def guest(host):
    return Guest(host)
