# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm drain and resume from a run's report (docs/fleet.md).

A node whose host is FAIL/ERROR (summary.json) or drifted / not checked (drift.json) is drained
with the reason ``<prefix> <first failing check>``; a node drained with that prefix whose host
now passes is resumed. A node that is DOWN or FAIL, drained by anyone else or carrying anyone
else's reason is never touched. A circuit breaker refuses a run that would drain more than its
share of the nodes (a bad threshold must not drain a cluster). A report it cannot read, or two
hosts on one node, make it change nothing.

The rules this shares with each node's gds-healthcheck (node names, reason prefixes, drain
reasons, verdict-file states, scontrol's node states, when a node is left alone) live in
fleet/slurm_rules.py, which the gds_slurm role puts into that script when it installs it.
"""
from __future__ import annotations

import errno
import json
import os

from ansible_collections.gds.commission.plugins.module_utils.core.checks import FAILING, VERDICTS, area_of
from ansible_collections.gds.commission.plugins.module_utils.core.spec import RoleSpec, Var, on_node, reports_dir
from ansible_collections.gds.commission.plugins.module_utils.core.variables import errors, given_int, given_number, path_error
from ansible_collections.gds.commission.plugins.module_utils.fleet.output import OutDir, RefusedPath
from ansible_collections.gds.commission.plugins.module_utils.fleet.slurm_rules import (
    DEFAULT_PREFIX, DRIFT_TAG, MODES, NODE_NAME, PREFIX, REASON_MAX, STATES, drift_cannot_resume, is_ours, node_flags,
    one_line, parse_nodes, reason, state_problem, untouchable,
)

__all__ = [
    "BAD_VERDICTS", "DEFAULT_PREFIX", "DRIFT_TAG", "GOOD_VERDICTS", "MODES", "NODE_NAME", "PREFIX", "REASON_MAX", "STATES",
    "SlurmError", "apply", "check_prefix", "commands", "drain_command", "drift_cannot_resume", "first_failing_check",
    "is_ours", "load_run", "node_flags", "node_names", "one_line", "parse_nodes", "plan", "read_nodes", "reason",
    "resume_command", "short_name", "state_problem", "untouchable",
]

# host verdicts summary.json may hold; only PASS and WARN resume a node
BAD_VERDICTS = FAILING
GOOD_VERDICTS = STATES["good"]


class SlurmError(Exception):
    pass


def _key(host, *rest):
    """hosts["a"].checks[0].verdict; the host quoted as JSON (control characters escaped)."""
    out = "hosts[%s]" % json.dumps(host)
    for part in rest:
        out += "[%d]" % part if isinstance(part, int) else "." + part
    return out


def _show(value):
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _no_duplicates(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError("duplicate key %s" % json.dumps(key))
        out[key] = value
    return out


def _load_json(path):
    """A verdict file as gds_report wrote it: a regular file, never read through a link put in
    its place (fleet/output.py); the run directory itself (``latest``) may be a link."""
    try:
        with OutDir(os.path.dirname(path), create=False) as folder:
            text = folder.read(os.path.basename(path))
        if text is None:
            raise FileNotFoundError(errno.ENOENT, "no such file")
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise SlurmError("%s is not valid JSON: %s" % (path, exc))
    except RefusedPath as exc:
        raise SlurmError("cannot read %s: %s; nothing changed" % (path, exc))
    except OSError as exc:
        raise SlurmError("cannot read %s: %s" % (path, exc.strerror or exc))


def _hosts_of(path):
    """The ``hosts`` mapping of a summary.json or drift.json."""
    doc = _load_json(path)
    hosts = doc.get("hosts") if isinstance(doc, dict) else None
    if not isinstance(hosts, dict):
        raise SlurmError("%s: key 'hosts' missing or not a mapping" % path)
    for host in hosts:
        if not host.strip():
            raise SlurmError("%s: key %s: an empty host name" % (path, _key(host)))
    return hosts


def _bad(path, parts, value, wanted):
    raise SlurmError("%s: key %s: %s, expected %s; nothing changed" % (path, _key(*parts[1:]), _show(value), wanted))


def _summary_entry(path, host, entry):
    """(verdict, checks) of one host of summary.json, or SlurmError naming the key."""
    if not isinstance(entry, dict):
        _bad(path, ("hosts", host), entry, "a mapping")
    verdict = entry.get("verdict")
    if not isinstance(verdict, str) or verdict.upper() not in VERDICTS:
        _bad(path, ("hosts", host, "verdict"), verdict, "one of " + ", ".join(VERDICTS))
    verdict = verdict.upper()
    checks = entry.get("checks", [])
    if not isinstance(checks, list):
        _bad(path, ("hosts", host, "checks"), checks, "a list")
    for i, check in enumerate(checks):
        if not isinstance(check, dict):
            _bad(path, ("hosts", host, "checks", i), check, "a mapping")
        if not isinstance(check.get("name", ""), str):
            _bad(path, ("hosts", host, "checks", i, "name"), check.get("name"), "a string")
        wanted = check.get("verdict")
        if not isinstance(wanted, str) or wanted.upper() not in VERDICTS:
            _bad(path, ("hosts", host, "checks", i, "verdict"), wanted, "one of " + ", ".join(VERDICTS))
        # a passing host with a failed check: the document contradicts itself
        if verdict in GOOD_VERDICTS and wanted.upper() in BAD_VERDICTS:
            _bad(path, ("hosts", host, "verdict"), verdict, "a verdict that agrees with checks[%d] (%s)" % (i, wanted))
    return verdict, checks


def _drift_entry(path, host, entry):
    """The checked drift.json entry of one host, or SlurmError naming the key."""
    if not isinstance(entry, dict):
        _bad(path, ("hosts", host), entry, "a mapping")
    if "drifted" not in entry or not (entry["drifted"] is None or isinstance(entry["drifted"], bool)):
        _bad(path, ("hosts", host, "drifted"), entry.get("drifted"), "true, false or null")
    for flag in ("unreachable", "error"):
        if flag in entry and not isinstance(entry[flag], bool) and entry[flag] is not None:
            _bad(path, ("hosts", host, flag), entry[flag], "true or false")
    if not isinstance(entry.get("detail") or "", str):
        _bad(path, ("hosts", host, "detail"), entry["detail"], "a string")
    items = entry.get("items", [])
    if not isinstance(items, list):
        _bad(path, ("hosts", host, "items"), items, "a list")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            _bad(path, ("hosts", host, "items", i), item, "a mapping")
        if not isinstance(item.get("setting") or "", str):
            _bad(path, ("hosts", host, "items", i, "setting"), item["setting"], "a string")
    if entry["drifted"] is False and (items or entry.get("error") or entry.get("unreachable")):
        _bad(path, ("hosts", host, "drifted"), False, "true or null: the entry lists drift, an error or unreachable")
    return entry


def first_failing_check(entry):
    """The check that decided a non-passing host's verdict (the first one with that verdict)."""
    verdict = str(entry.get("verdict")).upper()
    checks = entry.get("checks") or []
    for wanted in ([verdict] if verdict in BAD_VERDICTS else []) + list(BAD_VERDICTS):
        for check in checks:
            if isinstance(check, dict) and str(check.get("verdict")).upper() == wanted:
                name = str(check.get("name") or "unnamed check")
                actual = check.get("actual")
                # host: checks (play completed, reachable) and the report's about a host (its host
                # file missing, its input unreadable) say little without what happened (a summary of
                # an older version carries no area: its name's, core/checks.area_of)
                if (check.get("area") or area_of(name)) in ("host", "report") and actual not in (None, ""):
                    return "%s: %s" % (name, actual if isinstance(actual, str) else json.dumps(actual, default=str))
                return name
    return "verdict %s" % verdict


def load_run(run_dir, prefix=DEFAULT_PREFIX):
    """{host: {status: bad|good|unknown, verdict, reason, mode}} from a run directory.

    summary.json (commissioning) and drift.json (drift check) are both read when present; a
    host bad in either is bad. UNREACHABLE hosts are unknown: Slurm sees a dead node itself.
    Anything in either file that is not what gds_report writes is a SlurmError naming the file
    and the key: an unreadable report must neither drain nor resume.
    """
    check_prefix(prefix)
    summary_path = os.path.join(run_dir, "summary.json")
    drift_path = os.path.join(run_dir, "drift.json")
    if not os.path.isdir(run_dir):
        raise SlurmError("run directory %s does not exist" % run_dir)
    # exists, not isfile: a summary.json that is a directory is unreadable, not absent
    found = [p for p in (summary_path, drift_path) if os.path.lexists(p)]
    if not found:
        raise SlurmError("run directory %s has neither summary.json nor drift.json" % run_dir)
    out = {}
    if summary_path in found:
        for host, entry in _hosts_of(summary_path).items():
            verdict, dummy = _summary_entry(summary_path, host, entry)
            if verdict in BAD_VERDICTS and verdict != "UNREACHABLE":
                out[host] = {"status": "bad", "verdict": verdict, "mode": "commission",
                             "reason": reason(prefix, first_failing_check(entry))}
            elif verdict in GOOD_VERDICTS:
                out[host] = {"status": "good", "verdict": verdict, "reason": None, "mode": "commission"}
            else:  # UNREACHABLE, SKIP
                out[host] = {"status": "unknown", "verdict": verdict, "reason": None, "mode": "commission"}
    if drift_path in found:
        for host, entry in _hosts_of(drift_path).items():
            entry = _drift_entry(drift_path, host, entry)
            if entry.get("unreachable"):
                mine = {"status": "unknown", "verdict": "UNREACHABLE", "reason": None}
            elif entry["drifted"] is False:
                mine = {"status": "good", "verdict": "PASS", "reason": None}
            elif entry.get("error") or entry["drifted"] is None:
                mine = {"status": "bad", "verdict": "ERROR",
                        "reason": reason(prefix, "%s %s" % (DRIFT_TAG, entry.get("detail") or "not checked"))}
            else:
                items = entry.get("items") or [{}]
                mine = {"status": "bad", "verdict": "DRIFTED",
                        "reason": reason(prefix, "%s %s" % (DRIFT_TAG, items[0].get("setting") or "drifted"))}
            mine["mode"] = "drift"
            before = out.get(host)
            # a host bad in either document is bad; good in both may clear any drain of ours
            if before is None or before["status"] == "unknown" or (mine["status"] == "bad" and before["status"] != "bad"):
                out[host] = mine
            elif before["status"] == "good" and mine["status"] == "good":
                before["mode"] = "both"
    return out


def short_name(host):
    return host.split(".")[0]


def node_names(hosts, names=None, report=None):
    """{host: Slurm node} for ``hosts``: ``names`` where given, else the short host name.

    SlurmError when two hosts share a node (one host's FAIL and another's PASS would drain and
    resume the same node) or when a host of ``report`` (default: every host) has a node name that
    is not one plain node; other hosts with such a name are left out.
    """
    names = names or {}
    out, seen = {}, {}
    for host in sorted(hosts):
        given = names.get(host)
        node = given if given not in (None, "") else short_name(host)
        if not isinstance(node, str) or not NODE_NAME.match(node):
            if report is not None and host not in report:
                continue
            raise SlurmError("host %s: Slurm node name %s is not one plain node name (letters, digits, '.', '_', "
                             "'-'; no hostlist); set gds_slurm_node_name; nothing changed" % (json.dumps(host), _show(node)))
        if node in seen:
            raise SlurmError("hosts %s and %s both map to Slurm node %s: give each its own gds_slurm_node_name; "
                             "nothing changed" % (json.dumps(seen[node]), json.dumps(host), node))
        seen[node] = host
        out[host] = node
    return out


def plan(run, slurm_nodes, names=None, prefix=DEFAULT_PREFIX, max_drain_percent=10.0, max_drain_min=1, hosts=None):
    """What to do: {drain, reason, resume, kept, not_in_slurm, limit, candidates, tripped}.

    ``names`` maps inventory hosts to Slurm node names (default the short host name); ``hosts``
    limits the run's hosts considered (and joins the hosts whose node names must not collide).
    The breaker counts the nodes this run would newly drain against
    max(max_drain_min, floor(percent of the run's Slurm nodes)).
    """
    check_prefix(prefix)
    wanted = [h for h in sorted(run) if hosts is None or h in hosts]
    mapping = node_names(set(wanted) | set(hosts or ()), names, set(wanted))
    out = {"drain": [], "reason": [], "resume": [], "kept": [], "not_in_slurm": []}
    in_slurm = 0
    for host in wanted:
        info = run[host]
        node = mapping[host]
        current = slurm_nodes.get(node)
        if current is None:
            out["not_in_slurm"].append({"host": host, "node": node})
            continue
        in_slurm += 1
        flags, text = current["flags"], current.get("reason")
        drained = "DRAIN" in flags
        item = {"host": host, "node": node, "verdict": info["verdict"], "slurm_state": "+".join(flags),
                "slurm_reason": text}
        if info["status"] == "bad":
            item["reason"] = info["reason"]
        blocked = untouchable(flags, text, prefix)
        if blocked:
            if info["status"] == "bad" or drained or text:
                out["kept"].append(dict(item, why=blocked))
        elif info["status"] == "bad":
            if not drained:
                out["drain"].append(item)
            elif text != info["reason"]:
                out["reason"].append(item)
            else:
                out["kept"].append(dict(item, why="already drained"))
        elif info["status"] == "good" and drained:
            # a drift check says nothing about a benchmark: it resumes only drift drains
            if drift_cannot_resume(info["mode"], text, prefix):
                out["kept"].append(dict(item, why="drained by a commissioning run; a drift check does not clear it"))
            else:
                out["resume"].append(item)
        elif drained:
            out["kept"].append(dict(item, why="result unknown"))
    limit = max(int(max_drain_min), int(in_slurm * float(max_drain_percent) / 100.0))
    out.update(limit=limit, candidates=in_slurm, tripped=len(out["drain"]) > limit, nodes=mapping)
    return out


def drain_command(scontrol, item):
    return [scontrol, "update", "NodeName=%s" % item["node"], "State=DRAIN", "Reason=%s" % item["reason"]]


def resume_command(scontrol, item):
    return [scontrol, "update", "NodeName=%s" % item["node"], "State=RESUME"]


def commands(the_plan, scontrol="scontrol"):
    """The scontrol command lines of a plan, drains first."""
    return ([drain_command(scontrol, i) for i in the_plan["drain"] + the_plan["reason"]]
            + [resume_command(scontrol, i) for i in the_plan["resume"]])


def apply(the_plan, run_command, scontrol="scontrol"):
    """Run the plan's commands; run_command(argv) -> (rc, stdout, stderr). [{argv, error}] of failures."""
    failures = []
    for argv in commands(the_plan, scontrol):
        rc, out, err = run_command(argv)
        if rc != 0:
            failures.append({"command": " ".join(argv[1:]), "error": one_line(err or out or "exit %d" % rc)})
    return failures


def read_nodes(run_command, scontrol="scontrol"):
    rc, out, err = run_command([scontrol, "-o", "show", "node"])
    if rc != 0:
        raise SlurmError("%s -o show node failed (exit %d): %s" % (scontrol, rc, one_line(err or out)))
    return parse_nodes(out)


def check_prefix(prefix):
    """SlurmError unless ``prefix`` can mark this tool's drains (PREFIX)."""
    if not isinstance(prefix, str) or not PREFIX.match(prefix):
        raise SlurmError("reason_prefix %s must be 1 to 32 letters, digits or _.:/#@+- (no spaces, quotes or '='): "
                         "it is how this tool knows its own drains" % _show(prefix))


def validate_vars(values, host=None, hosts=()):
    """The gds_slurm role's variables (gds_slurm_*, and the host's gds_slurm_node_name) by the rules
    the module applies (PREFIX, NODE_NAME): [message naming the variable and the value]."""
    percent, least = given_number(values.get("gds_slurm_max_drain_percent")), given_int(values.get("gds_slurm_max_drain_min"))
    node, scontrol = values.get("gds_slurm_node_name"), values.get("gds_slurm_scontrol")
    try:
        check_prefix(values.get("gds_slurm_reason_prefix"))
        prefix_error = None
    except SlurmError as exc:
        prefix_error = "gds_slurm_%s" % exc
    return errors(
        None if percent is not None and 0 <= percent <= 100 and least is not None and least >= 0 else
        "gds_slurm_max_drain_percent must be 0 to 100 (got %s) and gds_slurm_max_drain_min 0 or more (got %s)"
        % (values.get("gds_slurm_max_drain_percent"), values.get("gds_slurm_max_drain_min")),
        prefix_error,
        # a hostlist such as fleet-[01-04] would act on several nodes
        "gds_slurm_node_name of %s must be one plain Slurm node name (letters, digits, '.', '_', '-'; no hostlist), "
        "got %s" % (host, _show(node)) if node not in (None, "") and not (isinstance(node, str) and NODE_NAME.match(node))
        else None,
        path_error("gds_slurm_verdict_file", values.get("gds_slurm_verdict_file")),
        path_error("gds_slurm_healthcheck_path", values.get("gds_slurm_healthcheck_path")),
        None if isinstance(scontrol, str) and scontrol.strip() else "gds_slurm_scontrol must not be empty, got %s" % _show(scontrol))


# The role gds_slurm: its variables, the one source of its defaults/main.yml, meta/argument_specs.yml
# and its table in docs/variables.md (make roles)
ROLE_SPEC = RoleSpec(
    'gds_slurm', 'gds_slurm_',
    short_description='Drain failing nodes in Slurm and resume the ones this role drained that pass again',
    description=("Once, on gds_slurm_delegate, the module gds_slurm reads the run's summary.json and/or drift.json "
                 'and scontrol -o show node, drains each FAIL, ERROR or drifted node and resumes each node drained '
                 'with gds_slurm_reason_prefix whose host passes again, behind a circuit breaker. Nodes that are '
                 "DOWN or FAIL, drained by anyone else or carrying anyone else's reason are never touched; an "
                 'unreadable report or two hosts on one node change nothing.',
                 "Then writes each node's verdict file for scripts/gds-healthcheck and, when asked, installs that "
                 'script.',),
    variables=[
        Var('gds_slurm_run_dir', 'path',
            'The run whose report decides (`reports/<run-id>` or `reports/latest`, on the controller).',
            reports_dir("/latest")),
        Var('gds_slurm_dry_run', 'bool',
            'Plan and show the scontrol commands, change nothing (`--check` does the same).',
            False),
        Var('gds_slurm_max_drain_percent', 'float',
            "Circuit breaker: share of the run's Slurm nodes one run may newly drain, in percent (0 to 100). Above "
            'it the run changes nothing and fails.',
            10),
        Var('gds_slurm_max_drain_min', 'int',
            'Nodes one run may always drain, whatever the share (small clusters); 0 or more.',
            1),
        Var('gds_slurm_reason_prefix', 'str',
            'Prefix of the drain reasons the role writes; only drains with it (and a space) are ever resumed. '
            'Written into each verdict file: gds-healthcheck follows it. 1 to 32 letters, digits or `_.:/#@+-`.',
            'gds:'),
        Var('gds_slurm_scontrol', 'str',
            'The scontrol command on the host that runs it.',
            'scontrol'),
        Var('gds_slurm_delegate', 'str',
            'The host where scontrol reaches the cluster (the controller, a login or an admin node).',
            'localhost'),
        Var('gds_slurm_write_verdict', 'bool',
            "Write each node's verdict file for the Slurm HealthCheckProgram (after the circuit breaker let the "
            'run through).',
            True),
        Var('gds_slurm_verdict_file', 'path',
            "The node's verdict file that gds-healthcheck reads.",
            on_node('/var/lib/gds-commission/verdict.json')),
        Var('gds_slurm_healthcheck_install', 'bool',
            'Install `scripts/gds-healthcheck` on the node.',
            False),
        Var('gds_slurm_healthcheck_path', 'path',
            'Where gds-healthcheck is installed on the node.',
            on_node('/usr/local/sbin/gds-healthcheck')),
        Var('gds_slurm_node_name', 'str',
            "Host variable - the host's Slurm node name, where it is not the short host name. One plain node name "
            "(letters, digits, '.', '_', '-'); no two hosts may share one."),
    ],
    shared=('gds_root',),
    entry_points={
        'validate': "main",
    },
)
