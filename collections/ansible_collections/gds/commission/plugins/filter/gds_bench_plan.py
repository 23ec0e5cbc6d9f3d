# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the benchmark plan of a node: thin calls of module_utils/measure/plan.py
(``gds_bench_plan``, ``gds_netfs_bench_targets``), measure/jobfile.py (``gds_gdsio_jobfile``) and
measure/progress.py (``gds_bench_progress_steps``).
"""
from __future__ import annotations

from ansible_collections.gds.commission.plugins.module_utils.measure.jobfile import gds_gdsio_jobfile
from ansible_collections.gds.commission.plugins.module_utils.measure.plan import PlanError, gds_bench_plan, gds_netfs_bench_targets
from ansible_collections.gds.commission.plugins.module_utils.measure.progress import progress_steps

__all__ = ["FilterModule", "PlanError", "gds_bench_plan", "gds_gdsio_jobfile", "gds_netfs_bench_targets"]


def _filter_errors(function):
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except PlanError as exc:
            from ansible.errors import AnsibleFilterError
            raise AnsibleFilterError(str(exc))
    return wrapper


class FilterModule(object):
    def filters(self):
        return {"gds_bench_plan": _filter_errors(gds_bench_plan),
                "gds_netfs_bench_targets": _filter_errors(gds_netfs_bench_targets),
                "gds_gdsio_jobfile": _filter_errors(gds_gdsio_jobfile),
                "gds_bench_progress_steps": progress_steps}
