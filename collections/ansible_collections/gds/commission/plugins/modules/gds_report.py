#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_report
short_description: Write the commissioning or drift report of a run
description:
  - Runs once on the controller. Turns what every host recorded (checks, topology, arrays,
    benchmark records) and what the C(gds_commission) callback saw (unreachable hosts, broken
    plays, check-mode drift) into C(reports/<run-id>/) and points C(reports/latest) at it.
  - Commission mode writes C(summary.json), one C(HOST.json) and one C(HOST.prom) (Prometheus
    textfile) per host, C(junit.xml), a self-contained C(report.html) (the fleet's index) and one
    C(HOST.html) (the host's page) per host. Drift mode writes
    C(drift.json) and one C(HOST.drift.prom) per host.
  - Commission mode also compares each host's benchmark figures with the median of the hosts of
    its platform in the run (C(fleet:) checks) and with its own last PASS run (C(history:)
    checks), and keeps each host's last runs in C(reports_dir/history/HOST.json).
  - HOST in a file name is the inventory name, or its percent-encoded form when the name is not a
    plain file name (docs/reports.md, Hostile input); nothing is written outside C(reports_dir).
  - "Nothing it did not make is replaced or removed: a C(reports/latest) that is not its link to a
    run directory (a real directory, a file, a link elsewhere), or a link or directory where a
    report or history file goes, is left as it is and fails the task naming it, after the run's
    own directory is written."
  - "A host whose inputs cannot be read or rendered (a C(record) that is not a mapping, say) is
    C(ERROR) with the check C(report: host input); the other hosts' reports are written as usual."
  - "C(scope=host) (a node commissioning itself, a slice of a job: several runs write one run
    directory) writes per host only C(HOST.inputs.json), what the merge (module C(gds_merge),
    C(scripts/gds-merge)) needs to rebuild that host, and the host's own C(HOST.json) and
    C(HOST.prom) (C(HOST.drift.prom)); no summary, junit, page, drift.json, history or C(latest)."
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
options:
  reports_dir:
    description: Directory that holds the run directories.
    type: path
    required: true
  run_id:
    description:
      - Name of this run's directory, a plain name (letters, digits, C(.) C(_) C(-), not starting with a dot,
        at most 150 characters, not C(latest) or C(history)); any other fails the task.
    type: str
    required: true
  started:
    description: When the run started (ISO 8601); default now.
    type: str
  mode:
    description: Which report to write.
    type: str
    choices: [commission, drift]
    default: commission
  hosts:
    description: Per host, what it recorded; keys C(checks), C(topology), C(arrays), C(bench), C(rdma_bench), C(reboot_required).
    type: dict
    default: {}
  all_hosts:
    description: Every host the run targeted.
    type: list
    elements: str
    required: true
  active_hosts:
    description: The hosts still in the play (the others broke or were unreachable).
    type: list
    elements: str
    required: true
  state_file:
    description: The callback's state file (unreachable hosts, failures, drift, start time); optional.
    type: path
  required_areas:
    description:
      - "Check areas (the part of a check name before the colon) in which a host that completed its
        plays needs at least one check that is not SKIP; without one it gets a FAIL check
        C(<area>: measured) (SKIP with C(check_run)). Commission mode only."
      - One list for every host, or a dict host -> list (each host's own setting).
    type: raw
    default: [bench]
  check_run:
    description:
      - "The run is in check mode (C(ansible_check_mode)): it measured nothing, so an unmeasured
        required area is SKIP, not FAIL, the report says so, and C(latest) is not pointed at it
        (commission mode)."
    type: bool
    default: false
  platforms:
    description:
      - Per host, its platform (the profile name); hosts are compared with the fleet only within
        their platform. A host missing here belongs to the platform C(unknown).
    type: dict
    default: {}
  fleet_tolerance:
    description:
      - "How far (a share of the median, 0 to 1) a host's benchmark figure may be on the bad side of
        the median of its platform's hosts before its C(fleet:) check WARNs: one number for every
        host, or a dict host: number."
    type: raw
    default: 0.10
  fleet_min_peers:
    description:
      - Compare a figure with the fleet only when at least this many other hosts of the platform measured it.
      - "One number, or a dict host -> number (each host's setting): the largest is the run's."
    type: raw
    default: 3
  history_tolerance:
    description:
      - "How much (a share, 0 to 1) a host's benchmark figure may have lost since its last PASS run
        before its C(history:) check WARNs: one number for every host, or a dict host: number."
    type: raw
    default: 0.10
  history_keep:
    description:
      - How many runs each host's history file keeps (the oldest go first); 0 keeps no history.
      - "One number, or a dict host -> number (each host's setting): the largest is the run's."
    type: raw
    default: 20
  scope:
    description:
      - C(run) writes the run's report; C(host) writes each host's inputs file for a later merge (and the
        host's own C(HOST.json), C(HOST.prom)), nothing that several runs sharing the run directory would race on.
    type: str
    choices: [run, host]
    default: run
notes:
  - In check mode nothing is written; the documents are still returned.
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
"""

EXAMPLES = r"""
- name: Write the report
  gds.commission.gds_report:
    reports_dir: "{{ playbook_dir }}/../reports"
    run_id: "{{ lookup('ansible.builtin.env', 'GDS_RUN_ID') }}"
    all_hosts: "{{ ansible_play_hosts_all }}"
    active_hosts: "{{ ansible_play_hosts }}"
    hosts: "{{ collected }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
run_dir:
  description: The run directory written.
  returned: always
  type: str
set_aside:
  description:
    - A run id used again (scope run, not in check mode) - the earlier run's host files whose hosts
      this report does not have, moved into C(RUN/.earlier-<time>/) (nothing is removed).
  returned: when scope is run
  type: list
  elements: str
summary:
  description: summary.json's content (commission mode).
  returned: when mode is commission
  type: dict
not_pass:
  description: Hosts whose verdict is not PASS.
  returned: when mode is commission
  type: list
  elements: str
metrics:
  description: Per host, its Prometheus textfile (the content of C(HOST.prom) or C(HOST.drift.prom)).
  returned: always
  type: dict
metrics_file:
  description: The name the textfile gets on a node (C(gds_commission.prom), or C(gds_commission_drift.prom) in drift mode).
  returned: always
  type: str
history:
  description: The history files written (commission mode, with C(history_keep) above 0; none in check mode).
  returned: when mode is commission
  type: list
  elements: str
drifted:
  description: Hosts that drifted (or could not be checked).
  returned: when mode is drift
  type: list
  elements: str
drift:
  description: drift.json's content.
  returned: when mode is drift
  type: dict
inputs:
  description: The inputs files written, C(HOST.inputs.json) (scope host; the run directory holds them).
  returned: when scope is host
  type: list
  elements: str
"""

import datetime
import json
import os

from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.fleet.merge import host_scope_files
from ansible_collections.gds.commission.plugins.module_utils.fleet.output import OutDir
from ansible_collections.gds.commission.plugins.module_utils.fleet.report import (
    REQUIRED_AREAS, publish_run, run_id_error, write_run_dir,
)


def load_state(module, path):
    if not path:
        return {}
    try:
        # the callback's file (.state/RUN.json): read as written, never through a link put in its place
        with OutDir(os.path.dirname(path) or ".", create=False) as folder:
            text = folder.read(os.path.basename(path))
        if text is None:
            raise FileNotFoundError("no such file")
        state = json.loads(text)
    except (OSError, ValueError, RecursionError) as exc:
        module.fail_json(msg="cannot read the run state %s: %s" % (path, exc))
    if not isinstance(state, dict):
        module.fail_json(msg="cannot read the run state %s: expected an object" % path)
    for key in ("hosts", "drift"):
        if not isinstance(state.get(key, {}), (dict, type(None))):
            module.fail_json(msg="cannot read the run state %s: '%s' must be an object" % (path, key))
    if not all(isinstance(entry, dict) for entry in (state.get("hosts") or {}).values()):
        module.fail_json(msg="cannot read the run state %s: each entry of 'hosts' must be an object" % path)
    return state


def tolerance(module, name, value, hosts):
    """A share from 0 to 1, for every host or per host; a bad one fails naming it."""
    per_host = value if isinstance(value, dict) else dict((host, value) for host in hosts)
    out = {}
    for host, share in per_host.items():
        try:
            share = float(share)
        except (TypeError, ValueError):
            share = None
        if share is None or not 0 <= share < 1:
            module.fail_json(msg="%s%s: %r is not a share from 0 to 1 (0.10 is 10 %%)"
                             % (name, " of host %s" % host if isinstance(value, dict) else "", per_host[host]))
        out[host] = share
    return out


def per_host_areas(module, value, hosts):
    """{host: [area]} from one list for every host or a dict host -> list; a bad one fails naming it."""
    per_host = value if isinstance(value, dict) else dict((host, value) for host in hosts)
    for host, areas in per_host.items():
        if not isinstance(areas, list) or not all(isinstance(a, str) for a in areas):
            module.fail_json(msg="required_areas%s: %r is not a list of area names"
                             % (" of host %s" % host if isinstance(value, dict) else "", areas))
    return dict((host, list(per_host.get(host, REQUIRED_AREAS))) for host in hosts)


def largest_count(module, name, value):
    """The run's count: one number, or the largest of a dict host -> number; a bad one fails naming it."""
    per_host = value if isinstance(value, dict) else {None: value}
    counts = []
    for host, count in per_host.items():
        try:
            good = not isinstance(count, bool) and int(str(count)) >= 0
        except ValueError:
            good = False
        if not good:
            module.fail_json(msg="%s%s: %r is not a count (0 or more)" % (name, " of host %s" % host if host else "", count))
        counts.append(int(str(count)))
    return max(counts) if counts else 0


def main():
    module = AnsibleModule(
        argument_spec=dict(
            reports_dir=dict(type="path", required=True),
            run_id=dict(type="str", required=True),
            started=dict(type="str"),
            mode=dict(type="str", default="commission", choices=["commission", "drift"]),
            hosts=dict(type="dict", default={}),
            all_hosts=dict(type="list", elements="str", required=True),
            active_hosts=dict(type="list", elements="str", required=True),
            state_file=dict(type="path"),
            required_areas=dict(type="raw", default=["bench"]),
            check_run=dict(type="bool", default=False),
            platforms=dict(type="dict", default={}),
            fleet_tolerance=dict(type="raw", default=0.10),
            fleet_min_peers=dict(type="raw", default=3),
            history_tolerance=dict(type="raw", default=0.10),
            history_keep=dict(type="raw", default=20),
            scope=dict(type="str", default="run", choices=["run", "host"]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    required_areas = per_host_areas(module, p["required_areas"], p["all_hosts"])
    fleet_min_peers = largest_count(module, "fleet_min_peers", p["fleet_min_peers"])
    history_keep = largest_count(module, "history_keep", p["history_keep"])
    if run_id_error(p["run_id"]):
        module.fail_json(msg="run_id: %s" % run_id_error(p["run_id"]))
    state = load_state(module, p["state_file"])
    states = dict(state.get("hosts") or {})
    for host in p["all_hosts"]:
        entry = states.setdefault(host, {})
        if host not in p["active_hosts"] and not entry.get("unreachable"):
            entry["broken"] = True
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    started = p["started"] or state.get("started") or now
    platforms = dict((h, str(v)) for h, v in p["platforms"].items() if v)
    fleet_tolerance = tolerance(module, "fleet_tolerance", p["fleet_tolerance"], p["all_hosts"])
    history_tolerance = tolerance(module, "history_tolerance", p["history_tolerance"], p["all_hosts"]) \
        if p["mode"] == "commission" and history_keep > 0 else {}
    drift = (state.get("drift") or {}) if p["state_file"] else None
    if p["scope"] == "host":
        files, result = host_scope_files(p["run_id"], started, now, p["mode"], p["hosts"], p["all_hosts"], states,
                                         drift=drift, required_areas=required_areas, platforms=platforms,
                                         fleet_tolerance=fleet_tolerance, history_tolerance=history_tolerance,
                                         fleet_min_peers=fleet_min_peers, history_keep=history_keep,
                                         check_run=p["check_run"])
        run_dir = "%s/%s" % (p["reports_dir"], p["run_id"])
        if not module.check_mode:
            try:
                run_dir = write_run_dir(p["reports_dir"], p["run_id"], files)
            except (OSError, ValueError) as exc:
                module.fail_json(msg="cannot write the host files under %s: %s" % (p["reports_dir"], exc))
        if p["mode"] == "commission":
            result["history"] = []  # the merge keeps the history
        module.exit_json(changed=False, run_dir=run_dir, **result)
    try:
        run_dir, result, refused = publish_run(
            p["reports_dir"], p["run_id"], started, now, p["mode"], p["hosts"], p["all_hosts"], states, drift=drift,
            required_areas=required_areas,
            fleet=dict(platforms=platforms, tolerance=fleet_tolerance, min_peers=fleet_min_peers),
            history_keep=history_keep, history_tolerance=history_tolerance, write=not module.check_mode,
            check_run=p["check_run"])
    except (OSError, ValueError) as exc:
        module.fail_json(msg="cannot write the report under %s: %s" % (p["reports_dir"], exc))
    # the run's directory is written: a refused history file or latest fails the task after it
    if refused:
        module.fail_json(msg="the report is in %s, but %s" % (run_dir, "; ".join(refused)), run_dir=run_dir)
    # a report on the controller is the run's output, not state of a node: never "changed"
    module.exit_json(changed=False, run_dir=run_dir, **result)


if __name__ == "__main__":
    main()
