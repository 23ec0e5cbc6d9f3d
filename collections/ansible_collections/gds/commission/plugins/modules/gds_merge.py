#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_merge
short_description: Write a run's report from the host files of its run directory
description:
  - "Runs on the controller after runs in host scope (C(gds_report_scope=host)) wrote each host's
    C(HOST.inputs.json) into one run directory (nodes commissioning themselves under Slurm, the
    slices of an AWX job, push runs). Writes what a push run's C(gds_report) writes: C(summary.json),
    C(HOST.json), C(junit.xml), C(report.html) (or C(drift.json)), the Prometheus files, the
    C(fleet:) and C(history:) checks, the history, and points C(reports/latest) at the run."
  - "A host of C(hosts) whose file is missing, partial (not whole JSON, another format version, a
    key of the wrong kind), from another run or mode, or unreadable is C(ERROR) with the check
    C(report: host file) and the reason; the other hosts are reported."
  - Logic in C(plugins/module_utils/fleet/merge.py); C(scripts/gds-merge) is the same merge from a shell.
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
options:
  reports_dir:
    description: Directory that holds the run directories.
    type: path
    required: true
  run_id:
    description: The run to merge (its directory in C(reports_dir)).
    type: str
    required: true
  hosts:
    description:
      - The hosts the run targeted; each without a usable file is C(ERROR). Empty takes the hosts of
        the files found (a host that wrote nothing is then not in the report).
    type: list
    elements: str
    default: []
  mode:
    description: The run's mode; default the host files' (they must agree).
    type: str
    choices: [commission, drift]
  required_areas:
    description: As C(gds_report)'s; default the first host's file's.
    type: list
    elements: str
  fleet_min_peers:
    description: As C(gds_report)'s; default the first host's file's.
    type: int
  history_keep:
    description: As C(gds_report)'s; default the first host's file's (0 in a check-mode run).
    type: int
notes:
  - In check mode nothing is written; the documents are still returned.
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
"""

EXAMPLES = r"""
- name: Merge the nodes' files of a run
  gds.commission.gds_merge:
    reports_dir: /shared/gds-reports
    run_id: nightly-20261126
    hosts: "{{ groups['all'] }}"
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
    - The earlier host files of the run directory whose hosts this report does not have, moved into
      C(RUN/.earlier-<time>/) (nothing is removed).
  returned: when not a dry run
  type: list
  elements: str
mode:
  description: The mode merged (commission or drift).
  returned: always
  type: str
hosts:
  description: Every host of the report.
  returned: always
  type: list
  elements: str
problems:
  description: Per host made ERROR for its file, why (missing, partial, another run, unreadable).
  returned: always
  type: dict
notes:
  description: What else the merge saw (files no host's name can be read from, hosts whose files disagree on a report setting).
  returned: always
  type: list
  elements: str
summary:
  description: summary.json's content.
  returned: when mode is commission
  type: dict
not_pass:
  description: Hosts whose verdict is not PASS.
  returned: when mode is commission
  type: list
  elements: str
history:
  description: The history files written.
  returned: when mode is commission
  type: list
  elements: str
drift:
  description: drift.json's content.
  returned: when mode is drift
  type: dict
drifted:
  description: Hosts that drifted (or could not be checked).
  returned: when mode is drift
  type: list
  elements: str
"""

from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.fleet.merge import MergeError, merge_run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            reports_dir=dict(type="path", required=True),
            run_id=dict(type="str", required=True),
            hosts=dict(type="list", elements="str", default=[]),
            mode=dict(type="str", choices=["commission", "drift"]),
            required_areas=dict(type="list", elements="str"),
            fleet_min_peers=dict(type="int"),
            history_keep=dict(type="int"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = merge_run(p["reports_dir"], p["run_id"], expected=p["hosts"], mode=p["mode"],
                           required_areas=p["required_areas"], fleet_min_peers=p["fleet_min_peers"],
                           history_keep=p["history_keep"], write=not module.check_mode)
    except MergeError as exc:
        module.fail_json(msg="cannot merge run %s: %s" % (p["run_id"], exc))
    except (OSError, ValueError) as exc:
        module.fail_json(msg="cannot write the report under %s: %s" % (p["reports_dir"], exc))
    # each node's textfile is its HOST.prom: a fleet's would make a large result
    result.pop("metrics", None)
    result.pop("metrics_file", None)
    refused = result.pop("refused")
    if refused:
        module.fail_json(msg="the report is in %s, but %s" % (result["run_dir"], "; ".join(refused)), **result)
    # the report is the run's output, not state of a node: never "changed"
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
