# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GDS driver mode: the ``driver: ...`` checks of the gds_driver role (through the
gds_driver_checks and gds_driver_reboot_pending filters) from the gds_platform facts: the NVIDIA
module, nvidia-fs or the P2PDMA prerequisites and module options, and the udev data cuFile needs
for every data drive (also judged per benchmark file, ``udev_record_check``)."""
from __future__ import annotations

import os

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.spec import EntryPoint, RoleSpec, Var, on_node
from ansible_collections.gds.commission.plugins.module_utils.hw.p2pdma import kernel_parameter
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import controller_bdfs


P2PDMA_DWORDS = {"RMForceStaticBar1": "1", "RmForceDisableIomapWC": "1"}
MULTIPATH_OFF = ("N", "n", "0")


def _x86(platform):
    return (platform.get("arch") or "x86_64") != "aarch64"


def _member(facts, key):
    """``facts[key]`` when it is a dict, else {} (every fact in it then unknown)."""
    value = facts.get(key) if isinstance(facts, dict) else None
    return value if isinstance(value, dict) else {}


def _dwords_ok(platform):
    registry = _member(_member(platform, "nvidia_driver"), "registry")
    return all(registry.get(key) == value for key, value in P2PDMA_DWORDS.items())


def driver_reboot_pending(platform, mode):
    """The P2PDMA module options the running drivers do not have yet (they apply at the next load)."""
    if mode != "p2pdma":
        return []
    pending = []
    if _x86(platform) and not _dwords_ok(platform):
        pending.append("NVreg_RegistryDwords")
    if platform.get("nvme_multipath") not in MULTIPATH_OFF:
        pending.append("nvme_core multipath=N")
    return pending


MODE_DETAIL = {"nvfs": "GPUDirect through the nvidia-fs kernel module",
               "p2pdma": "GPUDirect through the kernel P2PDMA (no nvidia-fs)",
               "compat": "cuFile uses POSIX I/O through host memory: no GPUDirect"}


def _items(value):
    """A fact that should be a list: itself, else [] (an unreadable fact judges nothing)."""
    return value if isinstance(value, list) else []


def group_pairs(topology):
    """(GPU bdf, drive controller bdf, drive name) of every GPU and data drive of one affinity group."""
    topology = topology if isinstance(topology, dict) else {}
    gpu_bdf = {g.get("index"): g.get("bdf") for g in _items(topology.get("gpus")) if isinstance(g, dict)}
    drives = {d.get("name"): d for d in _items(topology.get("nvme")) if isinstance(d, dict)}
    for group in _items(topology.get("groups")):
        for index in _items(group.get("gpus") if isinstance(group, dict) else None):
            for name in _items(group.get("nvme")):
                for bdf in controller_bdfs(drives.get(name)) or [None]:  # None: a pair it cannot judge
                    yield gpu_bdf.get(index), bdf, name


def p2pdma_pairs_check(topology):
    """``driver: P2PDMA pairs``: what the kernel will decide (hw/p2pdma.py, the gds_topology facts'
    ``p2pdma``) for each GPU and data drive of one affinity group. A pair it refuses fails GDS's
    P2PDMA mode for that drive: FAIL, naming the pair, the reason and the kernel parameter that
    clears the ACS it found; a pair it could not judge leaves the check short of PASS."""
    facts = _member(topology if isinstance(topology, dict) else {}, "p2pdma")
    decided = {(p.get("provider"), p.get("client")): p for p in _items(facts.get("pairs")) if isinstance(p, dict)}
    wanted = list(group_pairs(topology))
    if not wanted:
        return check("driver: P2PDMA pairs", "SKIP", "allowed", None, "no GPU and data drive share an affinity group")
    maps, problems = {}, []
    for gpu, client, name in wanted:
        pair = decided.get((gpu, client)) or {"map": None, "reason": "no prediction in the gds_topology facts"}
        judged = pair.get("map") if pair.get("map") in ("bus_address", "host_bridge", "refused") else None
        maps["%s<-%s" % (gpu, client)] = judged
        if judged != "bus_address" and judged != "host_bridge":
            problems.append("GPU %s <- %s (%s): %s: %s%s" % (
                gpu, name, client, judged or "unknown", pair.get("reason"),
                "; boot with %s" % kernel_parameter(pair) if kernel_parameter(pair) else ""))
    refused = [m for m in maps.values() if m == "refused"]
    shown = [m or "unknown" for m in maps.values()]
    counts = ", ".join("%d %s" % (shown.count(m), m) for m in sorted(set(shown)))
    return check("driver: P2PDMA pairs", "FAIL" if refused else "PASS", "bus_address or host_bridge", counts,
                 "; ".join(problems[:8]) or "the kernel routes every GPU-drive pair of the affinity groups (%s)"
                 % facts.get("whitelist"), inputs=maps)


def driver_checks(platform, mode, gpus=0, rw_stats=True, live=True, reboot_ok=False, topology=None):
    """``driver: ...`` checks from the gds_platform facts: the NVIDIA module, the GDS mode and what
    it needs (nvidia-fs and its IO statistics, or the P2PDMA prerequisites, module options and the
    kernel's decision for the affinity groups' pairs from the gds_topology facts ``topology``), the
    GPU peer-memory module for RDMA NICs, and the udev data cuFile needs for every data drive."""
    drv = _member(platform, "nvidia_driver")
    reboot_note = "" if reboot_ok else " (gds_reboot_ok is false)"
    checks = []
    if drv.get("loaded"):
        flavour = " open" if drv.get("open") else " proprietary" if drv.get("open") is False else ""
        checks.append(check("driver: NVIDIA kernel module", "PASS", "loaded", "%s%s" % (drv.get("version") or "loaded", flavour),
                            drv.get("banner"), inputs={"loaded": drv.get("loaded")}))
    else:
        checks.append(check("driver: NVIDIA kernel module", "FAIL" if gpus else "SKIP", "loaded", "not loaded",
                            "no /proc/driver/nvidia/version" + ("" if gpus else " (no GPU on this node)")))
    checks.append(check("driver: GDS mode", "WARN" if mode == "compat" else "PASS", mode, mode, MODE_DETAIL[mode]))
    if mode == "nvfs":
        fs = _member(platform, "nvidia_fs")
        checks.append(check("driver: nvidia-fs loaded", "PASS" if fs.get("loaded") and fs.get("proc_version") else "FAIL",
                            "loaded, /proc/driver/nvidia-fs/version",
                            fs.get("version") or ("loaded" if fs.get("loaded") else "not loaded"),
                            None if fs.get("proc_version") else "no /proc/driver/nvidia-fs/version",
                            inputs={"loaded": fs.get("loaded"), "proc_version": fs.get("proc_version")}))
        if rw_stats:
            on = fs.get("rw_stats_enabled")
            checks.append(check("driver: nvidia-fs IO statistics", "PASS" if on else "WARN", True, on,
                                "rw_stats_enabled=1: the benchmark can prove the GDS path" if on
                                else "rw_stats_enabled is off: nvidia-fs counters stay at 0"))
    elif mode == "p2pdma":
        p2p = _member(platform, "p2pdma")
        built = {True: "CONFIG_PCI_P2PDMA", False: "built without CONFIG_PCI_P2PDMA", None: "CONFIG_PCI_P2PDMA unread"}
        checks.append(check("driver: P2PDMA support", "PASS" if p2p.get("supported") else "FAIL",
                            "kernel 6.2+ or p2pdma_pgmap_ops with CONFIG_PCI_P2PDMA, open kernel module",
                            "%s (%s), %s" % (_member(platform, "kernel").get("release") or "?",
                                             built.get(p2p.get("built_in"), "?"),
                                             "open" if drv.get("open") else "proprietary"),
                            inputs={"supported": p2p.get("supported"), "built_in": p2p.get("built_in")}))
        if _x86(platform):
            ok = _dwords_ok(platform)
            judged = {key: _member(drv, "registry").get(key) for key in P2PDMA_DWORDS}
            shown = drv.get("registry_dwords")
            checks.append(check("driver: NVreg_RegistryDwords", "PASS" if ok else "WARN",
                                "".join("%s=%s;" % item for item in P2PDMA_DWORDS.items()),
                                shown if shown is not None else "".join("%s=%s;" % item for item in judged.items()),
                                None if ok else "gds-p2pdma.conf applies at the next load of the nvidia module" + reboot_note,
                                inputs=judged))
        if topology is not None:
            checks.append(p2pdma_pairs_check(topology))
        multipath = platform.get("nvme_multipath")
        ok = multipath in MULTIPATH_OFF
        checks.append(check("driver: nvme_core multipath", "PASS" if ok else "WARN", "N", multipath,
                            None if ok else "gds-p2pdma.conf applies at the next boot" + reboot_note))
    checks.append(udev_check(_member(platform, "udev")))
    return checks


def udev_remedy(record, device=None):
    """What to do about a missing udev record ``record`` (/run/udev/data/b<major>:<minor>): udevd
    writes it on a change event; the product never writes or deletes udev records itself."""
    target = "/dev/%s" % device if device else "the block device"
    return ("Check with `udevadm info %s`; `udevadm trigger --action=change %s` makes systemd-udevd "
            "write %s (in a container: udevd runs on the host, whose /run/udev must be mounted in)"
            % (target, target, record))


def udev_record_check(name, record, devno):
    """``bench: JOB: udev record``: the record of the block device ``devno`` (major, minor) that
    holds a benchmark's files; cuFile cannot register a file there without it."""
    if record is None:
        return None
    device = ":".join(map(str, devno)) if isinstance(devno, (list, tuple)) else str(devno)
    if not isinstance(record, str):
        return check(name, "SKIP", "present", "unknown", "the udev record of block device %s is unknown: %r"
                     % (device, record))
    if os.path.exists(record):
        return check(name, "PASS", "present", record, inputs={"block device": devno})
    return check(name, "FAIL", "present", "missing",
                 "%s is missing: cuFile cannot register files on block device %s and fails or falls "
                 "back to compat mode. %s" % (record, device, udev_remedy(record)))


def udev_check(udev):
    """``driver: udev data for data drives``: cuFile looks the block device behind a file up in the
    udev database (/run/udev/data/b<major>:<minor>) and cannot register the file without it. The
    remedy belongs to udevd (a change event makes it write the record); this check only says so."""
    udev = udev if isinstance(udev, dict) else {}
    devices = udev.get("devices") or []
    missing = udev.get("missing")
    name = "driver: udev data for data drives"
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        return check(name, "SKIP", "the data drives", "unknown", "the gds_platform facts list no data drives: %r"
                     % (devices,))
    if not devices:
        return check(name, "SKIP", 0, 0, "no data drive")
    missing = missing if isinstance(missing, list) else None
    present = None if missing is None else len(devices) - len(missing)
    if udev.get("readable") and not missing:
        return check(name, "PASS", len(devices), present, inputs={"readable": udev.get("readable")})
    missing = missing or []
    path = udev.get("path") or "/run/udev"
    if not udev.get("readable"):
        detail = ("%s/data is missing or unreadable: cuFile cannot register files on the data drives and "
                  "fails or falls back to compat mode. Check that systemd-udevd runs and, in a container, "
                  "that the host's /run/udev is mounted into it (read-only is enough)" % path)
    else:
        numbers = {d.get("name"): d.get("dev") for d in devices}
        first = missing[0]
        record = "%s/data/b%s" % (path, numbers.get(first)) if numbers.get(first) else "its record in %s/data" % path
        detail = ("no udev entry for %s: cuFile cannot register files there and fails or falls back to "
                  "compat mode. %s"
                  % (", ".join("%s (%s)" % (m, numbers.get(m) or "no dev number") for m in missing),
                     udev_remedy(record, first)))
    return check(name, "FAIL", len(devices), present, detail)


# The role gds_driver: its variables, the one source of its defaults/main.yml, meta/argument_specs.yml
# and its table in docs/variables.md (make roles)
ROLE_SPEC = RoleSpec(
    'gds_driver', 'gds_driver_',
    short_description='Put the GDS driver path in place (nvidia-fs, P2PDMA or compat) and check its prerequisites',
    description=('nvfs loads nvidia-fs persistently with IO statistics on; p2pdma checks the kernel, the open '
                 'NVIDIA kernel module, the module options and refuses md RAID; compat loads nothing.',
                 'Checks that every data drive has udev data (cuFile needs it to register files).',
                 'Records driver checks in gds_driver_checks and sets gds_driver_reboot_required.',),
    variables=[
        Var('gds_driver_mode', 'str',
            'GDS I/O path: nvfs (nvidia-fs kernel module), p2pdma (upstream P2PDMA, CUDA 12.8+) or compat (POSIX, '
            'no GPUDirect).',
            "{{ gds_mode | default('nvfs') }}",
            choices=('nvfs', 'p2pdma', 'compat')),
        Var('gds_driver_nvfs_rw_stats', 'bool',
            'Load nvidia-fs with rw_stats_enabled=1, so that benchmarks can prove the GDS path from its counters.',
            True),
        Var('gds_driver_p2pdma_configure', 'bool',
            'In p2pdma mode, write the module options P2PDMA needs (x86 NVreg_RegistryDwords, nvme_core multipath=N).',
            True),
        Var('gds_driver_update_initramfs', 'bool',
            'Refresh the initramfs (update-initramfs -u) when module options changed (nvme_core and nvidia may '
            'load from it).',
            True),
        Var('gds_driver_modprobe_dir', 'path',
            'Directory of the module options on the node.',
            on_node('/etc/modprobe.d')),
        Var('gds_driver_modules_load_dir', 'path',
            'Directory of the modules loaded at boot on the node.',
            on_node('/etc/modules-load.d')),
    ],
    shared=('gds_mode', 'gds_root', 'gds_live'),
    entry_points={
        'verify': EntryPoint(
            'Read the node again (after a reboot) and re-record the driver checks',
            variables=['gds_driver_mode']),
        'validate': "main",
        'steps': "main",
    },
)
