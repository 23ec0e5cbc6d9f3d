# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The PCIe links of a host as the report shows them: gds_topology's pcie_links, each with the
role of its function, the affinity groups on it and, from the `pcie: link <bdf>` check that judged
it (hw/health.link_checks, the one judge of a link), its verdict and which end is slow."""
from __future__ import annotations

from ansible_collections.gds.commission.plugins.module_utils.core.numbers import is_figure
from ansible_collections.gds.commission.plugins.module_utils.hw.health import KIND_ROLES, PORT_ROLES


def link_state(width, speed):
    """"x8 16.0 GT/s"; "?" for what could not be read."""
    width = "x%d" % width if is_figure(width) and isinstance(width, int) and width > 0 else "x?"
    speed = "%.1f GT/s" % speed if is_figure(speed) and speed > 0 else "? GT/s"
    return "%s %s" % (width, speed)


def _below(current, expected):
    return is_figure(current) and is_figure(expected) and current < expected


# Where a bridge sits, from its PCIe port type (the link's `port`, else gds_topology's bridges):
# hw/health's words for the same link entries (PORT_ROLES, KIND_ROLES).
def link_role(link, port_types):
    """What the function is: "GPU", "NVMe controller", "NIC", "root port", "switch upstream port"..."""
    if link.get("kind") in KIND_ROLES:
        return KIND_ROLES[link["kind"]]
    role = PORT_ROLES.get(link.get("port")) or PORT_ROLES.get(port_types.get(link.get("bdf")))
    if role:
        return role
    return "root port" if not link.get("upstream") else "bridge"


def describe_degraded(link, role, width_only=False):
    """Which end is slow and by how much: "switch upstream port 0000:01:00.0 x8 of x16"."""
    parts = []
    if _below(link.get("current_width"), link.get("expected_width")):
        parts.append("x%d of x%d" % (link["current_width"], link["expected_width"]))
    if not width_only and _below(link.get("current_speed_gts"), link.get("expected_speed_gts")):
        parts.append("%.1f GT/s of %.1f GT/s" % (link["current_speed_gts"], link["expected_speed_gts"]))
    if not parts:
        return None
    return "%s %s %s" % (role, link.get("bdf"), ", ".join(parts))


def _link_checks(checks):
    """{bdf: the check that judges its link} from the checks' ``bdf`` (hw/health.link_checks);
    a GPU's check under load (``under_load``) wins over its idle one."""
    out = {}
    for check in checks:
        bdf = check.get("bdf")
        if isinstance(bdf, str) and (bdf not in out or check.get("under_load")):
            out[bdf] = check
    return out


def pcie_links(topology, checks):
    """gds_topology's pcie_links for HOST.json and the report: each link with its `role`, the
    affinity `groups` whose devices sit below or on it, `verdict`/`detail` of its check (the one
    judge of a link: hw/health.link_checks; SKIP for a link no check judged) and `slow` (which
    end is slow, for a FAIL, or null)."""
    topology = topology if isinstance(topology, dict) else {}
    raw = [link for link in topology.get("pcie_links") or [] if isinstance(link, dict) and link.get("bdf")]
    if not raw:
        return []
    by_bdf = {link["bdf"]: link for link in raw}
    port_types = {b.get("bdf"): b.get("port_type") for b in topology.get("bridges") or [] if isinstance(b, dict)}
    judged = _link_checks(checks)
    groups_of = {}
    for group in topology.get("groups") or []:
        for bdf in group_path(group, topology, by_bdf):
            groups_of.setdefault(bdf, []).append(group.get("id"))
    out = []
    for link in raw:
        role = link_role(link, port_types)
        # an idle GPU trains its speed down: its slow end is named by width only
        gpu = link.get("kind") == "gpu"
        check = judged.get(link["bdf"])
        if check:
            verdict, detail = check["verdict"], check.get("detail")
        else:
            verdict, detail = "SKIP", "not judged: no pcie: link check was recorded for this link"
        slow = None
        if verdict == "FAIL":
            slow = (describe_degraded(link, role, width_only=gpu) or detail
                    or "%s %s below its expected link" % (role, link["bdf"]))
        out.append(dict(link, role=role, groups=groups_of.get(link["bdf"], []), verdict=verdict, detail=detail, slow=slow))
    return out


def group_path(group, topology, by_bdf):
    """BDFs of a group's links, top-down: each device's path from its root port to itself."""
    gpus = {g.get("index"): g.get("bdf") for g in topology.get("gpus") or []}
    members = [gpus.get(i) for i in group.get("gpus") or []]
    for drive in topology.get("nvme") or []:
        if drive.get("name") in (group.get("nvme") or []):
            members += [p.get("bdf") for p in drive.get("paths") or []] or [drive.get("bdf")]
    for nic in topology.get("nics") or []:
        if nic.get("name") in (group.get("nics") or []):
            members.append(nic.get("bdf"))
    ordered = []
    for bdf in members:
        chain, seen = [], set()
        while bdf in by_bdf and bdf not in seen:  # a looping upstream chain ends, never spins
            seen.add(bdf)
            chain.append(bdf)
            bdf = by_bdf[bdf].get("upstream")
        ordered += [b for b in reversed(chain) if b not in ordered]
    return ordered
