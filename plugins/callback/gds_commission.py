# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Callback ``gds_commission``: what a report cannot learn from host variables.

- Gives the run an id (``GDS_RUN_ID``) and a state file (``GDS_RUN_STATE``), exported to the
  environment so the report play reads them with ``lookup('env', ...)``.
- Records per host whether it was unreachable or which task broke it (failed hosts have no
  facts left to tell).
- In check mode, turns every task result that would change something into drift items
  ``{setting, expected, actual}``: the module's own ``drift`` list when it returns one, else the
  file named by its ``diff``, else the task name.
The state file is rewritten after every event it records, so it is complete when read.
"""
from __future__ import annotations

DOCUMENTATION = r"""
name: gds_commission
type: aggregate
short_description: Run id, unreachable/failed hosts and check-mode drift for gds-commission reports
description:
  - Exports GDS_RUN_ID and GDS_RUN_STATE and keeps a JSON state file with unreachable hosts,
    failed tasks and drift items found in check mode.
requirements:
  - enabled in ansible.cfg (callbacks_enabled = gds_commission)
notes:
  - Run directories go under C(GDS_REPORTS_DIR), default C(reports/) beside the ansible.cfg in use.
"""

import datetime
import json
import os

from ansible import constants as C
from ansible.plugins.callback import CallbackBase

_MAX_TEXT = 300


def _short(value):
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + "..."


def drift_items(task_name, result):
    """Drift items of one changed check-mode result."""
    if isinstance(result.get("drift"), list) and result["drift"]:
        return [{"setting": str(item.get("setting")), "expected": _short(item.get("expected")),
                 "actual": _short(item.get("actual"))} for item in result["drift"]]
    diffs = result.get("diff")
    diffs = diffs if isinstance(diffs, list) else [diffs] if isinstance(diffs, dict) else []
    items = []
    for diff in diffs:
        # before_header names the file on the node; after_header can be a template's temp source
        path = diff.get("before_header") or result.get("dest") or result.get("path") or diff.get("after_header")
        if path or "after" in diff:
            items.append({"setting": str(path or task_name),
                          "expected": _short(diff.get("after")), "actual": _short(diff.get("before"))})
    if items:
        return items
    return [{"setting": task_name, "expected": "as configured", "actual": _short(result.get("msg")) or "differs"}]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gds_commission"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self.state = {"run_id": None, "hosts": {}, "drift": {}}
        self.path = None

    def _root(self):
        configured = os.environ.get("GDS_REPORTS_DIR")
        if configured:
            return os.path.abspath(configured)
        base = os.path.dirname(C.CONFIG_FILE) if C.CONFIG_FILE else os.getcwd()
        return os.path.join(base, "reports")

    def v2_playbook_on_start(self, playbook):
        run_id = os.environ.get("GDS_RUN_ID") or datetime.datetime.now().strftime("%Y%m%dT%H%M%S") + "-%d" % os.getpid()
        root = self._root()
        state_dir = os.path.join(root, ".state")
        os.makedirs(state_dir, exist_ok=True)
        self.path = os.path.join(state_dir, run_id + ".json")
        self.state.update(run_id=run_id, started=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                          playbook=os.path.basename(playbook._file_name), reports_dir=root)
        os.environ["GDS_RUN_ID"] = run_id
        os.environ["GDS_RUN_STATE"] = self.path
        os.environ["GDS_REPORTS_DIR"] = root
        self._save()

    def _save(self):
        if not self.path:
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(self.state, handle, indent=1, sort_keys=True, default=str)
        os.replace(tmp, self.path)

    def _host(self, result):
        return self.state["hosts"].setdefault(result._host.get_name(), {})

    def v2_runner_on_unreachable(self, result):
        self._host(result).update(unreachable=True, task=result._task.get_name(),
                                  msg=_short(result._result.get("msg")))
        self._save()

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if ignore_errors:
            return
        self._host(result).setdefault("failures", []).append(
            {"task": result._task.get_name(), "msg": _short(result._result.get("msg"))})
        self._save()

    def _changed_in_check_mode(self, result):
        res = result._result
        if not res.get("changed") or res.get("skipped"):
            return
        if not (result._task.check_mode is True or getattr(self, "_check_cli", False)):
            return
        items = self.state["drift"].setdefault(result._host.get_name(), [])
        items.extend(drift_items(result._task.get_name(), res))
        self._save()

    def v2_runner_on_ok(self, result):
        if "results" in result._result:
            return  # loop results arrive one by one in v2_runner_item_on_ok
        self._changed_in_check_mode(result)

    def v2_runner_item_on_ok(self, result):
        self._changed_in_check_mode(result)

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super(CallbackModule, self).set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        try:
            from ansible import context
            self._check_cli = bool(context.CLIARGS.get("check"))
        except Exception:
            self._check_cli = False
