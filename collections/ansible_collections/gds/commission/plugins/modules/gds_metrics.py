#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_metrics
short_description: Put a node's Prometheus textfile in node_exporter's textfile directory
description:
  - Writes the textfile that C(gds_report) built for this node (its C(metrics) return key) into
    the directory of node_exporter's textfile collector, atomically (a scrape never reads half
    a file).
  - The file is the run's output, not a setting of the node, so the task never reports a change.
  - A link, a directory or any other file that is not a regular file at that name is left as it
    is and fails the task naming it (docs/reports.md, What a run writes and what it leaves alone).
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
options:
  dir:
    description: The textfile collector's directory (node_exporter's C(--collector.textfile.directory)); created when missing.
    type: path
    required: true
  name:
    description: The file's name; node_exporter reads only names that end in C(.prom).
    type: str
    default: gds_commission.prom
  content:
    description: The textfile (Prometheus text exposition format).
    type: str
    required: true
notes:
  - In check mode nothing is written.
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
"""

EXAMPLES = r"""
- name: Publish the node's results to node_exporter
  gds.commission.gds_metrics:
    dir: /var/lib/prometheus/node-exporter
    name: "{{ report.metrics_file }}"
    content: "{{ report.metrics[inventory_hostname] }}"
"""

RETURN = r"""
path:
  description: The file written (or that would be, in check mode).
  returned: always
  type: str
"""

import re

from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.fleet.metrics import write_textfile

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\.prom$")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dir=dict(type="path", required=True),
            name=dict(type="str", default="gds_commission.prom"),
            content=dict(type="str", required=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not _NAME.match(p["name"]):
        module.fail_json(msg="name: %r must be a plain file name ending in .prom (node_exporter reads no other)" % p["name"])
    if not p["dir"].startswith("/"):
        module.fail_json(msg="dir: %r must be an absolute path" % p["dir"])
    path = "%s/%s" % (p["dir"].rstrip("/"), p["name"])
    if not module.check_mode:
        try:
            path = write_textfile(p["dir"], p["name"], p["content"])
        except OSError as exc:
            module.fail_json(msg="cannot write %s: %s" % (path, exc))
    # the run's output, like the report: a change every run would break the idempotence check
    module.exit_json(changed=False, path=path)


if __name__ == "__main__":
    main()
