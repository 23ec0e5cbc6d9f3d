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

REBOOT = re.compile(r"^gds_\w*reboot_required$")


def _flat(value):
    if isinstance(value, (list, tuple)):
        return [item for part in value for item in _flat(part)]
    return [value]


def gds_report_hosts(hosts, hostvars, check_vars):
    """{host: {checks, topology, arrays, bench, rdma_bench, reboot_required, platform}} for each host."""
    try:
        pattern = re.compile(check_vars)
    except (re.error, TypeError) as exc:
        raise AnsibleFilterError("gds_report_check_vars %r is not a regular expression: %s" % (check_vars, exc))
    out = {}
    for host in hosts:
        hv = hostvars[host]
        names = list(hv.keys())
        facts = hv.get("ansible_facts") or {}
        checks = []
        for name in names:
            if pattern.search(name):
                value = hv[name]
                checks.extend(_flat(value))
        out[host] = {
            "checks": checks,
            "topology": facts.get("gds_topology"),
            "arrays": hv.get("gds_raid_arrays") or [],
            "bench": hv.get("gds_bench_results") or [],
            "rdma_bench": hv.get("gds_rdma_bench_results") or [],
            "reboot_required": any(bool(hv[name]) for name in names if REBOOT.search(name)),
            "platform": facts.get("gds_platform"),
        }
    return out


class FilterModule(object):
    def filters(self):
        return {"gds_report_hosts": gds_report_hosts}
