# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's PCIe tree as a picture (inline SVG): what admins draw by hand from `lspci -tv` and
`nvidia-smi topo -mp`. Host bridges on top, then root ports, switches (a switch's upstream port
with its downstream ports folded into one box) and the GPUs, NVMe drives and NICs below them;
each box filled with its affinity group's colour, each link coloured by its verdict with its
width and speed on hover. Each benchmark job whose path is known draws over it (shown when its
link is followed: CSS :target, no script): the bytes that crossed each link and the hop that
bounds it (measure/pathlimit's route and limit, the ones the watch used)."""
from __future__ import annotations

from ansible_collections.gds.commission.plugins.module_utils.core.checks import gb_text, worst
from ansible_collections.gds.commission.plugins.module_utils.core.files import printable
from ansible_collections.gds.commission.plugins.module_utils.core.numbers import is_figure
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_links import link_state
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_text import html_text
from ansible_collections.gds.commission.plugins.module_utils.measure.pathlimit import (
    PathLoop, PathUnknown, faces_up, host_bridge, route_links,
)

BOX_W, BOX_H, GAP, ROW = 104, 34, 10, 72
# affinity group n takes GROUP_FILLS[(n - 1) % len]; a box on several groups' paths is SHARED_FILL
GROUP_FILLS = ("#bbdefb", "#c8e6c9", "#ffe0b2", "#e1bee7", "#b2ebf2", "#f8bbd0", "#dcedc8", "#d7ccc8")
SHARED_FILL, NO_GROUP_FILL = "#eceff1", "#ffffff"
ENDPOINT_NAMES = {"gpu": "GPU", "nvme": "NVMe", "nic": "NIC"}


def _bus(bdf):
    """"18:00.0" of "0000:18:00.0" (the domain drawn once, on its host bridge)."""
    return bdf.split(":", 1)[1] if bdf.count(":") == 2 else bdf


def _names(topology):
    """{bdf: label} of the endpoints the facts name: GPU<index>, the NVMe namespaces, the NIC."""
    out = {}
    for gpu in topology.get("gpus") or []:
        if isinstance(gpu, dict) and isinstance(gpu.get("bdf"), str):
            out[gpu["bdf"]] = "GPU%s" % printable(gpu.get("index"))
    drives = {}
    for drive in topology.get("nvme") or []:
        if not isinstance(drive, dict):
            continue
        for path in [drive] + [p for p in drive.get("paths") or [] if isinstance(p, dict)]:
            if isinstance(path.get("bdf"), str):
                label = "%s%s" % (printable(drive.get("name")), " (system)" if drive.get("system") else "")
                labels = drives.setdefault(path["bdf"], [])
                if label not in labels:  # a controller with several namespaces names each once
                    labels.append(label)
    for bdf, labels in drives.items():
        out.setdefault(bdf, ", ".join(labels))
    for nic in topology.get("nics") or []:
        if isinstance(nic, dict) and isinstance(nic.get("bdf"), str):
            out.setdefault(nic["bdf"], printable(nic.get("name")))
    return out


class Tree(object):
    """The boxes and links of one host's tree, laid out: ``boxes`` {id: box}, ``links`` {bdf of
    the function that faces up on the link: link}. A box id is a host bridge ("pci0000:15") or
    a function's address (a switch by its upstream port)."""

    def __init__(self, pcie_links, topology):
        entries = {e["bdf"]: e for e in pcie_links or [] if isinstance(e, dict) and isinstance(e.get("bdf"), str)}
        self.entries, names = entries, _names(topology or {})
        self.boxes, self.links, parent = {}, {}, {}
        for bdf, entry in entries.items():
            if entry.get("port") == "downstream":
                continue  # folded into its switch's box
            up = entry.get("upstream") if isinstance(entry.get("upstream"), str) and entry["upstream"] in entries else None
            self.boxes[bdf] = self._box(bdf, entry, names)
            if up is None:
                top = host_bridge(bdf) or "root complex"
                self.boxes.setdefault(top, {"id": top, "kind": "host bridge", "label": "host bridge",
                                            "sub": top, "groups": set(), "children": []})
                parent[bdf] = top
                continue
            port = entries[up]
            parent[bdf] = self._switch_of(up)
            if faces_up(entry):  # a link is named by the function below it (pathlimit's rule)
                self.links[bdf] = {"bdf": bdf, "port": up, "entry": entry, "port_entry": port,
                                   "verdict": worst([str(entry.get("verdict") or "SKIP"), str(port.get("verdict") or "SKIP")])}
        for bdf, up in parent.items():
            if up not in self.boxes or self._loops(bdf, parent):
                parent[bdf] = None
        # addresses sort as text: fixed-width hex, where a natural sort would put 9a before 15
        self.tops = sorted(b for b in self.boxes if b not in parent)
        self.tops += sorted(b for b, up in parent.items() if up is None)
        for bdf, up in sorted(parent.items()):
            if up is not None:
                self.boxes[up]["children"].append(bdf)
        self._place()

    def _switch_of(self, bdf):
        """The box a port belongs to: a downstream port's is its switch (its upstream port)."""
        entry = self.entries.get(bdf) or {}
        if entry.get("port") == "downstream" and isinstance(entry.get("upstream"), str) and entry["upstream"] in self.entries:
            return entry["upstream"]
        return bdf

    @staticmethod
    def _loops(bdf, parent):
        seen = set()
        while bdf is not None:
            if bdf in seen:
                return True
            seen.add(bdf)
            bdf = parent.get(bdf)
        return False

    def _box(self, bdf, entry, names):
        kind = entry.get("kind") if entry.get("kind") in ENDPOINT_NAMES else (
            "switch" if entry.get("port") == "upstream" else "root port" if entry.get("port") == "root_port" else "function")
        label = names.get(bdf) or ENDPOINT_NAMES.get(kind) or kind
        groups = {g for g in entry.get("groups") or [] if isinstance(g, int) and not isinstance(g, bool)}
        return {"id": bdf, "kind": kind, "label": label, "sub": _bus(bdf), "groups": groups, "children": [],
                "verdict": entry.get("verdict")}

    def _place(self):
        """x of each box (leaves side by side in address order, a parent over its children), y by
        depth; iterative, so no tree is too deep for it."""
        self.width, self.depth, leaf = 0, 0, 0
        stack = [(top, 0, False) for top in reversed(self.tops)]
        while stack:
            box_id, depth, done = stack.pop()
            box = self.boxes[box_id]
            box["y"] = depth * ROW
            self.depth = max(self.depth, depth)
            if done:
                xs = [self.boxes[c]["x"] for c in box["children"]]
                box["x"] = (min(xs) + max(xs)) / 2.0
            elif box["children"]:
                stack.append((box_id, depth, True))
                stack += [(c, depth + 1, False) for c in reversed(box["children"])]
            else:
                box["x"] = leaf * (BOX_W + GAP)
                leaf += 1
        self.width = max(leaf, 1) * (BOX_W + GAP)

    def center(self, box_id, end):
        """Where a link meets a box: the middle of its top (``end`` "top") or bottom edge."""
        box = self.boxes[box_id]
        return box["x"] + BOX_W / 2.0, box["y"] + (0 if end == "top" else BOX_H)

    def link_ends(self, bdf):
        """(x1, y1, x2, y2) of a link: from its upper box's bottom to the lower box's top."""
        upper = self._switch_of(self.links[bdf]["port"])
        return self.center(upper, "bottom") + self.center(bdf, "top")


def fill(box):
    groups = box["groups"]
    if not groups:
        return NO_GROUP_FILL
    return GROUP_FILLS[(min(groups) - 1) % len(GROUP_FILLS)] if len(groups) == 1 else SHARED_FILL


def link_title(link):
    """The hover text of a link: both ends, its state against its maximum, the verdict, why."""
    entry = link["entry"]
    now = link_state(entry.get("current_width"), entry.get("current_speed_gts"))
    most = link_state(entry.get("max_width"), entry.get("max_speed_gts"))
    text = "%s - %s: %s (max %s) %s" % (link["port"], link["bdf"], now, most, link["verdict"])
    detail = entry.get("slow") or entry.get("detail") or link["port_entry"].get("detail")
    return text + ("; %s" % printable(detail) if detail else "")


def job_paths(doc, results):
    """[(n, result, {bdf: bytes}, bottleneck bdfs, root complex crossed, why unknown)] for each
    benchmark job: the links its bytes crossed (measure/pathlimit.route_links: each drive an equal
    share, the GPU's links all of it) from the watch's limit, which names the job's GPU and drives."""
    topology = doc.get("topology") if isinstance(doc.get("topology"), dict) else {}
    out = []
    for n, result in enumerate(r for r in results if isinstance(r, dict)):
        watch = result.get("watch") if isinstance(result.get("watch"), dict) else {}
        limit = watch.get("limit") if isinstance(watch.get("limit"), dict) else {}
        record = result.get("record") if isinstance(result.get("record"), dict) else {}
        drives = [d.get("name") for d in limit.get("drives") or [] if isinstance(d, dict) and isinstance(d.get("name"), str)]
        gpu = (limit.get("gpu") or {}).get("index") if isinstance(limit.get("gpu"), dict) else None
        if not drives:
            out.append((n, result, {}, [], [], limit.get("unknown") or watch.get("unknown") or "no path known"))
            continue
        try:
            shares, crossed = route_links(dict(topology, pcie_links=doc.get("pcie_links") or topology.get("pcie_links")),
                                          gpu, drives)
        except (PathLoop, PathUnknown) as exc:
            out.append((n, result, {}, [], [], str(exc)))
            continue
        except (TypeError, ValueError, KeyError, AttributeError):  # links not of the facts' shape
            out.append((n, result, {}, [], [], "the PCIe links are not of the facts' shape"))
            continue
        total = record.get("bytes") if is_figure(record.get("bytes")) and record.get("bytes") >= 0 else None
        moved = {bdf: (share * total if total is not None else None) for bdf, share in shares.items()}
        narrowest = [b for b in limit.get("bottleneck") or [] if isinstance(b, str)]
        out.append((n, result, moved, narrowest, crossed, None))
    return out


def _short(text, limit=17):
    text = printable(text)
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _lanes(entry):
    width = entry.get("current_width")
    return width if is_figure(width) and isinstance(width, int) and 0 < width <= 32 else 1


def _box_svg(box, colors):
    verdict = box.get("verdict")
    edge = colors[verdict] if verdict in ("FAIL", "WARN", "ERROR") else "#90a4ae"
    groups = ", ".join("group %d" % g for g in sorted(box["groups"])) or "no affinity group"
    title = "%s %s (%s)%s" % (box["kind"], box["id"], groups, ": %s" % verdict if verdict else "")
    return ("<g class=\"box\" data-kind=\"%s\" data-bdf=\"%s\" data-groups=\"%s\"><title>%s</title>"
            "<rect x=\"%.1f\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"4\" fill=\"%s\" stroke=\"%s\"/>"
            "<text x=\"%.1f\" y=\"%d\" class=\"name\">%s</text><text x=\"%.1f\" y=\"%d\" class=\"sub\">%s</text></g>" % (
                html_text(box["kind"]), html_text(box["id"]), " ".join(str(g) for g in sorted(box["groups"])),
                html_text(title), box["x"], box["y"], BOX_W, BOX_H, fill(box), edge,
                box["x"] + BOX_W / 2.0, box["y"] + 14, html_text(_short(box["label"])),
                box["x"] + BOX_W / 2.0, box["y"] + 27, html_text(_short(box["sub"]))))


def _job_svg(tree, n, result, moved, narrowest, crossed):
    """One job's path over the tree: each link it crossed with its bytes, the bounding hop ringed,
    the host bridges it crossed outlined."""
    name = printable(result.get("name"))
    out = ["<g class=\"job\" id=\"path-%d\" data-job=\"%s\">" % (n, html_text(name))]
    for bdf, amount in sorted(moved.items()):
        if bdf not in tree.links:
            continue
        x1, y1, x2, y2 = tree.link_ends(bdf)
        out.append("<line class=\"path\" data-bdf=\"%s\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>"
                   "<text class=\"bytes\" x=\"%.1f\" y=\"%.1f\">%s</text>" % (
                       html_text(bdf), x1, y1, x2, y2, (x1 + x2) / 2.0 + 4, (y1 + y2) / 2.0,
                       html_text(gb_text(amount) if amount is not None else "bytes unknown")))
        if bdf in narrowest:
            out.append("<circle class=\"bottleneck\" data-bdf=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"11\"><title>bounds the job: %s</title>"
                       "</circle>" % (html_text(bdf), x1 + (x2 - x1) * 0.75, y1 + (y2 - y1) * 0.75, html_text(link_title(tree.links[bdf]))))
    for bridge in crossed:
        if bridge in tree.boxes:
            box = tree.boxes[bridge]
            out.append("<rect class=\"crossed\" x=\"%.1f\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"4\"/>"
                       % (box["x"] - 3, box["y"] - 3, BOX_W + 6, BOX_H + 6))
    limit = (result.get("watch") or {}).get("limit") or {}
    out.append("<text class=\"caption\" x=\"4\" y=\"%d\">%s</text></g>" % ((tree.depth + 1) * ROW - 14, html_text(
        "%s: the bytes that crossed each link%s" % (name, "; bounded by %s (ringed)" % printable(limit.get("bound")) if narrowest else ""))))
    return "".join(out)


def tree_html(doc, colors):
    """The host's "PCIe tree" section: the picture, its legend and a link per job whose path is
    known (a click draws that job over the tree); "" without links. ``colors``: verdict colours."""
    tree = Tree(doc.get("pcie_links"), doc.get("topology") if isinstance(doc.get("topology"), dict) else {})
    if not tree.boxes:
        return ""
    height = (tree.depth + 1) * ROW + 6
    out = ["<h3 id=\"pcie-tree\">PCIe tree</h3><div class=\"tree-wrap\"><svg class=\"chart tree\" xmlns=\"http://www.w3.org/2000/svg\" "
           "width=\"%d\" height=\"%d\" viewBox=\"0 -4 %d %d\" role=\"img\" aria-label=\"PCIe tree\">" % (
               tree.width, height, tree.width, height)]
    for box in tree.boxes.values():  # a host bridge's own functions: on its root bus, no PCIe link
        out += ["<line class=\"bus\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>" % (tree.center(box["id"], "bottom") + tree.center(c, "top"))
                for c in box["children"] if box["kind"] == "host bridge"]
    for bdf, link in sorted(tree.links.items()):
        x1, y1, x2, y2 = tree.link_ends(bdf)
        out.append("<line class=\"link\" data-bdf=\"%s\" data-verdict=\"%s\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                   "stroke=\"%s\" stroke-width=\"%.1f\"><title>%s</title></line>" % (
                       html_text(bdf), html_text(link["verdict"]), x1, y1, x2, y2, colors.get(link["verdict"], "#000"),
                       1 + _lanes(link["entry"]) / 4.0, html_text(link_title(link))))
    out += [_box_svg(box, colors) for box_id, box in sorted(tree.boxes.items())]
    paths = job_paths(doc, doc.get("bench") or [])
    out += [_job_svg(tree, n, result, moved, narrowest, crossed) for n, result, moved, narrowest, crossed, why in paths if not why]
    out.append("</svg></div>")
    groups = sorted({g for box in tree.boxes.values() for g in box["groups"]})
    out.append("<p class=\"legend\">%s <span class=\"swatch\" style=\"background:%s\"></span> on several groups' paths; "
               "a link's colour is its verdict, its width its lanes (hover for width and speed)</p>" % (
                   " ".join("<span class=\"swatch\" style=\"background:%s\"></span> group %d" % (GROUP_FILLS[(g - 1) % len(GROUP_FILLS)], g)
                            for g in groups), SHARED_FILL))
    known = [(n, result) for n, result, moved, narrowest, crossed, why in paths if not why]
    unknown = sorted({why for n, result, moved, narrowest, crossed, why in paths if why})
    if known:
        out.append("<p class=\"legend\">Draw a job's path (bytes per link, the bounding hop ringed): %s</p>" % " &middot; ".join(
            "<a href=\"#path-%d\">%s</a>" % (n, html_text(result.get("name"))) for n, result in known))
    if unknown:
        out.append("<p class=\"meta\">Paths not drawn: %s</p>" % html_text("; ".join(unknown)))
    return "".join(out)
