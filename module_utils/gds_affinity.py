# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPUs, NVMe drives and RDMA NICs placed on the PCI tree, and the affinity groups between them.

``discover()`` builds the ``gds_topology`` facts of DESIGN.md section 4 from one PciTree:
gpus, nvme, nics, matrix, groups, bridges. It is the only code that decides what a GPU, a drive
or a NIC is and which of them belong together; modules and roles take its output.
"""
from __future__ import annotations

import os

from ansible.module_utils.gds_files import listdir, read_text
from ansible.module_utils.gds_pci import (
    CLASS_3D, CLASS_VGA, LINK_CLASSES, NVIDIA_VENDOR, PciTree, bdf_key,
    natural_key, normalize_bdf, _CLASS_RANK, _NAMESPACE, _PATH_DEVICE,
)
from ansible.module_utils.gds_procfs import ProcfsError, system_disks


def _read_text(path):
    text = read_text(path)
    return text.strip() if text is not None else None


def _listdir(path):
    return listdir(path, key=natural_key)


def _pci_device_of(tree, class_dir_entry):
    """BDF of the PCI function behind a /sys/class/<x>/<name> entry (its ``device`` link)."""
    real = os.path.realpath(os.path.join(class_dir_entry, "device"))
    name = os.path.basename(real)
    return name if name in tree.devices else None


# --------------------------------------------------------------------------------------------
# Devices
# --------------------------------------------------------------------------------------------
def find_gpus(tree, nvml_bus_ids=None):
    """NVIDIA display/3D functions (NVSwitches are class 0x0680 and are not GPUs).

    ``index`` follows NVML's order when ``nvml_bus_ids`` (bus ids in NVML index order) is given,
    else ascending PCI bus id, which is nvidia-smi's default order.
    """
    found = [dev for dev in tree.devices.values()
             if dev.vendor == NVIDIA_VENDOR and dev.class_code >> 8 in (CLASS_VGA, CLASS_3D)]
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


def find_nvme(tree, system):
    """NVMe namespaces (block devices) with their controller, plain or native-multipath layout."""
    root = tree.sysfs_root
    controllers = {}
    for ctrl in _listdir(os.path.join(root, "class", "nvme")):
        entry = os.path.join(root, "class", "nvme", ctrl)
        bdf = _pci_device_of(tree, entry)
        if bdf is None:
            continue  # fabrics (TCP/RDMA/FC) controllers have no local PCI function
        controllers[ctrl] = {"bdf": bdf, "model": _read_text(os.path.join(entry, "model"))}
    drives = []
    block = os.path.join(root, "block")
    for name in _listdir(block):
        if not _NAMESPACE.match(name):
            continue
        real = os.path.realpath(os.path.join(block, name))
        if not os.path.isdir(real):
            tree.warnings.append("skipping %s: dangling link" % os.path.join(block, name))
            continue
        if "nvme-subsystem" in real.split(os.sep):
            # native multipath: the head's multipath/ links name the paths nvme<S>c<C>n<N>
            paths = [p for p in _listdir(os.path.join(real, "multipath")) if _PATH_DEVICE.match(p)]
            ctrls = ["nvme" + _PATH_DEVICE.match(p).group(1) for p in paths]
        else:
            ctrls = [os.path.basename(os.path.dirname(real))]
        ctrls = [c for c in ctrls if c in controllers]
        if not ctrls:
            continue  # not PCI-attached (fabrics), or a controller we could not place
        ctrl = ctrls[0]
        sectors = _read_text(os.path.join(real, "size"))
        dev = tree.devices[controllers[ctrl]["bdf"]]
        drives.append({
            "name": name, "controller": ctrl, "controllers": ctrls, "bdf": dev.bdf,
            "numa_node": dev.numa_node, "model": controllers[ctrl]["model"],
            "size_bytes": int(sectors) * 512 if sectors and sectors.isdigit() else None,
            "system": name in system, "switch": tree.switch_of(dev.bdf),
        })
    # PCI NVMe controllers with no namespace still matter for placement (and ACS): keep them
    # visible in the warnings rather than silently dropping them.
    named = {d["controller"] for d in drives}
    for ctrl in sorted(set(controllers) - named, key=natural_key):
        tree.warnings.append("NVMe controller %s (%s) has no namespace block device"
                             % (ctrl, controllers[ctrl]["bdf"]))
    return drives


def find_nics(tree):
    """RDMA devices (/sys/class/infiniband) on PCI, with their first network interface."""
    nics = []
    root = os.path.join(tree.sysfs_root, "class", "infiniband")
    for name in _listdir(root):
        bdf = _pci_device_of(tree, os.path.join(root, name))
        if bdf is None:
            continue  # soft RoCE/iWARP devices have no PCI function of their own
        dev = tree.devices[bdf]
        netdevs = _listdir(os.path.join(dev.path, "net"))
        nics.append({"name": name, "netdev": netdevs[0] if netdevs else None, "bdf": bdf,
                     "numa_node": dev.numa_node, "switch": tree.switch_of(bdf)})
    return nics


# --------------------------------------------------------------------------------------------
# Relations
# --------------------------------------------------------------------------------------------
def link_matrix(tree, gpus, nvme, nics):
    """{A: {B: CLASS}} over GPU<index>, NVMe names and NIC names; ``X`` on the diagonal."""
    nodes = ([("GPU%d" % g["index"], g["bdf"]) for g in gpus]
             + [(d["name"], d["bdf"]) for d in nvme] + [(n["name"], n["bdf"]) for n in nics])
    matrix = {name: {} for name, _ in nodes}
    for i, (name_a, bdf_a) in enumerate(nodes):
        matrix[name_a][name_a] = "X"
        for name_b, bdf_b in nodes[i + 1:]:
            cls = "X" if bdf_a == bdf_b else tree.link_class(bdf_a, bdf_b)
            matrix[name_a][name_b] = matrix[name_b][name_a] = cls
    return matrix


def _best(matrix, source, candidates):
    """Candidates of the best (lowest) class to ``source``, or [] when the best is SYS."""
    if not candidates:
        return []
    ranked = [(_CLASS_RANK[matrix[source][c]], c) for c in candidates]
    best = min(rank for rank, _ in ranked)
    if LINK_CLASSES[best] == "SYS":
        return []
    return [c for rank, c in ranked if rank == best]


def affinity_groups(matrix, gpus, nvme, nics):
    """DESIGN.md's groups: each GPU linked to the data drives of its best class (unless SYS);
    the groups are the connected components of that GPU-NVMe graph; a group's NICs are, for each
    of its GPUs, the NICs of best class (unless SYS)."""
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
    ranks = [_CLASS_RANK[matrix["GPU%d" % i][d]] for i in indices for d in drives]
    return LINK_CLASSES[max(ranks)] if ranks else None


def path_bridges(tree, gpus, nvme, nics):
    """ACS state of the bridges above GPUs, data NVMe drives and RDMA NICs.

    Those are the bridges that any GPU-storage or GPU-NIC peer-to-peer path can cross; bridges
    above system drives alone are left out. Without GPUs (a storage-only node, the QEMU guest)
    the drives' and NICs' bridges still count, since GDS traffic will cross them once GPUs land.
    """
    endpoints = [g["bdf"] for g in gpus] + [d["bdf"] for d in nvme if not d["system"]]
    endpoints += [n["bdf"] for n in nics]
    seen = set()
    for bdf in endpoints:
        seen.update(tree.bridges_above(bdf))
    return [tree.acs(bdf) for bdf in sorted(seen, key=bdf_key)]


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
    matrix = link_matrix(tree, gpus, nvme, nics)
    facts = {
        "gpus": gpus, "nvme": nvme, "nics": nics, "matrix": matrix,
        "groups": affinity_groups(matrix, gpus, nvme, nics),
        "bridges": path_bridges(tree, gpus, nvme, nics),
        "numa_nodes": sorted({d.numa_node for d in tree.devices.values()}),
    }
    return facts, tree.warnings


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
