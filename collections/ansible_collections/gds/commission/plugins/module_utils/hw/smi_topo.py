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
# ASCII digits only ("²" is a digit to str.isdigit, not to int), and as many as a count can have
NVLINK = re.compile(r"^NV([0-9]{1,3})$", re.ASCII)
NUMA_ID = re.compile(r"^[0-9]{1,4}$", re.ASCII)
GPU_NAME = re.compile(r"^GPU[0-9]{1,4}$", re.ASCII)
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
    A difference is a string naming the pair and both answers. Every GPU pair of the facts must be
    whole: a GPU row or cell the text lacks while naming that GPU elsewhere (a listing may show a
    part of the machine, as the guide's do) or text with no matrix is a difference, never fewer
    cells compared and "no difference"."""
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
        if text is None:
            continue
        try:
            parsed = parse(text)
        except TopoTextError as exc:
            differences.append("%s: %s" % (source, exc))
            continue
        # the GPUs of its columns (a listing may crop columns, as the guide's do, not rows): each has
        # its row, and each GPU row a cell in each of them
        columns = set(c for cells in parsed["matrix"].values() for c in cells if GPU_NAME.match(c))
        gpus = sorted(columns | set(r for r in parsed["matrix"] if GPU_NAME.match(r)), key=lambda name: int(name[3:]))
        for row in gpus:
            missing = sorted((c for c in columns if c not in (parsed["matrix"].get(row) or {})), key=lambda n: int(n[3:]))
            if missing:
                differences.append("%s %s: no cell for %s in nvidia-smi's text" % (source, row, ", ".join(missing)))
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
                elif cell.startswith("NV"):
                    differences.append("%s %s/%s: nvidia-smi %s, not an NVLink count" % (source, row, column, cell[:40]))
                else:
                    compared -= 1  # a cell of a kind nvidia-smi adds later (e.g. SOC): not ours to judge
            said = (parsed["affinity"].get(row) or {}).get("NUMA Affinity")
            # sysfs's -1 (the firmware names no node) is unknown in the facts; nvidia-smi prints 0
            if numa.get(row) is not None and numa[row] >= 0 and said not in (None, "N/A"):
                compared += 1
                if not NUMA_ID.match(said) or numa[row] != int(said):
                    differences.append("%s %s NUMA Affinity: nvidia-smi %s, facts %s" % (source, row, said[:40], numa[row]))
    return compared, differences
