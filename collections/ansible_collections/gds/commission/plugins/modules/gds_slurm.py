#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_slurm
short_description: Drain failing nodes in Slurm and resume the ones this tool drained that pass again
description:
  - Reads a run's report (C(summary.json) of a commissioning run, C(drift.json) of a drift run, or
    both) and the nodes' state from C(scontrol -o show node).
  - Drains each node whose host is FAIL, ERROR or drifted with the reason
    C(<reason_prefix> <first failing check>); resumes each node drained with that prefix whose host
    now passes. A drift run resumes only nodes drained for drift.
  - Never touches a node that is DOWN or FAIL (or rebooting, invalid, future, in a state it does
    not know), drained by anyone else or carrying anyone else's reason, whatever its flags.
  - Reasons are one line of printable text - whitespace runs become a space, other control
    characters C(\xNN), C(=) becomes C(:), at most 200 characters - so a second run reads its
    own reason back unchanged.
  - Changes nothing and fails, naming the file and the key, when summary.json or drift.json is not
    what gds_report writes; naming both hosts when two hosts map to one Slurm node; naming the host
    when a node name is not one plain node (a hostlist, a comma list).
  - Circuit breaker - when the run would newly drain more than
    max(C(max_drain_min), C(max_drain_percent) of the run's Slurm nodes), it changes nothing and fails.
  - Runs where C(scontrol) reaches the cluster (a login or admin host; C(delegate_to) it).
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
options:
  run_dir:
    description: The run directory to read (C(reports/<run-id>) or C(reports/latest)).
    type: path
    required: true
  nodes:
    description:
      - Slurm node name per inventory host, for hosts whose node name is not their short host name.
      - One plain node name each (letters, digits, C(.), C(_), C(-)); no two hosts, here or by short name, on one node.
    type: dict
    default: {}
  hosts:
    description:
      - Only these hosts of the report; empty means every host of the report.
      - Their node names must not collide either, in the report or not (the play's hosts).
    type: list
    elements: str
    default: []
  reason_prefix:
    description:
      - Prefix of the drain reasons this module writes and the only drains it resumes (a reason
        that starts with the prefix and a space).
      - 1 to 32 letters, digits or C(_.:/#@+-).
    type: str
    default: "gds:"
  max_drain_percent:
    description: Share of the run's Slurm nodes one run may newly drain, in percent.
    type: float
    default: 10
  max_drain_min:
    description: Nodes one run may always drain, whatever the share (a small cluster).
    type: int
    default: 1
  dry_run:
    description: Plan and return the commands without running them (as check mode does).
    type: bool
    default: false
  scontrol:
    description: The scontrol command.
    type: str
    default: scontrol
notes:
  - Reads the cluster in check mode and dry-run mode too (C(scontrol -o show node) changes nothing).
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
"""

EXAMPLES = r"""
- name: Drain the failing nodes, resume the ones that pass again
  gds.commission.gds_slurm:
    run_dir: "{{ playbook_dir }}/../reports/latest"
    max_drain_percent: 10
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
drain:
  description: Nodes drained (or to drain) by this run, each C({host, node, verdict, reason, slurm_state, slurm_reason}).
  returned: always
  type: list
  elements: dict
reason:
  description: Nodes drained earlier by this tool whose reason changed (the reason is updated, not counted as a drain).
  returned: always
  type: list
  elements: dict
resume:
  description: Nodes resumed (or to resume), each C({host, node, verdict, slurm_state, slurm_reason}).
  returned: always
  type: list
  elements: dict
kept:
  description: Drained nodes left as they are, each with C(why) (drained by someone else, already drained, ...).
  returned: always
  type: list
  elements: dict
not_in_slurm:
  description: Hosts of the report whose node Slurm does not know, each C({host, node}).
  returned: always
  type: list
  elements: dict
limit:
  description: How many nodes this run may newly drain.
  returned: always
  type: int
candidates:
  description: Hosts of the report that are Slurm nodes.
  returned: always
  type: int
tripped:
  description: The circuit breaker refused the run (more drains than C(limit)); nothing was changed.
  returned: always
  type: bool
commands:
  description: The scontrol command lines (run, or to run in check mode / dry run).
  returned: always
  type: list
  elements: str
failures:
  description: The scontrol commands that failed, each C({command, error}).
  returned: when a command failed
  type: list
  elements: dict
hosts:
  description:
    - Per host of the report, C({status, verdict, reason, mode, node}); status is bad, good or unknown.
    - C(node) is the host's Slurm node name (absent for hosts outside C(hosts)).
  returned: always
  type: dict
"""

from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.fleet.slurm import SlurmError, apply, check_prefix, commands, load_run, plan, read_nodes


def main():
    module = AnsibleModule(
        argument_spec=dict(
            run_dir=dict(type="path", required=True),
            nodes=dict(type="dict", default={}),
            hosts=dict(type="list", elements="str", default=[]),
            reason_prefix=dict(type="str", default="gds:"),
            max_drain_percent=dict(type="float", default=10),
            max_drain_min=dict(type="int", default=1),
            dry_run=dict(type="bool", default=False),
            scontrol=dict(type="str", default="scontrol"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not 0 <= p["max_drain_percent"] <= 100:
        module.fail_json(msg="max_drain_percent must be between 0 and 100, got %s" % p["max_drain_percent"])
    if p["max_drain_min"] < 0:
        module.fail_json(msg="max_drain_min must be 0 or more, got %s" % p["max_drain_min"])

    def run_command(argv):
        try:
            return module.run_command(argv, handle_exceptions=False)
        except OSError as exc:
            return 127, "", "cannot run %s: %s" % (argv[0], exc.strerror or exc)

    # values as given: a list or a number is refused by name, never turned into a node name
    names = dict((str(k), v) for k, v in p["nodes"].items() if v not in (None, ""))
    try:
        check_prefix(p["reason_prefix"])
        run = load_run(p["run_dir"], p["reason_prefix"])
        slurm_nodes = read_nodes(run_command, p["scontrol"])
        the_plan = plan(run, slurm_nodes, names, p["reason_prefix"], p["max_drain_percent"], p["max_drain_min"],
                        set(p["hosts"]) if p["hosts"] else None)
    except SlurmError as exc:
        module.fail_json(msg=str(exc))
    # each host's node, as the verdict file for gds-healthcheck names it
    for host, node in the_plan.pop("nodes").items():
        if host in run:
            run[host]["node"] = node
    lines = [" ".join(argv) for argv in commands(the_plan, p["scontrol"])]
    result = dict(the_plan, commands=lines, hosts=run, changed=False)
    if the_plan["tripped"]:
        module.fail_json(msg="circuit breaker: this run would drain %d of %d Slurm nodes, more than the %d allowed "
                             "(max_drain_percent=%s, max_drain_min=%d); nothing changed. Nodes: %s"
                             % (len(the_plan["drain"]), the_plan["candidates"], the_plan["limit"], p["max_drain_percent"],
                                p["max_drain_min"], ", ".join(i["node"] for i in the_plan["drain"])), **result)
    result["changed"] = bool(lines)
    if lines and not (module.check_mode or p["dry_run"]):
        failures = apply(the_plan, run_command, p["scontrol"])
        if failures:
            module.fail_json(msg="scontrol failed for %d of %d commands: %s" % (
                len(failures), len(lines), "; ".join("%s: %s" % (f["command"], f["error"]) for f in failures)),
                failures=failures, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
