# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gds_report_hosts``: what every host recorded, for the gds_report module, in one pass.

A set_fact loop that combine()s one host per item makes each item's result carry the whole
dictionary so far: quadratic in the number of hosts (with topologies of about 100 kB a host).
"""
from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

from ansible_collections.gds.commission.plugins.module_utils.fleet import report as _report


def gds_report_hosts(hosts, hostvars, check_vars):
    """{host: {checks, topology, arrays, bench, rdma_bench, reboot_required, platform}} for each
    host: plugins/module_utils/fleet/report.host_inputs, the map the callback's own report uses too."""
    try:
        pattern = re.compile(check_vars)
    except (re.error, TypeError) as exc:
        raise AnsibleFilterError("gds_report_check_vars %r is not a regular expression: %s" % (check_vars, exc))
    out = {}
    for host in hosts:
        hv = hostvars[host]
        out[host] = _report.host_inputs(hv, hv.get("ansible_facts") or {}, pattern)
    return out


class FilterModule(object):
    def filters(self):
        return {"gds_report_hosts": gds_report_hosts}
