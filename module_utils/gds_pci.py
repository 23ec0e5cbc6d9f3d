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

_BDF = re.compile(r"^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
_ROOT_BUS = re.compile(r"^pci([0-9a-f]{4,8}):([0-9a-f]{2})$")
_NAMESPACE = re.compile(r"^nvme\d+n\d+$")
_PATH_DEVICE = re.compile(r"^nvme\d+c(\d+)n\d+$")


class TopologyError(Exception):
    """sysfs cannot be read at all (the message names the path)."""


def bdf_key(bdf):
    """Sort key for a BDF: numeric domain, bus, device, function."""
    match = _BDF.match(bdf)
    if not match:
        return (1 << 32, bdf)
    return tuple(int(part, 16) for part in match.groups())


def is_bdf(text):
    return bool(_BDF.match(text or ""))


def normalize_bdf(text):
    """``00000000:34:00.0`` (NVML) or ``34:00.0`` -> ``0000:34:00.0``; None if it is no BDF."""
    text = (text or "").strip().lower()
    if re.match(r"^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", text):
        text = "0000:" + text
    match = _BDF.match(text)
    if not match:
        return None
    domain, bus, dev, fn = match.groups()
    return "%04x:%s:%s.%s" % (int(domain, 16), bus, dev, fn)


def natural_key(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


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
    for _ in range(48):  # the list lives in 0x40..0xff: at most 48 entries
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

    Raises ValueError when the image is too short to hold extended config space (reads by a
    non-root user return only 64 bytes; a truncated file must not look like "no ACS").
    """
    if len(config) < ECAP_START + 4:
        raise ValueError("config space is %d bytes, extended capabilities need 4096" % len(config))
    offset = ECAP_START
    for _ in range((4096 - ECAP_START) // 4):
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


# --------------------------------------------------------------------------------------------
# The tree
# --------------------------------------------------------------------------------------------
class PciDevice(object):
    """One PCI function as sysfs shows it."""

    __slots__ = ("bdf", "chain", "path", "vendor", "device", "class_code", "numa_node",
                 "driver", "_config", "_port_type", "model")

    def __init__(self, bdf, chain, path, vendor, device, class_code, numa_node, driver):
        self.bdf = bdf
        self.chain = chain
        self.path = path
        self.vendor = vendor
        self.device = device
        self.class_code = class_code
        self.numa_node = numa_node
        self.driver = driver
        self._config = None
        self._port_type = None
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
        self._scan()

    # -- reading ------------------------------------------------------------------------------
    def _warn(self, message):
        self.warnings.append(message)

    def _read_attr(self, dev_path, name, base=16):
        path = os.path.join(dev_path, name)
        with open(path, "r") as handle:
            text = handle.read().strip()
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
            real = os.path.realpath(link)
            if not os.path.isdir(real):
                self._warn("skipping %s: dangling link to %s" % (link, real))
                continue
            rel = os.path.relpath(real, devices_dir)
            chain = tuple(rel.split(os.sep))
            if rel.startswith("..") or not _ROOT_BUS.match(chain[0]) or chain[-1] != entry:
                self._warn("skipping %s: %s is not below %s/pciDDDD:BB" % (link, real, devices_dir))
                continue
            try:
                vendor = self._read_attr(real, "vendor")
                device = self._read_attr(real, "device")
                class_code = self._read_attr(real, "class")
            except (OSError, ValueError) as exc:
                self._warn("skipping %s: %s" % (entry, _reason(exc)))
                continue
            try:
                numa = self._read_attr(real, "numa_node", base=10)
            except (OSError, ValueError) as exc:
                self._warn("%s: numa_node unreadable (%s), using -1" % (entry, _reason(exc)))
                numa = -1
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

    def config(self, bdf):
        """The device's config-space image (bytes); b'' when unreadable (warned)."""
        dev = self.devices[bdf]
        if dev._config is None:
            path = os.path.join(dev.path, "config")
            try:
                with open(path, "rb") as handle:
                    dev._config = handle.read(4096)
            except OSError as exc:
                self._warn("%s: cannot read %s (%s)" % (bdf, path, _reason(exc)))
                dev._config = b""
        return dev._config

    def port_type(self, bdf):
        """PCIe port type of a bridge: from its PCIe capability, else from its place in the tree."""
        dev = self.devices[bdf]
        if dev._port_type is None:
            port = find_pcie_port_type(self.config(bdf))
            if port is None:
                parent = self.devices.get(dev.parent)
                if parent is None:  # on a root bus
                    port = PORT_ROOT
                elif self.port_type(parent.bdf) == PORT_UPSTREAM:
                    port = PORT_DOWNSTREAM
                else:
                    port = PORT_UPSTREAM
            dev._port_type = port
        return dev._port_type

    def acs(self, bdf):
        """{bdf, port_type, acs_offset, acs_cap, acs_ctrl} for one bridge (None values: no ACS)."""
        config = self.config(bdf)
        entry = {"bdf": bdf, "port_type": PORT_NAMES.get(self.port_type(bdf), "unknown"),
                 "acs_offset": None, "acs_cap": None, "acs_ctrl": None}
        try:
            offset, cap, ctrl = read_acs(config)
        except ValueError as exc:
            if config:
                self._warn("%s: %s; ACS state unknown" % (bdf, exc))
            return entry
        entry.update(acs_offset=offset, acs_cap=cap, acs_ctrl=ctrl)
        return entry

    # -- placement ----------------------------------------------------------------------------
    def host_bridge(self, bdf):
        return self.devices[bdf].chain[0]

    def bridges_above(self, bdf):
        """BDFs of the bridges between a device and its host bridge, nearest first."""
        return [element for element in reversed(self.devices[bdf].chain[:-1])
                if element in self.devices]

    def switch_of(self, bdf):
        """The upstream port of the nearest PCIe switch above a device, or None."""
        for element in self.bridges_above(bdf):
            if self.port_type(element) == PORT_UPSTREAM:
                return element
        return None

    def _switch_id(self, element):
        """Collapse the ports of one switch (and VMD's nested root bus) into one identity."""
        dev = self.devices.get(element)
        if dev is None:  # a nested root bus (VMD): part of the VMD endpoint above it
            return ("vmd", element)
        if dev.is_bridge and self.port_type(element) == PORT_DOWNSTREAM:
            return dev.parent
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
        lca = a.chain[common - 1]
        on_path = [lca] + list(a.chain[common:-1]) + list(b.chain[common:-1])
        switches = {self._switch_id(element) for element in on_path}
        return "PIX" if len(switches) <= 1 else "PXB"


def _reason(exc):
    if isinstance(exc, OSError):
        return "%s: %s" % (exc.filename, exc.strerror) if exc.filename else str(exc)
    return str(exc)
