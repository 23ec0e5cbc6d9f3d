# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe ACS control of bridges, read and written through sysfs ``config`` files.

The ACS state is read with the shared config-space walker (``hw/pci.acs_state``); this file
only adds what changing it needs: the desired control value per state, the write through the
``config`` file (what ``setpci -s BDF ECAP_ACS+0x6.w=0000`` does) with a read-back, and the two
conditions that make a write unsafe or impossible: devices bound to vfio-pci (their isolation
rests on ACS) and kernel lockdown (the kernel refuses config writes from user space).
"""
from __future__ import annotations

import errno
import json
import os
import re
import struct

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.files import UnreadableFile, read_bounded
from ansible_collections.gds.commission.plugins.module_utils.core.spec import EntryPoint, RoleSpec, Var, on_node
from ansible_collections.gds.commission.plugins.module_utils.core.variables import errors, is_list
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import PORT_NAMES, acs_state, find_pcie_port_type, normalize_bdf

# ACS Control bits (PCIe spec 7.7.8.3)
ACS_BITS = (("SV", 0x01), ("TB", 0x02), ("RR", 0x04), ("CR", 0x08), ("UF", 0x10), ("EC", 0x20),
            ("DT", 0x40))
# What Linux enables by itself on a port that has them (pci_std_enable_acs): Source Validation,
# Request and Completion Redirect, Upstream Forwarding.
KERNEL_DEFAULT_CTRL = 0x01 | 0x04 | 0x08 | 0x10
ACS_CTRL = 6  # ACS Control register: offset within the capability
LOCKED_DOWN = ("integrity", "confidentiality")


class AcsError(Exception):
    """A bridge cannot be read, or a write was refused or did not stick (the message says which)."""


def hexword(value):
    return None if value is None else "0x%04x" % value


def decode(ctrl):
    """``0x001d`` -> ``SV RR CR UF``; ``0`` -> ``off``."""
    if ctrl is None:
        return "no ACS capability"
    names = [name for name, bit in ACS_BITS if ctrl & bit]
    return " ".join(names) if names else "off"


def config_path(sysfs_root, bdf):
    return os.path.join(sysfs_root, "bus", "pci", "devices", bdf, "config")


def read_bridge(sysfs_root, bdf):
    """{bdf, path, port_type, acs_offset, acs_cap, acs_ctrl} read from the bridge's config file.

    Raises AcsError naming the path when the device is missing or its config space cannot be read
    in full (a non-root reader gets 64 bytes: that must not look like "no ACS").
    """
    path = config_path(sysfs_root, bdf)
    if not os.path.exists(os.path.dirname(path)):
        raise AcsError("bridge %s: no such PCI device (%s is missing)" % (bdf, os.path.dirname(path)))
    try:
        config = read_bounded(path, 4096, truncate=True)
    except UnreadableFile as exc:
        raise AcsError("bridge %s: %s" % (bdf, exc))
    state = acs_state(config, path)
    if state["acs_unknown"]:
        raise AcsError("bridge %s: ACS state unknown: %s (reading ACS needs root)" % (bdf, state["acs_unknown"]))
    del state["acs_unknown"]
    port = find_pcie_port_type(config)
    return dict(state, bdf=bdf, path=path, port_type=PORT_NAMES.get(port) if port is not None else None)


def bridges_in_scope(bridges, topology_bridges):
    """The PCI addresses whose ACS is set, in order and each once: ``bridges`` (gds_pcie_acs_bridges,
    normalized) when any are named, else every bridge of ``topology_bridges`` (gds_topology's
    ``bridges``: those on the paths of the GPUs, data drives and RDMA NICs) that has an ACS
    capability. A bridge whose ACS state could not be read stays in scope, so that reading it
    fails naming the file rather than the bridge being left out unseen.

    Raises AcsError naming a bridge that is no PCI address.
    """
    if not bridges:
        return [b["bdf"] for b in topology_bridges or [] if b.get("acs_cap") is not None or b.get("acs_unknown")]
    scope = []
    for text in bridges:
        bdf = normalize_bdf(text)
        if bdf is None:
            raise AcsError("bridges: %r is not a PCI address (DDDD:BB:DD.F)" % (text,))
        if bdf not in scope:
            scope.append(bdf)
    return scope


def desired_ctrl(state, cap, ctrl):
    """The ACS control a bridge should have: ``disabled`` 0; ``enabled`` what it has plus the
    kernel's default bits it supports; ``query`` unchanged."""
    if ctrl is None:
        return None
    if state == "disabled":
        return 0
    if state == "enabled":
        return ctrl | (cap & KERNEL_DEFAULT_CTRL)
    return ctrl


def write_ctrl(path, offset, value, opener=open):
    """Write ACS Control (2 bytes, little endian) at offset+6 of a config file; return the read-back.

    Unbuffered, one aligned 2-byte write: the kernel turns it into one config-word write. OSError
    (EPERM under lockdown, EIO, EROFS) propagates to the caller, which names the bridge.
    """
    with opener(path, "r+b", buffering=0) as handle:
        handle.seek(offset + ACS_CTRL)
        handle.write(struct.pack("<H", value))
        handle.seek(offset + ACS_CTRL)
        data = handle.read(2)
    if len(data) != 2:
        raise AcsError("%s: short read-back (%d bytes) at 0x%x" % (path, len(data), offset + ACS_CTRL))
    return struct.unpack("<H", data)[0]


def refusal_reason(exc, lockdown):
    """Why the kernel refused a config write, for the failure message."""
    what = exc.strerror or str(exc)
    if exc.errno in (errno.EPERM, errno.EACCES):
        if lockdown in LOCKED_DOWN:
            return ("%s: kernel lockdown is '%s' (/sys/kernel/security/lockdown), which forbids PCI "
                    "config writes from user space" % (what, lockdown))
        return "%s: the kernel refused the config write (lockdown %s, or not root)" % (what, lockdown or "unknown")
    if exc.errno == errno.EROFS:
        return "%s: sysfs is mounted read-only (a container without write access?)" % what
    return "%s: the kernel refused the config write (lockdown: %s)" % (what, lockdown or "unknown")


class AcsPlan(object):
    """The bridges in scope, their ACS control before, the value they should have, and the result."""

    def __init__(self, sysfs_root, bridges, state):
        self.sysfs_root = sysfs_root
        self.state = state
        self.entries = [read_bridge(sysfs_root, bdf) for bdf in bridges]
        for entry in self.entries:
            entry["before"] = entry["acs_ctrl"]
            entry["want"] = desired_ctrl(state, entry["acs_cap"], entry["acs_ctrl"])
            entry["after"] = entry["acs_ctrl"]

    @property
    def todo(self):
        return [e for e in self.entries if e["want"] is not None and e["want"] != e["before"]]

    @property
    def without_acs(self):
        return [e["bdf"] for e in self.entries if e["acs_offset"] is None]

    def apply(self, lockdown=None, opener=open):
        """Write every bridge that differs; read back; re-read the whole config to confirm.

        Raises AcsError at the first refused or ignored write; bridges written before it keep their
        new value and are reported by ``written``.
        """
        self.written = []
        for entry in self.todo:
            try:
                got = write_ctrl(entry["path"], entry["acs_offset"], entry["want"], opener=opener)
            except OSError as exc:
                raise AcsError("bridge %s: writing ACS control %s at %s+0x%x failed: %s"
                               % (entry["bdf"], hexword(entry["want"]), entry["path"],
                                  entry["acs_offset"] + ACS_CTRL, refusal_reason(exc, lockdown)))
            if got != entry["want"]:
                raise AcsError("bridge %s: wrote ACS control %s, read back %s: the device or a hypervisor "
                               "ignores the write" % (entry["bdf"], hexword(entry["want"]), hexword(got)))
            again = read_bridge(self.sysfs_root, entry["bdf"])
            entry["after"] = again["acs_ctrl"]
            if entry["after"] != entry["want"]:
                raise AcsError("bridge %s: ACS control reads %s after writing %s"
                               % (entry["bdf"], hexword(entry["after"]), hexword(entry["want"])))
            self.written.append(entry["bdf"])

    def simulate(self):
        """Check mode: what the bridges would read after apply()."""
        for entry in self.todo:
            entry["after"] = entry["want"]

    # -- results ------------------------------------------------------------------------------
    def bridges(self):
        return [{"bdf": e["bdf"], "port_type": e["port_type"], "acs_offset": e["acs_offset"],
                 "acs_cap": hexword(e["acs_cap"]), "before": hexword(e["before"]),
                 "after": hexword(e["after"])} for e in self.entries]

    def drift(self):
        if self.state == "query":
            return []
        return [{"setting": "acs: %s ACS control" % e["bdf"], "expected": hexword(e["want"]),
                 "actual": hexword(e["before"])} for e in self.todo]

    def diff(self):
        def text(key):
            return "".join("%s ACS control %s (%s)\n" % (e["bdf"], hexword(e[key]), decode(e[key]))
                           for e in self.entries if e["acs_offset"] is not None)
        return {"before": text("before"), "after": text("after"),
                "before_header": "ACS control (%s)" % self.sysfs_root,
                "after_header": "ACS control (%s, state=%s)" % (self.sysfs_root, self.state)}


# --------------------------------------------------------------------------------------------
# The role's verdicts (pcie_acs, through the gds_acs_checks filter) and the unit it writes
# --------------------------------------------------------------------------------------------
def acs_checks(result, state, persist="unit", cmdline_param="config_acs", managed_by=None, live=True,
               platform=None, check_mode=False):
    """``acs: ...`` checks from the pcie_acs module's result.

    ``state`` is gds_pcie_acs_state; ``managed_by`` the version of DGX OS's nvidia-acs-disable when
    that package manages ACS (the role then only verifies that ACS is off). In check mode the
    checks describe the bridges as they are (``before``), else as the module left them (``after``).
    """
    result = result if isinstance(result, dict) else {}
    platform = platform or {}
    bridges = result.get("bridges")
    with_cap = [b if isinstance(b, dict) else {} for b in bridges if not isinstance(b, dict) or b.get("acs_offset") is not None] \
        if isinstance(bridges, list) else []
    side = "before" if check_mode else "after"
    # ACS Control as the module read it ("0x0000"); anything else it could not read is unknown
    control = [(b.get("bdf"), b.get(side) if isinstance(b.get(side), str) and b.get(side).startswith("0x") else None)
               for b in with_cap]
    on = [bdf for bdf, value in control if value != "0x0000"]
    inputs = {"bridges": None if bridges is not None and not isinstance(bridges, list) else len(with_cap),
              "ACS Control": [value for dummy, value in control]}
    count = len(with_cap)
    if managed_by:
        state = "disabled"
    checks = []
    if count == 0:
        checks.append(check("acs: GPU/NVMe/NIC bridges", "SKIP", "bridges with ACS", 0,
                            "no bridge with an ACS capability above a GPU, data drive or NIC"
                            if inputs["bridges"] is not None else "unknown: the module returned no list of bridges"))
    elif state == "disabled":
        detail = ("ACS still on: " + ", ".join(map(str, on))) if on else "%d bridges with ACS Control 0x0000" % count
        if managed_by:
            detail += " (managed by nvidia-acs-disable %s)" % managed_by
        checks.append(check("acs: disabled on GPU/NVMe/NIC bridges", "FAIL" if on else "PASS", 0, len(on), detail,
                            inputs=inputs))
    elif state == "enabled":
        off = [bdf for bdf, value in control if value == "0x0000"]
        checks.append(check("acs: enabled on GPU/NVMe/NIC bridges", "FAIL" if off else "PASS", count, len(on),
                            ("ACS off: " + ", ".join(map(str, off))) if off else "kernel default ACS bits set",
                            inputs=inputs))
    else:
        checks.append(check("acs: state of GPU/NVMe/NIC bridges", "WARN" if on else "PASS", 0, len(on),
                            ("ACS on (query only): " + ", ".join(map(str, on))) if on else "%d bridges with ACS off" % count,
                            inputs=inputs))
    if count and state == "disabled":
        checks.append(_acs_persistence(count, persist, cmdline_param, managed_by, live, platform))
    vfio = result.get("vfio_devices") or []
    if vfio:
        checks.append(check("acs: devices bound to vfio-pci", "WARN", 0, len(vfio),
                            "changed with gds_pcie_acs_allow_with_vfio: " + ", ".join(vfio)))
    return checks


def _acs_persistence(count, persist, cmdline_param, managed_by, live, platform):
    name = "acs: kept disabled across reboots"
    if managed_by:
        return check(name, "PASS", "persistent", "nvidia-acs-disable " + managed_by,
                     "DGX OS manages ACS on this node; the role only verifies it")
    if persist == "none":
        return check(name, "WARN", "persistent", "none",
                     "gds_pcie_acs_persist is none: ACS comes back at the next boot")
    how = []
    if persist in ("unit", "both"):
        how.append("gds-acs-disable.service" + ("" if live else " (written; not enabled on a simulated node)"))
    if persist in ("cmdline", "both"):
        how.append("pci=%s in 99-gds-acs.cfg" % cmdline_param)
    # kernels 6.11 to 6.13 parse only the first device of a pci=config_acs= list
    cmdline = platform.get("acs_cmdline")
    lists = cmdline.get("device_lists") if isinstance(cmdline, dict) else None
    judged = persist == "cmdline" and count > 1
    lists_broken = persist in ("cmdline", "both") and count > 1 and lists is False
    detail = "%d bridges" % count
    if lists_broken:
        detail = ("kernel %s parses only the first device of a pci=%s= list (6.11 to 6.13, fixed in 6.14)"
                  % ((platform.get("kernel") or {}).get("release"), cmdline_param))
        if persist == "both":
            detail += "; the unit clears the others"
    return check(name, "WARN" if lists_broken and persist == "cmdline" else "PASS", "persistent",
                 " + ".join(how), detail,
                 # with the command line alone, whether the kernel reads a whole list decides it
                 inputs={"the kernel parses pci= device lists": lists if isinstance(lists, bool) else None}
                 if judged else None)


_SAFE_PATH = re.compile(r"^(/[A-Za-z0-9._+-]+)+$")


def unit_exec_error(path):
    """Why ``path`` cannot be the program of a root systemd unit's ExecStart: it must be an
    absolute path of plain path characters (no spaces, quotes, ``;``, ``$``, ``%`` specifiers, no
    ``..``), so that the unit runs exactly that file and nothing else. None when it is fine."""
    if not isinstance(path, str) or not path:
        return "must be an absolute path to an executable, got %r" % (path,)
    if not _SAFE_PATH.match(path) or "/." in path:
        return ("%r is not an absolute path of plain characters (letters, digits, . _ + - /, no "
                "component starting with '.'): "
                "it is written into a root systemd unit, so no shell words, spaces or specifiers" % (path,))
    return None


def validate_vars(values, host=None, hosts=()):
    """The gds_pcie_acs role's variables (gds_pcie_acs_*): [message naming the variable and the value]."""
    bridges, setpci = values.get("gds_pcie_acs_bridges", []), values.get("gds_pcie_acs_setpci", "")
    if not is_list(bridges):
        # the argument specs would split a string at commas, the role would loop over its characters
        return ["gds_pcie_acs_bridges must be a YAML list of PCI addresses ([\"0000:04:10.0\"]), got the %s %s"
                % (type(bridges).__name__, json.dumps(bridges, default=str))]
    bad = [str(bdf) for bdf in bridges if normalize_bdf(str(bdf)) is None]
    setpci_error = unit_exec_error(setpci) if setpci != "" else None
    return errors(
        "gds_pcie_acs_bridges: %s are not PCI addresses (DDDD:BB:DD.F)" % bad if bad else None,
        "gds_pcie_acs_setpci=%s must be empty (find setpci on the node) or the absolute path of the setpci "
        "executable: %s" % (json.dumps(setpci, default=str), setpci_error) if setpci_error else None)


# The role gds_pcie_acs: its variables, the one source of its defaults/main.yml, meta/argument_specs.yml
# and its table in docs/variables.md (make roles)
ROLE_SPEC = RoleSpec(
    'gds_pcie_acs', 'gds_pcie_acs_',
    short_description='Disable PCIe ACS on the bridges between GPUs, NVMe drives and NICs, and keep it so',
    description=("Clears ACS Control on the bridges of ansible_facts['gds_topology'] (module pcie_acs), then makes "
                 'it last across reboots with a systemd unit and/or a kernel command-line drop-in.',
                 'Records acs checks in gds_pcie_acs_checks for the report.',),
    variables=[
        Var('gds_pcie_acs_state', 'str',
            'ACS on the bridges between GPUs, NVMe drives and NICs: disabled (GDS), enabled (kernel default) or '
            'query.',
            'disabled',
            choices=('disabled', 'enabled', 'query')),
        Var('gds_pcie_acs_bridges', 'list',
            'Bridges (PCI addresses) to act on; empty: every bridge with ACS above a GPU, data drive or RDMA NIC.',
            [],
            elements='str'),
        Var('gds_pcie_acs_allow_with_vfio', 'bool',
            'Change ACS even while devices are bound to vfio-pci (without ACS they lose their isolation).',
            False),
        Var('gds_pcie_acs_persist', 'str',
            'How disabled ACS survives a reboot: unit (systemd oneshot running setpci), cmdline, both or none.',
            'unit',
            choices=('unit', 'cmdline', 'both', 'none')),
        Var('gds_pcie_acs_cmdline_param', 'str',
            'Kernel parameter of the cmdline drop-in: config_acs (all bits, Linux 6.11+) or disable_acs_redir '
            '(4.19+).',
            'config_acs',
            choices=('config_acs', 'disable_acs_redir')),
        Var('gds_pcie_acs_respect_dgx_package', 'bool',
            "Leave a node whose ACS DGX OS's nvidia-acs-disable package manages alone, and only verify it.",
            True),
        Var('gds_pcie_acs_setpci', 'str',
            'setpci the boot-time unit runs; empty: the first of /usr/bin/setpci, /usr/sbin/setpci, /sbin/setpci.',
            ''),
        Var('gds_pcie_acs_sysfs_root', 'path',
            "Where sysfs is mounted on the node (a simulated node's config files are written for real).",
            on_node('/sys')),
    ],
    entry_points={
        'verify': EntryPoint(
            'Read ACS on the bridges again (after a reboot) and re-record the checks',
            variables=['gds_pcie_acs_sysfs_root']),
        'validate': "main",
        'steps': "main",
    },
    renamed_from='pcie_acs',
)
