# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPUs, NVMe drives, other disks and RDMA NICs placed on the PCI tree, and the affinity groups
between them.

``discover()`` builds the ``gds_topology`` facts (docs/modules.md) from one PciTree:
gpus, nvme, disks, nics, matrix, groups, bridges, pcie_links. It is the only code that decides what a GPU, a drive
or a NIC is and which of them belong together; modules and roles take its output.
"""
from __future__ import annotations

import os
import re

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.files import listdir, natural_key, read_text, resolve
from ansible_collections.gds.commission.plugins.module_utils.core.spec import EntryPoint, RoleSpec, Var, on_node
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import (
    CLASS_3D, CLASS_VGA, LINK_CLASSES, LINK_FILES, NVIDIA_VENDOR, PORT_DOWNSTREAM, PORT_NAMES, PORT_ROOT, PciTree,
    bdf_key, controller_bdfs, class_rank, is_root_bus, normalize_bdf, pci_function_in_path,
)
from ansible_collections.gds.commission.plugins.module_utils.hw.p2pdma import pairs as p2pdma_pairs
from ansible_collections.gds.commission.plugins.module_utils.hw.platform import cpu_info, running_kernel_version
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import ProcfsError, system_disks

# A namespace block device as /sys/block lists it: the plain disk of a controller, or the head
# disk of a multipath subsystem. Hidden path disks (nvme0c1n1) never match.
_NAMESPACE = re.compile(r"^nvme(\d+)n(\d+)$")


def _read_text(path):
    text = read_text(path)
    return text.strip() if text is not None else None


def _listdir(path):
    return listdir(path, key=natural_key)


def _class_entries(tree, class_name):
    """(name, real path, BDF or None) for each /sys/class/<class_name> entry.

    A class entry or ``device`` link that cannot be followed (symlink loop, dangling link) is
    warned about and left out; BDF None means a device with no PCI function (fabrics NVMe,
    soft RoCE).
    """
    base = os.path.join(tree.sysfs_root, "class", class_name)
    for name in _listdir(base):
        entry = os.path.join(base, name)
        real, problem = resolve(entry)
        if problem is not None:
            tree.warnings.append("skipping %s: %s" % (entry, problem))
            continue
        link = os.path.join(entry, "device")
        device, problem = resolve(link)
        if problem is not None and not os.path.lexists(link):
            yield name, real, None  # a virtual device: no parent at all
            continue
        if problem is not None:
            tree.warnings.append("skipping %s: %s: %s" % (entry, link, problem))
            continue
        bdf = os.path.basename(device)
        yield name, real, bdf if bdf in tree.devices else None


# --------------------------------------------------------------------------------------------
# Devices
# --------------------------------------------------------------------------------------------
def find_gpus(tree, nvml_bus_ids=None):
    """NVIDIA display/3D functions (NVSwitches are class 0x0680 and are not GPUs; SR-IOV virtual
    functions of a GPU are not GPUs either: nvidia-smi lists their physical function).

    ``index`` follows NVML's order when ``nvml_bus_ids`` (bus ids in NVML index order) is given,
    else ascending PCI bus id, which is nvidia-smi's default order.
    """
    found = [dev for dev in tree.devices.values()
             if dev.vendor == NVIDIA_VENDOR and dev.class_code >> 8 in (CLASS_VGA, CLASS_3D)
             and tree.physfn(dev.bdf) is None]
    found.sort(key=lambda dev: bdf_key(dev.bdf))
    order = {bdf: i for i, bdf in enumerate(normalize_bdf(b) for b in (nvml_bus_ids or []))}
    if order and all(dev.bdf in order for dev in found):
        found.sort(key=lambda dev: order[dev.bdf])
    elif order:
        tree.warnings.append("NVML bus ids %s do not match sysfs GPUs %s: using PCI order"
                             % (sorted(order), [d.bdf for d in found]))
    return [{"index": i, "bdf": dev.bdf, "numa_node": dev.numa_node,
             "device_id": "0x%04x" % dev.device, "switch": tree.switch_of(dev.bdf),
             "driver": dev.driver}
            for i, dev in enumerate(found)]


def _controller_of(disk_dir, by_dir):
    """The controller a namespace or path disk belongs to: its ``device`` link (the gendisk's
    parent device, drivers/nvme/host/core.c), else the directory it sits in; None if neither is
    a known controller."""
    device, problem = resolve(os.path.join(disk_dir, "device"))
    if problem is None and device in by_dir:
        return by_dir[device]
    return by_dir.get(os.path.dirname(disk_dir))


def _multipath_paths(tree, head, by_dir):
    """Controllers of a native-multipath head disk, found through sysfs links, never through
    the c-number of ``nvme<S>c<C>n<N>``: before 2019 kernels put the controller's cntlid there,
    not its instance.

    Current kernels link each path disk from the head's ``multipath/`` directory. Older ones
    have no such directory: then the controllers linked from the subsystem directory
    (nvme-subsysN/nvmeX) are searched for the path disk that carries the head's nsid.
    """
    paths = []
    links = _listdir(os.path.join(head, "multipath"))
    for link in links:
        path_dir, problem = resolve(os.path.join(head, "multipath", link))
        if problem is not None:
            tree.warnings.append("%s: %s" % (os.path.join(head, "multipath", link), problem))
            continue
        paths.append((link, _controller_of(path_dir, by_dir)))
    if links:
        return paths
    subsys = os.path.dirname(head)
    nsid = _read_text(os.path.join(head, "nsid"))
    head_name = _NAMESPACE.match(os.path.basename(head))
    # The subsystem and namespace parts of a path disk's name still hold on every kernel; only
    # the c-number changed meaning.
    path_name = re.compile(r"^nvme%sc\d+n%s$" % head_name.groups()) if head_name else None
    ctrl_dirs = [os.path.realpath(os.path.join(subsys, entry)) for entry in _listdir(subsys)]
    ctrl_dirs = [d for d in ctrl_dirs if d in by_dir]  # not the heads and attributes
    linked = bool(ctrl_dirs)
    if not linked:  # no controller links either: every controller, by name and nsid
        ctrl_dirs = sorted(by_dir, key=lambda d: natural_key(by_dir[d]))
    for ctrl_dir in ctrl_dirs:
        for child in _listdir(ctrl_dir):
            child_dir = os.path.join(ctrl_dir, child)
            if os.path.islink(child_dir) or not os.path.isdir(child_dir):
                continue
            # Old kernels give hidden disks no dev_t (no ``dev`` file), but every namespace
            # disk has ``nsid``.
            child_nsid = _read_text(os.path.join(child_dir, "nsid"))
            named = bool(path_name and path_name.match(child))
            if nsid is not None and child_nsid is not None:
                same = child_nsid == nsid and (linked or named)
            else:
                same = named
            if same:
                paths.append((child, by_dir[ctrl_dir]))
    return paths


def find_nvme(tree, system):
    """NVMe namespaces (block devices) with their controllers, plain or native-multipath layout.

    ``controller``/``bdf``/``switch`` name the first controller; a drive reached through several
    controllers (a dual-port drive, one subsystem) lists them all in ``controllers`` and
    ``paths``; the matrix takes the best of its paths.
    """
    root = tree.sysfs_root
    controllers = {}
    by_dir = {}
    for ctrl, real, bdf in _class_entries(tree, "nvme"):
        if bdf is None:
            continue  # fabrics (TCP/RDMA/FC) controllers have no local PCI function
        controllers[ctrl] = {"bdf": bdf, "model": _read_text(os.path.join(real, "model"))}
        by_dir[real] = ctrl
    drives = []
    block = os.path.join(root, "block")
    for name in _listdir(block):
        if not _NAMESPACE.match(name):
            continue
        real, problem = resolve(os.path.join(block, name))
        if problem is not None or not os.path.isdir(real):
            tree.warnings.append("skipping %s: %s" % (os.path.join(block, name), problem or "not a directory"))
            continue
        if "nvme-subsystem" in real.split(os.sep):
            found = _multipath_paths(tree, real, by_dir)
        else:
            found = [(name, _controller_of(real, by_dir))]
        unplaced = [path for path, ctrl in found if ctrl is None]
        if unplaced and len(unplaced) < len(found):
            tree.warnings.append("%s: path %s leads to no PCI NVMe controller"
                                 % (name, ", ".join(unplaced)))
        found = sorted(((p, c) for p, c in found if c is not None), key=lambda pc: natural_key(pc[1]))
        if not found:
            continue  # not PCI-attached (fabrics), or a controller we could not place
        ctrl = found[0][1]
        sectors = _read_text(os.path.join(real, "size"))
        dev = tree.devices[controllers[ctrl]["bdf"]]
        drives.append({
            "name": name, "controller": ctrl, "controllers": [c for dummy, c in found], "bdf": dev.bdf,
            "numa_node": dev.numa_node, "model": controllers[ctrl]["model"],
            "size_bytes": int(sectors) * 512 if sectors and sectors.isdigit() else None,
            "system": name in system, "switch": tree.switch_of(dev.bdf),
            "paths": [{"name": p, "controller": c, "bdf": controllers[c]["bdf"],
                       "switch": tree.switch_of(controllers[c]["bdf"])} for p, c in found],
        })
    # PCI NVMe controllers with no namespace still matter for placement (and ACS): keep them
    # visible in the warnings rather than silently dropping them. A second port of a dual-port
    # drive is a path of that drive, not such a controller.
    named = {c for d in drives for c in d["controllers"]}
    for ctrl in sorted(set(controllers) - named, key=natural_key):
        tree.warnings.append("NVMe controller %s (%s) has no namespace block device"
                             % (ctrl, controllers[ctrl]["bdf"]))
    return drives


# The layer a disk hangs from below its PCI function, as the kernel names the device directories
# between them: virtio_blk (and virtio-scsi) below ``virtioN``, libata below ``ataN``, any SCSI
# host (SAS/SATA HBAs, USB storage) below ``hostN``.
_DISK_LAYERS = ((re.compile(r"^virtio\d+$"), "virtio"), (re.compile(r"^ata\d+$"), "ata"),
                (re.compile(r"^usb\d+$"), "usb"), (re.compile(r"^host\d+$"), "scsi"))
# nvme-fabrics controllers print their address as key=value pairs (drivers/nvme/host/fabrics.c,
# nvmf_get_address): traddr, trsvcid, host_traddr, host_iface (nvme-tcp, since 5.14)
_ADDRESS_PAIR = re.compile(r"([a-z_]+)=([^,\s]*)")


def _disk_kind(parts, bdf):
    """The layer between a disk and its PCI function (``virtio``, ``ata``, ``usb``, ``scsi``), or
    ``other``."""
    below = parts[parts.index(bdf) + 1:] if bdf in parts else parts
    for part in below:
        for pattern, kind in _DISK_LAYERS:
            if pattern.match(part):
                return kind
    return "other"


def _fabrics_disk(tree, name, real):
    """The NIC side of an NVMe-over-fabrics namespace: its controller's transport and address,
    and the PCI function of the interface the address names (``host_iface``), else why it is
    unknown. None when ``real`` is no fabrics namespace."""
    controllers = {}
    for ctrl, ctrl_real, bdf in _class_entries(tree, "nvme"):
        if bdf is None:
            controllers[ctrl_real] = ctrl
    if not controllers:
        return None
    if "nvme-subsystem" in real.split(os.sep):
        found = [ctrl for dummy, ctrl in _multipath_paths(tree, real, controllers) if ctrl]
    else:
        found = [c for c in [_controller_of(real, controllers)] if c]
    if not found:
        return None
    ctrl = found[0]
    base = os.path.join(tree.sysfs_root, "class", "nvme", ctrl)
    transport = _read_text(os.path.join(base, "transport"))
    address = _read_text(os.path.join(base, "address")) or ""
    pairs = dict(_ADDRESS_PAIR.findall(address))
    disk = {"name": name, "kind": "fabrics", "controller": ctrl, "transport": transport,
            "address": address or None, "nic": pairs.get("host_iface")}
    bdf = netdev_pci(tree, disk["nic"]) if disk["nic"] else None
    if bdf is not None:
        disk["bdf"] = bdf
    elif disk["nic"]:
        disk["unknown"] = "NVMe over %s through %s, which has no PCI function in sysfs" % (transport, disk["nic"])
    else:
        where = pairs.get("traddr") or address or "an unknown address"
        disk["unknown"] = ("NVMe over %s to %s: the controller names no local interface (host_iface), "
                           "so the NIC its data crosses is not known" % (transport, where))
    return disk


def find_disks(tree, system, nvme):
    """Whole disks that are not PCIe NVMe namespaces, each with the PCI function its data crosses:
    a virtio disk's virtio function, a SCSI/SATA disk's host bus adapter (the nearest PCI function
    above it in sysfs), an NVMe-over-fabrics namespace's NIC where the controller names its
    interface. md, device-mapper, loop and other virtual block devices are not disks; a disk with
    no PCI function is listed with ``bdf`` null and ``unknown`` saying why."""
    known = {d["name"] for d in nvme}
    block = os.path.join(tree.sysfs_root, "block")
    disks = []
    for name in _listdir(block):
        if name in known:
            continue
        real, problem = resolve(os.path.join(block, name))
        if problem is not None or not os.path.isdir(real):
            continue  # find_nvme and the system-drive reader warn about what they need
        parts = real.split(os.sep)
        if "virtual" in parts and "nvme-fabrics" not in parts and "nvme-subsystem" not in parts:
            continue  # md, dm, loop, ram, zram: they sit on disks, or on none
        disk = _fabrics_disk(tree, name, real) if _NAMESPACE.match(name) else None
        if disk is None:
            bdf = pci_function_in_path(real, tree.devices)
            disk = {"name": name, "kind": _disk_kind(parts, bdf), "bdf": bdf}
            if bdf is None:
                disk["unknown"] = "%s is below no PCI function (%s)" % (name, real)
        bdf = disk.get("bdf")
        sectors = _read_text(os.path.join(real, "size"))
        disk.update({"bdf": bdf, "system": name in system,
                     "numa_node": tree.devices[bdf].numa_node if bdf else None,
                     "switch": tree.switch_of(bdf) if bdf else None,
                     "size_bytes": int(sectors) * 512 if sectors and sectors.isdigit() else None})
        disks.append(disk)
    return disks


# RDMA port attributes as drivers/infiniband/core/sysfs.c prints them: "4: ACTIVE",
# "5: LinkUp", "400 Gb/sec (4X NDR)" (also "2.5 Gb/sec (1X SDR)").
_NUMBERED = re.compile(r"^\s*\d+\s*:\s*(.+?)\s*$")
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec\b")
_ZERO_GID = re.compile(r"^[0:]+$")


def _numbered(text):
    """"4: ACTIVE" -> "ACTIVE" (the kernel's "<n>: <name>"); other text as it is; None stays."""
    if text is None:
        return None
    match = _NUMBERED.match(text)
    return match.group(1) if match else text


def port_rate_gbps(text):
    """A port's ``rate`` file -> Gb/s as a float ("400 Gb/sec (4X NDR)" -> 400.0); None else."""
    match = _RATE.match(text or "")
    return float(match.group(1)) if match else None


def _netdev_port(netdev_dir):
    """The port (1-based) a netdev of an RDMA device's PCI function serves, as ibdev2netdev
    computes it: the larger of ``dev_id`` (hex; older kernels) and ``dev_port``, plus one."""
    numbers = []
    for name, base in (("dev_id", 16), ("dev_port", 10)):
        text = _read_text(os.path.join(netdev_dir, name))
        try:
            numbers.append(int(text, base) if text else 0)
        except ValueError:
            numbers.append(0)
    return max(numbers) + 1


def lower_netdevs(sysfs_root, netdev, seen=None):
    """The netdevs below a bond, team or VLAN (``/sys/class/net/DEV/lower_*`` links), down to
    the ones with nothing below; ``[netdev]`` itself when it has none."""
    seen = set() if seen is None else seen
    if netdev in seen:
        return []
    seen.add(netdev)
    lowers = [e[len("lower_"):] for e in _listdir(os.path.join(sysfs_root, "class", "net", netdev))
              if e.startswith("lower_")]
    if not lowers:
        return [netdev]
    out = []
    for lower in lowers:
        out += [d for d in lower_netdevs(sysfs_root, lower, seen) if d not in out]
    return out


def netdev_by_ifindex(sysfs_root, ifindex):
    """The netdev whose ``/sys/class/net/DEV/ifindex`` is ``ifindex``, or None. An IPv6 zone that
    is a number is an ifindex (net/sunrpc/addr.c prints a link-local NFS server as fe80::1%3)."""
    base = os.path.join(sysfs_root, "class", "net")
    for name in _listdir(base):
        if _read_text(os.path.join(base, name, "ifindex")) == str(ifindex):
            return name
    return None


def netdev_pci(tree, netdev):
    """The PCI function behind a network interface: the one its sysfs directory sits below, else
    (a bond, a VLAN, a bridge) that of the first of its lower devices that has one; None."""
    if not netdev:
        return None
    for name in dict.fromkeys([netdev] + lower_netdevs(tree.sysfs_root, netdev)):
        real, problem = resolve(os.path.join(tree.sysfs_root, "class", "net", name))
        found = pci_function_in_path(real, tree.devices) if problem is None else None
        if found is not None:
            return found
    return None


def _ib_ports(tree, ibdir, pci_netdevs):
    """The ports of one RDMA device (``ports/<n>/``), each with the netdev that serves it.

    The netdev is the one the kernel names in the port's GID table (``gid_attrs/ndevs/0``: RoCE,
    soft RoCE), else the PCI function's netdev whose dev_port/dev_id maps to the port (IPoIB), as
    ibdev2netdev finds them.
    """
    ports = []
    base = os.path.join(ibdir, "ports")
    for entry in _listdir(base):
        if not entry.isdigit():
            continue
        pdir = os.path.join(base, entry)
        number = int(entry)
        netdev = _read_text(os.path.join(pdir, "gid_attrs", "ndevs", "0")) or None
        if netdev is None:
            netdev = next((name for name, port in pci_netdevs if port == number), None)
        rate_text = _read_text(os.path.join(pdir, "rate"))
        port = {
            "port": number,
            "state": _numbered(_read_text(os.path.join(pdir, "state"))),
            "phys_state": _numbered(_read_text(os.path.join(pdir, "phys_state"))),
            "rate_gbps": port_rate_gbps(rate_text),
            "rate": rate_text,
            "link_layer": _read_text(os.path.join(pdir, "link_layer")),
            "netdev": netdev,
        }
        gid = _read_text(os.path.join(pdir, "gids", "0"))
        if gid and not _ZERO_GID.match(gid):
            port["gid"] = gid
        ports.append(port)
    if not ports:
        tree.warnings.append("%s has no readable ports/<n>/ directory" % ibdir)
    return ports


def _pci_netdevs(tree, bdf):
    """[(netdev, port)] of a PCI function, in name order (``ib0`` before its child ``ib0.8001``)."""
    path = tree.devices[bdf].path
    return [(name, _netdev_port(os.path.join(path, "net", name)))
            for name in _listdir(os.path.join(path, "net"))]


def find_nics(tree):
    """RDMA devices (/sys/class/infiniband) with their ports, netdevs and firmware.

    A hardware device is placed by its PCI function. A software device (rxe, siw: no ``device``
    link, it lives in /sys/devices/virtual) is placed by the PCI function of the netdev it is
    bound to (``software: true``, ``bdf`` that function); one on a netdev with no PCI function
    below it (veth, loopback) cannot be placed and is warned about. An SR-IOV virtual function
    (it has a ``physfn`` link) is no NIC of its own, even with its own mlx5_N device: it is
    counted in ``vfs`` of its physical function's entry.
    """
    nics = []
    vf_of = {}
    for name, real, bdf in _class_entries(tree, "infiniband"):
        software = bdf is None
        if software:
            ports = _ib_ports(tree, real, [])
            bound = [p["netdev"] for p in ports if p["netdev"]]
            parent = _read_text(os.path.join(real, "parent"))  # rxe's own attribute
            if parent and parent not in bound:
                bound.append(parent)
            for port in ports:  # a GID table not filled yet: the device's own netdev serves it
                if port["netdev"] is None and parent:
                    port["netdev"] = parent
            bdf = next((b for b in (netdev_pci(tree, nd) for nd in bound) if b is not None), None)
            if bdf is None:
                tree.warnings.append("%s is a software RDMA device on %s, which has no PCI device: "
                                     "not listed as a NIC" % (name, ", ".join(bound) or "no netdev"))
                continue
            netdevs = bound
        else:
            physfn = tree.physfn(bdf)
            if physfn is not None:
                vf_of[name] = (bdf, physfn)
                continue
            pci_netdevs = _pci_netdevs(tree, bdf)
            ports = _ib_ports(tree, real, pci_netdevs)
            netdevs = [p["netdev"] for p in ports if p["netdev"]]
            netdevs += [nd for nd, dummy in pci_netdevs if nd not in netdevs]
        netdevs = list(dict.fromkeys(netdevs))
        dev = tree.devices[bdf]
        nics.append({"name": name, "netdev": netdevs[0] if netdevs else None, "netdevs": netdevs,
                     "bdf": bdf, "numa_node": dev.numa_node, "switch": tree.switch_of(bdf),
                     "vfs": 0 if software else tree.num_vfs(bdf), "software": software,
                     "fw_ver": _read_text(os.path.join(real, "fw_ver")) or None,
                     "ports": ports})
    pfs = {n["bdf"] for n in nics}
    for name, (bdf, physfn) in sorted(vf_of.items()):
        if physfn not in pfs:
            tree.warnings.append("%s (%s) is an SR-IOV virtual function of %s, which has no RDMA "
                                 "device: not listed as a NIC" % (name, bdf, physfn))
    return nics


# --------------------------------------------------------------------------------------------
# Relations
# --------------------------------------------------------------------------------------------
def link_matrix(tree, gpus, nvme, nics):
    """{A: {B: CLASS}} over GPU<index>, NVMe names and NIC names; ``X`` on the diagonal."""
    nodes = ([("GPU%d" % g["index"], [g["bdf"]]) for g in gpus]
             + [(d["name"], controller_bdfs(d)) for d in nvme] + [(n["name"], [n["bdf"]]) for n in nics])
    matrix = {name: {} for name, dummy in nodes}
    for i, (name_a, bdfs_a) in enumerate(nodes):
        matrix[name_a][name_a] = "X"
        for name_b, bdfs_b in nodes[i + 1:]:
            if set(bdfs_a) & set(bdfs_b):
                cls = "X"
            else:  # a drive with several paths: the best one (the kernel's numa iopolicy picks it)
                cls = min((tree.link_class(a, b) for a in bdfs_a for b in bdfs_b), key=class_rank)
            matrix[name_a][name_b] = matrix[name_b][name_a] = cls
    return matrix


def _best(matrix, source, candidates):
    """Candidates of the best (lowest) class to ``source``, or [] when the best is SYS."""
    if not candidates:
        return []
    ranked = [(class_rank(matrix[source][c]), c) for c in candidates]
    best = min(rank for rank, dummy in ranked)
    if LINK_CLASSES[best] == "SYS":
        return []
    return [c for rank, c in ranked if rank == best]


def affinity_groups(matrix, gpus, nvme, nics):
    """The affinity groups (docs/architecture.md): each GPU linked to the data drives of its best
    class (unless SYS); the groups are the connected components of that GPU-NVMe graph; a group's
    NICs are, for each of its GPUs, the NICs of best class (unless SYS)."""
    data = [d["name"] for d in nvme if not d["system"]]
    chosen = {g["index"]: _best(matrix, "GPU%d" % g["index"], data) for g in gpus}
    parent = {("gpu", g["index"]): ("gpu", g["index"]) for g in gpus}
    parent.update({("nvme", d): ("nvme", d) for d in data})

    def find(node):
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for index, drives in chosen.items():
        for drive in drives:
            parent[find(("nvme", drive))] = find(("gpu", index))
    components = {}
    for g in gpus:
        components.setdefault(find(("gpu", g["index"])), []).append(g)
    nic_names = [n["name"] for n in nics]
    groups = []
    for members in sorted(components.values(), key=lambda m: m[0]["index"]):
        indices = [g["index"] for g in members]
        drives = sorted({d for i in indices for d in chosen[i]}, key=natural_key)
        nic_set = {n for i in indices for n in _best(matrix, "GPU%d" % i, nic_names)}
        numa = sorted({g["numa_node"] for g in members})
        groups.append({"id": len(groups) + 1, "gpus": indices, "nvme": drives,
                       "nics": sorted(nic_set, key=natural_key),
                       "numa_node": numa[0] if len(numa) == 1 else numa,
                       "link": _group_class(matrix, indices, drives)})
    return groups


def _group_class(matrix, indices, drives):
    """The worst class between a group's GPUs and its drives (None without drives)."""
    ranks = [class_rank(matrix["GPU%d" % i][d]) for i in indices for d in drives]
    return LINK_CLASSES[max(ranks)] if ranks else None


def pair_nics(matrix, gpus, nics):
    """Each GPU's NICs by link class, best first (then by name), as ``gpus[].nics``, and the
    best class as ``gpus[].nic_link`` (None without NICs): the NIC on the GPU's own switch
    first, the one GPUDirect RDMA should use."""
    for gpu in gpus:
        row = matrix["GPU%d" % gpu["index"]]
        ranked = sorted(nics, key=lambda n: (class_rank(row[n["name"]]), natural_key(n["name"])))
        gpu["nics"] = [n["name"] for n in ranked]
        gpu["nic_link"] = row[ranked[0]["name"]] if ranked else None


def paired_nics(topology):
    """{GPU index: [NIC name]}: the one pairing rule of GPUs and NICs (GPUDirect RDMA, the network
    mounts, the report): a GPU is paired with the NICs of its best link class (``gpus[].nic_link``,
    ties included, in ``gpus[].nics`` order), and with none when that class is SYS (every path
    crosses the CPUs' interconnect) or unknown (no matrix entry)."""
    matrix = topology.get("matrix") if isinstance(topology.get("matrix"), dict) else {}
    out = {}
    for gpu in topology.get("gpus") or []:
        best = gpu.get("nic_link")
        row = matrix.get("GPU%s" % gpu.get("index")) or {}
        names = gpu.get("nics") if isinstance(gpu.get("nics"), list) else []
        out[gpu.get("index")] = [n for n in names if best not in (None, "SYS") and row.get(n) == best]
    return out


def path_bridges(tree, gpus, nvme, nics):
    """ACS state of the bridges above GPUs, data NVMe drives and RDMA NICs.

    Those are the bridges that any GPU-storage or GPU-NIC peer-to-peer path can cross; bridges
    above system drives alone are left out. Without GPUs (a storage-only node, the QEMU guest)
    the drives' and NICs' bridges still count, since GDS traffic will cross them once GPUs land.
    """
    endpoints = [g["bdf"] for g in gpus] + [b for d in nvme if not d["system"] for b in controller_bdfs(d)]
    endpoints += [n["bdf"] for n in nics]
    seen = set()
    for bdf in endpoints:
        seen.update(tree.bridges_above(bdf))
    return [tree.acs(bdf) for bdf in sorted(seen, key=bdf_key)]


def pcie_links(tree, gpus, nvme, nics, disks=()):
    """The PCIe link state of every GPU, NVMe controller (each path of a drive), RDMA NIC, the
    PCI function under each data disk of ``disks`` (a virtio function, an HBA) and each bridge
    port between them and their root port, sorted by BDF.

    A link has two ends that show the same current speed and width: an endpoint or a switch
    upstream port sees the link to the port above it, a root or downstream port the link to the
    device below. ``partner`` is that other end, ``upstream`` the port above in the tree.
    ``expected_*`` is the best both ends support (the lower of the two maxima; a port whose other
    end is not on any path, its own), so a x4 drive below a x16-capable port expects x4.
    """
    kinds = {}
    for gpu in gpus:
        kinds[gpu["bdf"]] = "gpu"
    for drive in nvme:
        for bdf in controller_bdfs(drive):
            kinds.setdefault(bdf, "nvme")
    for nic in nics:
        kinds.setdefault(nic["bdf"], "nic")
    for disk in disks:
        kinds.setdefault(disk["bdf"], "disk")
    upstream = {}
    for bdf in list(kinds):
        chain = tree.devices[bdf].chain
        for index in range(len(chain) - 1, 0, -1):
            element = chain[index]
            if is_root_bus(element):
                break  # a nested root bus (VMD): the path to the root port ends here
            kinds.setdefault(element, "bridge")
            upstream[element] = None if is_root_bus(chain[index - 1]) else chain[index - 1]
    below = {}
    for bdf, parent in upstream.items():
        if parent is not None:
            below.setdefault(parent, []).append(bdf)
    states = {bdf: tree.link_state(bdf) for bdf in kinds}
    links = []
    for bdf in sorted(kinds, key=bdf_key):
        kind, state = kinds[bdf], states[bdf]
        port = PORT_NAMES.get(tree.port_type(bdf), "unknown") if kind == "bridge" else "endpoint"
        faces_down = kind == "bridge" and tree.port_type(bdf) in (PORT_ROOT, PORT_DOWNSTREAM)
        partners = sorted(below.get(bdf, []), key=bdf_key) if faces_down else [upstream[bdf]]
        partners = [p for p in partners if p is not None]
        problems = list(state["problems"])
        if len(problems) == len(LINK_FILES) and all(p.endswith(" is missing") for p in problems):
            # no link at all in sysfs: say so once, with why it can be, rather than four times
            problems = ["%s/{%s} are missing: no PCIe link is shown (a kernel without these files, a "
                        "conventional PCI function, or one a hypervisor emulates), so its rate is unknown"
                        % (os.path.dirname(problems[0].split(" is missing")[0]), ",".join(LINK_FILES))]
        expected = {}
        for key in ("speed_gts", "width"):
            own = state["max_" + key]
            theirs = [states[p]["max_" + key] for p in partners]
            if own is None or None in theirs:
                expected[key] = None
                if own is not None:
                    problems.append("expected %s unknown: the other end (%s) has no readable max"
                                    % (key.replace("_gts", ""), ", ".join(partners)))
            else:
                expected[key] = min([own] + theirs)
        verdicts = [state["current_" + key] < expected[key]
                    if state["current_" + key] is not None and expected[key] is not None else None
                    for key in ("speed_gts", "width")]
        degraded = True if True in verdicts else None if None in verdicts else False
        links.append({
            "bdf": bdf, "kind": kind, "port": port,
            "current_speed_gts": state["current_speed_gts"], "max_speed_gts": state["max_speed_gts"],
            "current_width": state["current_width"], "max_width": state["max_width"],
            "expected_speed_gts": expected["speed_gts"], "expected_width": expected["width"],
            "degraded": degraded, "upstream": upstream.get(bdf), "partner": partners[0] if partners else None,
            "problem": "; ".join(problems) or None,
        })
    return links


def discover(sysfs_root="/sys", procfs_root="/proc", nvml_bus_ids=None):
    """The ``gds_topology`` facts. Returns (facts, warnings)."""
    tree = PciTree(sysfs_root)
    unresolved = []
    try:
        system = system_disks(procfs_root, sysfs_root, unresolved=unresolved)
    except ProcfsError as exc:
        raise ProcfsError("%s (needed to tell system drives from data drives)" % exc)
    for target, source in unresolved:
        tree.warnings.append("%s is mounted from %s, which leads to no block device in %s: the drive "
                             "behind it cannot be flagged as a system drive" % (target, source, sysfs_root))
    gpus = find_gpus(tree, nvml_bus_ids)
    nvme = find_nvme(tree, system)
    nics = find_nics(tree)
    disks = find_disks(tree, system, nvme)
    matrix = link_matrix(tree, gpus, nvme, nics)
    pair_nics(matrix, gpus, nics)
    facts = {
        "gpus": gpus, "nvme": nvme, "nics": nics, "matrix": matrix,
        "groups": affinity_groups(matrix, gpus, nvme, nics),
        "bridges": path_bridges(tree, gpus, nvme, nics),
        "disks": disks,
        "pcie_links": pcie_links(tree, gpus, nvme, nics, [d for d in disks if d["bdf"]]),
        "numa_nodes": sorted({d.numa_node for d in tree.devices.values()}),
        "p2pdma": p2pdma_pairs(tree, gpus, nvme, nics, cpu_info(procfs_root), running_kernel_version(procfs_root)),
    }
    return facts, tree.warnings


def visibility_checks(facts, warnings):
    """Report checks for what discovery could not see: bridges of unknown ACS state (short
    config space, e.g. read without root) and every warning (skipped devices, looping links)."""
    bridges = facts.get("bridges") if isinstance(facts, dict) else None
    bridges = [b if isinstance(b, dict) else {"acs_unknown": "not a bridge entry: %r" % (b,)} for b in bridges] \
        if isinstance(bridges, list) else None
    unknown = [b for b in bridges or [] if b.get("acs_unknown")]
    warnings = warnings if isinstance(warnings, list) else None
    return [
        check("topology: ACS state readable on GPU/NVMe/NIC bridges", "WARN" if unknown else "PASS",
              0, None if bridges is None else len(unknown),
              "; ".join("%s (%s)" % (b.get("bdf"), b["acs_unknown"]) for b in unknown)),
        check("topology: sysfs and procfs read without warnings", "WARN" if warnings else "PASS",
              0, None if warnings is None else len(warnings), "; ".join(map(str, (warnings or [])[:20]))),
    ]


def affinity_table(facts):
    """The guide's Table 5 as text lines: group, GPUs (and their buses), drives, NICs, class."""
    gpu_bdf = {g["index"]: g["bdf"] for g in facts["gpus"]}
    nvme_bdf = {d["name"]: d["bdf"] for d in facts["nvme"]}
    rows = [("group", "GPU #", "GPU PCIe", "NVMe", "NVMe PCIe", "NICs", "link", "NUMA")]
    for group in facts["groups"]:
        rows.append((
            str(group["id"]), ",".join(str(i) for i in group["gpus"]),
            ",".join(_bus(gpu_bdf[i]) for i in group["gpus"]),
            ",".join(group["nvme"]) or "-", ",".join(_bus(nvme_bdf[d]) for d in group["nvme"]) or "-",
            ",".join(group["nics"]) or "-", group["link"] or "-", str(group["numa_node"]),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def _bus(bdf):
    return "0x" + bdf.split(":")[-2]


# --------------------------------------------------------------------------------------------
# The role-level verdicts of the topology (gds_facts, through the gds_topology_checks filter)
# --------------------------------------------------------------------------------------------
TOPOLOGY_COUNTS = ("gpus", "data_drives", "nics", "groups")


def expect_error(expect):
    """Why ``gds_facts_expect`` is not {count name: non-negative int}; None when it is fine."""
    if expect is None:
        return None
    if not isinstance(expect, dict):
        return "gds_facts_expect must be a dict such as {gpus: 8, data_drives: 8}, got %r" % (expect,)
    for key, want in expect.items():
        if key not in TOPOLOGY_COUNTS:
            return "gds_facts_expect: unknown key %r (known: %s)" % (key, ", ".join(TOPOLOGY_COUNTS))
        if isinstance(want, bool) or not isinstance(want, int) or want < 0:
            return ("gds_facts_expect.%s must be a whole number >= 0, got %r (gds_facts_expect maps %s to whole "
                    "numbers >= 0)" % (key, want, ", ".join(TOPOLOGY_COUNTS)))
    return None


def validate_vars(values, host=None, hosts=()):
    """The gds_facts role's variables (gds_facts_*): [message naming the variable and the value]."""
    baseline = values.get("gds_facts_link_baseline", "")
    baseline_ok = isinstance(baseline, str) and (
        baseline == "" or (baseline.startswith("/") and not baseline.endswith("/") and "/../" not in baseline + "/"))
    return [message for message in (
        expect_error(values.get("gds_facts_expect")),
        None if baseline_ok else "gds_facts_link_baseline must be an absolute file path without '..' (or empty for "
        "none), got %s" % (baseline,)) if message]


def _listed(facts, key):
    """``facts[key]`` when it is a list, else None (missing or no list: unknown)."""
    value = facts.get(key) if isinstance(facts, dict) else None
    return value if isinstance(value, list) else None


def topology_checks(topology, expect=None, profile=None, unknown_platform=None):
    """``topology: ...`` checks: the expected counts, every affinity group with a local drive, and
    whether a platform profile (the collection's profiles/, through the host's platform group) applied.
    A list the facts lack is an unknown count: it never equals an expected one. ``unknown_platform``
    ({group, known}, from the vars plugin gds_profiles): the host is in a group named like a
    platform that has no profile, so nothing can judge it: ERROR naming the known ones."""
    error = expect_error(expect)
    if error:
        raise ValueError(error)
    lists = {key: _listed(topology, key) for key in ("gpus", "nvme", "nics", "groups")}
    nvme = lists["nvme"] if all(isinstance(d, dict) for d in lists["nvme"] or []) else None
    found = {"gpus": lists["gpus"], "data_drives": None if nvme is None else [d for d in nvme if not d.get("system")],
             "nics": lists["nics"], "groups": lists["groups"]}
    found = {key: None if value is None else len(value) for key, value in found.items()}
    checks = [check("topology: " + key, "PASS" if found[key] == want else "FAIL", want, found[key],
                    None if found[key] is not None else "unknown: the gds_topology facts have no %s list"
                    % ("nvme" if key == "data_drives" else key))
              for key, want in (expect or {}).items()]
    groups = [g if isinstance(g, dict) else {} for g in lists["groups"] or []]
    ungrouped = [g.get("id") for g in groups if isinstance(g.get("nvme"), list) and not g["nvme"]]
    drive_lists = [g.get("nvme") if isinstance(g.get("nvme"), list) else None for g in groups]
    checks.append(check("topology: every group has a local drive", "WARN" if ungrouped else "PASS", 0,
                        None if lists["groups"] is None else len(ungrouped),
                        "groups without a drive: %s" % ungrouped if ungrouped else None,
                        inputs={"groups' drive lists": drive_lists}))
    if unknown_platform:
        group = unknown_platform.get("group") if isinstance(unknown_platform, dict) else unknown_platform
        known = unknown_platform.get("known") if isinstance(unknown_platform, dict) else None
        checks.append(check("topology: platform profile", "ERROR", "a platform profile", None,
                            "the host is in platform group %s, which has no profile (known: %s): no thresholds "
                            "to judge it by; put it in a known group or add profiles/%s.yml"
                            % (group, ", ".join(str(k) for k in known or []) or "none", group)))
    elif profile:
        checks.append(check("topology: platform profile", "PASS", "a platform profile", profile))
    else:
        checks.append(check("topology: platform profile", "WARN", "a platform profile", None,
                            "the host is in no platform group (dgx2, dgx_a100, dgx_h100, gh200, gpu_compat, "
                            "...): no profile applied, so the roles' defaults and no benchmark thresholds "
                            "of the platform are used"))
    return checks


# The role gds_facts: its variables, the one source of its defaults/main.yml, meta/argument_specs.yml
# and its table in docs/variables.md (make roles)
ROLE_SPEC = RoleSpec(
    'gds_facts', 'gds_facts_',
    short_description='Discover the PCIe topology, the GPU-NVMe-NIC affinity groups and the platform facts',
    description=("Sets ansible_facts['gds_topology'] (module gds_topology) and ansible_facts['gds_platform'] "
                 '(module gds_platform) for the tuning roles, and records topology checks in gds_facts_checks.',),
    variables=[
        Var('gds_facts_sysfs_root', 'path',
            'Where sysfs is mounted on the node (a simulated node points below its gds_root).',
            on_node('/sys')),
        Var('gds_facts_procfs_root', 'path',
            'Where procfs is mounted on the node; mounts, swaps and mdstat decide the system drives.',
            on_node('/proc')),
        Var('gds_facts_gpu_index_source', 'str',
            'GPU numbering: auto (NVML on a live node, else PCI order), nvml or pci.',
            'auto',
            choices=('auto', 'nvml', 'pci')),
        Var('gds_facts_expect', 'dict',
            'Expected counts for this platform ({gpus: 8, data_drives: 8, groups: 4}); keys `gpus`, `data_drives`, '
            '`nics`, `groups`, whole numbers >= 0; empty: no check.',
            {},
            options={'gpus': {'type': 'int', 'description': 'GPUs.'},
                     'data_drives': {'type': 'int', 'description': 'NVMe drives that do not hold the OS.'},
                     'nics': {'type': 'int', 'description': 'RDMA NICs.'},
                     'groups': {'type': 'int', 'description': 'Affinity groups.'}}),
        Var('gds_facts_link_baseline', 'str',
            'The PCIe link states recorded at commissioning (written by runs not in check mode); a check-mode '
            '(drift) run reports each link that changed since.',
            on_node('/var/lib/gds-commission/pcie_links.json')),
        Var('gds_facts_reuse', 'bool',
            'Keep the topology and platform facts an earlier play of the same run read (`gds_facts_checks` is set) '
            'instead of reading them again; `playbooks/bench.yml` (after `tune.yml` in `commission.yml`) and '
            '`playbooks/rdma_bench.yml` set it. The tuning roles read again what they changed, so the facts kept '
            'are current; a play with nothing read before it reads them.',
            False),
    ],
    shared=('gds_platform_profile', 'gds_root'),
    entry_points={
        'topology': EntryPoint(
            'Read the topology again and re-record its checks (after a change or a reboot)',
            variables=['gds_facts_sysfs_root', 'gds_facts_procfs_root', 'gds_facts_gpu_index_source',
                       'gds_facts_expect', 'gds_facts_link_baseline', 'gds_platform_profile']),
        'platform': EntryPoint(
            'Read the platform facts again (after a change or a reboot)',
            variables=['gds_facts_sysfs_root', 'gds_facts_procfs_root']),
        'validate': "main",
        'steps': "main",
    },
)
