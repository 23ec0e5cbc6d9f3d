#!/usr/bin/env python3
"""Capture what gds-commission reads of a real node into a tree with the kernel's own layout, as a
fixture for the tests (tests/fixtures/captured/<name>.tgz), so a machine stays covered by the
tests after it is gone.

Copied, as they are: the PCI functions below /sys/devices/pci* with the attributes the PCI model
reads (ids, class, NUMA node, links, config space, AER counters, SR-IOV) and their driver and
IOMMU-group links; the block, NVMe, network and RDMA devices below them; the /sys/bus, /sys/class,
/sys/block and /sys/dev/block links to them; the kernel modules, IOMMU groups and lockdown state
the platform facts read; and /proc's mounts, mountinfo, swaps, mdstat, cmdline, modules, diskstats,
osrelease and the first processor of cpuinfo; of /boot/config-<release> the lines of KERNEL_CONFIG;
a P2PDMA provider's p2pmem size, available and published. Links are kept as links (their text,
relative as sysfs writes them); nothing is followed out of the tree.

Anonymised: serial numbers, WWIDs, UUIDs, NGUIDs/EUIs, node and port GUIDs, MAC addresses and
NQNs become fixed placeholders of the same shape; host names do not appear in what is copied.

    scripts/capture-node.py OUT_DIR [--name NAME] [--expect]
writes OUT_DIR/NAME.tgz and OUT_DIR/NAME.json; with --expect also OUT_DIR/NAME.expected.json, the
vendor's view of the same machine for the tests to hold discovery against: from NVML (pynvml),
each GPU's index, PCI address, name and NUMA node, each GPU pair's common ancestor as
nvidia-smi topo -mp names it (PIX PXB PHB NODE SYS), the NVLinks between GPUs as topo -m counts
them (hw/nvml.nvlink_peers); `nvidia-smi topo -m` and `-mp` as printed (the tests read them with
hw/smi_topo.py).
Run as root (config space past 64 bytes needs it). Every read is bounded (64 KiB a file)."""
from __future__ import annotations

import argparse
import errno
import io
import json
import os
import re
import stat
import sys
import tarfile
import time

LIMIT = 64 << 10
# the attributes of a PCI function that discovery, the link checks and the health gate read
PCI_FILES = {"vendor", "device", "subsystem_vendor", "subsystem_device", "class", "revision", "numa_node",
             "local_cpulist", "current_link_speed", "current_link_width", "max_link_speed", "max_link_width",
             "config", "aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal", "aer_rootport_total_err_cor",
             "aer_rootport_total_err_fatal", "aer_rootport_total_err_nonfatal", "sriov_numvfs", "sriov_totalvfs",
             "enable", "irq", "modalias", "secondary_bus_number", "subordinate_bus_number"}
KERNEL_CONFIG = ("CONFIG_PCI_P2PDMA",)
PCI_LINKS = {"driver", "iommu_group", "physfn", "subsystem"}
BLOCK_FILES = {"dev", "size", "nsid", "wwid", "eui", "nguid", "uuid", "ro", "removable", "partition", "start", "range", "ext_range", "hidden", "stat",
               "queue/logical_block_size", "queue/physical_block_size", "queue/rotational", "queue/nr_requests",
               "queue/max_sectors_kb", "queue/scheduler", "md/level", "md/raid_disks", "md/chunk_size",
               "md/array_state", "md/metadata_version", "dm/name", "device/model", "device/vendor", "device/rev",
               "device/state", "device/type"}
NVME_FILES = {"model", "serial", "firmware_rev", "transport", "address", "cntlid", "subsysnqn", "state",
              "numa_node", "queue_count", "sqsize"}
NET_FILES = {"address", "dev_id", "dev_port", "operstate", "speed", "type", "mtu", "carrier", "ifindex", "iflink"}
IB_FILES = {"fw_ver", "node_guid", "node_type", "sys_image_guid", "hca_type", "board_id"}
IB_PORT_FILES = {"state", "phys_state", "rate", "link_layer", "lid", "sm_lid", "gids/0", "gid_attrs/ndevs/0",
                 "gid_attrs/types/0"}
MODULES = ("nvidia", "nvidia_fs", "nvidia_peermem", "nv_peer_mem", "nvme", "nvme_core", "md_mod", "raid0",
           "vfio_pci", "ib_core", "mlx5_core", "mlx5_ib", "rdma_rxe", "virtio_blk", "nvidia_uvm")
PROC_FILES = ("cmdline", "mounts", "self/mountinfo", "swaps", "mdstat", "modules", "diskstats",
              "sys/kernel/osrelease", "driver/nvidia/version", "driver/nvidia/params", "driver/nvidia-fs/version",
              "driver/nvidia-fs/stats")
# of the large files the platform facts search, only what they look for
KALLSYMS = ("p2pdma_pgmap_ops",)
DPKG_PREFIXES = ("nvidia", "cuda", "gds", "libcufile", "mlnx", "doca", "dgx", "rdma-core", "perftest", "nvme-cli",
                 "mdadm", "linux-image")
# what could name or track a machine, by attribute name
SECRET_NAMES = {"serial": "SERIAL0000", "wwid": "WWID0000", "uuid": "00000000-0000-0000-0000-000000000000",
                "nguid": "00000000000000000000000000000000", "eui": "0000000000000000",
                "subsysnqn": "nqn.2014-08.org.nvmexpress:anonymised", "node_guid": "0000:0000:0000:0000",
                "sys_image_guid": "0000:0000:0000:0000", "board_id": "BOARD0000"}
MAC = re.compile(r"\b(?:[0-9a-f]{2}:){5}[0-9a-f]{2}\b", re.I)
GID = re.compile(r"\b(?:[0-9a-f]{4}:){7}[0-9a-f]{4}\b", re.I)


class Anonymiser(object):
    """Fixed placeholders for what could name or track a machine; distinct values stay distinct
    (the n-th address seen becomes the n-th placeholder), so pairings between devices survive."""

    def __init__(self):
        self.seen = {}

    def _numbered(self, value, shape):
        number = self.seen.setdefault(value.lower(), len(self.seen) + 1)
        return shape(number)

    def __call__(self, rel, data):
        name = os.path.basename(rel)
        if name in SECRET_NAMES:
            return (SECRET_NAMES[name] + "\n").encode()
        if name in ("address", "ports") or "/gids/" in rel or name.startswith("gid"):
            text = data.decode("latin-1")
            text = MAC.sub(lambda m: self._numbered(m.group(0), lambda n: "02:00:00:00:%02x:%02x" % (n >> 8 & 255, n & 255)), text)
            # the subnet prefix stays (it says link-local or not), the interface id is numbered
            text = GID.sub(lambda m: m.group(0)[:20] + self._numbered(m.group(0), lambda n: "0000:0000:0000:%04x" % (n & 0xffff)), text)
            return text.encode("latin-1")
        return data


class Capture(object):
    def __init__(self, root="/"):
        self.root = root
        self.files = {}    # rel -> bytes
        self.links = {}    # rel -> link text
        self.dirs = set()
        self.problems = []
        self.anonymise = Anonymiser()

    def _abs(self, rel):
        return os.path.join(self.root, rel)

    def through_link(self, rel):
        """Whether a directory on the way to ``rel`` is a link: its target is captured where it
        lives (or not at all), never as a copy here."""
        parts = rel.split("/")[:-1]
        for n in range(1, len(parts) + 1):
            if os.path.islink(self._abs("/".join(parts[:n]))):
                return True
        return False

    def file(self, rel, follow=False):
        """``rel`` as a regular file of the capture. sysfs links are kept as links (``link``), so
        nothing is read through one; procfs's own links (/proc/mounts -> self/mounts, /proc/self)
        are the kernel's view of this process: read through them (``follow``)."""
        path = self._abs(rel)
        if not follow and self.through_link(rel):
            return
        try:
            st = os.stat(path) if follow else os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                return
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW))
            try:
                data = os.read(fd, LIMIT)
            finally:
                os.close(fd)
        except OSError as exc:  # unreadable attributes are absent in the fixture, as on that kernel
            # (EINVAL: what the kernel answers for a down link's speed, a virtual device's carrier)
            if not isinstance(exc, FileNotFoundError) and exc.errno not in (errno.EINVAL, errno.ENODEV, errno.EOPNOTSUPP):
                self.problems.append("%s: %s" % (rel, exc.strerror or exc))
            return
        self.files[rel] = self.anonymise(rel, data)

    def link(self, rel):
        try:
            self.links[rel] = os.readlink(self._abs(rel))
        except OSError:
            pass

    def entries(self, rel):
        try:
            return sorted(os.listdir(self._abs(rel)))
        except OSError:
            return []

    def is_link(self, rel):
        return os.path.islink(self._abs(rel))

    def is_dir(self, rel):
        return os.path.isdir(self._abs(rel)) and not self.is_link(rel)

    # ---- sysfs ---------------------------------------------------------------------------------
    def pci_tree(self):
        for top in self.entries("sys/devices"):
            if top.startswith("pci"):
                self.walk_device("sys/devices/" + top)
        for rel in ("sys/bus/pci/devices", "sys/block", "sys/class/nvme", "sys/class/net", "sys/class/infiniband",
                    "sys/class/block", "sys/class/iommu", "sys/dev/block", "sys/class/nvme-subsystem"):
            self.link_dir(rel)
        for driver in self.entries("sys/bus/pci/drivers"):
            for entry in self.entries("sys/bus/pci/drivers/" + driver):
                if re.match(r"^[0-9a-f]{4,5}:[0-9a-f]{2}:", entry):
                    self.link("sys/bus/pci/drivers/%s/%s" % (driver, entry))

    def link_dir(self, rel):
        for entry in self.entries(rel):
            if self.is_link(rel + "/" + entry):
                self.link(rel + "/" + entry)

    def walk_device(self, rel, depth=0):
        """A PCI function or bridge (and what hangs below it), recursively; bounded depth."""
        if depth > 24:
            return
        self.dirs.add(rel)
        name = os.path.basename(rel)
        for entry in self.entries(rel):
            sub = rel + "/" + entry
            if entry in PCI_FILES and not self.is_dir(sub):
                self.file(sub)
            elif entry in PCI_LINKS or entry.startswith("virtfn"):
                self.link(sub)
            elif entry == "p2pmem" and self.is_dir(sub):
                # a P2PDMA provider (hw/p2pdma.py); never its `allocate`, whose mmap takes device memory
                self.dirs.add(sub)
                for leaf in ("size", "available", "published"):
                    self.file(sub + "/" + leaf)
            elif re.match(r"^[0-9a-f]{4,5}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", entry) and self.is_dir(sub):
                self.walk_device(sub, depth + 1)
            elif entry in ("block", "nvme", "net", "infiniband", "nvme-subsystem") and self.is_dir(sub):
                self.walk_class(sub, entry)
            elif re.match(r"^(virtio\d+|pci[0-9a-f]{4,5}:[0-9a-f]{2})$", entry) and self.is_dir(sub):
                # a virtio device, or the PCI domain an Intel VMD puts its drives in
                self.walk_device(sub, depth + 1)
            elif re.match(r"^(host\d+|target[\d:]+|[\d]+:[\d]+:[\d]+:[\d]+|port-[\d:]+|end_device-[\d:]+)$", entry) \
                    and self.is_dir(sub):
                self.walk_device(sub, depth + 1)
            elif entry in ("device", "vendor", "model", "rev", "state", "type") and name and self.is_dir(rel) \
                    and re.match(r"^[\d]+:[\d]+:[\d]+:[\d]+$", name) and not self.is_dir(sub):
                self.file(sub)

    def walk_class(self, rel, kind):
        self.dirs.add(rel)
        for dev in self.entries(rel):
            sub = rel + "/" + dev
            if not self.is_dir(sub):
                continue
            self.dirs.add(sub)
            if kind == "block":
                self.walk_block(sub)
            elif kind == "nvme":
                for entry in NVME_FILES | {"dev"}:
                    self.file(sub + "/" + entry)
                self.link(sub + "/device")
                for child in self.entries(sub):
                    if re.match(r"^nvme\d+c?\d*n\d+$", child) and self.is_dir(sub + "/" + child):
                        self.walk_block(sub + "/" + child)
            elif kind == "net":
                for entry in NET_FILES:
                    self.file(sub + "/" + entry)
                self.link(sub + "/device")
                for child in self.entries(sub):
                    if child.startswith(("lower_", "upper_")):
                        self.link(sub + "/" + child)
            elif kind == "infiniband":
                for entry in IB_FILES:
                    self.file(sub + "/" + entry)
                self.link(sub + "/device")
                for port in self.entries(sub + "/ports"):
                    for entry in IB_PORT_FILES:
                        self.file("%s/ports/%s/%s" % (sub, port, entry))

    def walk_block(self, rel):
        self.dirs.add(rel)
        for entry in BLOCK_FILES:
            self.file(rel + "/" + entry)
        for entry in ("holders", "slaves", "multipath"):
            if not self.is_dir(rel + "/" + entry):
                continue
            self.dirs.add(rel + "/" + entry)
            for child in self.entries(rel + "/" + entry):
                self.link("%s/%s/%s" % (rel, entry, child))
        self.link(rel + "/device")
        for child in self.entries(rel):
            if self.is_dir(rel + "/" + child) and re.match(r"^\w+?p?\d+$", child) \
                    and os.path.exists(self._abs(rel + "/" + child + "/partition")):
                self.walk_block(rel + "/" + child)

    def virtual_devices(self):
        """md/dm disks, software RDMA devices (soft-RoCE) and the virtual netdevs they sit on."""
        for dev in self.entries("sys/devices/virtual/block"):
            self.walk_block("sys/devices/virtual/block/" + dev)
        for kind in ("infiniband", "net"):
            if self.is_dir("sys/devices/virtual/" + kind):
                self.walk_class("sys/devices/virtual/" + kind, kind)
        # native NVMe multipath: each subsystem's head disks and links to its controllers
        for subsys in self.entries("sys/devices/virtual/nvme-subsystem"):
            base = "sys/devices/virtual/nvme-subsystem/" + subsys
            self.dirs.add(base)
            for entry in self.entries(base):
                if self.is_link(base + "/" + entry):
                    self.link(base + "/" + entry)
                elif re.match(r"^nvme\d+n\d+$", entry) and self.is_dir(base + "/" + entry):
                    self.walk_block(base + "/" + entry)
                elif entry in NVME_FILES | {"iopolicy"}:
                    self.file(base + "/" + entry)

    def filtered(self, rel, keep, separator=b"\n", limit=256 << 20):
        """``rel`` with only the records (lines, or dpkg stanzas) that ``keep`` accepts."""
        try:
            with open(self._abs(rel), "rb") as handle:
                data = handle.read(limit)
        except OSError:
            return
        self.files[rel] = separator.join(r for r in data.split(separator) if keep(r)) + b"\n"

    def udev_records(self):
        """The udev database's record of every block device captured (cuFile reads them)."""
        for rel, data in list(self.files.items()):
            if rel.endswith("/dev") and re.match(rb"^\d+:\d+\s*$", data):
                self.file("run/udev/data/b" + data.decode().strip())

    def platform(self):
        for name in MODULES:
            base = "sys/module/" + name
            if os.path.isdir(self._abs(base)):
                self.dirs.add(base)
                for entry in ("version", "refcnt", "initstate"):
                    self.file(base + "/" + entry)
                for param in self.entries(base + "/parameters"):
                    self.file("%s/parameters/%s" % (base, param))
        for group in self.entries("sys/kernel/iommu_groups"):
            self.file("sys/kernel/iommu_groups/%s/type" % group)
        for unit in self.entries("sys/class/iommu"):
            if self.is_link("sys/class/iommu/" + unit):
                self.link("sys/class/iommu/" + unit)
            else:  # (a tree built without the kernel's links has the unit's directory here)
                self.dirs.add("sys/class/iommu/" + unit)
                self.file("sys/class/iommu/%s/intel-iommu/version" % unit)
        self.file("sys/kernel/security/lockdown")
        for rel in PROC_FILES:
            self.file("proc/" + rel, follow=True)
        self.filtered("proc/kallsyms", lambda line: any(line.endswith(b" " + s.encode()) for s in KALLSYMS))
        self.filtered("var/lib/dpkg/status", lambda stanza: any(
            stanza.startswith(b"Package: " + p.encode()) for p in DPKG_PREFIXES), separator=b"\n\n")
        self.file("etc/dgx-release")
        release = self.files.get("proc/sys/kernel/osrelease", b"").decode("ascii", "replace").strip()
        if re.match(r"^[\w.+~-]+$", release):
            for name in ("modules.dep", "modules.builtin"):
                self.filtered("lib/modules/%s/%s" % (release, name), lambda line: True, limit=32 << 20)
            # the build options the platform facts read (hw/platform.kernel_config), as their lines
            self.filtered("boot/config-%s" % release, lambda line: any(
                line.startswith(o.encode() + b"=") or line == b"# %s is not set" % o.encode() for o in KERNEL_CONFIG),
                limit=4 << 20)
        self.udev_records()
        try:
            with open(self._abs("proc/cpuinfo"), "rb") as handle:
                first = handle.read(LIMIT).split(b"\n\n")[0]
            self.files["proc/cpuinfo"] = first + b"\n\n"
        except OSError as exc:
            self.problems.append("proc/cpuinfo: %s" % exc)

    def run(self):
        self.pci_tree()
        self.virtual_devices()
        self.platform()
        return self

    def tarball(self, path, prefix):
        with tarfile.open(path, "w:gz") as tar:
            def add(rel, kind, payload=None):
                info = tarfile.TarInfo("%s/%s" % (prefix, rel))
                info.mtime = 0
                if kind == "dir":
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                elif kind == "link":
                    info.type, info.linkname, info.mode = tarfile.SYMTYPE, payload, 0o777
                    tar.addfile(info)
                else:
                    info.size, info.mode = len(payload), 0o644
                    tar.addfile(info, io.BytesIO(payload))
            parents = set()
            for rel in list(self.files) + list(self.links) + list(self.dirs):
                parent = os.path.dirname(rel)
                while parent and parent not in parents:
                    parents.add(parent)
                    parent = os.path.dirname(parent)
            for rel in sorted(parents | self.dirs):
                add(rel, "dir")
            for rel, text in sorted(self.links.items()):
                add(rel, "link", text)
            for rel, data in sorted(self.files.items()):
                add(rel, "file", data)


# nvmlDeviceGetTopologyCommonAncestor's levels, as nvidia-smi topo -mp prints them
NVML_LEVELS = {"NVML_TOPOLOGY_INTERNAL": "X", "NVML_TOPOLOGY_SINGLE": "PIX", "NVML_TOPOLOGY_MULTIPLE": "PXB",
               "NVML_TOPOLOGY_HOSTBRIDGE": "PHB", "NVML_TOPOLOGY_NODE": "NODE", "NVML_TOPOLOGY_SYSTEM": "SYS"}


def vendor_view():
    """What NVML and nvidia-smi say of the machine's GPUs (every problem named, never raised)."""
    import subprocess
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "collections"))
    from ansible_collections.gds.commission.plugins.module_utils.hw.nvml import nvlink_peers
    out = {"gpus": [], "gpu_pairs": {}, "nvlink": {}, "problems": []}
    for args in (["topo", "-m"], ["topo", "-mp"]):
        try:
            proc = subprocess.run(["nvidia-smi"] + args, capture_output=True, text=True,
                                  errors="backslashreplace", timeout=60)  # a stray byte: kept visible, never a traceback
            out["nvidia-smi " + " ".join(args)] = proc.stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            out["problems"].append("nvidia-smi %s: %s" % (" ".join(args), exc))
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception as exc:
        out["problems"].append("NVML: %s" % exc)
        return out
    levels = {getattr(pynvml, name): text for name, text in NVML_LEVELS.items() if hasattr(pynvml, name)}
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        for index, handle in enumerate(handles):
            bus = pynvml.nvmlDeviceGetPciInfo(handle).busId
            bus = bus.decode() if isinstance(bus, bytes) else bus
            entry = {"index": index, "bdf": bus.lower()[-12:], "name": str(pynvml.nvmlDeviceGetName(handle))}
            try:
                entry["numa_node"] = pynvml.nvmlDeviceGetNumaNodeId(handle)
            except Exception as exc:
                entry["numa_node_problem"] = str(exc)
            out["gpus"].append(entry)
        bdfs = [gpu["bdf"] for gpu in out["gpus"]]
        for gpu, peers in zip(out["gpus"], nvlink_peers(pynvml, handles, bdfs)):
            out["nvlink"]["GPU%d" % gpu["index"]] = {"GPU%d" % bdfs.index(bdf): n for bdf, n in peers.items()}
        for a, first in enumerate(handles):
            for b, second in enumerate(handles):
                if a < b:
                    level = pynvml.nvmlDeviceGetTopologyCommonAncestor(first, second)
                    out["gpu_pairs"]["GPU%d GPU%d" % (a, b)] = levels.get(level, str(level))
    except Exception as exc:
        out["problems"].append("NVML: %s" % exc)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--name", default="node")
    parser.add_argument("--root", default="/", help="capture below this root instead of / (tests)")
    parser.add_argument("--expect", action="store_true", help="also write NAME.expected.json (NVML, nvidia-smi)")
    args = parser.parse_args()
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", args.name):
        sys.exit("--name %r: letters, digits, dot, dash and underscore only" % args.name)
    started = time.time()
    capture = Capture(args.root).run()
    os.makedirs(args.out, exist_ok=True)
    tgz = os.path.join(args.out, args.name + ".tgz")
    capture.tarball(tgz, args.name)
    summary = {"name": args.name, "files": len(capture.files), "links": len(capture.links),
               "dirs": len(capture.dirs), "seconds": round(time.time() - started, 2),
               "problems": capture.problems[:50]}
    with open(os.path.join(args.out, args.name + ".json"), "w") as handle:
        json.dump(summary, handle, indent=1)
    print(json.dumps(summary))
    if args.expect:
        view = vendor_view()
        with open(os.path.join(args.out, args.name + ".expected.json"), "w") as handle:
            json.dump(view, handle, indent=1, sort_keys=True)
        print("vendor view: %d GPUs, problems: %s" % (len(view["gpus"]), view["problems"] or "none"))
    if not capture.files:
        sys.exit("nothing captured below %s" % args.root)


if __name__ == "__main__":
    main()
