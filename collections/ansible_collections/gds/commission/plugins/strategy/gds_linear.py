# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Strategy ``gds_linear``: Ansible's ``linear``, with check mode kept by every task of a check-mode
play, and the Jinja plugins loaded before the workers fork.

Check mode: a play in check mode (``--check``, or ``check_mode: true`` as the drift playbook's plays
say) is where a drift run reads a node. Ansible lets a task leave it (``check_mode: false``), and its
``ansible_check_mode`` variable follows only ``--check``, so a guard ``when: not ansible_check_mode``
is wrong in a play that says ``check_mode: true``. Here, in one place every task passes: in a
check-mode play every task runs in check mode (only a task delegated to the controller, which writes
the run's report there, may leave it), and ``ansible_check_mode`` is what the task runs under.

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
short_description: linear, check mode kept in check-mode plays, filter and test plugins loaded once
description:
  - Task scheduling is exactly that of ansible.builtin.linear (all hosts finish a task before any
    starts the next).
  - In a play in check mode (C(--check), or the play keyword C(check_mode) true), every task runs
    in check mode; a task's C(check_mode=false) is overridden (with a warning) unless the task is
    delegated to C(localhost), the controller.
  - The variable C(ansible_check_mode) of every task is the check mode the task runs under, not only
    the command line's C(--check).
  - Before the first task, loads the filter and test plugins in the controller process, so the
    worker processes forked for each host and task inherit them instead of importing them again.
  - Freezes the controller's objects for the garbage collector while it forks a worker, so that a
    collection in the worker does not write to (and so copy) the memory it shares with the controller.
author: gds-commission contributors (!UNKNOWN)
"""

import gc

from ansible.plugins.loader import filter_loader, test_loader
from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule
from ansible.utils.display import Display

display = Display()
CONTROLLER = ("localhost", "127.0.0.1", "::1")


def load_jinja_plugins():
    """Import and wrap every filter and test plugin in this process (Ansible caches them per loader)."""
    for loader in (filter_loader, test_loader):
        for _plugin in loader.all():
            pass
    # all() holds the builtin and legacy-path plugins only; this collection's filters load by
    # name, and asking for one imports every filter file of the collection
    filter_loader.get("gds.commission.gds_report_hosts")


def keep_check_mode(play, task, task_vars):
    """Keep ``task`` in check mode when ``play`` is, and set its ``ansible_check_mode`` to the mode
    it runs under. A task delegated to the controller may leave check mode: it writes the run's
    outputs there (the report, the benchmark's source archive), never on a node."""
    if play.check_mode is True and task.check_mode is not True and task.delegate_to not in CONTROLLER:
        display.warning("%s: a task of a check-mode play runs in check mode (its check_mode: %s is not "
                        "followed)" % (task.get_name(), task.check_mode))
        task.check_mode = True
    task_vars["ansible_check_mode"] = task.check_mode is True


class StrategyModule(LinearStrategyModule):
    def run(self, iterator, play_context):
        load_jinja_plugins()
        self._gds_play = iterator._play
        return super().run(iterator, play_context)

    def _queue_task(self, host, task, task_vars, play_context):
        keep_check_mode(self._gds_play, task, task_vars)
        # a worker's collections then skip the objects it inherits: fewer copy-on-write page copies
        # (about 6 % of a drift run's CPU); unfrozen right after the fork, so the controller still
        # collects its own garbage
        gc.freeze()
        try:
            return super()._queue_task(host, task, task_vars, play_context)
        finally:
            gc.unfreeze()
