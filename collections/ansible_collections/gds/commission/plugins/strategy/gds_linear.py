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
advice for fork-based workers).

A task whose ``when`` is false does nothing but report that it skipped, yet linear forks a worker
for it on every host (on a drift run of simulated nodes, some 40 of a node's 100 tasks): the
controller's fork, its queues and the result's round trip. Here the controller evaluates such a
task's ``when`` itself, as TaskExecutor would with the same variables, and hands the skip result
to the results queue as a worker would; whenever it cannot tell without doubt (a loop, a
delegation, a condition on a connection variable, an error, a warning) the worker decides, as
before. Scheduling is linear's, unchanged.

Ansible builds each task's variables for each host (VariableManager.get_vars) with a deep copy of
the host's facts (ansible.vars.clean.namespace_facts): on a dgx-a100 the topology facts are 54 kB,
and that copy was some 12 % of the controller's time in a drift run (docs/fleet.md). Here the
controller's variables take the facts' values as they are in the fact cache. Nothing in the
controller writes into them: a template reads them through lazy containers that copy what they
change, a task runs in a forked worker, and new facts replace a host's top-level keys
(VariableManager.set_host_facts), never a value in place. The workers' own copies are untouched
(TaskExecutor keeps Ansible's copying function).
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
  - A task whose C(when) is false on a host is skipped by the controller, without a worker, with the
    result a worker would return; a loop, a delegation, a condition naming a connection variable,
    or a condition that errs or warns is left to the worker.
  - The controller builds each task's variables with the host's facts as they are in the fact cache,
    without the deep copy Ansible makes of them for every task and host; the workers keep it.
author: gds-commission contributors (!UNKNOWN)
"""

import gc

import ansible.vars.manager
from ansible import constants as C
from ansible._internal._display_utils import DeferredWarningContext
from ansible._internal._templating._engine import TemplateEngine
from ansible.executor.task_result import _WireTaskResult
from ansible.plugins.loader import filter_loader, test_loader
from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule
from ansible.utils.display import Display

display = Display()
CONTROLLER = ("localhost", "127.0.0.1", "::1")
# what a worker adds to a task's variables from its play context (TaskExecutor, PlayContext.update_vars)
CONNECTION_VARS = frozenset(name for names in C.MAGIC_VARIABLE_MAPPING.values() for name in names)


def load_jinja_plugins():
    """Import and wrap every filter and test plugin in this process (Ansible caches them per loader)."""
    for loader in (filter_loader, test_loader):
        for _plugin in loader.all():
            pass
    # all() holds the builtin and legacy-path plugins only; this collection's filters load by
    # name, and asking for one imports every filter file of the collection
    filter_loader.get("gds.commission.gds_report_hosts")


def namespace_facts_shared(facts):
    """ansible.vars.clean.namespace_facts without its deep copy: {'ansible_facts': the facts without
    their ``ansible_`` prefix}, each value the cache's own (the module docstring says why that is safe)."""
    return {"ansible_facts": {(k[8:] if k.startswith("ansible_") and k != "ansible_local" else k): v
                              for k, v in facts.items()}}


def share_facts_in_controller():
    """Make the controller's VariableManager.get_vars take the facts without copying them (only
    ansible.vars.manager's name: TaskExecutor, in the workers, keeps its own)."""
    ansible.vars.manager.namespace_facts = namespace_facts_shared


# vars plugins whose answer depends only on the path, the stage and the entities' names and kinds
# (host_group_vars caches what it finds and loads itself; gds_profiles reads the collection's files)
DETERMINISTIC_VARS_PLUGINS = frozenset(("ansible.builtin.host_group_vars", "host_group_vars",
                                        "gds.commission.gds_profiles"))


class VarsPluginsOnce(object):
    """ansible.vars.plugins.get_vars_from_path, asked once per path, stage and entities for a run.

    VariableManager.get_vars asks the vars plugins again for every task and host (six calls, each
    resolving every plugin through the loader by name): 12 % of the controller's time in a drift
    run (docs/fleet.md). When every enabled vars plugin is one whose answer cannot change within a
    run (DETERMINISTIC_VARS_PLUGINS), the first answer is kept; with any other plugin enabled (a
    site's own, which may be stateful) every call goes through as before."""

    def __init__(self, original, plugin_names):
        self.original = original
        self.enabled = all(name in DETERMINISTIC_VARS_PLUGINS for name in plugin_names)
        self.answers = {}

    def __call__(self, loader, path, entities, stage):
        if not self.enabled:
            return self.original(loader, path, entities, stage)
        key = (path, stage, tuple((entity.base_type, entity.name) for entity in entities))
        if key not in self.answers:
            self.answers[key] = self.original(loader, path, entities, stage)
        return self.answers[key]


def vars_plugins_once_in_controller():
    """Route VariableManager's vars plugin calls (ansible.vars.manager's names, and the inventory
    sources' through ansible.vars.plugins) through one VarsPluginsOnce for this run."""
    import ansible.vars.plugins as vars_plugins
    original = getattr(vars_plugins.get_vars_from_path, "original", vars_plugins.get_vars_from_path)
    vars_plugins._prime_vars_loader()
    once = VarsPluginsOnce(original, list(vars_plugins.vars_loader._plugin_instance_cache))
    vars_plugins.get_vars_from_path = once
    ansible.vars.manager.get_vars_from_path = once


def keep_check_mode(play, task, task_vars):
    """Keep ``task`` in check mode when ``play`` is, and set its ``ansible_check_mode`` to the mode
    it runs under. A task delegated to the controller may leave check mode: it writes the run's
    outputs there (the report, the benchmark's source archive), never on a node."""
    if play.check_mode is True and task.check_mode is not True and task.delegate_to not in CONTROLLER:
        display.warning("%s: a task of a check-mode play runs in check mode (its check_mode: %s is not "
                        "followed)" % (task.get_name(), task.check_mode))
        task.check_mode = True
    task_vars["ansible_check_mode"] = task.check_mode is True


def skip_result(task, task_vars, loader):
    """The result a worker returns for ``task`` when its ``when`` is false with ``task_vars``
    (TaskExecutor._execute_internal: the same conditional, the same result), or None when the task
    runs, or whenever this is not certain here: a loop (``when`` is per item), a delegation (the
    delegated host's variables), a condition that names a connection variable (a worker adds them
    from its play context), or one that errs or warns (the worker reports it)."""
    if not task.when or task.loop is not None or task.loop_with or task.delegate_to is not None:
        return None
    text = " ".join(str(condition) for condition in task.when)
    if any(name in text for name in CONNECTION_VARS):
        return None
    try:
        with DeferredWarningContext(variables=task_vars) as warnings:
            detail = {}
            if task._resolve_conditional(task.when, task_vars, result_context=detail):
                return None
            result = dict(changed=False, skipped=True, skip_reason="Conditional result was False") | detail
            task.update_result_no_log(TemplateEngine(loader=loader, variables=task_vars), result)
        if warnings.get_warnings() or warnings.get_deprecation_warnings():
            return None
    except Exception:  # the worker meets the same error and reports it
        return None
    return result


class StrategyModule(LinearStrategyModule):
    def run(self, iterator, play_context):
        load_jinja_plugins()
        share_facts_in_controller()
        vars_plugins_once_in_controller()
        self._gds_play = iterator._play
        return super().run(iterator, play_context)

    def _queue_task(self, host, task, task_vars, play_context):
        keep_check_mode(self._gds_play, task, task_vars)
        result = skip_result(task, task_vars, self._loader)
        if result is not None:
            # what _queue_task does before it forks, then the worker's result, through the same queue
            self._queued_task_cache[(host.name, task._uuid)] = {
                "host": host, "task": task, "task_vars": task_vars, "play_context": play_context}
            self._tqm.send_callback("v2_runner_on_start", host, task)
            self._final_q.put(_WireTaskResult(host_name=host.name, task_uuid=task._uuid, return_data=result,
                                              task_fields=task.dump_attrs()))
            self._pending_results += 1
            return None
        # a worker's collections then skip the objects it inherits: fewer copy-on-write page copies
        # (about 6 % of a drift run's CPU); unfrozen right after the fork, so the controller still
        # collects its own garbage
        gc.freeze()
        try:
            return super()._queue_task(host, task, task_vars, play_context)
        finally:
            gc.unfreeze()
