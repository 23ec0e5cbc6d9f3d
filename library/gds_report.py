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
  - Commission mode writes C(summary.json), one C(HOST.json) per host, C(junit.xml) and a
    self-contained C(report.html). Drift mode writes C(drift.json).
version_added: "1.0.0"
author: gds-commission contributors
options:
  reports_dir:
    description: Directory that holds the run directories.
    type: path
    required: true
  run_id:
    description: Name of this run's directory.
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
        C(<area>: measured). Commission mode only."
    type: list
    elements: str
    default: [bench]
notes:
  - In check mode nothing is written; the documents are still returned.
extends_documentation_fragment:
  - gds
  - gds.no_diff
"""

EXAMPLES = r"""
- name: Write the report
  gds_report:
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
summary:
  description: summary.json's content (commission mode).
  returned: when mode is commission
  type: dict
not_pass:
  description: Hosts whose verdict is not PASS.
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
"""

import datetime
import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gds_report import build_report, write_run


def load_state(module, path):
    if not path:
        return {}
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError) as exc:
        module.fail_json(msg="cannot read the run state %s: %s" % (path, exc))


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
            required_areas=dict(type="list", elements="str", default=["bench"]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    state = load_state(module, p["state_file"])
    states = dict(state.get("hosts") or {})
    for host in p["all_hosts"]:
        entry = states.setdefault(host, {})
        if host not in p["active_hosts"] and not entry.get("unreachable"):
            entry["broken"] = True
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    started = p["started"] or state.get("started") or now
    files, result = build_report(p["run_id"], started, now, p["mode"], p["hosts"], p["all_hosts"], states,
                                 drift=state.get("drift") or {}, required_areas=p["required_areas"])
    run_dir = "%s/%s" % (p["reports_dir"], p["run_id"])
    if not module.check_mode:
        try:
            run_dir = write_run(p["reports_dir"], p["run_id"], files)
        except OSError as exc:
            module.fail_json(msg="cannot write the report under %s: %s" % (p["reports_dir"], exc))
    # a report on the controller is the run's output, not state of a node: never "changed"
    module.exit_json(changed=False, run_dir=run_dir, **result)


if __name__ == "__main__":
    main()
