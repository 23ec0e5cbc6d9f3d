# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vendor's view for comparison: ``nvidia-smi topo -m`` / ``-mp`` text read into a matrix.

Never an input of discovery (that is sysfs and NVML, hw/affinity.py and hw/nvml.py): this is what
the lab scripts and the captured-machine tests hold the facts against. Both layouts are read: the
driver's (tab separated, an underlined header, CPU/NUMA affinity columns, NICs as NIC0.. with a
"NIC Legend") and the guide's listings (space separated, NICs by name).
"""
from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;]*m")
CLASSES = ("X", "PIX", "PXB", "PHB", "NODE", "SYS")
NVLINK = re.compile(r"^NV(\d+)$")
AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


class TopoTextError(ValueError):
    """The text is not an nvidia-smi topology matrix."""


def parse(text):
    """{"matrix": {row: {column: cell}}, "affinity": {row: {CPU Affinity, NUMA Affinity, GPU NUMA
    ID}}} with NICs under their device names (the legend's NIC0 -> mlx5_0)."""
    lines = [ANSI.sub("", line).rstrip() for line in (text or "").splitlines()]
    legend = {}
    for line in lines:
        match = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", line)
        if match:
            legend[match.group(1)] = match.group(2)
    body = []
    for line in lines:
        if line.strip().startswith("Legend"):
            break
        if line.strip():
            body.append(line)
    if not body:
        raise TopoTextError("no matrix in the text")
    tabs = "\t" in body[0]
    split = (lambda line: [c.strip() for c in line.split("\t")]) if tabs else str.split
    header = [c for c in split(body[0]) if c]
    columns = [c for c in header if c not in AFFINITY_COLUMNS]
    matrix, affinity = {}, {}
    for line in body[1:]:
        cells = split(line)
        name, cells = cells[0], cells[1:]
        if not tabs and len(cells) != len(columns):
            raise TopoTextError("row %s has %d cells for %d columns" % (name, len(cells), len(columns)))
        name = legend.get(name, name)
        matrix[name] = {legend.get(c, c): cell for c, cell in zip(columns, cells) if cell not in ("", ". . .")}
        extra = cells[len(columns):]
        if extra:
            affinity[name] = dict(zip([c for c in header if c in AFFINITY_COLUMNS], [c for c in extra if c != ""]))
    if not matrix or not any(cell == "X" for row in matrix.values() for cell in row.values()):
        raise TopoTextError("no matrix in the text (it starts %r)" % body[0][:80])
    return {"matrix": matrix, "affinity": affinity}


def compare(topology, topo_mp=None, topo_m=None):
    """(compared, [differences]) of the facts against the vendor's matrices: every cell of -mp
    between devices the facts know (GPUs, NICs) against ``matrix``; every NV# cell of -m against
    ``nvlink`` (and a PCIe class cell of -m against ``matrix``, nvidia-smi showing one only where
    there is no NVLink); each GPU's NUMA Affinity against its numa_node where the facts know it.
    A difference is a string naming the pair and both answers."""
    matrix = topology.get("matrix") or {}
    nvlink = topology.get("nvlink")
    numa = {"GPU%d" % g["index"]: g.get("numa_node") for g in topology.get("gpus") or []}
    compared, differences = 0, []

    def pcie(source, row, column, cell):
        ours = (matrix.get(row) or {}).get(column)
        if ours is None:
            differences.append("%s %s/%s: nvidia-smi %s, not in the facts' matrix" % (source, row, column, cell))
        elif ours != cell:
            differences.append("%s %s/%s: nvidia-smi %s, facts %s" % (source, row, column, cell, ours))

    for source, text in (("topo -mp", topo_mp), ("topo -m", topo_m)):
        if not text:
            continue
        parsed = parse(text)
        for row, cells in parsed["matrix"].items():
            if row not in matrix:
                differences.append("%s: %s is not a device of the facts" % (source, row))
                continue
            for column, cell in cells.items():
                compared += 1
                link = NVLINK.match(cell)
                if link:
                    ours = None if nvlink is None else (nvlink.get(row) or {}).get(column, 0)
                    if ours is None:
                        differences.append("%s %s/%s: nvidia-smi %s, the facts' NVLinks unknown (no NVML)"
                                           % (source, row, column, cell))
                    elif ours != int(link.group(1)):
                        differences.append("%s %s/%s: nvidia-smi %s, facts NV%d" % (source, row, column, cell, ours))
                elif cell in CLASSES:
                    if source == "topo -m" and nvlink and (nvlink.get(row) or {}).get(column):
                        differences.append("%s %s/%s: nvidia-smi %s, facts NV%d"
                                           % (source, row, column, cell, nvlink[row][column]))
                    else:
                        pcie(source, row, column, cell)
                else:
                    compared -= 1  # a cell of a kind nvidia-smi adds later (e.g. SOC): not ours to judge
            said = (parsed["affinity"].get(row) or {}).get("NUMA Affinity")
            # sysfs's -1 (the firmware names no node) is unknown in the facts; nvidia-smi prints 0
            if numa.get(row) is not None and numa[row] >= 0 and said not in (None, "N/A"):
                compared += 1
                if not said.isdigit() or numa[row] != int(said):
                    differences.append("%s %s NUMA Affinity: nvidia-smi %s, facts %s" % (source, row, said, numa[row]))
    return compared, differences
