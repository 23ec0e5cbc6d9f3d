# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn facts and module results into report checks, each computed in its area's
file of plugins/module_utils (hw/affinity.py, tune/acs.py, tune/iommu.py, tune/driver.py).

``gds_topology_checks``, ``gds_acs_checks``, ``gds_iommu_checks``, ``gds_driver_checks``: the
check lists the roles record; ``gds_driver_reboot_pending``: the P2PDMA module options that wait
for the next load of the drivers; ``gds_unit_exec``: a path checked fit for a root systemd unit's
ExecStart (the template that writes the unit fails on anything else).
"""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gds.commission.plugins.module_utils.hw import affinity as _affinity
from ansible_collections.gds.commission.plugins.module_utils.tune import acs as _acs
from ansible_collections.gds.commission.plugins.module_utils.tune import driver as _driver
from ansible_collections.gds.commission.plugins.module_utils.tune import iommu as _iommu


def _call(func, *args, **kwargs):
    try:
        return func(*args, **kwargs)
    except (ValueError, KeyError, TypeError) as exc:
        raise AnsibleFilterError("%s: %s" % (func.__name__, exc))


def gds_topology_checks(topology, expect=None, profile=None, unknown_platform=None):
    return _call(_affinity.topology_checks, topology, expect, profile, unknown_platform)


def gds_acs_checks(result, **kwargs):
    return _call(_acs.acs_checks, result, **kwargs)


def gds_iommu_checks(iommu, **kwargs):
    return _call(_iommu.iommu_checks, iommu, **kwargs)


def gds_driver_checks(platform, **kwargs):
    return _call(_driver.driver_checks, platform, **kwargs)


def gds_driver_reboot_pending(platform, mode):
    return _call(_driver.driver_reboot_pending, platform, mode)


def gds_unit_exec(path, name="path"):
    error = _acs.unit_exec_error(path)
    if error:
        raise AnsibleFilterError("%s: %s" % (name, error))
    return path


class FilterModule(object):
    def filters(self):
        return {"gds_topology_checks": gds_topology_checks, "gds_acs_checks": gds_acs_checks,
                "gds_iommu_checks": gds_iommu_checks, "gds_driver_checks": gds_driver_checks,
                "gds_driver_reboot_pending": gds_driver_reboot_pending, "gds_unit_exec": gds_unit_exec}
