# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run's report from host files (docs/reports.md#host-files-and-the-merge).

A run in host scope (``gds_report_scope: host``: a node commissioning itself under Slurm, a slice
of an AWX job, any push run told so) writes, for each of its hosts, ``HOST.inputs.json`` into the
shared run directory: exactly what build_report needs to rebuild that host (what it recorded, what
the callback saw of it, its platform and tolerances, the run's mode and times). No summary, no
junit, no page, no history: several writers share the directory.

``merge_run`` reads every inputs file of a run directory, makes each expected host whose file is
missing, partial, another run's or unreadable ERROR with the reason, and writes the run's report
through fleet/report.publish_run, the gds_report module's own path: the report of a merged run is
the report a push run over the same hosts writes.
"""
from __future__ import annotations

import datetime
import json
import os
from urllib.parse import unquote

from ansible_collections.gds.commission.plugins.module_utils.core.spec import REPORTS_DIR, RoleSpec, Var
from ansible_collections.gds.commission.plugins.module_utils.fleet.output import OutDir
from ansible_collections.gds.commission.plugins.module_utils.fleet.report import (
    INPUTS_SUFFIX, areas_of, build_report, host_file_name, publish_run, run_id_error, to_json,
)
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_baselines import (
    FLEET_MIN_PEERS, FLEET_TOLERANCE, HISTORY_KEEP, HISTORY_TOLERANCE,
)
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_inputs import REQUIRED_AREAS
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_text import short_text

FORMAT = "gds-commission host inputs"
VERSION = 1
MODES = ("commission", "drift")
# a host's inputs are its facts and results (about 150 kB on a DGX A100): far above that is no
# file this tool wrote
MAX_BYTES = 64 * 1024 * 1024


class MergeError(ValueError):
    """The run cannot be merged at all (no host file and no expected host, modes that disagree):
    the message says why; nothing is written."""


def inputs_file_name(host):
    """HOST.inputs.json (fleet/report_files.host_file_name: no host's HOST.json is this name)."""
    return host_file_name(host) + INPUTS_SUFFIX


# --------------------------------------------------------------------------------------------
# Writing: a run in host scope
# --------------------------------------------------------------------------------------------
def host_record(run_id, host, mode, started, finished, inputs, state, drift, platform="",
                fleet_tolerance=FLEET_TOLERANCE, history_tolerance=HISTORY_TOLERANCE, required_areas=REQUIRED_AREAS,
                fleet_min_peers=FLEET_MIN_PEERS, history_keep=HISTORY_KEEP, check_run=False):
    """One host's inputs file: build_report's arguments for this host. ``state`` is what the
    callback saw of it, ``broken`` already decided; ``drift`` its drift items, None when the
    callback kept no state; ``check_run`` a check-mode run (never made latest by the merge)."""
    return {"format": FORMAT, "version": VERSION, "run_id": run_id, "host": host, "mode": mode,
            "started": started, "finished": finished, "inputs": inputs, "state": state or {}, "drift": drift,
            "platform": platform or "", "fleet_tolerance": fleet_tolerance, "history_tolerance": history_tolerance,
            "report": {"required_areas": list(required_areas), "fleet_min_peers": fleet_min_peers,
                       "history_keep": history_keep, "check_run": bool(check_run)}}


def host_scope_files(run_id, started, finished, mode, hosts, all_hosts, states, drift=None, required_areas=(),
                     platforms=None, fleet_tolerance=None, history_tolerance=None, fleet_min_peers=FLEET_MIN_PEERS,
                     history_keep=HISTORY_KEEP, check_run=False):
    """({file name: text}, result) of a run in host scope: each host's inputs file, and for people
    its HOST.json and HOST.prom (HOST.drift.prom) as its own report builds them (no fleet or
    history checks: the merge adds them). ``result`` is build_report's over these hosts alone,
    with ``inputs``, the names of the inputs files."""
    states = states or {}
    files = {}
    for host in all_hosts:
        record = host_record(
            run_id, host, mode, started, finished, (hosts or {}).get(host), states.get(host),
            None if drift is None else drift.get(host, []), (platforms or {}).get(host) or "",
            (fleet_tolerance or {}).get(host, FLEET_TOLERANCE), (history_tolerance or {}).get(host, HISTORY_TOLERANCE),
            areas_of(required_areas, host), fleet_min_peers, history_keep, check_run)
        files[inputs_file_name(host)] = to_json(record, indent=None)
    built, result = build_report(run_id, started, finished, mode, hosts or {}, all_hosts, states, drift=drift,
                                 required_areas=required_areas, check_run=check_run)
    for host in all_hosts:
        for suffix in ((".drift.prom",) if mode == "drift" else (".json", ".prom")):
            name = host_file_name(host) + suffix
            files[name] = built[name]
    result["inputs"] = sorted(inputs_file_name(host) for host in all_hosts)
    return files, result


# --------------------------------------------------------------------------------------------
# Reading: what each file holds, or why it cannot be used
# --------------------------------------------------------------------------------------------
class _Bad(Exception):
    """A host file that cannot be used: ``problem`` is one of missing, partial, another run,
    unreadable; the message says why."""

    def __init__(self, problem, why):
        super(_Bad, self).__init__(why)
        self.problem = problem


def _share(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_record(record, run_id, name):
    """``record`` when it is an inputs file of this run; else _Bad naming the key at fault."""
    if not isinstance(record, dict):
        raise _Bad("partial", "%s is %s, not an object" % (name, type(record).__name__))
    if record.get("format") != FORMAT:
        raise _Bad("partial", "%s: format %r, expected %r" % (name, record.get("format"), FORMAT))
    if record.get("version") != VERSION:
        raise _Bad("partial", "%s: version %r, this merge reads version %d" % (name, record.get("version"), VERSION))
    if record.get("run_id") != run_id:
        raise _Bad("another run", "%s is from run %r, not %s" % (name, record.get("run_id"), run_id))
    report = record.get("report")
    wrong = [
        ("host", isinstance(record.get("host"), str)),
        ("mode", record.get("mode") in MODES),
        ("started", isinstance(record.get("started"), str)),
        ("finished", isinstance(record.get("finished"), str)),
        ("inputs", isinstance(record.get("inputs"), dict) or record.get("inputs") is None),
        ("state", isinstance(record.get("state"), dict)),
        ("drift", isinstance(record.get("drift"), list) or record.get("drift") is None),
        ("platform", isinstance(record.get("platform"), str)),
        ("fleet_tolerance", _share(record.get("fleet_tolerance"))),
        ("history_tolerance", _share(record.get("history_tolerance"))),
        ("report", isinstance(report, dict)),
        ("report.required_areas", isinstance((report or {}).get("required_areas"), list)
         and all(isinstance(a, str) for a in report["required_areas"])),
        ("report.fleet_min_peers", _count((report or {}).get("fleet_min_peers"))),
        ("report.history_keep", _count((report or {}).get("history_keep"))),
        ("report.check_run", isinstance((report or {}).get("check_run", False), bool)),
    ]
    for key, good in wrong:
        if not good:
            value = record
            for part in key.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            raise _Bad("partial", "%s: key %s is %s" % (name, key, short_text(value, 80)))
    if _when(record["started"]) is None or _when(record["finished"]) is None:
        raise _Bad("partial", "%s: started %s, finished %s: expected ISO 8601 times"
                   % (name, short_text(record["started"], 40), short_text(record["finished"], 40)))
    return record


def _when(text):
    """An ISO 8601 time as an aware datetime (a naive one is taken as UTC), or None."""
    try:
        when = datetime.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def _read_record(folder, name, run_id):
    """The record of the inputs file ``name`` in ``folder``, or _Bad."""
    where = folder.where(name)
    try:
        data = folder.read_bytes(name, MAX_BYTES)
    except OSError as exc:  # a link or no regular file (RefusedPath), no permission, an I/O error
        raise _Bad("unreadable", "cannot read %s: %s" % (where, exc))
    if data is None:
        raise _Bad("missing", "no %s: the host's run wrote no inputs file: it never started or died before its report "
                   "(its output: the Slurm job's output file, or its AWX slice's job)" % where)
    if len(data) > MAX_BYTES:
        raise _Bad("unreadable", "%s is larger than %d MiB" % (where, MAX_BYTES // (1024 * 1024)))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Bad("unreadable", "%s is not UTF-8 text: %s" % (where, exc))
    try:
        record = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _Bad("partial", "%s is not whole JSON (cut short or changed?): %s" % (where, exc))
    return _check_record(record, run_id, where)


def _host_of_stem(stem):
    """The host a file stem names (host_file_name reversed), or None (a cut name, an odd one)."""
    try:
        host = unquote(stem, errors="strict")
    except UnicodeDecodeError:
        return None
    return host if host_file_name(host) == stem else None


def read_run(reports_dir, run_id, expected=None, mode=None):
    """(records, problems, notes): every usable inputs file of reports_dir/run_id as {host: record};
    {host: (problem, why)} for each expected host, or host a file names, whose file cannot be
    used; notes on files no host can be told from. ``expected``: the hosts the run targeted (None:
    the hosts of the files found). ``mode``: a record of another mode is a problem of its host."""
    error = run_id_error(run_id)
    if error:
        raise MergeError(error)
    expected = list(dict.fromkeys(expected or []))
    records, problems, notes = {}, {}, []
    try:
        reports = OutDir(reports_dir, create=False)
    except FileNotFoundError:
        raise MergeError("%s does not exist" % reports_dir)
    with reports:
        try:
            folder = reports.child(run_id, create=False)
        except FileNotFoundError:
            folder = None
        if folder is None:
            if not expected:
                raise MergeError("no run directory %s" % os.path.join(reports_dir, run_id))
            for host in expected:
                problems[host] = ("missing", "no run directory %s: no host wrote its inputs file"
                                  % os.path.join(reports_dir, run_id))
            return records, problems, notes
        with folder:
            names = sorted(n for n in os.listdir(folder.fd) if n.endswith(INPUTS_SUFFIX) and not n.startswith("."))
            by_name = {inputs_file_name(host): host for host in expected}
            for name in list(by_name) + [n for n in names if n not in by_name]:
                host = by_name.get(name) or _host_of_stem(name[:-len(INPUTS_SUFFIX)])
                try:
                    record = _read_record(folder, name, run_id)
                    if inputs_file_name(record["host"]) != name:
                        raise _Bad("partial", "%s holds the inputs of host %r, not of the host its name says"
                                   % (folder.where(name), record["host"]))
                    if mode and record["mode"] != mode:
                        raise _Bad("another run", "%s is from a %s run, this merge is %s"
                                   % (folder.where(name), record["mode"], mode))
                except _Bad as bad:
                    if host is None:
                        notes.append("%s (no host's name can be read from the file name)" % bad)
                    else:
                        problems[host] = (bad.problem, str(bad))
                    continue
                records[record["host"]] = record
    return records, problems, notes


# --------------------------------------------------------------------------------------------
# The merge
# --------------------------------------------------------------------------------------------
def _largest(records, key, given):
    """(value, note) of a run-wide count: ``given`` when set, else the largest any host's file asks
    for (never one host's setting for the others), with a note naming the hosts that differ."""
    if given is not None or not records:
        return given, None
    value = max(record["report"][key] for record in records.values())
    differ = sorted(h for h, record in records.items() if record["report"][key] != value)
    note = ("hosts disagree on %s: the largest, %s, is the run's; other values on %s"
            % (key, json.dumps(value), ", ".join(differ[:10]) + (" ..." if len(differ) > 10 else ""))) \
        if differ else None
    return value, note


def merge_run(reports_dir, run_id, expected=None, mode=None, required_areas=None, fleet_min_peers=None,
              history_keep=None, write=True):
    """Merge the host files of reports_dir/run_id into the run's report (summary.json, HOST.json,
    junit.xml, report.html or drift.json, the textfiles, the history, ``latest``), through
    fleet/report.publish_run. Returns the gds_report module's result with ``run_dir``,
    ``refused`` (a history file or ``latest`` left as it was), ``hosts`` (every host reported),
    ``problems`` ({host: why} of the hosts made ERROR for their file) and ``notes``.

    ``expected``: the hosts the run targeted; each without a usable file is ERROR with the reason
    (check ``report: host file``), the others are reported. The report settings (required areas,
    fleet peers, history kept) are the arguments, else each host's required areas are its own
    file's and the counts the largest of all files'. A run any host ran in check mode is never
    made latest."""
    if mode is not None and mode not in MODES:
        raise MergeError("mode %r: expected one of %s" % (mode, ", ".join(MODES)))
    records, problems, notes = read_run(reports_dir, run_id, expected, mode)
    if not records and not problems:
        raise MergeError("no host file (*%s) in %s and no expected host" % (INPUTS_SUFFIX, os.path.join(reports_dir, run_id)))
    modes = sorted({r["mode"] for r in records.values()})
    if mode is None:
        if len(modes) > 1:
            raise MergeError("the host files are of several modes (%s): name the mode to merge"
                             % "; ".join("%s: %s" % (m, ", ".join(sorted(h for h, r in records.items() if r["mode"] == m)[:5]))
                                         for m in modes))
        mode = modes[0] if modes else "commission"
    if required_areas is None:
        required_areas = dict((host, record["report"]["required_areas"]) for host, record in records.items())
    fleet_min_peers, note1 = _largest(records, "fleet_min_peers", fleet_min_peers)
    history_keep, note2 = _largest(records, "history_keep", history_keep)
    notes += [n for n in (note1, note2) if n]
    check_run = any(record["report"].get("check_run") for record in records.values())
    all_hosts = list(dict.fromkeys(list(expected or []) + sorted(records) + sorted(problems)))
    hosts, states, drift, platforms, fleet_tol, history_tol = {}, {}, {}, {}, {}, {}
    for host in all_hosts:
        record = records.get(host)
        if record is None:
            problem, why = problems[host]
            states[host] = {"host_file": why, "host_file_problem": problem}
            continue
        hosts[host] = record["inputs"] or {}
        states[host] = record["state"]
        if mode == "drift":
            drift[host] = record["drift"]
        if record["platform"]:
            platforms[host] = record["platform"]
        fleet_tol[host] = record["fleet_tolerance"]
        history_tol[host] = record["history_tolerance"]
    # the run is as long as its hosts' runs together; no host file at all: dated now
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    started = min((r["started"] for r in records.values()), key=_when, default=now)
    finished = max((r["finished"] for r in records.values()), key=_when, default=now)
    run_dir, result, refused = publish_run(
        reports_dir, run_id, started, finished, mode, hosts, all_hosts, states,
        drift=drift if mode == "drift" else None, required_areas=required_areas or (),
        fleet=dict(platforms=platforms, tolerance=fleet_tol,
                   min_peers=FLEET_MIN_PEERS if fleet_min_peers is None else fleet_min_peers),
        history_keep=history_keep or 0, history_tolerance=history_tol, write=write, check_run=check_run)
    result.update(run_dir=run_dir, refused=refused, mode=mode, hosts=all_hosts,
                  problems=dict((host, why) for host, (dummy, why) in sorted(problems.items())), notes=notes)
    return result


# The role gds_merge: its variables, the one source of its defaults/main.yml, meta/argument_specs.yml
# and its table in docs/variables.md (make roles)
ROLE_SPEC = RoleSpec(
    'gds_merge', 'gds_merge_',
    short_description="Write a run's report from the inputs files its hosts wrote (gds_report_scope host)",
    description=('Once, on the controller, the module gds_merge reads every HOST.inputs.json of the run directory '
                 'and writes the report a push run writes (summary.json, HOST.json, junit.xml, report.html or '
                 'drift.json, the Prometheus files, the fleet and history checks, latest). Each host of '
                 'gds_merge_hosts without a usable file is ERROR with the reason.',),
    variables=[
        Var('gds_merge_dir', 'path',
            'Directory on the controller that holds the run directories.',
            REPORTS_DIR),
        Var('gds_merge_run_id', 'str',
            'The run to merge; empty: `GDS_RUN_ID`.',
            "{{ gds_report_run_id | default('') }}"),
        Var('gds_merge_hosts', 'list',
            'The hosts the run targeted: each without a usable inputs file is ERROR.',
            "{{ groups['all'] }}",
            elements='str'),
        Var('gds_merge_mode', 'str',
            "The mode to merge; empty: the host files' own.",
            '',
            choices=('', 'commission', 'drift')),
        Var('gds_merge_fail', 'bool',
            'Fail the play (non-zero exit) when a host is not PASS, or drifted.',
            True),
    ],
    shared=(),
)
