# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report's checks against a baseline: `fleet: ` (each measured figure against the median of
its platform in the run) and `history: ` (against the host's last PASS), and the history files
they read and write (reports/history/HOST.json)."""
from __future__ import annotations

import json
import os
import statistics

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check as make_check
from ansible_collections.gds.commission.plugins.module_utils.core.numbers import PLAUSIBLE_MAX, figure, is_figure, ratio
from ansible_collections.gds.commission.plugins.module_utils.fleet.output import OutDir, RefusedPath
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_files import host_file_name
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_text import figure_text, json_ready, to_json


FLEET_TOLERANCE = 0.10
FLEET_MIN_PEERS = 3
HISTORY_TOLERANCE = 0.10
HISTORY_KEEP = 20
UNKNOWN_PLATFORM = "unknown"


def per_host(values, host, default):
    """A setting given as one number for every host or as {host: number}."""
    if isinstance(values, dict):
        values = values.get(host)
    return default if values is None else float(values)


def measured(checks):
    """{metric: check} of the benchmark figures a host measured: the `bench: JOB: METRIC` checks
    with a number and a bound (a lower bound: more is better; only an upper one: less is)."""
    out = {}
    for check in checks:
        job, metric = check.get("job"), check.get("metric")
        if check.get("area") != "bench" or not isinstance(job, str) or not isinstance(metric, str):
            continue
        # a figure the check itself could not judge (ERROR: implausible, no figure) is no peer
        if not is_figure(check.get("actual")) or check.get("verdict") == "ERROR" or abs(check["actual"]) > PLAUSIBLE_MAX:
            continue
        if check.get("low") is None and check.get("high") is None:
            continue
        out["%s: %s" % (job, metric)] = check  # the key the history files have always used
    return out


def _lost(value, reference, higher_is_better):
    """The share of ``reference`` that ``value`` lost (0 when it is as good or better); None when
    the reference is no figure to divide by (numbers.ratio's floor): nothing to compare with."""
    if ratio(value, reference) is None:
        return None
    loss = (reference - value) / reference if higher_is_better else (value - reference) / reference
    return max(0.0, loss)


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
        tol = per_host(tolerance, host, FLEET_TOLERANCE)
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
            if loss is None:  # a median of nothing measured: no comparison
                continue
            where = "%s on %d %s hosts" % (figure_text(median) + unit, len(group), platforms[host])
            verdict = "WARN" if loss > tol else "PASS"
            detail = ("%s%s is %.0f%% %s the fleet median %s (tolerance %.0f%%)"
                      % (figure_text(check["actual"]), unit, loss * 100, "below" if higher else "above", where, tol * 100)
                      if verdict == "WARN" else "%s%s against the fleet median %s" % (figure_text(check["actual"]), unit, where))
            out.setdefault(host, []).append(make_check(
                "fleet: " + metric, verdict,
                "%s %s%s (fleet median %s %s %.0f%%)" % (">=" if higher else "<=", figure_text(bound), unit,
                                                         figure_text(median), "-" if higher else "+", tol * 100),
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
        if loss is None:  # the last PASS measured nothing to compare with
            continue
        verdict = "WARN" if loss > tolerance else "PASS"
        since = "run %s (%s)" % (last.get("run_id"), last.get("finished")) if last.get("finished") else "run %s" % last.get("run_id")
        out.append(make_check(
            "history: " + metric, verdict,
            "%s %s%s (%s%s in the last PASS %s %s %.0f%%)" % (
                ">=" if higher else "<=", figure_text(before * (1 - tolerance) if higher else before * (1 + tolerance)), unit,
                figure_text(before), unit, since, "-" if higher else "+", tolerance * 100),
            check["actual"],
            ("lost %.0f%% since the last PASS, %s: %s%s then, %s%s now" % (
                loss * 100, since, figure_text(before), unit, figure_text(check["actual"]), unit)
                if verdict == "WARN" else "%s%s in the last PASS %s" % (figure_text(before), unit, since)),
            unit=check.get("unit") or "", reference=before, previous_run=last.get("run_id"),
            inputs={"last PASS figure": before}))
    return out


def history_update(runs, run_id, finished, doc, keep=HISTORY_KEEP):
    """The host's runs with this one appended (a rerun of the same run id replaces it), at most
    ``keep`` of them, oldest first."""
    entry = {"run_id": run_id, "finished": finished, "verdict": doc["verdict"],
             "values": {metric: check["actual"] for metric, check in
                        measured(doc["checks"]).items()}}
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
