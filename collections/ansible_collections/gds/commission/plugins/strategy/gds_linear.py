# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Strategy ``gds_linear``: Ansible's ``linear``, with the Jinja plugins loaded before the workers fork.

Ansible runs every task of every host in a worker process forked from the controller. The first
template a worker compiles makes it import and wrap every filter and test plugin (Jinja checks a
filter's name at compile time), and the controller itself never does, so each of the N x tasks
workers paid that again: a quarter of the workers' profiled time on a fleet of simulated nodes,
10 % of a drift run's CPU (docs/fleet.md). Loading them once here, in the controller, lets every fork inherit them.
The controller's objects are also frozen for the garbage collector across each fork (Python's
advice for fork-based workers). Scheduling is linear's, unchanged.
"""
from __future__ import annotations

DOCUMENTATION = r"""
name: gds_linear
short_description: linear, with the filter and test plugins loaded once in the controller
description:
  - Task execution is exactly that of ansible.builtin.linear (all hosts finish a task before any
    starts the next).
  - Before the first task, loads the filter and test plugins in the controller process, so the
    worker processes forked for each host and task inherit them instead of importing them again.
  - Freezes the controller's objects for the garbage collector while it forks a worker, so that a
    collection in the worker does not write to (and so copy) the memory it shares with the controller.
author: gds-commission contributors (!UNKNOWN)
"""

import gc

from ansible.plugins.loader import filter_loader, test_loader
from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule


def load_jinja_plugins():
    """Import and wrap every filter and test plugin in this process (Ansible caches them per loader)."""
    for loader in (filter_loader, test_loader):
        for _plugin in loader.all():
            pass
    # all() holds the builtin and legacy-path plugins only; this collection's filters load by
    # name, and asking for one imports every filter file of the collection
    filter_loader.get("gds.commission.gds_report_hosts")


class StrategyModule(LinearStrategyModule):
    def run(self, iterator, play_context):
        load_jinja_plugins()
        return super().run(iterator, play_context)

    def _queue_task(self, host, task, task_vars, play_context):
        # a worker's collections then skip the objects it inherits: fewer copy-on-write page copies
        # (about 6 % of a drift run's CPU); unfrozen right after the fork, so the controller still
        # collects its own garbage
        gc.freeze()
        try:
            return super()._queue_task(host, task, task_vars, play_context)
        finally:
            gc.unfreeze()
