# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The commissioning and drift reports (docs/reports.md): summary.json, HOST.json, junit.xml,
report.html and drift.json, built from what each host recorded; each host's part in a boundary
of its own (one host's odd entry makes that host ERROR, never the report of the others).

The parts, one concern each, are beside this file: report_inputs (what is read of a host and
whether the report can read it), report_links (the PCIe links as shown), report_html (the page),
report_baselines (the `fleet: ` and `history: ` checks, the history files), report_files (file
names, the run directory), report_text (values as text, strict JSON). Their public names are
this module's too (__all__): callers import the report from here.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from ansible_collections.gds.commission.plugins.module_utils.core.checks import VERDICTS, host_verdict
from ansible_collections.gds.commission.plugins.module_utils.core.checks import check as make_check
from ansible_collections.gds.commission.plugins.module_utils.core.files import printable
from ansible_collections.gds.commission.plugins.module_utils.core.spec import REPORTS_DIR, RoleSpec, Var, on_node
from ansible_collections.gds.commission.plugins.module_utils.fleet.metrics import COMMISSION_FILE, DRIFT_FILE, area_of, commission_metrics, drift_metrics
from ansible_collections.gds.commission.plugins.module_utils.fleet.output import OutDir, RefusedPath
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_inputs import (
    CHECK_KEYS, CHECK_VARS, INPUT_SHAPE, REBOOT_VARS, REPORT_FACTS, REPORT_VARS, REQUIRED_AREAS, flatten,
    host_inputs, input_problems, normalize_check,
)
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_links import describe_degraded, link_role, link_state, pcie_links
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_baselines import (
    FLEET_MIN_PEERS, FLEET_TOLERANCE, HISTORY_KEEP, HISTORY_TOLERANCE, UNKNOWN_PLATFORM, fleet_checks,
    history_checks, history_path, history_update, load_history, measured, per_host, write_history,
)
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_html import (
    COLORS, FLEET_ORDER, affinity_rows, bar_chart, ceiling_text, every_gpu_html, every_gpu_rows, first_problem,
    fleet_html, fleet_row, fleet_status, host_html, host_page, host_page_name, links_html, network_html, network_rows, pairing_rows,
    platform_summary, rdma_bench_rows, render_drift_html, render_html, watch_chart,
)
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_files import (
    INPUTS_SUFFIX, host_file_name, point_latest, run_id_error, set_aside_other_hosts, write_run, write_run_dir,
)
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_text import (
    epoch_of, figure_text, folds, json_ready, share_text, short_text, table_figure, to_json,
)

__all__ = [
    "host_document", "summary", "junit", "junit_suites", "drift_document", "areas_of", "build_report", "publish_run",
    "INPUT_CHECK", "HOST_FILE_CHECK", "INPUTS_SUFFIX",
    "NO_DRIFT_STATE", "host_verdict", "VERDICTS", "OutDir", "RefusedPath", "CHECK_KEYS", "CHECK_VARS", "INPUT_SHAPE",
    "REBOOT_VARS", "REPORT_FACTS", "REPORT_VARS", "REQUIRED_AREAS", "flatten", "host_inputs",
    "input_problems", "normalize_check", "describe_degraded", "link_role", "link_state", "pcie_links",
    "FLEET_MIN_PEERS", "FLEET_TOLERANCE", "HISTORY_KEEP", "HISTORY_TOLERANCE", "UNKNOWN_PLATFORM",
    "fleet_checks", "history_checks", "history_path", "history_update", "load_history", "measured",
    "per_host", "write_history", "COLORS", "FLEET_ORDER", "affinity_rows", "bar_chart", "ceiling_text",
    "every_gpu_html", "every_gpu_rows", "first_problem",
    "fleet_html", "fleet_row", "fleet_status", "host_html", "host_page", "host_page_name", "links_html", "network_html",
    "network_rows", "pairing_rows", "platform_summary", "rdma_bench_rows", "render_drift_html", "render_html", "watch_chart",
    "host_file_name", "point_latest", "run_id_error", "write_run", "write_run_dir", "epoch_of",
    "figure_text", "json_ready", "share_text", "short_text", "table_figure", "to_json"
]


# --------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------
# a merged run (fleet/merge.py): the host's inputs file is missing, partial, another run's or
# unreadable; its state says why (host_file) and what (host_file_problem)
HOST_FILE_CHECK = "report: host file"


def _stopped(state):
    """The host did not complete its plays (unreachable, broken) or its run cannot be read."""
    return bool(state.get("unreachable") or state.get("broken") or state.get("host_file"))


def host_document(name, data, state, required_areas=(), check_run=False):
    """One host's report: verdict, checks, and what the report needs to show it.

    A host that completed its plays needs a measured (not SKIP) check in every required area:
    without one it FAILs, so no host passes without, say, a benchmark result. In a check-mode run
    (``check_run``: nothing was measured, by design) that check is SKIP, saying so.
    """
    state = state or {}
    checks = [normalize_check(c) for c in flatten(data.get("checks") or [])]
    if not _stopped(state):
        for area in required_areas:
            mine = [c for c in checks if c.get("area") == area]
            if not [c for c in mine if c["verdict"] != "SKIP"]:
                checks.append(make_check("%s: measured" % area, "SKIP" if check_run else "FAIL",
                                         "at least one %s result" % area,
                                         "%d checks, all SKIP" % len(mine) if mine else "none",
                                         "not run: a check-mode run measures nothing (run without --check to "
                                         "measure %s)" % area if check_run else
                                         "nothing in area %s was measured on this host (did its role run?)" % area))
    if state.get("unreachable"):
        checks.append(make_check("host: reachable", "UNREACHABLE", "reachable", "unreachable", state.get("msg") or ""))
    elif state.get("broken"):
        last = (state.get("failures") or [{}])[-1]
        checks.append(make_check("host: play completed", "ERROR", "every step ran",
                                 "failed in task '%s'" % last.get("task", "?"), last.get("msg") or ""))
    elif state.get("host_file"):
        checks.append(make_check(HOST_FILE_CHECK, "ERROR", "the host's inputs file of this run",
                                 state.get("host_file_problem") or "unreadable", state["host_file"]))
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
    """A testsuite per host and area (``HOST: AREA``), problems a testcase each, each run of PASS
    and of SKIP (one reason) one testcase (report_text.folds, as report.html folds them).
    ``suites``: {host: junit_suites(...)} built already (build_report's, one host at a time)."""
    root = ET.Element("testsuites", name=printable("gds-commission %s" % summary_doc["run_id"]))
    for host, doc in sorted(summary_doc["hosts"].items()):
        mine = (suites or {}).get(host)
        root.extend(mine if mine is not None else junit_suites(host, doc["checks"]))
    ET.indent(root)
    return "<?xml version='1.0' encoding='UTF-8'?>\n" + ET.tostring(root, encoding="unicode") + "\n"


def junit_suites(host, checks):
    """One host's testsuites, one an area. ElementTree escapes markup (& < > and quotes); what XML
    1.0 cannot hold at all (control characters, bytes that were not UTF-8) is written as its
    escape first (core/files.printable)."""
    x = printable
    by_area = {}
    for check in checks:
        by_area.setdefault(area_of(check) or "other", []).append(check)
    out = []
    for area, mine in by_area.items():
        shown, runs = folds(mine)
        suite = ET.Element("testsuite", name=x("%s: %s" % (host, area)), tests=str(len(shown) + len(runs)),
                           failures=str(sum(c["verdict"] == "FAIL" for c in shown)),
                           errors=str(sum(c["verdict"] in ("ERROR", "UNREACHABLE") for c in shown)),
                           skipped=str(sum(run[0]["verdict"] == "SKIP" for dummy, run in runs)))
        properties = ET.SubElement(suite, "properties")
        ET.SubElement(properties, "property", name="host", value=x(host))
        ET.SubElement(properties, "property", name="area", value=x(area))
        classname = x("%s.%s" % (host, area.replace(" ", "_")))
        for check in shown:
            case = ET.SubElement(suite, "testcase", classname=classname, name=x(check["name"]))
            text = x("expected %s, actual %s%s" % (check.get("expected"), check.get("actual"),
                                                   ("; " + check["detail"]) if check.get("detail") else ""))
            if check["verdict"] == "FAIL":
                ET.SubElement(case, "failure", message=text).text = text
            elif check["verdict"] in ("ERROR", "UNREACHABLE"):
                ET.SubElement(case, "error", message=text).text = text
            elif check["verdict"] == "WARN":
                ET.SubElement(case, "system-out").text = "WARN: " + text
        for title, run in runs:  # "12 PASS", "88 SKIP: simulated node": the checks' names inside
            case = ET.SubElement(suite, "testcase", classname=classname, name=x("%s: %s" % (area, title)))
            if run[0]["verdict"] == "SKIP":
                ET.SubElement(case, "skipped", message=x(title.split(": ", 1)[-1]))
            ET.SubElement(case, "system-out").text = x("\n".join(c["name"] for c in run))
        out.append(suite)
    return out


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
    None (the callback kept no state): no host was checked, never "not drifted"; the same for a
    host whose entry is None (a merged run: that host's run kept no state)."""
    out = {"run_id": run_id, "hosts": {}}
    for host in sorted(hosts):
        if drift is None or (host in drift and drift[host] is None):
            out["hosts"][host] = {"drifted": None, "items": [], "error": True, "detail": NO_DRIFT_STATE}
            continue
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
        elif state.get("host_file"):
            entry.update(drifted=None, error=True, detail=state["host_file"])
        out["hosts"][host] = entry
    return out


def areas_of(required_areas, host):
    """The areas ``host`` must have measured: ``required_areas`` is one list for every host or
    {host: list} (each host's own setting; a host not in it has none given: the defaults)."""
    if isinstance(required_areas, dict):
        return tuple(required_areas.get(host, REQUIRED_AREAS))
    return tuple(required_areas or ())


def build_report(run_id, started, finished, mode, hosts, all_hosts, states, drift=None, required_areas=(),
                 fleet=None, history=None, check_run=False):
    """The documents of a run: ({file name: text}, result). ``hosts`` is what each host recorded,
    ``states`` what the callback saw (unreachable, broken with its failures).

    ``fleet`` ({platforms, tolerance, min_peers}) adds the `fleet: ` checks, ``history``
    ({runs, tolerance, keep, problems}) the `history: ` checks; the result then carries each
    host's updated ``history`` for write_history. ``metrics`` holds each host's textfile."""
    states = states or {}
    stamp = epoch_of(finished)
    if mode == "drift":
        doc = drift_document(run_id, all_hosts, drift, states)
        metrics = {host: drift_metrics(entry, stamp) for host, entry in doc["hosts"].items()}
        files = {"drift.json": to_json(doc), "report.html": render_drift_html(doc)}
        files.update(("%s.drift.prom" % host_file_name(host), text) for host, text in metrics.items())
        return files, dict(
            drift=doc, drifted=[h for h, e in sorted(doc["hosts"].items()) if e["drifted"] is not False],
            metrics=metrics, metrics_file=DRIFT_FILE)
    # each host's part is built inside its own boundary (_host_doc, _host_parts): one host's odd
    # entry makes that host ERROR, never the report of the others
    docs = {host: _host_doc(host, hosts.get(host), states.get(host), areas_of(required_areas, host), check_run)
            for host in all_hosts}
    fleet = fleet or {}
    platforms = {host: (fleet.get("platforms") or {}).get(host) or UNKNOWN_PLATFORM for host in docs}
    for host, doc in docs.items():
        doc["profile"] = platforms[host]
    added = fleet_checks(docs, platforms, fleet.get("tolerance"), fleet.get("min_peers", FLEET_MIN_PEERS))
    if history is not None:
        runs = history.get("runs") or {}
        for host, doc in docs.items():
            # this run's own entry (a report or a merge made again) is never its own baseline
            earlier = [run for run in runs.get(host) or [] if not (isinstance(run, dict) and run.get("run_id") == run_id)]
            added.setdefault(host, []).extend(history_checks(host, doc, earlier,
                                                             per_host(history.get("tolerance"), host, HISTORY_TOLERANCE),
                                                             (history.get("problems") or {}).get(host)))
    for host, extra in added.items():
        if extra:
            docs[host]["checks"].extend(extra)
            docs[host]["verdict"] = host_verdict(c["verdict"] for c in docs[host]["checks"])
    parts = {}
    for host in docs:
        docs[host], parts[host] = _host_parts(host, docs[host], stamp, run_id)
    summ = summary(run_id, started, finished, docs)
    if check_run:
        summ["check_mode"] = True
    files = {"summary.json": to_json(summ), "junit.xml": junit(summ, {h: p["suite"] for h, p in parts.items()}),
             "report.html": render_html(summ, docs, rows={host: part["row"] for host, part in parts.items()})}
    for host, part in parts.items():
        files["%s.json" % host_file_name(host)] = part["json"]
        files["%s.prom" % host_file_name(host)] = part["prom"]
        files[host_page_name(host)] = part["page"]
    result = dict(summary=summ, not_pass=[h for h, d in sorted(docs.items()) if d["verdict"] != "PASS"],
                  metrics={host: part["prom"] for host, part in parts.items()}, metrics_file=COMMISSION_FILE)
    if history is not None:
        runs, keep = history.get("runs") or {}, history.get("keep", HISTORY_KEEP)
        result["history"] = {host: history_update(runs.get(host) or [], run_id, finished, doc, keep)
                             for host, doc in docs.items() if not _stopped(states.get(host) or {})}
    return files, result


def publish_run(reports_dir, run_id, started, finished, mode, hosts, all_hosts, states, drift=None,
                required_areas=(), fleet=None, history_keep=0, history_tolerance=None, write=True, check_run=False):
    """A run's report as the report play writes it: the history read from reports_dir (commission
    mode, ``history_keep`` above 0), build_report, the run directory written, the history written,
    ``latest`` pointed at the run, unless ``check_run`` (a check-mode commission, which measured
    nothing, never becomes latest; a drift run always runs in check mode); (run_dir, result, refused). One path for the gds_report module
    and the merge of host files (fleet/merge.py), so both write the same report.

    A run directory that cannot be written raises (OSError, ValueError); a history file or
    ``latest`` refused after it is in ``refused`` (the run's directory stands). ``write`` false
    (check mode): nothing is written, the documents are still returned."""
    history, problems = None, {}
    if mode == "commission" and history_keep > 0:
        runs, problems = load_history(reports_dir, all_hosts)
        history = dict(runs=runs, problems=problems, keep=history_keep, tolerance=history_tolerance)
    files, result = build_report(run_id, started, finished, mode, hosts, all_hosts, states, drift=drift,
                                 required_areas=required_areas, fleet=fleet, history=history, check_run=check_run)
    run_dir = "%s/%s" % (reports_dir, run_id)
    updated = result.pop("history", None) or {}
    if mode == "commission":
        result["history"] = []
    refused = []
    if not write:
        return run_dir, result, refused
    run_dir = write_run_dir(reports_dir, run_id, files)
    try:
        result["set_aside"] = set_aside_other_hosts(reports_dir, run_id, files, mode)
    except OSError as exc:
        refused.append("the earlier host files of run %s could not be set aside: %s" % (run_id, exc))
    if updated:
        try:
            result["history"] = write_history(reports_dir, updated, problems)
        except (OSError, ValueError) as exc:
            refused.append(str(exc))
    if check_run and mode == "commission":  # a drift run is check mode by design, and is latest
        return run_dir, result, refused
    try:
        point_latest(reports_dir, run_id)
    except (OSError, ValueError) as exc:
        refused.append(str(exc))
    return run_dir, result, refused


# --------------------------------------------------------------------------------------------
# One host's part of the report, in a boundary of its own
# --------------------------------------------------------------------------------------------
INPUT_CHECK = "report: host input"


def _reason(exc):
    return short_text("%s: %s" % (type(exc).__name__, exc))


def _with_error(doc, reason, field=None):
    """``doc`` made ERROR by the check naming why its host's inputs could not be rendered."""
    doc["checks"].append(make_check(INPUT_CHECK, "ERROR", "host inputs the report can read", field or "unreadable",
                                    "report: cannot render host input: %s" % reason))
    doc["verdict"] = host_verdict(c["verdict"] for c in doc["checks"])
    return doc


def _host_doc(host, data, state, required_areas, check_run=False):
    """host_document inside the host's boundary. Inputs not of the report's shape, a variable
    that could not be read (``input_error``) or an exception on the way make the host ERROR with
    the reason; what still reads (the other keys, its checks, its state) is kept."""
    data = {} if data is None else data
    try:
        problems = input_problems(data)
        if not problems and data.get("input_error"):
            problems = [("input_error", data["input_error"])]
        if not problems:
            return host_document(host, data, state, required_areas, check_run)
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
            doc = host_document(host, keep, state, required_areas, check_run)
            break
        except Exception:  # the next candidate keeps less
            continue
    return _with_error(doc, reason, ", ".join(bad) or None)


def _rendered(host, doc, stamp, run_id):
    """Everything of one host's in the run's files, rendered (raises what its inputs raise)."""
    return {"json": to_json(doc), "prom": commission_metrics(doc, stamp), "suite": junit_suites(host, doc["checks"]),
            "page": host_page(host, doc, run_id), "row": fleet_row(host, doc)}


def _host_parts(host, doc, stamp, run_id):
    """(doc, its rendered parts), inside the host's boundary: a host whose inputs break a writer
    becomes ERROR with the reason, shown with its checks only (or with that check only)."""
    try:
        return doc, _rendered(host, doc, stamp, run_id)
    except Exception as exc:
        reason = _reason(exc)
    fallback = _with_error({key: list(doc[key]) if key == "checks" else doc[key]
                            for key in ("host", "verdict", "checks", "profile") if key in doc}, reason)
    try:
        return fallback, _rendered(host, fallback, stamp, run_id)
    except Exception:  # its checks break a writer too: the check that says so, alone
        fallback = _with_error({"host": host, "checks": [], "profile": doc.get("profile") or UNKNOWN_PLATFORM}, reason)
        return fallback, _rendered(host, fallback, stamp, run_id)


# The role gds_report: its variables, the one source of its defaults/main.yml, meta/argument_specs.yml
# and its table in docs/variables.md (make roles)
ROLE_SPEC = RoleSpec(
    'gds_report', 'gds_report_',
    short_description='Write the commissioning or drift report of the run on the controller',
    description=(),
    variables=[
        Var('gds_report_dir', 'path',
            'Directory on the controller that holds the run directories (reports/<run-id>/, reports/latest).',
            REPORTS_DIR),
        Var('gds_report_mode', 'str',
            'Which report to write: commission (summary/junit/html) or drift (drift.json).',
            'commission',
            choices=('commission', 'drift')),
        Var('gds_report_scope', 'str',
            "`run`: the run's report; `host`: only each host's inputs file (and its HOST.json, HOST.prom) for a "
            'later merge, for runs that share one run directory (node-local under Slurm, AWX slices; '
            '[reports.md](reports.md#host-files-and-the-merge)).',
            "{{ lookup('ansible.builtin.env', 'GDS_REPORT_SCOPE', default='run') }}",
            choices=('run', 'host')),
        Var('gds_report_run_id', 'str',
            "The run id (the run directory's name); empty: the gds_commission callback's (`GDS_RUN_ID`, else the "
            'start time and process id). Runs that share a run directory name it alike (AWX: '
            '`playbooks/run_id.yml`).',
            ''),
        Var('gds_report_fail', 'bool',
            'Fail the play (non-zero exit) when a host is not PASS, or when a host drifted.',
            True),
        Var('gds_report_check_vars', 'str',
            'Host variables whose names match this pattern hold checks for the report: a list of check records, or '
            "a module's registered result whose `checks` are that list.",
            CHECK_VARS),
        Var('gds_report_required_areas', 'list',
            'Check areas in which a host that completed its plays needs a measured (not SKIP) check; without one '
            'it gets the FAIL check `<area>: measured` (commission mode).',
            list(REQUIRED_AREAS),
            elements='str'),
        Var('gds_report_metrics_dir', 'str',
            "node_exporter's textfile directory on each node, where the Prometheus textfile goes "
            '(`gds_commission.prom`, `gds_commission_drift.prom`); empty: none on the nodes (the run directory '
            'still has `HOST.prom`). Needs write access there (become).',
            on_node('/var/lib/prometheus/node-exporter')),
        Var('gds_report_fleet_tolerance', 'float',
            "A benchmark figure this share (0 to 1) worse than the median of its platform's hosts in the run WARNs "
            '(`fleet: ` checks), even above its absolute threshold; set per platform in the profiles.',
            0.1),
        Var('gds_report_fleet_min_peers', 'int',
            'Compare with the fleet only when at least this many other hosts of the platform measured the figure.',
            3),
        Var('gds_report_history_tolerance', 'float',
            "A benchmark figure this share (0 to 1) worse than in the host's last PASS run WARNs (`history: ` "
            'checks), naming both figures and that run.',
            0.1),
        Var('gds_report_history_keep', 'int',
            'Runs kept per host in `<gds_report_dir>/history/HOST.json` (0: no history and no `history: ` checks).',
            20),
    ],
    shared=(),
)
