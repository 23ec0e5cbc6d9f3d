# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm drain and resume from a run's report (docs/fleet.md).

A node whose host is FAIL/ERROR (summary.json) or drifted / not checked (drift.json) is drained
with the reason ``<prefix> <first failing check>``; a node drained with that prefix whose host
now passes is resumed. Nodes drained by anyone else are left alone. A circuit breaker refuses a
run that would drain more than its share of the nodes (a bad threshold must not drain a cluster).
"""
from __future__ import annotations

import json
import os
import re

REASON_MAX = 200
BAD_VERDICTS = ("UNREACHABLE", "ERROR", "FAIL")
DRIFT_TAG = "drift:"


class SlurmError(Exception):
    pass


def _hosts_of(path):
    """The ``hosts`` mapping of a summary.json or drift.json."""
    doc = _load_json(path)
    hosts = doc.get("hosts") if isinstance(doc, dict) else None
    if not isinstance(hosts, dict):
        raise SlurmError("%s: key 'hosts' missing or not a mapping" % path)
    return hosts


def _load_json(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except ValueError as exc:
        raise SlurmError("%s is not valid JSON: %s" % (path, exc))
    except OSError as exc:
        raise SlurmError("cannot read %s: %s" % (path, exc.strerror or exc))


def _clean(text):
    return " ".join(str(text).split())


def reason(prefix, text):
    """A drain reason: one line, at most REASON_MAX characters."""
    out = "%s %s" % (prefix, _clean(text))
    return out if len(out) <= REASON_MAX else out[:REASON_MAX - 3] + "..."


def first_failing_check(entry):
    """The check that decided a non-passing host's verdict (the first one with that verdict)."""
    verdict = entry.get("verdict")
    checks = entry.get("checks") or []
    for wanted in ([verdict] if verdict in BAD_VERDICTS else []) + list(BAD_VERDICTS):
        for check in checks:
            if isinstance(check, dict) and check.get("verdict") == wanted:
                name = str(check.get("name") or "unnamed check")
                # host: checks (play completed, reachable) say little without what happened
                if name.startswith("host:") and check.get("actual") not in (None, ""):
                    return "%s: %s" % (name, check["actual"])
                return name
    return "verdict %s" % verdict


def load_run(run_dir, prefix="gds:"):
    """{host: {status: bad|good|unknown, verdict, reason, mode}} from a run directory.

    summary.json (commissioning) and drift.json (drift check) are both read when present; a
    host bad in either is bad. UNREACHABLE hosts are unknown: Slurm sees a dead node itself.
    """
    summary_path = os.path.join(run_dir, "summary.json")
    drift_path = os.path.join(run_dir, "drift.json")
    if not os.path.isdir(run_dir):
        raise SlurmError("run directory %s does not exist" % run_dir)
    found = [p for p in (summary_path, drift_path) if os.path.isfile(p)]
    if not found:
        raise SlurmError("run directory %s has neither summary.json nor drift.json" % run_dir)
    out = {}
    if summary_path in found:
        for host, entry in _hosts_of(summary_path).items():
            verdict = str((entry or {}).get("verdict", "ERROR")).upper()
            if verdict == "UNREACHABLE":
                out[host] = {"status": "unknown", "verdict": verdict, "reason": None, "mode": "commission"}
            elif verdict in BAD_VERDICTS:
                out[host] = {"status": "bad", "verdict": verdict, "mode": "commission",
                             "reason": reason(prefix, first_failing_check(entry))}
            else:
                out[host] = {"status": "good", "verdict": verdict, "reason": None, "mode": "commission"}
    if drift_path in found:
        for host, entry in _hosts_of(drift_path).items():
            entry = entry or {}
            if entry.get("unreachable"):
                mine = {"status": "unknown", "verdict": "UNREACHABLE", "reason": None}
            elif entry.get("drifted") is False:
                mine = {"status": "good", "verdict": "PASS", "reason": None}
            elif entry.get("error") or entry.get("drifted") is None:
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


_NODE_LINE = re.compile(r"^NodeName=(\S+)")
_STATE = re.compile(r"\bState=(\S+)")
# Reason=<text> [user@time], the last field of scontrol's one-line output in practice; stop at
# the next Key= field otherwise
_REASON = re.compile(r"\bReason=(.*?)(?:\s+\[[^\[\]]*@[^\[\]]*\])?(?=\s+[A-Z][A-Za-z]*=|\s*$)")


def parse_nodes(text):
    """{node: {flags: [IDLE, DRAIN, ...], reason}} from `scontrol -o show node`."""
    nodes = {}
    for line in text.splitlines():
        match = _NODE_LINE.match(line.strip())
        if not match:
            continue
        state = _STATE.search(line)
        why = _REASON.search(line)
        nodes[match.group(1)] = {
            "flags": state.group(1).upper().split("+") if state else [],
            "reason": why.group(1).strip() if why else None,
        }
    return nodes


def short_name(host):
    return host.split(".")[0]


def plan(run, slurm_nodes, names=None, prefix="gds:", max_drain_percent=10.0, max_drain_min=1, hosts=None):
    """What to do: {drain, reason, resume, kept, not_in_slurm, limit, candidates, tripped}.

    ``names`` maps inventory hosts to Slurm node names (default the short host name); ``hosts``
    limits the run's hosts considered. The breaker counts the nodes this run would newly drain
    against max(max_drain_min, floor(percent of the run's Slurm nodes)).
    """
    names = names or {}
    wanted = [h for h in sorted(run) if hosts is None or h in hosts]
    out = {"drain": [], "reason": [], "resume": [], "kept": [], "not_in_slurm": []}
    in_slurm = 0
    for host in wanted:
        info = run[host]
        node = names.get(host) or short_name(host)
        current = slurm_nodes.get(node)
        if current is None:
            out["not_in_slurm"].append({"host": host, "node": node})
            continue
        in_slurm += 1
        drained = "DRAIN" in current["flags"]
        ours = (current.get("reason") or "").startswith(prefix)
        item = {"host": host, "node": node, "verdict": info["verdict"], "slurm_state": "+".join(current["flags"]),
                "slurm_reason": current.get("reason")}
        if info["status"] == "bad":
            item["reason"] = info["reason"]
            if not drained:
                out["drain"].append(item)
            elif ours and current.get("reason") != info["reason"]:
                out["reason"].append(item)
            else:
                out["kept"].append(dict(item, why="already drained" if ours else "drained by someone else"))
        elif info["status"] == "good" and drained and ours:
            # a drift check says nothing about a benchmark: it resumes only drift drains
            if info["mode"] == "drift" and not current["reason"][len(prefix):].strip().startswith(DRIFT_TAG):
                out["kept"].append(dict(item, why="drained by a commissioning run; a drift check does not clear it"))
            else:
                out["resume"].append(item)
        elif drained:
            out["kept"].append(dict(item, why="drained by someone else" if not ours else "result unknown"))
    limit = max(int(max_drain_min), int(in_slurm * float(max_drain_percent) / 100.0))
    out.update(limit=limit, candidates=in_slurm, tripped=len(out["drain"]) > limit)
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
            failures.append({"command": " ".join(argv[1:]), "error": _clean(err or out or "exit %d" % rc)})
    return failures


def read_nodes(run_command, scontrol="scontrol"):
    rc, out, err = run_command([scontrol, "-o", "show", "node"])
    if rc != 0:
        raise SlurmError("%s -o show node failed (exit %d): %s" % (scontrol, rc, _clean(err or out)))
    return parse_nodes(out)
