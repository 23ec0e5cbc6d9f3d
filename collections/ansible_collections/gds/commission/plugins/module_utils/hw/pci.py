# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one model of the PCI tree, read from sysfs.

Everything the product decides about placement comes from here: which GPUs, NVMe drives and RDMA
NICs exist, where they sit (the chain of bridges from their host bridge down), how two of them are
linked in nvidia-smi's terms (PIX/PXB/PHB/NODE/SYS), the GPU-NVMe-NIC affinity groups, and the
bridges on those paths with their ACS state. The model reads sysfs once; all later steps take the
resulting facts, never sysfs again.

The device "chain" is the sysfs path below /sys/devices, e.g. for the DGX-2's GPU 0
``('pci0000:2b', '0000:2b:00.0', '0000:2c:00.0', '0000:2d:04.0', '0000:32:00.0', '0000:33:00.0',
'0000:34:00.0')``: a root bus (one host bridge), then bridges, then the device. Intel VMD nests a
second root bus (``pci10000:00``) below the VMD endpoint; the chain keeps it.
"""
from __future__ import annotations

import os
import re
import struct

from ansible_collections.gds.commission.plugins.module_utils.core.numbers import is_figure
from ansible_collections.gds.commission.plugins.module_utils.core.files import (
    UnreadableFile, listdir, read_bounded, read_file, resolve,
)

NVIDIA_VENDOR = 0x10DE
CLASS_VGA = 0x0300
CLASS_3D = 0x0302
CLASS_NVME = 0x010802
CLASS_BRIDGE_PCI = 0x0604

# PCIe capability port types (PCIe spec 7.5.3.2, Device/Port Type field)
PORT_ROOT = 4
PORT_UPSTREAM = 5
PORT_DOWNSTREAM = 6
PORT_PCI_BRIDGE = 7
PORT_NAMES = {0: "endpoint", 1: "legacy_endpoint", 4: "root_port", 5: "upstream",
              6: "downstream", 7: "pcie_to_pci", 8: "pci_to_pcie", 9: "rc_endpoint",
              10: "rc_event_collector"}

CAP_ID_PCIE = 0x10
ECAP_ID_ACS = 0x000D
ECAP_START = 0x100

# nvidia-smi's link classes, best first.
LINK_CLASSES = ("PIX", "PXB", "PHB", "NODE", "SYS")
_CLASS_RANK = {name: rank for rank, name in enumerate(LINK_CLASSES)}


def class_rank(cls):
    """Position of a link class, best (PIX) first; anything else ranks after SYS."""
    return _CLASS_RANK.get(cls, len(LINK_CLASSES))


# Link speeds as the kernel prints them (drivers/pci/pci.h PCIE_SPEED2STR: "16.0 GT/s PCIe";
# kernels before 4.20 "8 GT/s"; "Unknown" or "Unknown speed" when the speed field is reserved).
_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s\b")
SPEED_GENS = ((2.5, 1), (5.0, 2), (8.0, 3), (16.0, 4), (32.0, 5), (64.0, 6))
LINK_FILES = ("current_link_speed", "max_link_speed", "current_link_width", "max_link_width")
# The AER counter files of a function (drivers/pci/pcie/aer.c), in report order: the counter's
# key, the file, and the line of an aer_dev_* file that holds its total (None: a root port's
# aer_rootport_total_err_* file is one number)
AER_FILES = (("correctable", "aer_dev_correctable", "TOTAL_ERR_COR"),
             ("nonfatal", "aer_dev_nonfatal", "TOTAL_ERR_NONFATAL"),
             ("fatal", "aer_dev_fatal", "TOTAL_ERR_FATAL"),
             ("rootport_correctable", "aer_rootport_total_err_cor", None),
             ("rootport_nonfatal", "aer_rootport_total_err_nonfatal", None),
             ("rootport_fatal", "aer_rootport_total_err_fatal", None))
AER_FILE_NAMES = dict((key, name) for key, name, dummy in AER_FILES)

# a PCI address: domain (4 digits, 8 behind Intel VMD; 0000 when left out), bus, device, function
_BDF = re.compile(r"^(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
# a PCI address as sysfs names a device and normalize_bdf writes one: the domain always there
BDF_PATTERN = r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$"
_ROOT_BUS = re.compile(r"^pci([0-9a-f]{4,8}):([0-9a-f]{2})$")


class TopologyError(Exception):
    """sysfs cannot be read at all (the message names the path)."""


def bdf_key(bdf):
    """Sort key for a BDF: numeric domain, bus, device, function."""
    match = _BDF.match(bdf)
    if not match:
        return (1 << 32, bdf)
    return tuple(int(part or "0", 16) for part in match.groups())


def controller_bdfs(drive):
    """The PCI addresses a drive of the gds_topology facts is reached through: each path's
    controller (a dual-port drive has two), else the drive's own; sorted, each once. An entry
    that is not a dict, or an address that is not a string, is left out."""
    drive = drive if isinstance(drive, dict) else {}
    paths = drive.get("paths") if isinstance(drive.get("paths"), list) else []
    bdfs = [p.get("bdf") for p in paths if isinstance(p, dict)] or [drive.get("bdf")]
    return sorted({bdf for bdf in bdfs if isinstance(bdf, str)}, key=bdf_key)


def normalize_bdf(text):
    """``00000000:34:00.0`` (NVML) or ``34:00.0`` -> ``0000:34:00.0``; None if it is no BDF."""
    match = _BDF.match((text or "").strip().lower())
    if not match:
        return None
    domain, bus, dev, fn = match.groups()
    return "%04x:%s:%s.%s" % (int(domain or "0", 16), bus, dev, fn)


def is_root_bus(element):
    """True for a chain element that is a root bus (``pci0000:00``, VMD's ``pci10000:00``)."""
    return bool(_ROOT_BUS.match(element or ""))


def speed_gts(text):
    """A link speed file's text -> GT/s as a float; None for "Unknown" or anything else."""
    match = _SPEED.match(text or "")
    return float(match.group(1)) if match else None


def gen_of_speed(gts):
    """GT/s -> PCIe generation (2.5 -> 1 ... 64 -> 6); None when it is no generation's rate."""
    if not is_figure(gts):  # text, NaN, a boolean: no rate
        return None
    for rate, gen in SPEED_GENS:
        if abs(gts - rate) < 0.01:
            return gen
    return None


def speed_of_gen(gen):
    """PCIe generation -> GT/s; None when unknown."""
    return dict((g, rate) for rate, g in SPEED_GENS).get(gen)


def encoding(gen):
    """Payload share of the bits on the wire for PCIe generation ``gen``: 8b/10b for Gen1/Gen2,
    128b/130b for Gen3 to Gen5, 242/256 for Gen6's FLIT mode."""
    if gen is None:
        return None
    if gen <= 2:
        return 8 / 10.0
    if gen <= 5:
        return 128 / 130.0
    return 242 / 256.0


def link_bytes_per_s(speed_gts, width):
    """Bytes a second one direction of a link carries (Gen5 x16 ~ 63 GB/s, Gen4 x4 ~ 7.9 GB/s);
    None when speed or width is unknown: no generation's rate, or a width that is no lane count
    (a whole number 1 to 32: never NaN, text or negative)."""
    gen = gen_of_speed(speed_gts)
    if gen is None or isinstance(width, bool) or not isinstance(width, int) or not 1 <= width <= 32:
        return None
    return speed_gts * 1e9 * width * encoding(gen) / 8


def pci_function_in_path(path, known=None):
    """The nearest PCI function at or above a sysfs device directory (a virtio disk or netdev
    sits below its virtio device, which sits below the PCI function): an element of ``known``
    (the model's devices) when given, else any element that is a BDF; None when there is none."""
    def is_function(part):
        return part in known if known is not None else normalize_bdf(part) == part

    return next((part for part in reversed(path.split(os.sep)) if is_function(part)), None)


def read_link_file(dev_path, name):
    """(value, problem) of one link attribute: a float for the speeds, an int for the widths.

    value None: the problem says why, naming the file (missing: no PCIe capability or an older
    kernel; "Unknown"; a width of 0, which the kernel prints while the link is down; unreadable).
    """
    path = os.path.join(dev_path, name)
    if not os.path.lexists(path):
        return None, "%s is missing" % path
    try:
        text = read_file(path, limit=256).strip()
    except UnreadableFile as exc:
        return None, str(exc)
    if name.endswith("_speed"):
        value = speed_gts(text)
        return (value, None) if value else (None, "%s reads %r, not a speed" % (path, text[:40]))
    if not text.isdigit():
        return None, "%s reads %r, not a width" % (path, text[:40])
    if int(text) == 0:
        return None, "%s reads 0 (link down or width unknown)" % path
    return int(text), None


def read_aer_file(path, total_line=None):
    """One AER counter file -> int, or None when missing or unreadable/malformed.

    ``total_line``: the line of an aer_dev_* file that holds the total; without it the file is
    one number (aer_rootport_total_err_*).
    """
    try:
        text = read_file(path, limit=8192)
    except UnreadableFile:
        return None
    for line in text.splitlines():
        fields = line.split()
        if total_line is None and len(fields) == 1 and fields[0].isdigit():
            return int(fields[0])
        if total_line is not None and len(fields) == 2 and fields[0] == total_line and fields[1].isdigit():
            return int(fields[1])
    return None


def aer_counters(sysfs_root, bdf):
    """{correctable, nonfatal, fatal, rootport_correctable, rootport_nonfatal, rootport_fatal}
    of one function, from /sys/bus/pci/devices/<bdf>; None where the file is missing (no AER
    capability, not a root port) or unreadable."""
    base = os.path.join(sysfs_root, "bus", "pci", "devices", bdf)
    return dict((key, read_aer_file(os.path.join(base, name), total)) for key, name, total in AER_FILES)


# --------------------------------------------------------------------------------------------
# Config space
# --------------------------------------------------------------------------------------------
def find_pcie_port_type(config):
    """Device/Port Type from the PCIe capability in a config-space image, or None."""
    if len(config) < 0x40:
        return None
    status = struct.unpack_from("<H", config, 0x06)[0]
    if not status & 0x10:  # no capability list
        return None
    pointer = config[0x34] & 0xFC
    for dummy in range(48):  # the list lives in 0x40..0xff: at most 48 entries
        if pointer < 0x40 or pointer + 4 > len(config):
            return None
        cap_id, next_ptr = config[pointer], config[pointer + 1] & 0xFC
        if cap_id == CAP_ID_PCIE:
            return (struct.unpack_from("<H", config, pointer + 2)[0] >> 4) & 0xF
        if not next_ptr:
            return None
        pointer = next_ptr
    return None


def find_ext_capability(config, cap_id):
    """Offset of an extended capability (walked from 0x100), or None.

    Raises ValueError when the image is too short to hold the extended config space: sysfs
    gives an unprivileged reader 64 bytes, and a short or empty file must not look like "no
    ACS". Only a conventional PCI function (no PCIe capability) has a 256-byte config space and
    no extended capabilities at all.
    """
    if len(config) < 4096:
        if len(config) == 256 and find_pcie_port_type(config) is None:
            return None
        raise ValueError("config space is %d bytes, extended capabilities need 4096" % len(config))
    offset = ECAP_START
    for dummy in range((4096 - ECAP_START) // 4):
        if offset < ECAP_START or offset + 4 > len(config):
            return None
        header = struct.unpack_from("<I", config, offset)[0]
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == cap_id:
            return offset
        offset = (header >> 20) & 0xFFC
        if not offset:
            return None
    return None


def read_acs(config):
    """(acs_offset, acs_cap, acs_ctrl) from a config-space image; offset None without ACS."""
    offset = find_ext_capability(config, ECAP_ID_ACS)
    if offset is None or offset + 8 > len(config):
        return None, None, None
    cap, ctrl = struct.unpack_from("<HH", config, offset + 4)
    return offset, cap, ctrl


def acs_state(config, path):
    """{acs_offset, acs_cap, acs_ctrl, acs_unknown} of one config-space image read from ``path``.

    ``acs_unknown`` is None when the state was read (the other values None: no ACS capability),
    else the reason, naming the file.
    """
    try:
        offset, cap, ctrl = read_acs(config)
    except ValueError as exc:
        return {"acs_offset": None, "acs_cap": None, "acs_ctrl": None,
                "acs_unknown": "%s: %s" % (path, exc)}
    return {"acs_offset": offset, "acs_cap": cap, "acs_ctrl": ctrl, "acs_unknown": None}


# --------------------------------------------------------------------------------------------
# The tree
# --------------------------------------------------------------------------------------------
class PciDevice(object):
    """One PCI function as sysfs shows it."""

    __slots__ = ("bdf", "chain", "path", "vendor", "device", "class_code", "numa_node",
                 "driver", "model")

    def __init__(self, bdf, chain, path, vendor, device, class_code, numa_node, driver):
        self.bdf = bdf
        self.chain = chain
        self.path = path
        self.vendor = vendor
        self.device = device
        self.class_code = class_code
        self.numa_node = numa_node
        self.driver = driver
        self.model = None

    @property
    def is_bridge(self):
        return self.class_code >> 8 == CLASS_BRIDGE_PCI

    @property
    def parent(self):
        """The chain element above this device: a bridge BDF or a root bus ``pciDDDD:BB``."""
        return self.chain[-2]

    def __repr__(self):
        return "PciDevice(%s, class=%06x)" % (self.bdf, self.class_code)


class PciTree(object):
    """All PCI functions under ``sysfs_root``, with the link classification between them."""

    def __init__(self, sysfs_root="/sys"):
        self.sysfs_root = sysfs_root
        self.devices = {}
        self.warnings = []
        self._element_paths = {}  # chain element -> its sysfs directory
        self._configs = {}
        self._ports = {}
        self._scan()

    # -- reading ------------------------------------------------------------------------------
    def _warn(self, message):
        self.warnings.append(message)

    def _read_attr(self, dev_path, name, base=16):
        path = os.path.join(dev_path, name)
        text = read_file(path).strip()
        try:
            return int(text, base)
        except ValueError:
            raise ValueError("%s: expected a number, read %r" % (path, text[:40]))

    def _scan(self):
        root = self.sysfs_root
        if not os.path.isdir(root):
            raise TopologyError("sysfs_root %s does not exist or is not a directory" % root)
        bus_dir = os.path.join(root, "bus", "pci", "devices")
        if not os.path.isdir(bus_dir):
            # A machine without PCI (or a container without /sys/bus/pci): nothing to find.
            self._warn("%s is missing: no PCI devices found" % bus_dir)
            return
        devices_dir = os.path.realpath(os.path.join(root, "devices"))
        for entry in sorted(os.listdir(bus_dir), key=bdf_key):
            link = os.path.join(bus_dir, entry)
            real, problem = resolve(link)
            if problem is not None or not os.path.isdir(real):
                self._warn("skipping %s: %s" % (link, problem or "%s is not a directory" % real))
                continue
            rel = os.path.relpath(real, devices_dir)
            chain = tuple(rel.split(os.sep))
            if rel.startswith("..") or not is_root_bus(chain[0]) or chain[-1] != entry:
                self._warn("skipping %s: %s is not below %s/pciDDDD:BB" % (link, real, devices_dir))
                continue
            try:
                vendor = self._read_attr(real, "vendor")
                device = self._read_attr(real, "device")
                class_code = self._read_attr(real, "class")
            except (UnreadableFile, ValueError) as exc:
                self._warn("skipping %s: %s" % (entry, _reason(exc)))
                continue
            try:
                numa = self._read_attr(real, "numa_node", base=10)
            except (UnreadableFile, ValueError) as exc:
                self._warn("%s: numa_node unreadable (%s), using -1" % (entry, _reason(exc)))
                numa = -1
            for depth in range(1, len(chain) - 1):
                self._element_paths.setdefault(chain[depth], os.path.join(devices_dir, *chain[:depth + 1]))
            driver_link = os.path.join(real, "driver")
            driver = os.path.basename(os.readlink(driver_link)) if os.path.islink(driver_link) else None
            self.devices[entry] = PciDevice(entry, chain, real, vendor, device, class_code, numa, driver)
        # A device whose numa_node is -1 inherits its closest ancestor's (older kernels set it
        # only on some functions); -1 stays where nothing above knows.
        for dev in self.devices.values():
            if dev.numa_node < 0:
                for element in reversed(dev.chain[:-1]):
                    above = self.devices.get(element)
                    if above is not None and above.numa_node >= 0:
                        dev.numa_node = above.numa_node
                        break

    # Config space and port type work for every chain element that is a PCI function: the
    # devices of the tree, and bridges the scan had to skip (class or vendor unreadable), which
    # still carry their children.
    def _element_path(self, element):
        dev = self.devices.get(element)
        return dev.path if dev is not None else self._element_paths.get(element)

    def config_path(self, element):
        path = self._element_path(element)
        return os.path.join(path, "config") if path else None

    def config(self, element):
        """The function's config-space image (bytes); b'' when unreadable (warned)."""
        if element not in self._configs:
            path = self.config_path(element)
            data = b""
            if path:
                try:
                    data = read_bounded(path, 4096, truncate=True)
                except UnreadableFile as exc:
                    self._warn("%s: cannot read %s (%s)" % (element, path, exc.reason))
            self._configs[element] = data
        return self._configs[element]

    def port_type(self, element):
        """PCIe port type of a chain element: from its PCIe capability (Device/Port Type), else
        from its place in the tree (on a root bus a root port, below a switch's upstream port a
        downstream port, else an upstream port); None for a root bus."""
        if is_root_bus(element):
            return None
        if element not in self._ports:
            port = find_pcie_port_type(self.config(element))
            if port is None:
                path = self._element_path(element)
                parent = os.path.basename(os.path.dirname(path)) if path else None
                if parent is None or is_root_bus(parent):
                    port = PORT_ROOT
                elif self.port_type(parent) == PORT_UPSTREAM:
                    port = PORT_DOWNSTREAM
                else:
                    port = PORT_UPSTREAM
            self._ports[element] = port
        return self._ports[element]

    def acs(self, bdf):
        """{bdf, port_type, acs_offset, acs_cap, acs_ctrl, acs_unknown} for one bridge (also one
        the scan skipped).

        None values with ``acs_unknown`` None: the bridge has no ACS capability. ``acs_unknown``
        set (the reason, naming the config file): the state could not be read, and a warning
        says so.
        """
        entry = {"bdf": bdf, "port_type": PORT_NAMES.get(self.port_type(bdf), "unknown")}
        entry.update(acs_state(self.config(bdf), self.config_path(bdf)))
        if entry["acs_unknown"]:
            self._warn("%s: ACS state unknown: %s" % (bdf, entry["acs_unknown"]))
        return entry

    def link_state(self, element):
        """{current_speed_gts, max_speed_gts, current_width, max_width, problems} of one function's
        PCIe link (the link to its parent for an endpoint or a switch upstream port, the link to
        the device below for a root or downstream port); problems name the files at fault."""
        path = self._element_path(element)
        state = {"problems": []}
        for name in LINK_FILES:
            if path is None:
                value, problem = None, "%s: no sysfs directory" % element
            else:
                value, problem = read_link_file(path, name)
            state[name.replace("_link", "").replace("speed", "speed_gts")] = value
            if problem:
                state["problems"].append(problem)
        return state

    def publishes_p2pmem(self, bdf):
        """Whether the function offers peer-to-peer memory (``p2pmem/published`` is 1: the kernel's
        P2PDMA provider, e.g. an NVMe controller memory buffer)."""
        try:
            return self._read_attr(os.path.join(self.devices[bdf].path, "p2pmem"), "published", base=10) == 1
        except (UnreadableFile, ValueError):
            return False

    # -- SR-IOV -------------------------------------------------------------------------------
    def physfn(self, bdf):
        """The physical function of an SR-IOV virtual function (its ``physfn`` link), or None."""
        link = os.path.join(self.devices[bdf].path, "physfn")
        if not os.path.islink(link):
            return None
        return os.path.basename(os.path.realpath(link))

    def num_vfs(self, bdf):
        """Virtual functions enabled on a physical function: its ``virtfnN`` links, else
        ``sriov_numvfs`` (0 without SR-IOV)."""
        path = self.devices[bdf].path
        links = [e for e in listdir(path) if re.match(r"^virtfn\d+$", e)]
        if links:
            return len(links)
        try:
            return self._read_attr(path, "sriov_numvfs", base=10)
        except (UnreadableFile, ValueError):
            return 0

    # -- placement ----------------------------------------------------------------------------
    def host_bridge(self, bdf):
        return self.devices[bdf].chain[0]

    def bridges_above(self, bdf):
        """BDFs of the bridges between a device and its host bridge, nearest first (a VMD
        endpoint counts: its domain hangs below it)."""
        return [element for element in reversed(self.devices[bdf].chain[:-1])
                if not is_root_bus(element)]

    def switch_of(self, bdf):
        """The upstream port of the nearest PCIe switch above a device, or None."""
        for element in self.bridges_above(bdf):
            if self.port_type(element) == PORT_UPSTREAM:
                return element
        return None

    def _switch_id(self, element, parent):
        """Collapse the ports of one switch (and VMD's nested root bus) into one identity."""
        if is_root_bus(element):  # a nested root bus (VMD): part of the VMD endpoint above it
            return ("vmd", element)
        if self.port_type(element) == PORT_DOWNSTREAM:
            return parent
        return element

    def link_class(self, bdf_a, bdf_b):
        """nvidia-smi's class of the link between two devices.

        PIX: below one PCIe switch (or one bridge) and no other; PXB: through several switches
        without the host bridge; PHB: through the host bridge (same root complex); NODE: across
        root complexes of one NUMA node; SYS: across NUMA nodes.
        """
        a, b = self.devices[bdf_a], self.devices[bdf_b]
        if a.chain[0] != b.chain[0]:
            if a.numa_node >= 0 and b.numa_node >= 0 and a.numa_node != b.numa_node:
                return "SYS"
            return "NODE"
        common = 0
        for left, right in zip(a.chain[:-1], b.chain[:-1]):
            if left != right:
                break
            common += 1
        if common <= 1:
            return "PHB"
        on_path = [(common - 1, a.chain)] + [(i, a.chain) for i in range(common, len(a.chain) - 1)]
        on_path += [(i, b.chain) for i in range(common, len(b.chain) - 1)]
        switches = {self._switch_id(chain[i], chain[i - 1]) for i, chain in on_path}
        return "PIX" if len(switches) <= 1 else "PXB"


def _reason(exc):
    if isinstance(exc, OSError):
        return "%s: %s" % (exc.filename, exc.strerror) if exc.filename else str(exc)
    return str(exc)
