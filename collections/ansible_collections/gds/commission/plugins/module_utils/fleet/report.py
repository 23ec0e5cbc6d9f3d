# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The commissioning and drift reports (docs/reports.md): summary.json, HOST.json,
junit.xml, report.html and drift.json, built from what each host recorded.

Pure functions from plain data to documents, plus one writer that puts a run directory in
place atomically and points ``latest`` at it.
"""
from __future__ import annotations

import datetime
import hashlib
import html
import json
import math
import os
import re
import statistics
import time
import xml.etree.ElementTree as ET

from ansible_collections.gds.commission.plugins.module_utils.core.checks import (
    FAILING, SEVERITY, VERDICTS, gb_text, host_verdict, refuse_unknown,
)
from ansible_collections.gds.commission.plugins.module_utils.core.checks import check as make_check
from ansible_collections.gds.commission.plugins.module_utils.core.files import natural_key, printable
from ansible_collections.gds.commission.plugins.module_utils.core.numbers import figure, is_figure
from ansible_collections.gds.commission.plugins.module_utils.hw.health import KIND_ROLES, PORT_ROLES
from ansible_collections.gds.commission.plugins.module_utils.fleet.metrics import COMMISSION_FILE, DRIFT_FILE, area_of, commission_metrics, drift_metrics
from ansible_collections.gds.commission.plugins.module_utils.fleet.output import OutDir, RefusedPath

COLORS = {"PASS": "#2e7d32", "WARN": "#ef8f00", "FAIL": "#c62828", "SKIP": "#757575",
          "ERROR": "#6a1b9a", "UNREACHABLE": "#37474f"}


# --------------------------------------------------------------------------------------------
# What the report reads of each host: one map for the report play's filter
# (plugins/filter/gds_report_hosts.py) and the callback's own report (plugins/callback/
# gds_commission.py), so both judge a host from the same data
# --------------------------------------------------------------------------------------------
# host variable (set_fact) -> HOST.json key
REPORT_VARS = {"gds_raid_arrays": "arrays", "gds_bench_results": "bench", "gds_rdma_bench_results": "rdma_bench"}
# ansible_facts entry -> HOST.json key
REPORT_FACTS = {"gds_topology": "topology", "gds_platform": "platform"}
# the role's defaults (roles/gds_report/defaults/main.yml: gds_report_check_vars,
# gds_report_required_areas); tests/unit/test_report.py keeps both the same
CHECK_VARS = r"^(gds|pcie_acs|iommu|gds_driver|nvme_raid|cufile)_[a-z0-9_]*checks$"
REQUIRED_AREAS = ("bench",)
REBOOT_VARS = re.compile(r"^gds_\w*reboot_required$")


def _flat(value):
    """The items of nested lists, in order (a loop, not a recursion: nesting of any depth)."""
    out, todo = [], [value]
    while todo:
        item = todo.pop()
        if isinstance(item, (list, tuple)):
            todo.extend(reversed(item))
        else:
            out.append(item)
    return out


def host_inputs(variables, facts, check_vars=CHECK_VARS):
    """{checks, topology, arrays, bench, rdma_bench, reboot_required, platform}: what the report
    reads of one host, from its variables (checks in their order; only the names that match are
    read) and its ansible_facts. ``check_vars``: a pattern (text or compiled) of the variables
    that hold checks. A variable that cannot be read (a template that fails) is named in
    ``input_error``: the report makes that host ERROR, never the others."""
    pattern = re.compile(check_vars) if isinstance(check_vars, str) else check_vars
    problems = []

    def read(source, name, default=None):
        try:
            return source.get(name, default)
        except Exception as exc:  # whatever a lazy variable raises is this host's problem only
            problems.append("%s: %s" % (name, _short(str(exc) or type(exc).__name__)))
            return default

    names = list(variables.keys())
    checks = []
    for name in names:
        if pattern.search(name):
            checks.extend(_flat(read(variables, name, [])))
    out = {"checks": checks}
    for name, key in REPORT_FACTS.items():
        out[key] = read(facts or {}, name)
    for name, key in REPORT_VARS.items():
        out[key] = read(variables, name) or []
    out["reboot_required"] = any(bool(read(variables, name)) for name in names if REBOOT_VARS.search(name))
    if problems:
        out["input_error"] = "cannot read host variable %s" % "; ".join(problems)
    return out


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------
# optional keys of a check record kept as they are (docs/reports.md#the-check-record)
CHECK_KEYS = ("low", "high", "unit", "reference", "bdf", "under_load")


def _value(value):
    """A check's value as it is, but an integer too long to print (over 10000 bits) as text.
    Figures no float can hold stay numbers: where one is needed they are skipped (_figure,
    fleet/metrics.format_value)."""
    return printable(value) if isinstance(value, int) and value.bit_length() > 10000 else value


def normalize_check(item):
    """A check as every writer may rely on: a dict with a text name and a known verdict (else
    ERROR); anything that is no check at all becomes an ERROR naming it. A recorded PASS whose
    ``actual`` is unknown is no PASS here either (core/checks.refuse_unknown: SKIP, the reason
    added to ``detail``): what a host recorded is judged by the same rule as what it built."""
    if not isinstance(item, dict):
        return make_check("host: check record", "ERROR", "a check record", _short(item),
                          "the host recorded something that is not a check")
    verdict = item.get("verdict", "ERROR")
    verdict = verdict.upper() if isinstance(verdict, str) else "ERROR"
    verdict, why = refuse_unknown(verdict if verdict in VERDICTS else "ERROR", item.get("actual"))
    out = {"name": _text(item.get("name", "unnamed check")), "verdict": verdict,
           "expected": _value(item.get("expected")), "actual": _value(item.get("actual"))}
    detail = "; ".join(_text(part) for part in (item.get("detail"), why) if part)
    if detail:
        out["detail"] = detail
    for key in CHECK_KEYS:
        if item.get(key) is not None:
            out[key] = _text(item[key]) if key == "unit" else _value(item[key])
    return out


def _text(value):
    """Text as it is; anything else as its text (an integer too long to print as a note)."""
    return value if isinstance(value, str) else printable(value, controls=False)


def _short(value, limit=300):
    """A value as a message shows it: text as it is, else its repr, cut at ``limit``; never raises."""
    try:
        text = value if isinstance(value, str) else printable(value) if isinstance(value, int) else repr(value)
    except (ValueError, RecursionError):  # a value nested too deep to print
        text = "(a %s too large to show)" % type(value).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def host_document(name, data, state, required_areas=()):
    """One host's report: verdict, checks, and what the report needs to show it.

    A host that completed its plays needs a measured (not SKIP) check in every required area:
    without one it FAILs, so no host passes without, say, a benchmark result.
    """
    state = state or {}
    checks = [normalize_check(c) for c in _flat(data.get("checks") or [])]
    if not state.get("unreachable") and not state.get("broken"):
        for area in required_areas:
            mine = [c for c in checks if c["name"].startswith(area + ":")]
            if not [c for c in mine if c["verdict"] != "SKIP"]:
                checks.append(make_check("%s: measured" % area, "FAIL", "at least one %s result" % area,
                                         "%d checks, all SKIP" % len(mine) if mine else "none",
                                         "nothing in area %s was measured on this host (did its role run?)" % area))
    if state.get("unreachable"):
        checks.append(make_check("host: reachable", "UNREACHABLE", "reachable", "unreachable", state.get("msg") or ""))
    elif state.get("broken"):
        last = (state.get("failures") or [{}])[-1]
        checks.append(make_check("host: play completed", "ERROR", "every step ran",
                                 "failed in task '%s'" % last.get("task", "?"), last.get("msg") or ""))
    if not checks:
        checks.append(make_check("host: checks recorded", "ERROR", "at least one check", 0, "the host recorded no checks"))
    verdict = host_verdict(c["verdict"] for c in checks)
    doc = {"host": name, "verdict": verdict, "checks": checks}
    for key in ("platform", "topology", "arrays", "bench", "reboot_required", "raid_plan", "rdma_bench"):
        if data.get(key) is not None:
            doc[key] = data[key]
    links = pcie_links(data.get("topology"), checks)
    if links:
        doc["pcie_links"] = links
    return doc


def summary(run_id, started, finished, docs):
    counts = {key: 0 for key in ("PASS", "FAIL", "ERROR", "UNREACHABLE")}
    for doc in docs.values():
        counts[doc["verdict"]] = counts.get(doc["verdict"], 0) + 1
    return {"run_id": run_id, "started": started, "finished": finished,
            "hosts": {name: {"verdict": doc["verdict"], "checks": doc["checks"]} for name, doc in sorted(docs.items())},
            "counts": counts}


def junit(summary_doc, suites=None):
    """A testsuite per host, a testcase per check (WARN passes with a note, SKIP is skipped).
    ``suites``: {host: junit_suite(...)} built already (build_report's, one host at a time)."""
    root = ET.Element("testsuites", name=printable("gds-commission %s" % summary_doc["run_id"]))
    for host, doc in sorted(summary_doc["hosts"].items()):
        root.append((suites or {}).get(host) or junit_suite(host, doc["checks"]))
    ET.indent(root)
    return "<?xml version='1.0' encoding='UTF-8'?>\n" + ET.tostring(root, encoding="unicode") + "\n"


def junit_suite(host, checks):
    """One host's testsuite. ElementTree escapes markup (& < > and quotes); what XML 1.0 cannot
    hold at all (control characters, bytes that were not UTF-8) is written as its escape first
    (core/files.printable)."""
    x = printable
    suite = ET.Element("testsuite", name=x(host), tests=str(len(checks)),
                       failures=str(sum(c["verdict"] == "FAIL" for c in checks)),
                       errors=str(sum(c["verdict"] in ("ERROR", "UNREACHABLE") for c in checks)),
                       skipped=str(sum(c["verdict"] == "SKIP" for c in checks)))
    for check in checks:
        area = area_of(check["name"])
        case = ET.SubElement(suite, "testcase", classname=x("%s.%s" % (host, area.replace(" ", "_"))),
                             name=x(check["name"]))
        text = x("expected %s, actual %s%s" % (check.get("expected"), check.get("actual"),
                                               ("; " + check["detail"]) if check.get("detail") else ""))
        if check["verdict"] == "FAIL":
            ET.SubElement(case, "failure", message=text).text = text
        elif check["verdict"] in ("ERROR", "UNREACHABLE"):
            ET.SubElement(case, "error", message=text).text = text
        elif check["verdict"] == "SKIP":
            ET.SubElement(case, "skipped", message=x(check.get("detail") or "skipped"))
        elif check["verdict"] == "WARN":
            ET.SubElement(case, "system-out").text = "WARN: " + text
    return suite


# --------------------------------------------------------------------------------------------
# PCIe links (gds_topology's pcie_links, judged by the `pcie: link <bdf>` checks)
# --------------------------------------------------------------------------------------------
# Where a bridge sits, from its PCIe port type (the link's `port`, else gds_topology's bridges):
# hw/health's words for the same link entries (PORT_ROLES, KIND_ROLES).


def _link_state(width, speed):
    """"x8 16.0 GT/s"; "?" for what could not be read."""
    width = "x%d" % width if is_figure(width) and isinstance(width, int) and width > 0 else "x?"
    speed = "%.1f GT/s" % speed if is_figure(speed) and speed > 0 else "? GT/s"
    return "%s %s" % (width, speed)


def _below(current, expected):
    return is_figure(current) and is_figure(expected) and current < expected


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
        for bdf in _group_path(group, topology, by_bdf):
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


def _group_path(group, topology, by_bdf):
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


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------
def _e(value):
    """Text for HTML, in an element or a quoted attribute: markup and quotes escaped, characters
    no page should hold (controls, bytes that were not UTF-8) written as their escape."""
    return html.escape(printable(value), quote=True)


def _badge(verdict):
    return '<span class="badge" style="background:%s">%s</span>' % (COLORS.get(verdict, "#000"), _e(verdict))


def _bus(bdf):
    parts = str(bdf or "").split(":")
    return "0x" + parts[-2] if len(parts) > 1 else str(bdf or "")


def affinity_rows(doc):
    topo = doc.get("topology") or {}
    gpus = {g.get("index"): g for g in topo.get("gpus") or [] if isinstance(g, dict)}
    drives = {d.get("name"): d for d in topo.get("nvme") or [] if isinstance(d, dict)}
    mounts = {}
    for array in doc.get("arrays") or []:
        for member in array.get("members") or [] if isinstance(array, dict) else []:
            mounts[member] = array
    rows = []
    for group in topo.get("groups") or []:
        nvme = [str(d) for d in group.get("nvme") or []]
        array = next((mounts[d] for d in nvme if d in mounts), None)
        rows.append({
            "group": group.get("id"),
            "array": "%s (%s)" % (array.get("mount"), array.get("device")) if array else "-",
            "gpus": ", ".join(str(i) for i in group.get("gpus") or []),
            "gpu_bus": ", ".join(_bus(gpus[i].get("bdf")) for i in group.get("gpus") or [] if i in gpus),
            "nvme": ", ".join(nvme) or "-",
            "nvme_bus": ", ".join(_bus(drives[d].get("bdf")) for d in nvme if d in drives) or "-",
            "nics": ", ".join(str(n) for n in group.get("nics") or []) or "-",
            "link": group.get("link") or "-",
            "numa": group.get("numa_node"),
        })
    return rows


def bar_chart(checks, width=640):
    """Inline SVG: one bar per measured metric, scaled to its own bounds, bound lines drawn."""
    rows = [c for c in checks if is_figure(c.get("actual")) and (is_figure(c.get("low")) or is_figure(c.get("high")))]
    if not rows:
        return ""
    row_h, label_w, bar_w = 26, 300, width - 300 - 110
    height = row_h * len(rows) + 24
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" class="chart">' % (width, height)]
    for i, check in enumerate(rows):
        y = 8 + i * row_h
        bounds = [v for v in (check.get("low"), check.get("high"), check["actual"]) if is_figure(v)]
        scale_max = max(bounds) * 1.25 or 1.0

        def x_of(v, scale_max=scale_max):
            return label_w + bar_w * max(0.0, min(1.0, float(v) / scale_max))

        color = COLORS.get(check["verdict"], "#000")
        label = check["name"][len("bench: "):] if check["name"].startswith("bench: ") else check["name"]
        label = label if len(label) <= 46 else "\u2026" + label[-45:]
        parts.append('<text x="%d" y="%d" class="lbl">%s</text>' % (label_w - 8, y + 14, _e(label)))
        parts.append('<rect x="%d" y="%d" width="%d" height="16" fill="#eceff1"/>' % (label_w, y + 2, bar_w))
        parts.append('<rect x="%d" y="%d" width="%.1f" height="16" fill="%s"><title>%s</title></rect>'
                     % (label_w, y + 2, x_of(check["actual"]) - label_w, color, _e("%s: %s %s (expected %s)" % (
                         check["name"], check["actual"], check.get("unit", ""), check.get("expected")))))
        for bound, dash in ((check.get("low"), ""), (check.get("high"), ' stroke-dasharray="3,2"')):
            if is_figure(bound):
                parts.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#000" stroke-width="2"%s/>'
                             % (x_of(bound), x_of(bound), y, y + 20, dash))
        parts.append('<text x="%d" y="%d" class="val">%s %s</text>' % (label_w + bar_w + 6, y + 14,
                                                                       _e(check["actual"]), _e(check.get("unit", ""))))
    parts.append('<text x="%d" y="%d" class="note">solid line: lower bound, dashed: upper bound</text>'
                 % (label_w, height - 4))
    parts.append("</svg>")
    return "".join(parts)


def _dicts(value):
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def watch_chart(result, width=860):
    """Inline SVG of one job's watch (docs/reports.md#watch): measured against the path's limit,
    then a bar per GPU (PCIe bytes received and sent) and per drive (bytes, %util), on one scale.
    Drawn from the JSON only; anything that is no figure is left out."""
    watch = result.get("watch") if isinstance(result.get("watch"), dict) else None
    if not watch:
        return ""
    rec = result.get("record") if isinstance(result.get("record"), dict) else {}
    rows, label_w, bar_w, row_h = [], 200, width - 200 - 340, 22
    limit = watch.get("limit") if isinstance(watch.get("limit"), dict) else {}
    fraction, measured = watch.get("fraction"), rec.get("throughput_gib_s")
    if is_figure(fraction) and is_figure(measured) and is_figure(limit.get("gb_s")):
        rows.append(("limit", "measured / limit", min(fraction, 1.25) / 1.25, None,
                     "%.3g GiB/s = %s of %s GB/s (%s)" % (measured, _share(fraction, 1, "%.0f%%"), limit["gb_s"],
                                                          limit.get("bound")), {"data-fraction": fraction}))
    elif limit.get("unknown"):
        rows.append(("note", "path limit", None, None, "unknown: %s" % limit["unknown"], {}))
    ceiling = watch.get("ceiling") if isinstance(watch.get("ceiling"), dict) else {}
    if is_figure(ceiling.get("fraction")) and is_figure(measured) and is_figure(ceiling.get("gib_s")):
        # the measured ceiling: the same drives read into host memory in the same run
        rows.append(("limit", "measured / host read", min(ceiling["fraction"], 1.25) / 1.25, None,
                     "%.3g GiB/s = %s of the %s GiB/s read into host memory (%s)" % (
                         measured, _share(ceiling["fraction"], 1, "%.0f%%"), ceiling["gib_s"], _text(ceiling.get("job"))),
                     {"data-ceiling": ceiling["fraction"]}))
    elif ceiling.get("unknown"):
        rows.append(("note", "host read", None, None, "unknown: %s" % ceiling["unknown"], {}))
    gpus = [g for g in _dicts(watch.get("gpus")) if is_figure(g.get("rx_bytes")) and is_figure(g.get("tx_bytes"))]
    drives = [d for d in _dicts(watch.get("drives")) if is_figure(d.get("read_bytes")) and is_figure(d.get("write_bytes"))]
    moved = rec.get("bytes") if is_figure(rec.get("bytes")) else 0
    top = max([moved] + [max(g["rx_bytes"], g["tx_bytes"]) for g in gpus]
              + [d["read_bytes"] + d["write_bytes"] for d in drives]) or 1
    shown = [g for g in gpus if max(g["rx_bytes"], g["tx_bytes"]) >= 0.01 * top or g.get("index") == rec.get("gpu")]
    for gpu in shown:
        label = "GPU%s %s" % (gpu.get("index"), gpu.get("bdf") or "")
        rows.append(("gpu", label, gpu["rx_bytes"] / top, gpu["tx_bytes"] / top,
                     "rx %s, tx %s" % (gb_text(gpu["rx_bytes"]), gb_text(gpu["tx_bytes"])), {"data-gpu": gpu.get("index")}))
    if len(shown) < len(gpus):
        rows.append(("note", "", None, None, "%d other GPUs moved less than 1%%" % (len(gpus) - len(shown)), {}))
    elif watch.get("gpus_unknown"):
        rows.append(("note", "GPUs", None, None, "unknown: %s" % watch["gpus_unknown"], {}))
    sources = sorted({g["source"] for g in gpus if isinstance(g.get("source"), str)})
    if sources:  # which NVML counted: GPM, the byte counters, or an estimate from sampled throughput
        rows.append(("note", "GPU bytes from", None, None, "; ".join(sources), {}))
    unknown = [g for g in _dicts(watch.get("gpus")) if g.get("unknown")]
    if unknown:
        rows.append(("note", "GPUs unknown", None, None, "; ".join(
            "GPU%s: %s" % (g.get("index"), g["unknown"]) for g in unknown[:2])
            + ("; %d more" % (len(unknown) - 2) if len(unknown) > 2 else ""), {}))
    for drive in drives:
        total = drive["read_bytes"] + drive["write_bytes"]
        util = drive.get("util_pct")
        rows.append(("drive", "%s %s" % (drive.get("name"), drive.get("bdf") or ""), total / top, None,
                     "%s%s" % (gb_text(total), ", util %s%%" % util if is_figure(util) else ""), {"data-drive": drive.get("name")}))
    if watch.get("drives_unknown"):
        rows.append(("note", "drives", None, None, "unknown: %s" % watch["drives_unknown"], {}))
    cufile = watch.get("cufile") if isinstance(watch.get("cufile"), dict) else {}
    if isinstance(cufile.get("buffer_gpus"), list) and cufile["buffer_gpus"]:
        rows.append(("note", "cuFile bounce buffers", None, None,
                     "on GPU %s (gds_stats)" % ", ".join(str(i) for i in cufile["buffer_gpus"]), {}))
    if not rows:
        return ""
    height = row_h * len(rows) + 8
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" class="chart watch" data-job="%s">'
             % (width, height, _e(result.get("name")))]
    for i, (kind, label, first, second, text, data) in enumerate(rows):
        y = 4 + i * row_h
        attrs = "".join(' %s="%s"' % (k, _e(v)) for k, v in data.items())
        label = label if len(label) <= 34 else "\u2026" + label[-33:]
        parts.append('<text x="%d" y="%d" class="lbl">%s</text>' % (label_w - 8, y + 13, _e(label)))
        if first is not None:
            first, second = (max(0.0, min(1.0, v or 0.0)) for v in (first, second))  # hostile figures stay in the box
            parts.append('<rect x="%d" y="%d" width="%d" height="14" fill="#eceff1"/>' % (label_w, y + 2, bar_w))
            if kind == "gpu":  # received above, sent below
                parts.append('<rect class="bar gpu-rx"%s x="%d" y="%d" width="%.1f" height="7" fill="#1565c0"/>'
                             % (attrs, label_w, y + 2, bar_w * first))
                parts.append('<rect class="bar gpu-tx"%s x="%d" y="%d" width="%.1f" height="7" fill="#90caf9"/>'
                             % (attrs, label_w, y + 9, bar_w * second))
            else:
                color = "#2e7d32" if kind == "drive" else "#6a1b9a"
                parts.append('<rect class="bar %s"%s x="%d" y="%d" width="%.1f" height="14" fill="%s"/>'
                             % (kind, attrs, label_w, y + 2, bar_w * first, color))
            if kind == "limit":  # the limit itself at 1.0 of a scale that runs to 1.25
                x = label_w + bar_w / 1.25
                parts.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#000" stroke-width="2"/>' % (x, x, y, y + 18))
            parts.append('<text x="%d" y="%d" class="val">%s</text>' % (label_w + bar_w + 6, y + 13, _e(text)))
        else:
            parts.append('<text x="%d" y="%d" class="val">%s</text>' % (label_w, y + 13, _e(text)))
    parts.append("</svg>")
    return "".join(parts)


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#212121;max-width:1200px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px;border-bottom:2px solid #cfd8dc;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px;color:#37474f} .meta{color:#616161;font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:4px 0 12px} th,td{border:1px solid #cfd8dc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eceff1} .badge{color:#fff;border-radius:3px;padding:1px 6px;font-size:12px;font-weight:600}
.counts span{margin-right:10px} .chart .lbl{font-size:11px;text-anchor:end;fill:#37474f} .chart .val{font-size:11px;fill:#212121}
.chart .note{font-size:10px;fill:#757575} td.detail{color:#555;max-width:420px}
h4{font-size:13px;margin:10px 0 4px} .filters{margin:6px 0;font-size:13px} .filters label{margin-right:12px}
a.up{font-size:12px;font-weight:400;margin-left:8px} td.problem{max-width:460px;color:#555}
tr.slow td{background:#ffebee;font-weight:600} p.slow{color:#c62828;font-weight:600;margin:4px 0}
"""


def render_html(summary_doc, docs, title="GDS commissioning report", parts=None):
    """The page. ``parts``: {host: {"section", "row"}} built already (build_report's, one host at
    a time); the others are rendered here."""
    parts = parts or {}
    counts = summary_doc["counts"]
    out = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s %s</title><style>%s</style></head><body>"
           % (_e(title), _e(summary_doc["run_id"]), CSS)]
    out.append("<h1>%s</h1><div class=\"meta\">run %s &middot; started %s &middot; finished %s</div>"
               % (_e(title), _e(summary_doc["run_id"]), _e(summary_doc["started"]), _e(summary_doc["finished"])))
    out.append("<p class=\"counts\">%s</p>" % "".join("<span>%s %d</span>" % (_badge(k), v) for k, v in counts.items()))
    out.append(fleet_html(docs, {host: part["row"] for host, part in parts.items()}))
    for name, doc in sorted(docs.items(), key=lambda item: natural_key(item[0])):
        out.append(parts[name]["section"] if name in parts else host_html(name, doc))
    out.append("<script>%s</script></body></html>\n" % FLEET_JS)
    return "".join(out)


def host_html(name, doc):
    """One host's section of the page: affinity, links, network, checks, benchmarks, watch."""
    out = ["<h2 id=\"host-%s\">%s %s <a class=\"up\" href=\"#fleet\">fleet</a></h2>"
           % (_e(name), _e(name), _badge(doc["verdict"]))]
    rows = affinity_rows(doc)
    if rows:
        out.append("<h3>GPU / NVMe affinity</h3><table><tr><th>group</th><th>RAID array</th><th>GPU #</th><th>GPU PCIe</th>"
                   "<th>NVMe</th><th>NVMe PCIe</th><th>NICs</th><th>link</th><th>NUMA</th></tr>")
        for row in rows:
            out.append("<tr>%s</tr>" % "".join("<td>%s</td>" % _e(row[k]) for k in
                                               ("group", "array", "gpus", "gpu_bus", "nvme", "nvme_bus", "nics", "link", "numa")))
        out.append("</table>")
    out.append(links_html(doc))
    out.append(network_html(doc))
    bench = [c for c in doc["checks"] if c["name"].startswith("bench:")]
    health = [c for c in doc["checks"] if c["name"].startswith(HEALTH_AREAS)]
    settings = [c for c in doc["checks"] if c not in bench and c not in health]
    if settings:
        out.append("<h3>Settings and topology</h3>" + _check_table(settings))
    if health:
        out.append("<h3>Hardware health</h3>" + _check_table(health))
    if bench:
        out.append("<h3>Benchmarks against thresholds</h3>")
        chart = bar_chart(bench)
        if chart:
            out.append(chart)
        out.append(_check_table(bench))
    results = doc.get("bench") or []
    if results:
        out.append("<h3>Benchmark records</h3><table><tr><th>job</th><th>xfer</th><th>io</th><th>threads</th>"
                   "<th>GiB/s</th><th>IOPS</th><th>lat mean us</th><th>lat p99 us</th><th>path</th>"
                   "<th>of the host read</th></tr>")
        for result in results:
            rec = result.get("record") or {}
            lat = rec.get("lat_us") or {}
            out.append("<tr>%s</tr>" % "".join("<td>%s</td>" % _e(v) for v in (
                result.get("name"), rec.get("xfer_type"), rec.get("io_type"), rec.get("threads"),
                _num(rec.get("throughput_gib_s")), _num(rec.get("iops")), _num(lat.get("mean")),
                _num(lat.get("p99")), (rec.get("path") or {}).get("mode", "-"), ceiling_text(result))))
        out.append("</table>")
        out.append(every_gpu_html(results))
        charts = [(r, watch_chart(r)) for r in results if isinstance(r, dict)]
        if any(chart for dummy, chart in charts):
            out.append("<h3>Where the bytes went</h3><p class=\"meta\">per job: measured against the "
                       "limit of its PCIe path (line: the limit); PCIe bytes per GPU (dark: received, "
                       "light: sent); bytes per drive</p>")
            out += ["<h4>%s</h4>%s" % (_e(r.get("name")), chart) for r, chart in charts if chart]
    return "".join(out)


def ceiling_text(result):
    """"GPU path at 81 % of what the drives give" for a job with a host read of its drives
    (watch.ceiling), "unknown: why", or "-"."""
    watch = result.get("watch") if isinstance(result.get("watch"), dict) else {}
    ceiling = watch.get("ceiling") if isinstance(watch.get("ceiling"), dict) else None
    if ceiling is None:
        return "-"
    if is_figure(ceiling.get("fraction")):
        return "%s (%s: %s GiB/s)" % (_share(ceiling["fraction"], 1), _text(ceiling.get("job")), _num(ceiling.get("gib_s")))
    return "unknown: %s" % _text(ceiling.get("unknown") or "no figure")


def every_gpu_rows(results):
    """The concurrent jobs of a host (watch.concurrency): each run's aggregate against the sum of
    its GPUs' single figures and against the links they share, then per affinity group and per
    root port. Only what is a figure is shown as one."""
    rows = []
    for result in _dicts(results):
        watch = result.get("watch") if isinstance(result.get("watch"), dict) else {}
        entry = watch.get("concurrency") if isinstance(watch.get("concurrency"), dict) else None
        if entry is None:
            continue
        limit = watch.get("limit") if isinstance(watch.get("limit"), dict) else {}
        shared = ["%s%s" % (_text(e.get("what")), " %s GB/s" % e["gb_s"] if is_figure(e.get("gb_s")) else
                            " (rate unknown)" if not str(e.get("element", "")).startswith("pci") else " (not modelled)")
                  for e in _dicts(limit.get("shared"))]
        rows.append({
            "name": result.get("name"), "gpus": [r.get("gpu") for r in _dicts(entry.get("jobs"))],
            "aggregate": _num(entry.get("aggregate_gib_s")), "singles": _num(entry.get("singles_gib_s")),
            "scaling": _share(entry.get("scaling"), 1), "limit": _num(limit.get("gb_s")) if not limit.get("unknown")
            else "unknown", "bound": _text(limit.get("bound") or ("unknown: %s" % limit["unknown"] if limit.get("unknown")
                                                                   else "-")),
            "shared": "; ".join(shared) or "-", "ceiling": ceiling_text(result), "unknown": _text(entry.get("unknown") or ""),
            "parts": [(title, [{"key": _text(b.get("key")), "gpus": ", ".join(_text(g) for g in b.get("gpus") or []),
                                "aggregate": _num(b.get("aggregate_gib_s")), "singles": _num(b.get("singles_gib_s")),
                                "scaling": _share(b.get("scaling"), 1), "limit": _num(b.get("limit_gb_s")),
                                "bound": _text(b.get("bound") or "-")} for b in _dicts(entry.get(key))])
                      for title, key in (("per affinity group", "groups"), ("per root port", "root_ports"))]})
    return rows


def every_gpu_html(results):
    """The host's "Every GPU at once" section (docs/reports.md#reporthtml); "" without one."""
    rows = every_gpu_rows(results)
    if not rows:
        return ""
    out = ["<h3>Every GPU at once</h3><p class=\"meta\">each run in one gdsbench process: the aggregate against "
           "the sum of what each GPU reached alone, against the limit of the links the GPUs share (the path "
           "model) and against the same drives read into host memory</p>"
           "<table class=\"every-gpu\"><tr><th>run</th><th>GPUs</th><th>aggregate GiB/s</th><th>sum of singles GiB/s</th>"
           "<th>aggregate / sum</th><th>limit GB/s</th><th>what bounds it</th><th>shared</th><th>of the host read</th></tr>"]
    for row in rows:
        out.append("<tr data-job=\"%s\">%s</tr>" % (_e(row["name"]), "".join("<td>%s</td>" % _e(v) for v in (
            row["name"], ", ".join(_text(g) for g in row["gpus"]), row["aggregate"], row["singles"], row["scaling"],
            row["limit"], row["bound"], row["shared"], row["ceiling"]))))
        if row["unknown"]:
            out.append("<tr><td></td><td colspan=\"8\" class=\"detail\">unknown: %s</td></tr>" % _e(row["unknown"]))
        for title, parts in row["parts"]:
            for part in parts:
                out.append("<tr class=\"part\"><td>%s</td>%s<td></td><td></td></tr>" % (
                    _e("%s: %s" % (title, part["key"])), "".join("<td>%s</td>" % _e(part[k]) for k in (
                        "gpus", "aggregate", "singles", "scaling", "limit", "bound"))))
    out.append("</table>")
    return "".join(out)


# The fleet table's columns and order: the worst first (core/checks.SEVERITY; a host is never SKIP).
FLEET_ORDER = {verdict: place for place, verdict in enumerate(v for v in reversed(SEVERITY) if v != "SKIP")}


def fleet_status(doc):
    """The host's verdict, or WARN for a PASS host with a WARN check (the fleet filter's values)."""
    if doc["verdict"] == "PASS" and any(c["verdict"] == "WARN" for c in doc["checks"]):
        return "WARN"
    return doc["verdict"]


def first_problem(doc):
    """The first check that made the host what it is (a failing one, else a WARN), or None."""
    for wanted in (FAILING, ("WARN",)):
        for check in doc["checks"]:
            if check["verdict"] in wanted:
                return check
    return None


def platform_summary(docs):
    """{platform: {hosts, PASS, WARN, FAIL, ERROR, UNREACHABLE}} (WARN: PASS hosts with a WARN)."""
    out = {}
    for doc in docs.values():
        row = out.setdefault(doc.get("profile") or UNKNOWN_PLATFORM,
                             dict({"hosts": 0}, **{k: 0 for k in FLEET_ORDER}))
        row["hosts"] += 1
        status = fleet_status(doc)
        row[status] = row.get(status, 0) + 1  # a document built by hand may hold any verdict
    return out


def fleet_html(docs, rows=None):
    """The fleet part of report.html: a summary per platform, filters (verdict, platform, host
    name; inline script, nothing fetched), and one row per host, failing hosts first, each
    linking to its section. ``rows``: {host: fleet_row(...)} built already."""
    summ = platform_summary(docs)
    out = ["<h2 id=\"fleet\">Fleet</h2><h3>Per platform</h3><table id=\"platforms\"><tr><th>platform</th><th>hosts</th>%s</tr>"
           % "".join("<th>%s</th>" % _badge(k) for k in FLEET_ORDER)]
    for platform, row in sorted(summ.items()):
        out.append("<tr data-platform=\"%s\"><td>%s</td><td>%d</td>%s</tr>" % (
            _e(platform), _e(platform), row["hosts"], "".join("<td>%d</td>" % row[k] for k in FLEET_ORDER)))
    out.append("</table>")
    out.append("<div class=\"filters\"><label>verdict <select id=\"filter-verdict\"><option value=\"\">all</option>"
               "<option value=\"not-pass\">not PASS</option>%s</select></label>"
               "<label>platform <select id=\"filter-platform\"><option value=\"\">all</option>%s</select></label>"
               "<label>host <input id=\"filter-host\" type=\"search\" placeholder=\"name contains\"></label>"
               "<span id=\"filter-count\">%d of %d hosts</span></div>" % (
                   "".join("<option value=\"%s\">%s</option>" % (k, k + (" (PASS with a warning)" if k == "WARN" else ""))
                           for k in FLEET_ORDER),
                   "".join("<option value=\"%s\">%s</option>" % (_e(p), _e(p)) for p in sorted(summ)),
                   len(docs), len(docs)))
    out.append("<table id=\"fleet-table\"><thead><tr><th>host</th><th>verdict</th><th>platform</th><th>first problem</th>"
               "<th>GPUs</th><th>data drives</th><th>groups</th><th>checks</th><th>reboot required</th></tr></thead><tbody>")
    ordered = sorted(docs.items(), key=lambda item: (FLEET_ORDER.get(fleet_status(item[1]), 0), natural_key(item[0])))
    out += [(rows or {}).get(name) or fleet_row(name, doc) for name, doc in ordered]
    out.append("</tbody></table>")
    return "".join(out)


def fleet_row(name, doc):
    """One host's row of the fleet table."""
    topo = doc.get("topology") or {}
    tally = {}
    for check in doc["checks"]:
        tally[check["verdict"]] = tally.get(check["verdict"], 0) + 1
    problem = first_problem(doc)
    status = fleet_status(doc)
    return ("<tr data-host=\"%s\" data-verdict=\"%s\" data-platform=\"%s\"><td><a href=\"#host-%s\">%s</a></td>"
            "<td>%s</td><td>%s</td><td class=\"problem\">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>" % (
                _e(name), _e(status), _e(doc.get("profile") or UNKNOWN_PLATFORM), _e(name), _e(name),
                _badge(doc["verdict"]) + (" " + _badge("WARN") if status == "WARN" else ""),
                _e(doc.get("profile") or UNKNOWN_PLATFORM),
                _e("%s: %s" % (problem["name"], problem.get("detail") or problem.get("actual"))) if problem else "",
                len(topo.get("gpus") or []), len([d for d in topo.get("nvme") or [] if not d.get("system")]),
                len(topo.get("groups") or []), " ".join("%s&nbsp;%d" % (_e(k), v) for k, v in sorted(tally.items())),
                "yes" if doc.get("reboot_required") else "no"))


# The fleet filters; the page's query string presets them (report.html?verdict=FAIL&platform=dgx_a100).
FLEET_JS = """
(function () {
  var verdict = document.getElementById('filter-verdict');
  var platform = document.getElementById('filter-platform');
  var host = document.getElementById('filter-host');
  var count = document.getElementById('filter-count');
  if (!verdict) { return; }
  var rows = Array.prototype.slice.call(document.querySelectorAll('#fleet-table tbody tr'));
  function apply() {
    var v = verdict.value, p = platform.value, h = host.value.toLowerCase(), shown = 0;
    rows.forEach(function (row) {
      var d = row.getAttribute('data-verdict');
      var ok = (!v || (v === 'not-pass' ? d !== 'PASS' : d === v)) &&
               (!p || row.getAttribute('data-platform') === p) &&
               (!h || row.getAttribute('data-host').toLowerCase().indexOf(h) >= 0);
      row.hidden = !ok;
      if (ok) { shown += 1; }
    });
    count.textContent = shown + ' of ' + rows.length + ' hosts';
  }
  var query = new URLSearchParams(window.location.search);
  [['verdict', verdict], ['platform', platform], ['host', host]].forEach(function (pair) {
    if (query.has(pair[0])) { pair[1].value = query.get(pair[0]); }
  });
  [verdict, platform].forEach(function (el) { el.addEventListener('change', apply); });
  host.addEventListener('input', apply);
  apply();
})();
"""


HEALTH_AREAS = ("pcie:", "nvme:", "gpu:")


def links_html(doc):
    """The PCIe link table of every affinity group (root port first, down to the devices) and of
    the links in no group, the degraded hops highlighted and named."""
    links = doc.get("pcie_links") or []
    if not links:
        return ""
    topo = doc.get("topology") or {}
    by_bdf = {link["bdf"]: link for link in links}
    out = ["<h3>PCIe links</h3>"]
    placed = set()
    for group in topo.get("groups") or []:
        rows = [by_bdf[b] for b in _group_path(group, topo, by_bdf)]
        placed.update(link["bdf"] for link in rows)
        if rows:
            out.append(_links_table("group %s" % group.get("id"), rows))
    rest = [link for link in links if link["bdf"] not in placed]
    if rest:
        out.append(_links_table("in no group" if placed else "all links", rest))
    return "".join(out)


def _links_table(title, rows):
    slow = [link["slow"] for link in rows if link.get("slow")]
    out = ["<h4>%s</h4>" % _e(title)]
    if slow:
        out.append("<p class=\"slow\">degraded: %s</p>" % "; ".join(_e(s) for s in slow))
    out.append("<table><tr><th>function</th><th>PCI address</th><th>upstream port</th><th>current</th><th>max</th>"
               "<th>expected</th><th>verdict</th><th>detail</th></tr>")
    for link in rows:
        out.append("<tr%s><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"detail\">%s</td></tr>" % (
            ' class="slow"' if link.get("slow") else "", _e(link["role"]), _e(link["bdf"]), _e(link.get("upstream") or "-"),
            _e(_link_state(link.get("current_width"), link.get("current_speed_gts"))),
            _e(_link_state(link.get("max_width"), link.get("max_speed_gts"))),
            _e(_link_state(link.get("expected_width"), link.get("expected_speed_gts"))),
            _badge(link["verdict"]), _e(link.get("slow") or link.get("detail") or "")))
    out.append("</table>")
    return "".join(out)


def _num(value, form="%.4g"):
    """A table's figure: "-" for none recorded, an integer as it is, "unknown" for what is no figure."""
    if value is None:
        return "-"
    return value if is_figure(value) and isinstance(value, int) else _fmt(value, form)


def _share(part, whole, form="%.0f %%"):
    """part / whole as "42 %"; "-" when either is no figure, "unknown" when the share is none."""
    return _fmt(100.0 * part / whole, form) if is_figure(part) and is_figure(whole) and whole else "-"


def _check_table(checks):
    rows = ["<table><tr><th>check</th><th>verdict</th><th>expected</th><th>actual</th><th>detail</th></tr>"]
    for check in checks:
        rows.append("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"detail\">%s</td></tr>" % (
            _e(check["name"]), _badge(check["verdict"]), _e(check.get("expected")), _e(check.get("actual")),
            _e(check.get("detail", ""))))
    rows.append("</table>")
    return "".join(rows)


# --------------------------------------------------------------------------------------------
# Network (GPUDirect RDMA): NICs, ports, GPU pairing, RDMA benchmark results
# --------------------------------------------------------------------------------------------
def _rdma_checks(checks):
    return {c["name"]: c for c in checks or [] if str(c.get("name", "")).startswith("rdma: ")}


def _paired_gpus(topology):
    """{NIC name: [GPU index]}: the GPUs whose best NICs (those of their best class) include it."""
    out = {}
    matrix = topology.get("matrix") or {}
    for gpu in topology.get("gpus") or []:
        row = matrix.get("GPU%s" % gpu.get("index")) or {}
        for nic in gpu.get("nics") or []:
            if row.get(nic) == gpu.get("nic_link"):
                out.setdefault(nic, []).append(gpu.get("index"))
    return out


def network_rows(doc):
    """One row per RDMA port: NIC, port, netdev, state, rate, the NIC's PCIe link, paired GPUs and
    the verdict of its ``rdma: port`` check."""
    topo = doc.get("topology") or {}
    links = {link.get("bdf"): link for link in doc.get("pcie_links") or topo.get("pcie_links") or []
             if isinstance(link, dict)}
    checks = _rdma_checks(doc.get("checks"))
    paired = _paired_gpus(topo)
    rows = []
    for nic in topo.get("nics") or []:
        link = links.get(nic.get("bdf")) or {}
        pcie = "%s (%s)" % (nic.get("bdf"), _link_state(link.get("current_width"), link.get("current_speed_gts"))) \
            if link else nic.get("bdf")
        for port in nic.get("ports") or [{}]:
            name = "rdma: port %s/%s" % (nic.get("name"), port.get("port"))
            rows.append({
                "nic": nic.get("name") + (" (software)" if nic.get("software") else ""),
                "port": port.get("port", "-"), "netdev": port.get("netdev") or nic.get("netdev") or "-",
                "link_layer": port.get("link_layer") or "-",
                "state": "%s / %s" % (port.get("state") or "?", port.get("phys_state") or "?") if port else "-",
                "rate": "%s Gb/s" % _fmt(port["rate_gbps"], "%g") if port.get("rate_gbps") is not None else "-",
                "pcie": pcie, "numa": nic.get("numa_node"), "fw": nic.get("fw_ver") or "-",
                "gpus": ", ".join("GPU%s" % i for i in paired.get(nic.get("name"), [])) or "-",
                "verdict": (checks.get(name) or {}).get("verdict"),
            })
    return rows


def pairing_rows(doc):
    """One row per GPU: its best NIC, the link class and the verdict of its pairing check."""
    topo = doc.get("topology") or {}
    checks = _rdma_checks(doc.get("checks"))
    nics = {n.get("name"): n for n in topo.get("nics") or []}
    rows = []
    for gpu in topo.get("gpus") or []:
        best = (gpu.get("nics") or [None])[0]
        rows.append({"gpu": "GPU%s" % gpu.get("index"), "gpu_bdf": gpu.get("bdf"), "nic": best or "-",
                     "nic_bdf": (nics.get(best) or {}).get("bdf") or "-", "link": gpu.get("nic_link") or "-",
                     "verdict": (checks.get("rdma: GPU%s NIC pairing" % gpu.get("index")) or {}).get("verdict")})
    return rows


def rdma_bench_rows(doc):
    """The RDMA benchmark results (perftest/OSU) with measured Gb/s against the threshold, and
    the GPU-memory figure as a share of the host-memory one of the same NIC, port and test."""
    results = [r for r in doc.get("rdma_bench") or [] if isinstance(r, dict)]
    host = {(r.get("nic"), r.get("port"), r.get("test")): r.get("gbps") for r in results
            if r.get("memory") == "host" and is_figure(r.get("gbps"))}
    rows = []
    for r in results:
        gbps = r.get("gbps")
        share = _share(gbps, host.get((r.get("nic"), r.get("port"), r.get("test")))) if r.get("memory") == "cuda" else "-"
        gpu = "-" if r.get("gpu") is None else "GPU%s%s" % (r.get("gpu"), "" if r.get("affine") in (None, True) else " (far)")
        rows.append({"nic": r.get("nic"), "port": r.get("port"), "test": r.get("test"), "memory": r.get("memory"),
                     "gpu": gpu, "gbps": _num(gbps), "lat_us": _num(r.get("lat_us")),
                     "threshold": _num(r.get("threshold_gbps")), "vs_host": share, "verdict": r.get("verdict"),
                     "reason": r.get("reason") or ""})
    return rows


def network_html(doc):
    """The network section of a host: RDMA ports, GPU-NIC pairing, RDMA benchmark results."""
    ports, pairs, bench = network_rows(doc), pairing_rows(doc), rdma_bench_rows(doc)
    if not ports and not bench:
        return ""
    out = ["<h3>Network (GPUDirect RDMA)</h3>"]
    if ports:
        out.append("<table><tr><th>NIC</th><th>port</th><th>netdev</th><th>link layer</th><th>state</th><th>rate</th>"
                   "<th>PCIe</th><th>NUMA</th><th>firmware</th><th>paired GPUs</th><th>verdict</th></tr>")
        for row in ports:
            out.append("<tr>%s<td>%s</td></tr>" % ("".join("<td>%s</td>" % _e(row[k]) for k in (
                "nic", "port", "netdev", "link_layer", "state", "rate", "pcie", "numa", "fw", "gpus")),
                _badge(row["verdict"]) if row["verdict"] else "-"))
        out.append("</table>")
    if ports and pairs:
        out.append("<h4>GPU-NIC pairing</h4><table><tr><th>GPU</th><th>GPU PCIe</th><th>best NIC</th><th>NIC PCIe</th>"
                   "<th>link</th><th>verdict</th></tr>")
        for row in pairs:
            out.append("<tr>%s<td>%s</td></tr>" % ("".join("<td>%s</td>" % _e(row[k]) for k in (
                "gpu", "gpu_bdf", "nic", "nic_bdf", "link")), _badge(row["verdict"]) if row["verdict"] else "-"))
        out.append("</table>")
    if bench:
        out.append("<h4>RDMA benchmarks (host vs GPU memory)</h4><table><tr><th>NIC</th><th>port</th><th>test</th>"
                   "<th>memory</th><th>GPU</th><th>Gb/s</th><th>latency us</th><th>threshold Gb/s</th>"
                   "<th>GPU vs host</th><th>verdict</th><th>reason</th></tr>")
        for row in bench:
            out.append("<tr>%s<td>%s</td><td class=\"detail\">%s</td></tr>" % ("".join("<td>%s</td>" % _e(row[k]) for k in (
                "nic", "port", "test", "memory", "gpu", "gbps", "lat_us", "threshold", "vs_host")),
                _badge(row["verdict"]) if row["verdict"] else "-", _e(row["reason"])))
        out.append("</table>")
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Drift
# --------------------------------------------------------------------------------------------
def _drift_item(item):
    """{setting (text), expected, actual} of a drift item; what is no dict is its setting."""
    if not isinstance(item, dict):
        return {"setting": printable(item, controls=False), "expected": None, "actual": None}
    return dict(item, setting=printable(item.get("setting"), controls=False), expected=item.get("expected"),
                actual=item.get("actual"))


# the drift items come only from the gds_commission callback: without its state nothing was recorded
NO_DRIFT_STATE = ("no drift was recorded: the gds_commission callback is not enabled "
                  "(ansible.cfg: callbacks_enabled = gds.commission.gds_commission)")


def drift_document(run_id, hosts, drift, states):
    """{run_id, hosts: {HOST: {drifted, items}}}; unreachable hosts are listed as such. ``drift``
    None (the callback kept no state): no host was checked, never "not drifted"."""
    out = {"run_id": run_id, "hosts": {}}
    if drift is None:
        for host in sorted(hosts):
            out["hosts"][host] = {"drifted": None, "items": [], "error": True, "detail": NO_DRIFT_STATE}
        return out
    for host in sorted(hosts):
        items = drift.get(host) or []
        # a state file edited by hand: every item becomes {setting, expected, actual}
        items = [_drift_item(item) for item in (items if isinstance(items, list) else [items])]
        entry = {"drifted": bool(items), "items": items}
        state = states.get(host) or {}
        if state.get("unreachable"):
            entry.update(drifted=None, unreachable=True, detail=state.get("msg"))
        elif state.get("broken"):
            last = (state.get("failures") or [{}])[-1]
            entry.update(drifted=None, error=True, detail="failed in task '%s': %s" % (last.get("task", "?"), last.get("msg") or ""))
        out["hosts"][host] = entry
    return out


# --------------------------------------------------------------------------------------------
# Fleet-relative checks and per-host history
# --------------------------------------------------------------------------------------------
FLEET_TOLERANCE = 0.10
FLEET_MIN_PEERS = 3
HISTORY_TOLERANCE = 0.10
HISTORY_KEEP = 20
UNKNOWN_PLATFORM = "unknown"


def _per_host(values, host, default):
    """A setting given as one number for every host or as {host: number}."""
    if isinstance(values, dict):
        values = values.get(host)
    return default if values is None else float(values)


def measured(checks):
    """{metric: check} of the benchmark figures a host measured: the `bench: JOB: METRIC` checks
    with a number and a bound (a lower bound: more is better; only an upper one: less is)."""
    out = {}
    for check in checks:
        name = check["name"]
        if not name.startswith("bench: ") or name.count(": ") < 2:
            continue
        if not is_figure(check.get("actual")):
            continue
        if check.get("low") is None and check.get("high") is None:
            continue
        out[name[len("bench: "):]] = check
    return out


def _lost(value, reference, higher_is_better):
    """The share of ``reference`` that ``value`` lost (0 when it is as good or better)."""
    if not reference:
        return 0.0
    loss = (reference - value) / abs(reference) if higher_is_better else (value - reference) / abs(reference)
    return max(0.0, loss)


def _fmt(value, form="%.4g"):
    """A figure as text; "unknown" for what is none (NaN, infinity, 10**400, text): never raises."""
    return form % value if is_figure(value) else "unknown"


def fleet_checks(docs, platforms, tolerance=None, min_peers=FLEET_MIN_PEERS):
    """{host: [`fleet: JOB: METRIC` checks]}: each measured figure against the median of the
    hosts of the same platform in this run. More than the tolerance (a share of the median) on
    the bad side WARNs, even where the figure passes its absolute threshold. Compared only with
    at least ``min_peers`` other hosts that measured the same figure; a host of no known platform
    is not compared."""
    values = {}
    for host, doc in docs.items():
        if platforms.get(host, UNKNOWN_PLATFORM) == UNKNOWN_PLATFORM:
            continue  # nodes of unknown hardware are no peers of anything
        for metric, check in measured(doc["checks"]).items():
            values.setdefault((platforms[host], metric), {})[host] = check["actual"]
    out = {}
    for host, doc in sorted(docs.items()):
        if platforms.get(host, UNKNOWN_PLATFORM) == UNKNOWN_PLATFORM:
            continue
        tol = _per_host(tolerance, host, FLEET_TOLERANCE)
        for metric, check in sorted(measured(doc["checks"]).items()):
            group = values[(platforms[host], metric)]
            peers = len(group) - 1
            if peers < int(min_peers):
                continue
            median = statistics.median(group.values())
            higher = check.get("low") is not None
            unit = (" " + check["unit"]) if check.get("unit") else ""
            bound = median * (1 - tol) if higher else median * (1 + tol)
            loss = _lost(check["actual"], median, higher)
            where = "%s on %d %s hosts" % (_fmt(median) + unit, len(group), platforms[host])
            verdict = "WARN" if loss > tol else "PASS"
            detail = ("%s%s is %.0f%% %s the fleet median %s (tolerance %.0f%%)"
                      % (_fmt(check["actual"]), unit, loss * 100, "below" if higher else "above", where, tol * 100)
                      if verdict == "WARN" else "%s%s against the fleet median %s" % (_fmt(check["actual"]), unit, where))
            out.setdefault(host, []).append(make_check(
                "fleet: " + metric, verdict,
                "%s %s%s (fleet median %s %s %.0f%%)" % (">=" if higher else "<=", _fmt(bound), unit,
                                                         _fmt(median), "-" if higher else "+", tol * 100),
                check["actual"], detail, unit=check.get("unit") or "", reference=median,
                **{"low" if higher else "high": bound}))
    return out


def history_checks(host, doc, runs, tolerance=HISTORY_TOLERANCE, problem=None):
    """`history: JOB: METRIC` checks: each measured figure against the same figure of the host's
    last PASS run; a loss of more than the tolerance WARNs, naming both figures and that run."""
    out = []
    if problem:
        out.append(make_check("history: record", "WARN", "a readable history", "unreadable", problem))
    last = next((run for run in reversed(runs) if isinstance(run, dict) and run.get("verdict") == "PASS"
                 and isinstance(run.get("values"), dict)), None)
    if last is None:
        return out
    for metric, check in sorted(measured(doc["checks"]).items()):
        before = figure(last["values"].get(metric))
        if before is None:  # no figure (NaN, negative, text) to compare with
            continue
        higher = check.get("low") is not None
        unit = (" " + check["unit"]) if check.get("unit") else ""
        loss = _lost(check["actual"], before, higher)
        verdict = "WARN" if loss > tolerance else "PASS"
        since = "run %s (%s)" % (last.get("run_id"), last.get("finished")) if last.get("finished") else "run %s" % last.get("run_id")
        out.append(make_check(
            "history: " + metric, verdict,
            "%s %s%s (%s%s in the last PASS %s %s %.0f%%)" % (
                ">=" if higher else "<=", _fmt(before * (1 - tolerance) if higher else before * (1 + tolerance)), unit,
                _fmt(before), unit, since, "-" if higher else "+", tolerance * 100),
            check["actual"],
            ("lost %.0f%% since the last PASS, %s: %s%s then, %s%s now" % (
                loss * 100, since, _fmt(before), unit, _fmt(check["actual"]), unit)
                if verdict == "WARN" else "%s%s in the last PASS %s" % (_fmt(before), unit, since)),
            unit=check.get("unit") or "", reference=before, previous_run=last.get("run_id"),
            inputs={"last PASS figure": before}))
    return out


def history_update(runs, run_id, finished, doc, keep=HISTORY_KEEP):
    """The host's runs with this one appended (a rerun of the same run id replaces it), at most
    ``keep`` of them, oldest first."""
    entry = {"run_id": run_id, "finished": finished, "verdict": doc["verdict"],
             "values": {metric: check["actual"] for metric, check in
                        measured([c for c in doc["checks"] if c["name"].startswith("bench: ")]).items()}}
    runs = [run for run in runs if isinstance(run, dict) and run.get("run_id") != run_id] + [entry]
    return runs[-max(1, int(keep)):]


def history_path(reports_dir, host):
    """reports_dir/history/HOST.json, HOST being host_file_name(host)."""
    return os.path.join(reports_dir, "history", host_file_name(host) + ".json")


def load_history(reports_dir, hosts):
    """({host: runs}, {host: problem}) from the history files; a file that cannot be read, is no
    file this tool wrote (a link, a directory), or that is another host's, is a problem naming it
    (the report goes on, and write_history keeps a backup of it)."""
    runs, problems = {}, {}
    try:
        reports = OutDir(reports_dir, create=False)
    except FileNotFoundError:
        return runs, problems
    with reports:
        try:
            folder = reports.child("history", create=False)
        except FileNotFoundError:
            return runs, problems
        except OSError as exc:  # history/ is a link or a file: every host's history is unreadable
            return runs, {host: "cannot read %s: %s" % (history_path(reports_dir, host), exc) for host in hosts}
        with folder:
            for host in hosts:
                path = history_path(reports_dir, host)
                try:
                    text = folder.read(os.path.basename(path))
                    if text is None:
                        continue
                    data = json.loads(text)
                    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
                        raise ValueError("expected an object with a list 'runs'")
                    if data.get("host", host) not in (host, json_ready(host)):  # never another host's figures
                        raise ValueError("it is the history of host %r" % (data["host"],))
                    runs[host] = data["runs"]
                except RefusedPath as exc:  # not ours to read, back up or replace
                    problems[host] = "%s; no history is compared or kept until it is moved away" % exc
                except (OSError, ValueError, RecursionError) as exc:
                    problems[host] = "cannot read %s: %s; a new history starts (the old file is kept as a backup)" % (path, exc)
    return runs, problems


def write_history(reports_dir, history, problems=None):
    """Write each host's runs atomically; an unreadable old file is first copied aside. A file
    this tool did not write (a link, a directory) is left as it is: the others are written, then
    RefusedPath names every one refused."""
    written, refused = [], []
    with OutDir(reports_dir) as reports, reports.child("history") as folder:
        for host, runs in sorted(history.items()):
            name = os.path.basename(history_path(reports_dir, host))
            try:
                if (problems or {}).get(host):
                    folder.backup(name)
                written.append(folder.write(name, to_json({"host": host, "runs": runs})))
            except RefusedPath as exc:
                refused.append(str(exc))
    if refused:
        raise RefusedPath("history not written: %s" % "; ".join(refused))
    return written


# --------------------------------------------------------------------------------------------
# File names: inventory names and run ids are data, never paths
# --------------------------------------------------------------------------------------------
_PLAIN = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*\Z")
_KEEP = re.compile(r"[A-Za-z0-9_-]")
# what write_run accepts: plain names and host_file_name's stems
_FILE = re.compile(r"[A-Za-z0-9_%~-][A-Za-z0-9._%~-]*\Z")
# a stem leaves room for ".drift.prom", the temporary and backup names around it (NAME_MAX 255)
STEM_MAX = 150
# the run directory's own files: no host's file may take their place (on a case-insensitive
# file system either)
RESERVED_STEMS = ("summary", "junit", "report", "drift")
# reports_dir's own entries: no run id may take their place
RESERVED_RUN_IDS = ("latest", "history")


def _percent(char):
    return "".join("%%%02X" % byte for byte in char.encode("utf-8", "surrogatepass"))


def host_file_name(host):
    """The stem of a host's files (HOST.json, HOST.prom, HOST.drift.prom, history/HOST.json).

    A plain name (letters, digits, ``_ - .``, not starting with a dot, at most STEM_MAX
    characters, not one of the run's own files) is its own stem. In any other every character but
    letters, digits, ``_`` and ``-`` (and ``.`` after the first) is percent-encoded from its UTF-8
    bytes (``rack1/gpu+01`` -> ``rack1%2Fgpu%2B01``): no stem holds a ``/`` or is ``..``, and two
    hosts never share one. A stem still too long is cut and ends in ``~`` and a hash of the whole
    name (``~`` appears in no other stem)."""
    host = str(host)
    if _PLAIN.match(host) and len(host) <= STEM_MAX and host.lower() not in RESERVED_STEMS:
        return host
    # a reserved name gets its first character encoded, like any odd one
    stem = "".join(char if (_KEEP.match(char) or (char == "." and i)) and (i or host.lower() not in RESERVED_STEMS)
                   else _percent(char) for i, char in enumerate(host))
    if len(stem) > STEM_MAX or not stem:
        digest = hashlib.sha256(host.encode("utf-8", "surrogatepass")).hexdigest()[:20]
        stem = "%s~%s" % (stem[:STEM_MAX - 21], digest)
    return stem


def run_id_error(run_id):
    """Why ``run_id`` cannot name a run directory (it is a path, hidden, reserved or too long);
    None when it can. Run ids are the user's (GDS_RUN_ID): refused, never silently renamed."""
    text = str(run_id)
    if not _PLAIN.match(text) or len(text) > STEM_MAX or text in RESERVED_RUN_IDS:
        return ("run id %r must be a plain name of at most %d characters (letters, digits, . _ -, not starting "
                "with a dot, not %s)" % (run_id, STEM_MAX, " or ".join(RESERVED_RUN_IDS)))
    return None


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------
def write_run_dir(reports_dir, run_id, files):
    """Write {name: text} into reports_dir/run_id/ (each file atomically, UTF-8; fleet/output.py);
    its path. A run id or file name that is not a plain name raises ValueError: nothing is
    written outside reports_dir. A run directory, or a file of the run's, that is a link or
    anything else this tool did not make is refused (RefusedPath naming it)."""
    error = run_id_error(run_id)
    if error:
        raise ValueError(error)
    for name in files:
        if not _FILE.match(name) or len(name) > 255 - 16:
            raise ValueError("report file name %r is not a plain name" % (name,))
    with OutDir(reports_dir) as reports, reports.child(run_id) as run:
        for name, text in files.items():
            run.write(name, text, sync=False)
        return run.path


def point_latest(reports_dir, run_id):
    """Point reports_dir/latest at the run atomically. Only a link of ours is replaced (a link to
    a run directory beside it): a directory, a file or any other link there is someone else's
    and is refused, naming it; the run's own directory stays as written."""
    with OutDir(reports_dir) as reports:
        try:
            return reports.point("latest", run_id, lambda target: run_id_error(target) is None)
        except RefusedPath as exc:
            raise RefusedPath("%s, so it does not point at run %s: move it away and the next run sets it"
                              % (exc, run_id)) from None


def write_run(reports_dir, run_id, files):
    """write_run_dir, then point_latest: the run directory is written even when latest is refused."""
    run_dir = write_run_dir(reports_dir, run_id, files)
    point_latest(reports_dir, run_id)
    return run_dir


def build_report(run_id, started, finished, mode, hosts, all_hosts, states, drift=None, required_areas=(),
                 fleet=None, history=None):
    """The documents of a run: ({file name: text}, result). ``hosts`` is what each host recorded,
    ``states`` what the callback saw (unreachable, broken with its failures).

    ``fleet`` ({platforms, tolerance, min_peers}) adds the `fleet: ` checks, ``history``
    ({runs, tolerance, keep, problems}) the `history: ` checks; the result then carries each
    host's updated ``history`` for write_history. ``metrics`` holds each host's textfile."""
    states = states or {}
    stamp = _epoch(finished)
    if mode == "drift":
        doc = drift_document(run_id, all_hosts, drift, states)
        metrics = {host: drift_metrics(entry, stamp) for host, entry in doc["hosts"].items()}
        files = {"drift.json": to_json(doc)}
        files.update(("%s.drift.prom" % host_file_name(host), text) for host, text in metrics.items())
        return files, dict(
            drift=doc, drifted=[h for h, e in sorted(doc["hosts"].items()) if e["drifted"] is not False],
            metrics=metrics, metrics_file=DRIFT_FILE)
    # each host's part is built inside its own boundary (_host_doc, _host_parts): one host's odd
    # entry makes that host ERROR, never the report of the others
    docs = {host: _host_doc(host, hosts.get(host), states.get(host), required_areas) for host in all_hosts}
    fleet = fleet or {}
    platforms = {host: (fleet.get("platforms") or {}).get(host) or UNKNOWN_PLATFORM for host in docs}
    for host, doc in docs.items():
        doc["profile"] = platforms[host]
    added = fleet_checks(docs, platforms, fleet.get("tolerance"), fleet.get("min_peers", FLEET_MIN_PEERS))
    if history is not None:
        runs = history.get("runs") or {}
        for host, doc in docs.items():
            added.setdefault(host, []).extend(history_checks(host, doc, runs.get(host) or [],
                                                             _per_host(history.get("tolerance"), host, HISTORY_TOLERANCE),
                                                             (history.get("problems") or {}).get(host)))
    for host, extra in added.items():
        if extra:
            docs[host]["checks"].extend(extra)
            docs[host]["verdict"] = host_verdict(c["verdict"] for c in docs[host]["checks"])
    parts = {}
    for host in docs:
        docs[host], parts[host] = _host_parts(host, docs[host], stamp)
    summ = summary(run_id, started, finished, docs)
    files = {"summary.json": to_json(summ), "junit.xml": junit(summ, {h: p["suite"] for h, p in parts.items()}),
             "report.html": render_html(summ, docs, parts=parts)}
    for host, part in parts.items():
        files["%s.json" % host_file_name(host)] = part["json"]
        files["%s.prom" % host_file_name(host)] = part["prom"]
    result = dict(summary=summ, not_pass=[h for h, d in sorted(docs.items()) if d["verdict"] != "PASS"],
                  metrics={host: part["prom"] for host, part in parts.items()}, metrics_file=COMMISSION_FILE)
    if history is not None:
        result["history"] = {host: history_update((history.get("runs") or {}).get(host) or [], run_id, finished, doc,
                                                   history.get("keep", HISTORY_KEEP))
                             for host, doc in docs.items()
                             if not (states.get(host) or {}).get("unreachable") and not (states.get(host) or {}).get("broken")}
    return files, result


# --------------------------------------------------------------------------------------------
# One host's part of the report, in a boundary of its own
# --------------------------------------------------------------------------------------------
INPUT_CHECK = "report: host input"
_M, _L = dict, list
# What the report walks of a host's inputs (host_inputs, HOST.json): each key's type where it is
# present (null: not recorded), a list's items, a mapping's keys ("*": each value). Figures are
# shown or "unknown" (_fmt, _num), never judged here: the checks are the judges.
_NAMES = (_L, ((str, int), None))  # device names, GPU indices, command words
INPUT_SHAPE = (_M, {
    "topology": (_M, {
        "gpus": (_L, (_M, {"nics": _NAMES})), "nvme": (_L, (_M, {"paths": (_L, (_M, {}))})),
        "nics": (_L, (_M, {"ports": (_L, (_M, {}))})),
        "groups": (_L, (_M, {"gpus": _NAMES, "nvme": _NAMES, "nics": _NAMES})),
        "pcie_links": (_L, (_M, {})), "bridges": (_L, (_M, {})), "matrix": (_M, {"*": (_M, {})})}),
    "platform": (_M, {}),
    "arrays": (_L, (_M, {"members": _NAMES})),
    "bench": (_L, (_M, {"cmd": _NAMES, "record": (_M, {"lat_us": (_M, {}), "path": (_M, {})}),
                        "watch": (_M, {"limit": (_M, {"shared": (_L, (_M, {}))}), "cufile": (_M, {"buffer_gpus": _NAMES}),
                                       "gpus": (_L, (_M, {})), "drives": (_L, (_M, {})), "ceiling": (_M, {}),
                                       "concurrency": (_M, {"jobs": (_L, (_M, {})), "groups": (_L, (_M, {"gpus": _NAMES})),
                                                            "root_ports": (_L, (_M, {"gpus": _NAMES}))})})})),
    "rdma_bench": (_L, (_M, {})),
    "reboot_required": (bool, None),
    "input_error": (str, None),
})
_KINDS = {dict: "a mapping", list: "a list", bool: "true or false", str: "text", (str, int): "a name or an index"}


def input_problems(data, shape=INPUT_SHAPE, where=""):
    """[(top-level key, "bench[0].record is 'x' (str), expected a mapping")]: each place where a
    host's inputs are not of the shape the report reads (INPUT_SHAPE), the first one per key."""
    kind, inner = shape
    if not isinstance(data, kind):
        return [(where.split(".")[0].split("[")[0] or None, "%s is %s (%s), expected %s" % (
            where or "the host's entry", _short(repr(data) if isinstance(data, str) else data, 60), type(data).__name__,
            _KINDS[kind]))]
    out = []
    if kind is list and inner:
        for i, item in enumerate(data):
            out = input_problems(item, inner, "%s[%d]" % (where, i))
            if out:
                return out[:1]
    elif kind is dict and inner:
        for key, sub in inner.items():
            for name, item in (data.items() if key == "*" else [(key, data.get(key))]):
                found = input_problems(item, sub, "%s.%s" % (where, name) if where else str(name)) if item is not None else []
                if found:
                    out.append(found[0])
                    break
    return out


def _reason(exc):
    return _short("%s: %s" % (type(exc).__name__, exc))


def _with_error(doc, reason, field=None):
    """``doc`` made ERROR by the check naming why its host's inputs could not be rendered."""
    doc["checks"].append(make_check(INPUT_CHECK, "ERROR", "host inputs the report can read", field or "unreadable",
                                    "report: cannot render host input: %s" % reason))
    doc["verdict"] = host_verdict(c["verdict"] for c in doc["checks"])
    return doc


def _host_doc(host, data, state, required_areas):
    """host_document inside the host's boundary. Inputs not of the report's shape, a variable
    that could not be read (``input_error``) or an exception on the way make the host ERROR with
    the reason; what still reads (the other keys, its checks, its state) is kept."""
    data = {} if data is None else data
    try:
        problems = input_problems(data)
        if not problems and data.get("input_error"):
            problems = [("input_error", data["input_error"])]
        if not problems:
            return host_document(host, data, state, required_areas)
        bad = sorted({field for field, dummy in problems if field})
        reason = "; ".join(text for dummy, text in problems)
    except Exception as exc:
        bad, reason = [], _reason(exc)
    data = data if isinstance(data, dict) else {}
    candidates = [{"checks": data.get("checks")}, {}] if not bad else \
        [{k: v for k, v in data.items() if k not in bad}] + ([{"checks": data.get("checks")}] if "checks" not in bad else []) + [{}]
    doc = {"host": host, "verdict": "ERROR", "checks": []}
    for keep in candidates:
        try:
            doc = host_document(host, keep, state, required_areas)
            break
        except Exception:  # the next candidate keeps less
            continue
    return _with_error(doc, reason, ", ".join(bad) or None)


def _rendered(host, doc, stamp):
    """Everything of one host's in the run's files, rendered (raises what its inputs raise)."""
    return {"json": to_json(doc), "prom": commission_metrics(doc, stamp), "suite": junit_suite(host, doc["checks"]),
            "section": host_html(host, doc), "row": fleet_row(host, doc)}


def _host_parts(host, doc, stamp):
    """(doc, its rendered parts), inside the host's boundary: a host whose inputs break a writer
    becomes ERROR with the reason, shown with its checks only (or with that check only)."""
    try:
        return doc, _rendered(host, doc, stamp)
    except Exception as exc:
        reason = _reason(exc)
    fallback = _with_error({key: list(doc[key]) if key == "checks" else doc[key]
                            for key in ("host", "verdict", "checks", "profile") if key in doc}, reason)
    try:
        return fallback, _rendered(host, fallback, stamp)
    except Exception:  # its checks break a writer too: the check that says so, alone
        fallback = _with_error({"host": host, "checks": [], "profile": doc.get("profile") or UNKNOWN_PLATFORM}, reason)
        return fallback, _rendered(host, fallback, stamp)


def _epoch(iso):
    """Unix time of an ISO 8601 string; now when it cannot be read."""
    try:
        return datetime.datetime.fromisoformat(str(iso)).timestamp()
    except (TypeError, ValueError):
        return time.time()


JSON_DEPTH = 64


def json_ready(value, depth=0):
    """``value`` as strict JSON can hold it: lone surrogates escaped (core/files.printable; JSON
    escapes control characters itself), NaN and infinities as the strings "NaN", "Infinity",
    "-Infinity", keys as text, integers too long to print as text, and nothing nested deeper than
    JSON_DEPTH (a note in its place)."""
    if isinstance(value, str):
        return printable(value, controls=False)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, int):
        return value if value.bit_length() <= 10000 else printable(value)  # Python prints 4300 digits at most
    if depth >= JSON_DEPTH:
        return "(nested deeper than %d levels)" % JSON_DEPTH
    if isinstance(value, dict):
        return {printable(key, controls=False): json_ready(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_ready(item, depth + 1) for item in value]
    return printable(value, controls=False)


def to_json(doc):
    """Strict JSON (RFC 8259: no NaN, every string valid UTF-8), ASCII only."""
    try:
        # most documents need no json_ready (a walk in Python): the C encoder tells
        json.dumps(doc, sort_keys=True, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (ValueError, TypeError, RecursionError):  # UnicodeEncodeError is a ValueError
        doc = json_ready(doc)
    return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
