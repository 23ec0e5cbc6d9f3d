# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPUDirect RDMA on a node: GPU-NIC pairing, RDMA port state and rate, GPU peer memory.

Everything is decided from the ``gds_topology`` facts (the NICs, their ports and each GPU's NICs
by link class) and the ``gds_platform`` facts (kernel, NVIDIA driver flavour, the peer-memory
module the node ships); the only things read or written here are the boot-time module list
(modules-load.d) and ``/sys/module/<name>`` to see whether a module is loaded.

Peer memory is what lets an RDMA NIC read and write GPU memory: the ``nvidia_peermem`` module
(shipped with the NVIDIA driver since 470), MLNX_OFED's older ``nv_peer_mem``, or DMA-BUF, which
needs no module (Linux 5.12+ with the open NVIDIA kernel module).
"""
from __future__ import annotations

import os
import re

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.files import listdir, read_text, write_atomic
from ansible_collections.gds.commission.plugins.module_utils.core.spec import RoleSpec, Var, on_node
from ansible_collections.gds.commission.plugins.module_utils.core.variables import errors, path_error
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import paired_nics
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import LINK_CLASSES, class_rank

PEERMEM_CHOICES = ("auto", "nvidia_peermem", "nv_peer_mem", "dmabuf", "none")
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
# ib_umem_dmabuf (RDMA on DMA-BUF exported memory) arrived in Linux 5.12
DMABUF_KERNEL = (5, 12)
NO_RDMA = "no RDMA device on this node"
_MODULE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class RdmaError(Exception):
    """A setting cannot be applied (the message names the file or module)."""


# --------------------------------------------------------------------------------------------
# Pairing
# --------------------------------------------------------------------------------------------
def validate_vars(values, host=None, hosts=()):
    """The gds_rdma role's variables (gds_rdma_*): [message naming the variable and the value]."""
    rate, link = values.get("gds_rdma_port_rate_gbps"), values.get("gds_rdma_nic_link_max")
    rate_ok = rate is None or not isinstance(rate, bool) and isinstance(rate, (int, float)) and 0 < rate < float("inf")
    return errors(
        None if rate_ok else "gds_rdma_port_rate_gbps must be null or a positive number of Gb/s (400 for NDR), got %s" % (rate,),
        # null is the default, which the argument specs' choices would refuse
        None if link is None or link in LINK_CLASSES
        else "gds_rdma_nic_link_max must be null or one of %s, got %s" % (", ".join(LINK_CLASSES), link),
        *[path_error(name, values[name]) for name in ("gds_rdma_modules_load_dir", "gds_rdma_sysfs_root") if name in values])


def pairing(topology):
    """One row per GPU: {gpu, bdf, nic, nic_bdf, link, nics}: its best NIC (``gpus[].nics``) and
    the NICs it is paired with (hw/affinity.paired_nics, the one rule)."""
    nics = {n["name"]: n for n in topology.get("nics") or []}
    paired = paired_nics(topology)
    rows = []
    for gpu in topology.get("gpus") or []:
        names = gpu.get("nics") if isinstance(gpu.get("nics"), list) else []
        best = names[0] if names else None
        rows.append({"gpu": gpu["index"], "bdf": gpu["bdf"], "nic": best,
                     "nic_bdf": nics[best]["bdf"] if best in nics else None,
                     "link": gpu.get("nic_link"), "nics": paired[gpu["index"]]})
    return rows


def pairing_checks(topology, link_max=None):
    """``rdma: GPU<i> NIC pairing``: FAIL when a GPU's best NIC is farther than ``link_max`` (the
    worst class the platform accepts), naming the GPU and that NIC; without NICs one SKIP."""
    nics = topology.get("nics") or []
    gpus = topology.get("gpus") or []
    if not nics:
        return [check("rdma: GPU-NIC pairing", "SKIP", link_max or "any", None, NO_RDMA)]
    if not gpus:
        return [check("rdma: GPU-NIC pairing", "SKIP", link_max or "any", None, "no GPU on this node")]
    out = []
    for row in pairing(topology):
        actual = "%s %s" % (row["nic"], row["link"])
        if link_max is None:
            verdict, expected = "PASS", "any (no gds_rdma_nic_link_max)"
        else:
            verdict = "PASS" if class_rank(row["link"]) <= class_rank(link_max) else "FAIL"
            expected = "%s or closer" % link_max
        detail = "GPU%d (%s): best NIC %s (%s), link %s" % (row["gpu"], row["bdf"], row["nic"], row["nic_bdf"], row["link"])
        if verdict == "FAIL":
            detail += ", farther than %s: GPUDirect RDMA crosses %s" % (
                link_max, "the CPU" if class_rank(row["link"]) >= class_rank("PHB") else "several PCIe switches")
        out.append(check("rdma: GPU%d NIC pairing" % row["gpu"], verdict, expected, actual, detail,
                         inputs={"best NIC": row["nic"], "link class": row["link"]}, gpu=row["gpu"], nic=row["nic"]))
    return out


# --------------------------------------------------------------------------------------------
# Ports
# --------------------------------------------------------------------------------------------
def _rate_text(gbps):
    if isinstance(gbps, bool) or not isinstance(gbps, (int, float)):
        return "unknown"
    return "%g Gb/s" % gbps


def port_label(nic, port):
    return "%s/%d" % (nic["name"], port["port"])


def port_problems(port, rate_gbps=None):
    """What is wrong with one port: not ACTIVE, not LinkUp, a rate other than the expected."""
    problems = []
    if port.get("state") != "ACTIVE":
        problems.append("state %s" % (port.get("state") or "unreadable"))
    if port.get("phys_state") != "LinkUp":
        problems.append("phys_state %s" % (port.get("phys_state") or "unreadable"))
    if rate_gbps is not None and port.get("rate_gbps") != float(rate_gbps):
        problems.append("rate %s, not %s" % (_rate_text(port.get("rate_gbps")), _rate_text(float(rate_gbps))))
    return problems


def port_checks(topology, rate_gbps=None):
    """``rdma: port <nic>/<n>`` for every port: FAIL unless ACTIVE, LinkUp and (when the profile
    gives one) at the expected rate; without NICs one SKIP."""
    nics = topology.get("nics") or []
    expected = "ACTIVE, LinkUp" + (", %s" % _rate_text(float(rate_gbps)) if rate_gbps is not None else "")
    if not nics:
        return [check("rdma: ports", "SKIP", expected, None, NO_RDMA)]
    out = []
    for nic in nics:
        if not nic.get("ports") or not isinstance(nic["ports"], list):
            why = ("%s (%s) shows no ports/<n>/ directory" % (nic["name"], nic["bdf"]) if not nic.get("ports")
                   else "%s: ports unreadable: %r" % (nic["name"], nic["ports"]))
            out.append(check("rdma: port %s" % nic["name"], "WARN", expected, None, why, nic=nic["name"]))
            continue
        for number, port in enumerate(nic["ports"], 1):
            if not isinstance(port, dict):
                out.append(check("rdma: port %s/%d" % (nic["name"], number), "WARN", expected, None,
                                 "%s: port entry unreadable: %r" % (nic["name"], port), nic=nic["name"], port=number))
                continue
            problems = port_problems(port, rate_gbps)
            actual = "%s, %s, %s" % (port.get("state"), port.get("phys_state"), _rate_text(port.get("rate_gbps")))
            where = "%s port %d (%s%s, %s)" % (nic["name"], port["port"], port.get("link_layer") or "?",
                                               ", netdev %s" % port["netdev"] if port.get("netdev") else "",
                                               "software on " + nic["bdf"] if nic.get("software") else nic["bdf"])
            out.append(check("rdma: port %s" % port_label(nic, port), "FAIL" if problems else "PASS", expected, actual,
                             "%s: %s" % (where, "; ".join(problems)) if problems else where,
                             inputs={"rate": port.get("rate_gbps")} if rate_gbps is not None else None,
                             nic=nic["name"], port=port.get("port")))
    return out


def port_drift(topology, rate_gbps=None):
    """Drift items for ports that are down or run at another rate than the profile's."""
    items = []
    for nic in topology.get("nics") or []:
        for port in nic.get("ports") or []:
            if port_problems(port, rate_gbps):
                want = "ACTIVE LinkUp" + (" %s" % _rate_text(float(rate_gbps)) if rate_gbps is not None else "")
                items.append({"setting": "rdma port %s" % port_label(nic, port), "expected": want,
                              "actual": "%s %s %s" % (port.get("state"), port.get("phys_state"),
                                                      _rate_text(port.get("rate_gbps")))})
    return items


# --------------------------------------------------------------------------------------------
# Peer memory
# --------------------------------------------------------------------------------------------
def dmabuf_support(platform):
    """(supported, why): DMA-BUF GPUDirect RDMA needs Linux 5.12+ and the open NVIDIA module."""
    platform = platform or {}
    version = tuple((platform.get("kernel") or {}).get("version") or ())
    release = (platform.get("kernel") or {}).get("release") or "unknown"
    driver = platform.get("nvidia_driver") or {}
    missing = []
    if not version or version[:2] < DMABUF_KERNEL:
        missing.append("Linux 5.12+ (this one is %s)" % release)
    if driver.get("open") is not True:
        missing.append("the open NVIDIA kernel module (%s)" % (
            "proprietary loaded" if driver.get("open") is False else "no NVIDIA driver loaded"))
    return not missing, " and ".join(missing)


def module_loaded(sysfs_root, name):
    return os.path.isdir(os.path.join(sysfs_root, "module", name))


def module_shipped(platform, name):
    """True/False from the kernel's modules.dep (gds_platform), None when that is unknown."""
    shipped = ((platform or {}).get("modules") or {}).get("shipped")
    if shipped is None:
        return None
    return bool(shipped.get(name))


def persisted_in(load_dir, name):
    """The modules-load.d files that load ``name`` at boot (a non-comment line naming it)."""
    found = []
    for entry in listdir(load_dir):
        if not entry.endswith(".conf"):
            continue
        text = read_text(os.path.join(load_dir, entry)) or ""
        for line in text.splitlines():
            line = line.split("#", 1)[0].split(";", 1)[0].strip()
            if line.replace("-", "_") == name.replace("-", "_"):
                found.append(os.path.join(load_dir, entry))
                break
    return found


def choose_peermem(want, platform, sysfs_root):
    """(method, reason): the peer-memory method for ``want`` on this node.

    method is a module name, ``dmabuf``, ``none`` or None (nothing usable: reason says why).
    ``auto``: a loaded module first, then a shipped one (nvidia_peermem before nv_peer_mem), then
    DMA-BUF where kernel and driver provide it.
    """
    if want == "none":
        return "none", "gds_rdma_peermem is none"
    if want == "dmabuf":
        ok, why = dmabuf_support(platform)
        return ("dmabuf", None) if ok else (None, "DMA-BUF needs " + why)
    if want in PEERMEM_MODULES:
        if module_loaded(sysfs_root, want) or module_shipped(platform, want) is not False:
            return want, None
        return None, "%s is neither loaded nor shipped with kernel %s" % (
            want, ((platform or {}).get("kernel") or {}).get("release") or "unknown")
    for name in PEERMEM_MODULES:
        if module_loaded(sysfs_root, name):
            return name, None
    name = ((platform or {}).get("modules") or {}).get("peermem")
    if name in PEERMEM_MODULES:
        return name, None
    ok, why = dmabuf_support(platform)
    if ok:
        return "dmabuf", None
    return None, "no nvidia_peermem or nv_peer_mem module, and no DMA-BUF: it needs " + why


def peermem_state(topology, platform, want, sysfs_root, load_dir):
    """{method, reason, module, loaded, persisted: [files], skip} before any change."""
    state = {"want": want, "method": None, "reason": None, "module": None, "loaded": None,
             "persisted": [], "skip": None}
    if not topology.get("nics"):
        state["skip"] = NO_RDMA
        return state
    if not topology.get("gpus"):
        state["skip"] = "no GPU on this node"
        return state
    method, reason = choose_peermem(want, platform, sysfs_root)
    state.update(method=method, reason=reason)
    if method in PEERMEM_MODULES:
        state.update(module=method, loaded=module_loaded(sysfs_root, method),
                     persisted=persisted_in(load_dir, method))
    return state


def apply_peermem(state, load_dir, check_mode, live, load):
    """Persist (``<load_dir>/<module>.conf``, atomically) and load (``load(name)``, a live node
    outside check mode only) the chosen module. Returns (changed, drift items)."""
    name = state["module"]
    if name is None:
        return False, []
    if not _MODULE_NAME.match(name):
        raise RdmaError("peer-memory module name %r is not a module name" % name)
    changed = False
    drift = []
    if not state["persisted"]:
        path = os.path.join(load_dir, "%s.conf" % name)
        drift.append({"setting": path, "expected": name, "actual": "absent"})
        if not check_mode:
            try:
                write_atomic(path, "# Managed by gds-commission (role gds_rdma): GPUDirect RDMA peer memory.\n%s\n" % name)
            except OSError as exc:
                raise RdmaError("cannot write %s: %s" % (path, exc.strerror or exc))
            state["persisted"] = [path]
        changed = True
    if not state["loaded"] and live:
        drift.append({"setting": "rdma peer memory module", "expected": "%s loaded" % name, "actual": "not loaded"})
        if not check_mode:
            load(name)
            state["loaded"] = True
        changed = True
    return changed, drift


def peermem_check(state, live=True):
    """``rdma: GPU peer memory``: PASS when the chosen module is loaded and persisted (or DMA-BUF
    is available), FAIL when nothing provides peer memory, SKIP without NICs or GPUs."""
    name = "rdma: GPU peer memory"
    if state.get("skip"):
        return check(name, "SKIP", state.get("want"), None, state["skip"])
    method = state.get("method")
    if method is None:
        return check(name, "FAIL", state["want"], "none usable", state["reason"])
    if method == "none":
        return check(name, "SKIP", "none", "none", state["reason"])
    if method == "dmabuf":
        return check(name, "PASS", "dmabuf", "dmabuf",
                     "DMA-BUF (Linux 5.12+, open NVIDIA kernel module): no peer-memory module needed")
    expected = "%s loaded and in modules-load.d" % method
    state = dict(state, loaded=state.get("loaded"), persisted=state.get("persisted"))
    parts = ["loaded" if state["loaded"] else "not loaded",
             "in " + ", ".join(map(str, state["persisted"])) if isinstance(state["persisted"], list) and state["persisted"]
             else "not in modules-load.d"]
    actual = "%s %s" % (method, ", ".join(parts))
    if state["loaded"] and state["persisted"]:
        return check(name, "PASS", expected, actual,
                     inputs={"loaded": state["loaded"], "persisted": state["persisted"], "method": method})
    if not state["loaded"] and state["persisted"] and not live:
        return check(name, "WARN", expected, actual, "written to modules-load.d; loads at the next boot")
    return check(name, "FAIL", expected, actual, "GPUDirect RDMA cannot reach GPU memory until %s is %s" % (
        method, "loaded" if not state["loaded"] else "persisted"))


def rdma_checks(topology, platform=None, link_max=None, rate_gbps=None, peermem=None, live=True):
    """All ``rdma: `` checks from facts alone (the peer-memory state computed beforehand)."""
    checks = pairing_checks(topology, link_max) + port_checks(topology, rate_gbps)
    if peermem is not None:
        checks.append(peermem_check(peermem, live))
    return checks


# The role gds_rdma: its variables, the one source of its defaults/main.yml, meta/argument_specs.yml
# and its table in docs/variables.md (make roles)
ROLE_SPEC = RoleSpec(
    'gds_rdma', 'gds_rdma_',
    short_description='GPU peer memory for the RDMA NICs, and the GPU-NIC pairing and port checks',
    description=('Loads and persists the GPU peer-memory module (nvidia_peermem, or nv_peer_mem where that is what '
                 'the node has), or relies on DMA-BUF where Linux 5.12+ and the open NVIDIA kernel module provide '
                 'it.',
                 "Judges each GPU's best NIC against gds_rdma_nic_link_max and every RDMA port against "
                 'ACTIVE/LinkUp and gds_rdma_port_rate_gbps; records the checks in gds_rdma_checks.',),
    variables=[
        Var('gds_rdma_peermem', 'str',
            'GPU peer memory for GPUDirect RDMA. `auto`: a loaded module, else the one the kernel ships '
            '(`nvidia_peermem` first), else DMA-BUF (Linux 5.12+, open NVIDIA kernel module). A module is loaded '
            'and persisted in modules-load.d; `dmabuf` loads nothing; `none` leaves peer memory alone.',
            'auto',
            choices=('auto', 'nvidia_peermem', 'nv_peer_mem', 'dmabuf', 'none')),
        Var('gds_rdma_nic_link_max', 'str',
            'Worst link class accepted between a GPU and its best NIC (DGX profiles: `PXB`); a GPU whose best NIC '
            'is farther FAILs, naming both. Null: the pairing is reported, not judged.',
            None),
        Var('gds_rdma_port_rate_gbps', 'float',
            'Rate every RDMA port must run at, in Gb/s (400 NDR, 200 HDR, 100 EDR); a port at another rate FAILs '
            'and is drift. Null: any rate (ports must still be ACTIVE and LinkUp).',
            None),
        Var('gds_rdma_sysfs_root', 'path',
            'Where sysfs is mounted on the node (`module/<name>` there says whether a module is loaded).',
            on_node('/sys')),
        Var('gds_rdma_modules_load_dir', 'path',
            'Directory of the modules loaded at boot on the node.',
            on_node('/etc/modules-load.d')),
    ],
    entry_points={
        'validate': "main",
        'steps': "main",
    },
)
