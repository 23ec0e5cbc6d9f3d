# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The platform facts GDS depends on, read from procfs, sysfs and a few files of the root fs.

Kernel release and arch, the kernel command line, the IOMMU as it runs (units, groups and their
default domain type), the NVIDIA driver (version, open or proprietary kernel module, the
RegistryDwords it runs with), nvidia-fs (loaded, version, IO statistics), nvidia_peermem, P2PDMA
support, kernel modules the running kernel ships, udev data for the data drives (cuFile cannot
register a file without it), vfio-bound devices, kernel lockdown, DGX OS packages that manage ACS.

Each reader takes its root (``sysfs_root``, ``procfs_root``, ``root`` for /run, /etc, /var and
/lib) so that the same code runs on a node, a fixture tree and a VM. Nothing here fails on a
missing file: an absent file is a fact (``None`` / ``False``); only a malformed one is a warning.
"""
from __future__ import annotations

import gzip
import io
import os
import platform
import re
import zlib

from ansible_collections.gds.commission.plugins.module_utils.core.files import (
    UnreadableFile, is_live_root, listdir, read_bounded, read_text,
)
from ansible_collections.gds.commission.plugins.module_utils.hw.nvml import NvmlUnavailable, nvml_gpus
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import normalize_bdf
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import ProcfsError, base_disk, read_mdstat

P2PDMA_KERNEL = (6, 2)          # GDS P2P mode: upstream P2PDMA with the pgmap ops it needs
CONFIG_ACS_KERNEL = (6, 11)     # pci=config_acs= (commit 47c8846a49ba "PCI: Extend ACS configurability")
# 6.11 to 6.13 parse only the first device of a config_acs=/disable_acs_redir= list
# (fixed by "PCI/ACS: Fix 'pci=config_acs=' parameter" in 6.14, backported to some stable kernels)
DEVICE_LIST_BROKEN = ((6, 11), (6, 14))
DISABLE_ACS_REDIR_KERNEL = (4, 19)
GRACE_CPU_PART = "0xd4f"        # Arm Neoverse V2: the Grace CPU of GH200/GB200
PACKAGES = ("nvidia-acs-disable", "nvidia-fs", "nvidia-fs-dkms", "nvidia-gds", "dgx-release",
            "nvidia-peermem-loader")
MODULE_NAMES = ("nvidia", "nvidia_fs", "nvidia_peermem", "nv_peer_mem", "nvme_core", "nvme",
                "vfio_pci", "md_mod", "raid0")


_read = read_text
_listdir = listdir


# Node state the ACS writer refuses to act under (tune/acs.py); read with the rest of the platform
def vfio_devices(sysfs_root):
    """BDFs bound to vfio-pci (entries of /sys/bus/pci/drivers/vfio-pci)."""
    path = os.path.join(sysfs_root, "bus", "pci", "drivers", "vfio-pci")
    try:
        entries = os.listdir(path)
    except OSError:
        return []
    return sorted(entry for entry in entries if normalize_bdf(entry) == entry)


def lockdown_state(sysfs_root):
    """Kernel lockdown mode from /sys/kernel/security/lockdown (``none [integrity] confidentiality``):
    ``none``, ``integrity`` or ``confidentiality``; None when the kernel has no lockdown LSM."""
    text = read_text(os.path.join(sysfs_root, "kernel", "security", "lockdown"))
    if text is None:
        return None
    start, end = text.find("["), text.find("]")
    if start < 0 or end < start:
        return None
    return text[start + 1:end].strip() or None


def version_tuple(release):
    """``6.8.0-60-generic`` -> (6, 8, 0); None when it does not start with a version."""
    match = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?", release or "")
    if not match:
        return None
    return tuple(int(part or 0) for part in match.groups())


# --------------------------------------------------------------------------------------------
# Kernel, command line, CPU
# --------------------------------------------------------------------------------------------
def parse_cmdline(text):
    """Kernel command line -> (args, params): ``args`` in order, ``params`` {name: value}, last one
    winning (the kernel's own rule for most parameters); a bare flag has value True. Double quotes
    group words as the kernel's parser does."""
    args = []
    for match in re.finditer(r'(?:[^\s"]+|"[^"]*")+', text or ""):
        args.append(match.group(0).replace('"', ""))
    params = {}
    for arg in args:
        name, sep, value = arg.partition("=")
        params[name] = value if sep else True
    return args, params


def kernel_release(procfs_root, cmdline_params):
    """The running kernel's release: /proc/sys/kernel/osrelease, else the BOOT_IMAGE name, else uname
    (only when procfs_root is the live /proc)."""
    text = _read(os.path.join(procfs_root, "sys", "kernel", "osrelease"))
    if text and text.strip():
        return text.strip(), "osrelease"
    image = cmdline_params.get("BOOT_IMAGE")
    if isinstance(image, str):
        match = re.search(r"vmlinu[xz]-(\S+)$", image)
        if match:
            return match.group(1), "cmdline"
    if is_live_root(procfs_root, "/proc"):
        return platform.release(), "uname"
    return None, None


def running_kernel_version(procfs_root):
    """The running kernel's version tuple (kernel_release: osrelease, else the command line's
    image), or None."""
    params = parse_cmdline(_read(os.path.join(procfs_root, "cmdline")))[1]
    return version_tuple(kernel_release(procfs_root, params)[0])


def cpu_info(procfs_root):
    """{vendor, family, model, arch, grace} from /proc/cpuinfo (first processor); family is the
    x86 ``cpu family`` number (None elsewhere or unread)."""
    text = _read(os.path.join(procfs_root, "cpuinfo")) or ""
    fields = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, dummy, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    vendor = fields.get("vendor_id")
    arch = None
    if vendor:
        arch = "x86_64"
    elif "CPU implementer" in fields:
        arch = "aarch64"
        vendor = {"0x41": "ARM", "0x4e": "NVIDIA"}.get(fields["CPU implementer"].lower(),
                                                       fields["CPU implementer"])
    part = fields.get("CPU part", "").lower()
    family = fields.get("cpu family", "")
    return {"vendor": vendor, "family": int(family) if family.isdigit() else None,
            "model": fields.get("model name"), "arch": arch,
            "grace": arch == "aarch64" and part == GRACE_CPU_PART}


def machine_arch(procfs_root, cpu):
    if is_live_root(procfs_root, "/proc"):
        return platform.machine()
    return cpu["arch"]


# --------------------------------------------------------------------------------------------
# IOMMU
# --------------------------------------------------------------------------------------------
_IOMMU_PARAMS = ("intel_iommu", "amd_iommu", "iommu", "iommu.passthrough", "iommu.strict",
                 "amd_iommu_intr", "arm-smmu.disable_bypass")


def _truthy(value):
    return str(value).lower() in ("1", "y", "yes", "on", "true")


def requested_iommu_mode(params):
    """What the command line asks for: off, pt, on, or None (the kernel's built-in default)."""
    mode = None
    for name in ("intel_iommu", "amd_iommu"):
        value = str(params.get(name, ""))
        if "off" in value.split(","):
            return "off"
        if "on" in value.split(","):
            mode = "on"
    iommu = str(params.get("iommu", ""))
    if iommu == "off":
        return "off"
    passthrough = params.get("iommu.passthrough")
    if iommu == "pt" or (passthrough is not None and _truthy(passthrough)):
        return "pt"
    if iommu == "nopt" or (passthrough is not None and not _truthy(passthrough)):
        return "on"
    return mode


def iommu_state(sysfs_root, params):
    """The IOMMU as it runs: units (/sys/class/iommu), groups and their default domain types
    (``identity`` is passthrough, ``DMA``/``DMA-FQ`` translate), and the mode that follows."""
    units = _listdir(os.path.join(sysfs_root, "class", "iommu"))
    groups_dir = os.path.join(sysfs_root, "kernel", "iommu_groups")
    groups = [g for g in _listdir(groups_dir) if g.isdigit()]
    types = {}
    for group in groups:
        kind = _read(os.path.join(groups_dir, group, "type"))
        if kind:
            types[kind.strip()] = types.get(kind.strip(), 0) + 1
    requested = requested_iommu_mode(params)
    if not units and not groups:
        mode = "off"
    elif types:
        translating = sum(n for kind, n in types.items() if kind.startswith("DMA"))
        mode = "on" if translating else "pt" if types.get("identity") else "on"
    else:
        mode = "pt" if requested == "pt" else "on"
    return {"mode": mode, "requested": requested, "units": units, "groups": len(groups),
            "group_types": types,
            "cmdline": {name: params[name] for name in _IOMMU_PARAMS if name in params}}


# --------------------------------------------------------------------------------------------
# NVIDIA driver, nvidia-fs, peermem, modules
# --------------------------------------------------------------------------------------------
def parse_nvidia_version(text):
    """/proc/driver/nvidia/version -> {version, open, banner}.

    ``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build ...`` is the
    open kernel module; ``NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05 ...`` the
    proprietary one.
    """
    first = (text or "").splitlines()[0].strip() if (text or "").strip() else ""
    if not first:
        return {"version": None, "open": None, "banner": None}
    match = re.search(r"\s(\d+\.\d+(?:\.\d+)?)\s", first + " ")
    return {"version": match.group(1) if match else None, "open": "Open Kernel Module" in first,
            "banner": first}


def parse_nvidia_params(text):
    """/proc/driver/nvidia/params (``Name: value`` lines) -> dict of text values, quotes removed."""
    params = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            params[key.strip()] = value.strip().strip('"')
    return params


def registry_dwords(text):
    """``RMForceStaticBar1=1;RmForceDisableIomapWC=1;`` -> {name: value}."""
    entries = {}
    for item in (text or "").split(";"):
        key, sep, value = item.strip().partition("=")
        if key and sep:
            entries[key] = value
    return entries


def nvidia_driver(procfs_root, sysfs_root):
    info = parse_nvidia_version(_read(os.path.join(procfs_root, "driver", "nvidia", "version")))
    params = parse_nvidia_params(_read(os.path.join(procfs_root, "driver", "nvidia", "params")))
    dwords = params.get("RegistryDwords")
    info.update(loaded=os.path.isdir(os.path.join(sysfs_root, "module", "nvidia")) or info["version"] is not None,
                registry_dwords=dwords if dwords is not None else None,
                registry=registry_dwords(dwords))
    if info["version"] is None:
        version = _read(os.path.join(sysfs_root, "module", "nvidia", "version"))
        info["version"] = version.strip() if version else None
    return info


def parse_nvfs_stats(text):
    """Header of /proc/driver/nvidia-fs/stats -> {gds_version, driver_version, io_stats, peer_io_stats,
    reads, writes} (counts are None when IO stats are disabled)."""
    stats = {"gds_version": None, "driver_version": None, "io_stats": None, "peer_io_stats": None,
             "reads": None, "writes": None}
    for line in (text or "").splitlines():
        match = re.match(r"^GDS Version:\s*(\S+)", line)
        if match:
            stats["gds_version"] = match.group(1)
        match = re.match(r"^NVFS Driver\(version:\s*([\d.]+)\)", line)
        if match:
            stats["driver_version"] = match.group(1)
        match = re.match(r"^IO stats:\s*(\w+),\s*peer IO stats:\s*(\w+)", line)
        if match:
            stats["io_stats"] = match.group(1) == "Enabled"
            stats["peer_io_stats"] = match.group(2) == "Enabled"
        match = re.match(r"^(Reads|Writes)\s*:\s*n=(\d+)", line)
        if match:
            stats[match.group(1).lower()] = int(match.group(2))
    return stats


def nvidia_fs(procfs_root, sysfs_root):
    base = os.path.join(procfs_root, "driver", "nvidia-fs")
    version_text = _read(os.path.join(base, "version"))
    version = None
    if version_text:
        match = re.search(r"(\d+\.\d+(?:\.\d+)?)", version_text)
        version = match.group(1) if match else version_text.strip()
    stats_text = _read(os.path.join(base, "stats"))
    stats = parse_nvfs_stats(stats_text) if stats_text is not None else None
    param = _read(os.path.join(sysfs_root, "module", "nvidia_fs", "parameters", "rw_stats_enabled"))
    rw_stats = None
    if param is not None and param.strip().lstrip("-").isdigit():
        rw_stats = int(param.strip()) != 0
    elif stats is not None:
        rw_stats = stats["io_stats"]
    if version is None and stats is not None:
        version = stats["driver_version"]
    return {"loaded": os.path.isdir(os.path.join(sysfs_root, "module", "nvidia_fs")) or version_text is not None,
            "version": version, "proc_version": version_text is not None,
            "rw_stats_enabled": rw_stats, "stats": stats}


def loaded_modules(sysfs_root, names=MODULE_NAMES):
    """{name: bool} from /sys/module/<name> (built-in modules with parameters appear there too)."""
    return {name: os.path.isdir(os.path.join(sysfs_root, "module", name)) for name in names}


def module_parameter(sysfs_root, module, name):
    text = _read(os.path.join(sysfs_root, "module", module, "parameters", name))
    return text.strip() if text is not None else None


def shipped_modules(root, release):
    """Kernel modules the running kernel can load: names from lib/modules/<release>/modules.dep and
    modules.builtin (``-`` folded to ``_``, as modprobe does). None when modules.dep is unreadable."""
    if not release:
        return None
    base = os.path.join(root, "lib", "modules", release)
    dep = _read(os.path.join(base, "modules.dep"), limit=64 << 20)
    if dep is None:
        return None
    names = set()
    for line in dep.splitlines() + (_read(os.path.join(base, "modules.builtin"), limit=16 << 20) or "").splitlines():
        path = line.split(":", 1)[0].strip()
        if path:
            name = re.sub(r"\.ko(\.(xz|gz|zst))?$", "", os.path.basename(path))
            names.add(name.replace("-", "_"))
    return sorted(names)


def kallsyms_has(procfs_root, symbol):
    """Whether /proc/kallsyms lists a symbol (names are listed to any reader); None if unreadable."""
    path = os.path.join(procfs_root, "kallsyms")
    try:  # "ADDRESS TYPE NAME[\t[MODULE]]" a line; a kernel's is some tens of MB
        text = read_bounded(path, 256 << 20)
    except UnreadableFile:
        return None
    if re.search(rb"^\S+ \S " + re.escape(symbol.encode()) + rb"(\t|$)", text, re.MULTILINE):
        return True
    return False


def kernel_config(root, procfs_root, release, option):
    """A build option of the running kernel: True (=y or =m), False (not set), None when neither
    /boot/config-<release> nor /proc/config.gz can be read (config.gz bounded to 4 MiB unpacked)."""
    text = _read(os.path.join(root, "boot", "config-%s" % release), limit=4 << 20) if release else None
    if text is None:
        try:
            packed = read_bounded(os.path.join(procfs_root, "config.gz"), 1 << 20)
            text = gzip.GzipFile(fileobj=io.BytesIO(packed)).read(4 << 20).decode("utf-8", "replace")
        except (UnreadableFile, OSError, EOFError, zlib.error):
            return None
    match = re.search(r"^(?:%s=([ym])|# %s is not set)$" % (option, option), text, re.MULTILINE)
    return None if match is None else bool(match.group(1))


def p2pdma_support(procfs_root, kernel_version, driver, built_in=None):
    """P2PDMA prerequisites: kernel 6.2+ (or the p2pdma_pgmap_ops backport) and the running kernel
    built with it: CONFIG_PCI_P2PDMA (``built_in``, from its config) or, without a readable config,
    the p2pdma_pgmap_ops symbol, which exists only then (Debian's 6.1 and 6.12 lack both)."""
    pgmap = kallsyms_has(procfs_root, "p2pdma_pgmap_ops")
    kernel_ok = bool(kernel_version and kernel_version >= P2PDMA_KERNEL)
    built = built_in if built_in is not None else pgmap
    kernel_supported = (kernel_ok or bool(pgmap)) and built is not False
    return {"kernel": kernel_ok, "pgmap_ops": pgmap, "config": built_in, "built_in": built,
            "kernel_supported": kernel_supported, "open_driver": driver.get("open"),
            "supported": kernel_supported and driver.get("open") is True}


# --------------------------------------------------------------------------------------------
# Storage: udev data, md arrays
# --------------------------------------------------------------------------------------------
def block_dev_number(sysfs_root, name):
    text = _read(os.path.join(sysfs_root, "class", "block", name, "dev")) or \
        _read(os.path.join(sysfs_root, "block", name, "dev"))
    if text and re.match(r"^\d+:\d+$", text.strip()):
        return text.strip()
    return None


def udev_state(root, sysfs_root, block_devices):
    """/run/udev readable, and a udev database entry (/run/udev/data/b<major>:<minor>) for each
    block device that holds GDS data. cuFile looks the backing device up there; without it,
    cuFileHandleRegister fails (or falls back to compat mode)."""
    run_udev = os.path.join(root, "run", "udev")
    data_dir = os.path.join(run_udev, "data")
    readable = os.path.isdir(data_dir) and os.access(data_dir, os.R_OK | os.X_OK)
    devices = []
    for name in block_devices:
        number = block_dev_number(sysfs_root, name)
        entry = {"name": name, "dev": number, "present": False, "path": None}
        if number:
            entry["path"] = os.path.join(data_dir, "b" + number)
            entry["present"] = bool(readable and os.path.isfile(entry["path"]))
        devices.append(entry)
    return {"path": run_udev, "readable": readable, "devices": devices,
            "missing": [d["name"] for d in devices if not d["present"]]}


def with_arrays(block_devices, arrays):
    """The block devices plus the md arrays built on any of them (a file on /raid lives on md1,
    and md1 is the device cuFile looks up)."""
    names = list(block_devices)
    for array in arrays:
        if array["name"] not in names and set(array["members"]) & set(block_devices):
            names.append(array["name"])
    return names


def md_arrays(procfs_root):
    """[{name, level, state, members}] from /proc/mdstat; members as whole disks."""
    arrays = read_mdstat(procfs_root)
    return [{"name": name, "level": array["level"], "state": array["state"],
             "members": sorted({base_disk(m["device"]) for m in array["members"]})}
            for name, array in sorted(arrays.items())]


# --------------------------------------------------------------------------------------------
# Packages, DGX OS
# --------------------------------------------------------------------------------------------
def dpkg_packages(root, names=PACKAGES):
    """{name: version} of installed packages among ``names`` (var/lib/dpkg/status); None without dpkg."""
    text = _read(os.path.join(root, "var", "lib", "dpkg", "status"), limit=256 << 20)
    if text is None:
        return None
    found = {}
    for stanza in text.split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line[:1] not in (" ", "\t") and ":" in line:
                key, dummy, value = line.partition(":")
                fields[key.strip()] = value.strip()
        name = fields.get("Package")
        if name in names and fields.get("Status", "").endswith(" installed"):
            found[name] = fields.get("Version")
    return found


def dgx_release(root):
    text = _read(os.path.join(root, "etc", "dgx-release"))
    if text is None:
        return None
    release = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            release[key.strip()] = value.strip().strip('"')
    return release


# --------------------------------------------------------------------------------------------
# GPUs
# --------------------------------------------------------------------------------------------
def gpu_facts(source, driver, pynvml=None):
    """(gpus, nvml) from NVML: [{index, bdf, name, uuid, memory_total_bytes, bar1_total_bytes,
    driver_version, open_kernel_module}] and {used, reason}. ``source`` is nvml/none; a failure with
    ``nvml`` raises NvmlUnavailable."""
    if source == "none":
        return [], {"used": False, "reason": "gpu_source is none"}
    gpus = nvml_gpus(pynvml)
    for gpu in gpus:
        gpu["open_kernel_module"] = driver.get("open")
    return gpus, {"used": True, "reason": None}


# --------------------------------------------------------------------------------------------
# All together
# --------------------------------------------------------------------------------------------
def collect(sysfs_root="/sys", procfs_root="/proc", root="/", block_devices=(), gpu_source="none",
            pynvml=None):
    """The ``gds_platform`` facts. Returns (facts, warnings)."""
    warnings = []
    cmdline_text = _read(os.path.join(procfs_root, "cmdline"))
    if cmdline_text is None:
        warnings.append("%s/cmdline is unreadable: kernel command line unknown" % procfs_root)
    args, params = parse_cmdline(cmdline_text)
    release, release_source = kernel_release(procfs_root, params)
    kversion = version_tuple(release)
    cpu = cpu_info(procfs_root)
    driver = nvidia_driver(procfs_root, sysfs_root)
    try:
        arrays = md_arrays(procfs_root)
    except ProcfsError as exc:
        warnings.append(str(exc))
        arrays = []
    shipped = shipped_modules(root, release)
    nvml_state = {"used": False, "reason": None}
    gpus = []
    if gpu_source != "none":
        try:
            gpus, nvml_state = gpu_facts(gpu_source, driver, pynvml)
        except NvmlUnavailable as exc:
            if gpu_source == "nvml":
                raise
            nvml_state = {"used": False, "reason": str(exc)}
    if gpus and driver["version"] is None:
        driver["version"] = gpus[0].get("driver_version")
    facts = {
        "kernel": {"release": release, "release_source": release_source,
                   "version": list(kversion) if kversion else None},
        "arch": machine_arch(procfs_root, cpu),
        "cpu": cpu,
        "cmdline": {"text": (cmdline_text or "").strip(), "args": args},
        "iommu": iommu_state(sysfs_root, params),
        "nvidia_driver": driver,
        "gpus": gpus,
        "nvml": nvml_state,
        "nvidia_fs": nvidia_fs(procfs_root, sysfs_root),
        "modules": {"loaded": loaded_modules(sysfs_root),
                    "shipped": None if shipped is None else {name: name in shipped for name in MODULE_NAMES},
                    "peermem": _peermem_name(shipped, sysfs_root)},
        "nvme_multipath": module_parameter(sysfs_root, "nvme_core", "multipath"),
        "p2pdma": p2pdma_support(procfs_root, kversion, driver,
                                 kernel_config(root, procfs_root, release, "CONFIG_PCI_P2PDMA")),
        "acs_cmdline": {
            "config_acs": bool(kversion and kversion >= CONFIG_ACS_KERNEL),
            "device_lists": bool(kversion) and not (DEVICE_LIST_BROKEN[0] <= kversion[:2] < DEVICE_LIST_BROKEN[1]),
            "disable_acs_redir": bool(kversion and kversion >= DISABLE_ACS_REDIR_KERNEL)},
        "udev": udev_state(root, sysfs_root, with_arrays(block_devices, arrays)),
        "md_arrays": arrays,
        "vfio_devices": vfio_devices(sysfs_root),
        "lockdown": lockdown_state(sysfs_root),
        "packages": dpkg_packages(root),
        "dgx_release": dgx_release(root),
    }
    return facts, warnings


def _peermem_name(shipped, sysfs_root):
    """The peer-memory module this node has: nvidia_peermem (shipped with the NVIDIA driver since
    470) before nv_peer_mem (the older MLNX_OFED one); a loaded one wins; None when neither."""
    for name in ("nvidia_peermem", "nv_peer_mem"):
        if os.path.isdir(os.path.join(sysfs_root, "module", name)):
            return name
    for name in ("nvidia_peermem", "nv_peer_mem"):
        if shipped and name in shipped:
            return name
    return None
