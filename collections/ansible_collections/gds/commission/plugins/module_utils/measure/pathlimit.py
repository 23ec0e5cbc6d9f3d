# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The limit of a GPU/array path from the PCI model (``gds_topology``'s ``pcie_links``): what
the PCIe links between the array's drives and the GPU can carry, so that a job's throughput is
read as a fraction of it (a roofline).

A link carries rate x width x encoding / 8 bytes a second (hw/pci.py's link_bytes_per_s). The data
flows up from each drive to the switch (or root complex) it shares with the GPU, then down to the
GPU; links that several drives share carry their sum. The root complex and the link between
sockets (a PHB, NODE or SYS path) are not modelled: such a limit is an upper bound, and says so,
naming the host bridge (``root_complex``). A drive is an NVMe namespace of the facts or any other
disk of them (``disks``: a virtio disk's function, a SCSI disk's HBA, an NVMe-over-fabrics
namespace's NIC); a function without link files has an unknown rate, named, never a guessed one.
Links whose ``upstream`` entries loop (facts from a broken or hand-edited tree) are no path: the
limit is unknown, naming the loop.
"""
from __future__ import annotations

from ansible_collections.gds.commission.plugins.module_utils.core.numbers import figure
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import gen_of_speed, link_bytes_per_s, speed_of_gen

INF = float("inf")
GIB = float(1 << 30)


def faces_up(entry):
    """An endpoint or a switch upstream port: its link goes to the port above it."""
    return entry.get("kind") != "bridge" or entry.get("port") == "upstream"


class PathLoop(ValueError):
    """The topology's links go round in a circle: there is no path to measure."""


class PathUnknown(ValueError):
    """No path to measure: the message says why (a drive or GPU not on the links)."""


def host_bridge(bdf):
    """The host bridge (root complex) above the bus of ``bdf``, as sysfs names it: pciDDDD:BB."""
    return "pci" + bdf.rsplit(":", 1)[0] if bdf and ":" in bdf else None


class PathModel(object):
    """The links of one node, with a GPU's link speed as seen under load (NVML) where known: a
    GPU trains its link down when idle, so the idle speed sysfs shows is not its limit."""

    def __init__(self, pcie_links, gpu_load=None):
        self.links = {e["bdf"]: e for e in pcie_links or [] if isinstance(e, dict) and e.get("bdf")}
        self.gpu_load = gpu_load or {}

    def chain(self, bdf):
        """The device and every bridge above it up to its root port, nearest first; PathLoop when
        the ``upstream`` entries come back to one already passed."""
        out = []
        while bdf and bdf in self.links:
            if bdf in out:
                raise PathLoop("the PCIe links loop: %s" % " -> ".join(out[out.index(bdf):] + [bdf]))
            out.append(bdf)
            bdf = self.links[bdf].get("upstream")
        return out

    def _end(self, entry):
        """(speed GT/s, width, note) of one end of a link."""
        gpu = entry["bdf"] if entry.get("kind") == "gpu" else None
        partner = self.links.get(entry.get("partner") or "")
        if gpu is None and partner is not None and partner.get("kind") == "gpu":
            gpu = partner["bdf"]
        width = entry.get("current_width") or entry.get("expected_width")
        if gpu is None:
            return entry.get("current_speed_gts") or entry.get("expected_speed_gts"), width, None
        seen = speed_of_gen((self.gpu_load.get(gpu) or {}).get("max_gen_seen"))
        if seen:
            return seen, width, "GPU link at Gen%s, the fastest NVML saw under load" % gen_of_speed(seen)
        return entry.get("expected_speed_gts"), width, "GPU link at its expected speed (idle in sysfs)"

    def link(self, bdf):
        """The link from ``bdf`` (facing up) to the port above it: {bdf, gen, width, bytes_per_s, note}."""
        entry = self.links[bdf]
        ends = [self._end(entry)]
        above = self.links.get(entry.get("upstream") or "")
        if above is not None:
            ends.append(self._end(above))
        rates = [link_bytes_per_s(speed, width) for speed, width, dummy in ends]
        if None in rates:
            # what the facts say about the end that is unknown (its link files missing, unreadable)
            problem = next((e.get("problem") for e, r in zip([entry, above], rates) if r is None and e.get("problem")),
                           None)
            return {"bdf": bdf, "gen": None, "width": None, "bytes_per_s": None,
                    "note": problem or "link state unknown"}
        slow = min(range(len(ends)), key=lambda i: rates[i])
        return {"bdf": bdf, "gen": gen_of_speed(ends[slow][0]), "width": ends[slow][1],
                "bytes_per_s": rates[slow], "note": ends[slow][2]}


def _slowest(model, bdfs):
    links = [model.link(b) for b in bdfs if faces_up(model.links[b])]
    if not links:
        return None
    if any(link["bytes_per_s"] is None for link in links):
        return next(link for link in links if link["bytes_per_s"] is None)
    return min(links, key=lambda link: link["bytes_per_s"])


def _gb(value):
    return None if value is None or value == INF else round(value / 1e9, 3)


def _public(link):
    return None if link is None else {"bdf": link["bdf"], "gen": link["gen"], "width": link["width"],
                                      "gb_s": _gb(link["bytes_per_s"]), "note": link.get("note")}


def path_limit(topology, gpu, drives, gpu_load=None, spec_bytes_per_s=None):
    """The limit of the path from ``drives`` (disk names) to GPU ``gpu`` (index; None: host
    memory, a CPU transfer type): {bytes_per_s, gib_s, gb_s, bound, gpu, drives, ...}, or
    {unknown: why}. ``spec_bytes_per_s`` is the drives' summed spec, where the profile gives one."""
    topology = topology or {}
    if not topology.get("pcie_links"):
        return {"unknown": "no PCIe links in the topology facts"}
    model = PathModel(topology.get("pcie_links"), gpu_load)
    if not drives:
        return {"unknown": "no drive known for this job"}
    try:
        route = _route(model, topology, gpu, drives)
        return _path_limit(model, route, gpu, drives, spec_bytes_per_s)
    except (PathLoop, PathUnknown) as exc:
        return {"unknown": str(exc)}


def _drive_entry(topology, name):
    """The facts' entry of a disk: an NVMe namespace, else another disk (``disks``); {} if none."""
    for key in ("nvme", "disks"):
        for entry in topology.get(key) or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                return entry
    return {}


def _route(model, topology, gpu, drives):
    """{chains, gpu_chain, top, below, gpu_below, root_complex} of the path from ``drives`` to
    ``gpu``: each drive's chain of links up to where it meets the GPU's (``top``; None: the root
    complex, named by its host bridges in ``root_complex``). PathUnknown or PathLoop when there
    is none."""
    chains = {}
    for name in drives:
        entry = _drive_entry(topology, name)
        bdf = entry.get("bdf")
        chains[name] = model.chain(bdf)
        if not chains[name]:
            why = entry.get("unknown") or (
                "not a disk of the facts" if not entry else "no PCI function known" if bdf is None else bdf)
            raise PathUnknown("drive %s is not on the PCIe links of the topology (%s)" % (name, why))
    gpu_chain = []
    if gpu is not None:
        gpu_entry = next((g for g in topology.get("gpus") or [] if isinstance(g, dict) and g.get("index") == gpu), None)
        gpu_chain = model.chain((gpu_entry or {}).get("bdf"))
        if not gpu_chain:
            raise PathUnknown("GPU %s is not on the PCIe links of the topology" % gpu)
    # the lowest element the GPU shares with every drive; none: the root complex (not modelled)
    common = [b for b in gpu_chain if all(b in c for c in chains.values())] if gpu_chain else []
    top = common[0] if common else None
    below = {name: chain[:chain.index(top)] if top else chain for name, chain in chains.items()}
    for name, chain in below.items():
        if not chain:  # the drive is where its path meets the GPU's: no device tree does that
            raise PathUnknown("drive %s (%s) is on GPU %s's own path to the root in the PCIe links"
                              % (name, chains[name][0], gpu))
    gpu_below = gpu_chain[:gpu_chain.index(top)] if top else gpu_chain
    root_complex = None
    if top is None or model.links[top].get("port") == "root_port":
        tops = [c[-1] for c in chains.values()] + ([gpu_chain[-1]] if gpu_chain else [])
        root_complex = sorted({host_bridge(b) for b in tops if host_bridge(b)})
    return {"chains": chains, "gpu_chain": gpu_chain, "top": top, "below": below, "gpu_below": gpu_below,
            "root_complex": root_complex}


def route_links(topology, gpu, drives):
    """{link bdf: share of the job's bytes that crosses it} for the path from ``drives`` to
    ``gpu`` (a link named by the function that faces up on it), and the host bridges the path
    crosses (the root complex, not modelled): each drive carries an equal share (md RAID0 stripes
    evenly), the GPU's links all of it. PathUnknown or PathLoop when there is no path."""
    model = PathModel((topology or {}).get("pcie_links"))
    route = _route(model, topology or {}, gpu, drives)
    shares = {}
    for name in drives:
        for bdf in route["below"][name]:
            if faces_up(model.links[bdf]):
                shares[bdf] = shares.get(bdf, 0.0) + 1.0 / len(drives)
    for bdf in route["gpu_below"]:
        if faces_up(model.links[bdf]):
            shares[bdf] = 1.0
    return shares, route["root_complex"] or []


def _path_limit(model, route, gpu, drives, spec_bytes_per_s):
    chains, gpu_chain, top, below, gpu_below = (route[k] for k in ("chains", "gpu_chain", "top", "below", "gpu_below"))
    # max flow up the drives' tree: a node passes on what its children bring, each child's
    # link capping it; a drive brings its spec share (or anything)
    share = spec_bytes_per_s / len(drives) if spec_bytes_per_s else INF
    children, leaves = {}, {}
    for name, chain in below.items():
        leaves[chain[0]] = name
        for lower, upper in zip(chain, chain[1:] + [None]):
            children.setdefault(upper, set()).add(lower)
    shared = []

    def flow(node, above=()):
        if node in above:  # two drives' chains cross (each above the other): no tree to sum
            raise PathLoop("the PCIe links loop: %s" % " -> ".join(above[above.index(node):] + (node,)))
        own = share if node in leaves else sum(flow(c, above + (node,)) for c in children.get(node, ()))
        if not faces_up(model.links[node]):
            return own  # a downstream or root port: its link is counted at the device below
        link = model.link(node)
        if link["bytes_per_s"] is None:
            raise ValueError("%s (%s)" % (node, link["note"]))
        if link["bytes_per_s"] < own and len([n for n, c in below.items() if node in c]) > 1:
            shared.append(link)
        return min(own, link["bytes_per_s"])

    try:
        drive_side = sum(flow(c) for c in children.get(None, ()))
    except ValueError as exc:
        if isinstance(exc, PathLoop):
            raise
        return _unknown("link state unknown at %s" % exc, route)
    gpu_link = _slowest(model, gpu_below) if gpu_below else None
    if gpu_link is not None and gpu_link["bytes_per_s"] is None:
        return _unknown("link state unknown at %s (%s)" % (gpu_link["bdf"], gpu_link["note"]), route)
    gpu_side = gpu_link["bytes_per_s"] if gpu_link else INF
    slowest = {n: _slowest(model, below[n]) for n in drives}
    per_drive = [{"name": n, "bdf": chains[n][0], "slowest": _public(slowest[n])} for n in drives]
    drives_sum = sum(link["bytes_per_s"] for link in slowest.values()) if all(slowest.values()) else None
    limit = min(drive_side, gpu_side)
    # bound: what limits the path, said; bottleneck: the links it names (none for the drives' spec)
    if gpu_side < drive_side:
        bound, narrowest = "the GPU's link %s" % gpu_link["bdf"], [gpu_link["bdf"]]
    elif shared:
        narrowest = [min(shared, key=lambda s: s["bytes_per_s"])["bdf"]]
        bound = "a link the drives share, %s" % narrowest[0]
    elif spec_bytes_per_s and drive_side >= spec_bytes_per_s * 0.999:
        bound, narrowest = "the drives' spec", []
    else:
        bound, narrowest = "the drives' links", sorted({slowest[n]["bdf"] for n in drives if slowest[n]})
    if limit == INF:
        return _unknown("no PCIe link between the drives and the %s" % ("GPU" if gpu is not None else "host"), route)
    out = {"bytes_per_s": round(limit), "gb_s": _gb(limit), "gib_s": round(limit / GIB, 3), "bound": bound,
           "bottleneck": narrowest, "drives": per_drive, "drives_gb_s": _gb(drives_sum), "spec_gb_s": _gb(spec_bytes_per_s),
           "shared": [_public(s) for s in shared],
           "gpu": {"index": gpu, "bdf": gpu_chain[0], "slowest": _public(gpu_link)} if gpu_chain else None}
    if route["root_complex"]:
        out["root_complex"] = route["root_complex"]
        out["note"] = ("the path crosses the root complex%s (%s): it and the link between sockets are not "
                       "modelled, the limit is an upper bound" % (" (host memory)" if gpu is None else "",
                                                                  ", ".join(route["root_complex"])))
    return out


def _unknown(why, route):
    """An unknown limit, with the host bridges the path crosses (where it meets the GPU)."""
    out = {"unknown": why}
    if route["root_complex"]:
        out["root_complex"] = route["root_complex"]
    return out


def spec_bytes(spec, record):
    """The drives' summed spec as bytes a second: ``spec`` {metric, value} in GiB/s or IOPS (at
    the job's I/O size); None for another metric or without one."""
    value = figure(spec.get("value")) if isinstance(spec, dict) else None
    if not value:  # none, zero, or no figure (NaN, text, negative): no spec
        return None
    metric = spec.get("metric", "throughput_gib_s")
    if metric == "throughput_gib_s":
        return value * GIB
    io_size = figure((record or {}).get("io_size_bytes"))
    if metric == "iops" and io_size:
        return value * io_size
    return None
