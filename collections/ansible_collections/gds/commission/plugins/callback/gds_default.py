# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stdout callback ``gds_default``: Ansible's ``default`` screen output, line for line, without
converting the whole of a result it prints only a line of.

The default callback reads ``result.result`` for every ok result, and that converts the whole
result (``transform_to_native_types``: every value of the topology facts, every check) in
Ansible's one-threaded main process, to print ``ok: [host]``: 8 % of the main process in a drift
run of simulated nodes (docs/fleet.md). Here a result whose line is all that is printed (no
verbosity, nothing verbose, no warning or exception, no loop, no delegation) is printed from the
result as it arrived; everything else goes to the default callback as before.
"""
from __future__ import annotations

DOCUMENTATION = r"""
name: gds_default
type: stdout
short_description: Ansible's default screen output, cheaper for the controller on a fleet
description:
  - The output of C(ansible.builtin.default), with its options.
  - An ok or changed result that prints as one line (no C(-v), no warning, deprecation or
    exception, no loop, no delegation) is printed without converting the whole result first.
author: gds-commission contributors (!UNKNOWN)
extends_documentation_fragment:
  - default_callback
  - result_format_callback
requirements:
  - set as stdout in configuration (ansible.cfg stdout_callback = gds.commission.gds_default)
"""

from ansible import constants as C
from ansible.plugins.callback.default import CallbackModule as DefaultCallbackModule

# keys of a result that make the default callback print more than the result's line
_PRINTS_MORE = ("warnings", "deprecations", "exception")


class CallbackModule(DefaultCallbackModule):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "gds.commission.gds_default"

    def _one_line(self, result):
        """The result's data as it arrived when the default callback would print only its line
        (``ok: [host]`` / ``changed: [host]``), else None. Known only from ansible-core 2.19's
        ``_return_data``; without it, None."""
        raw = getattr(result, "_return_data", None)
        if not isinstance(raw, dict) or self._display.verbosity > 0:
            return None
        if raw.get("_ansible_verbose_always") is True and raw.get("_ansible_verbose_override", False) is False:
            return None
        if any(raw.get(key) for key in _PRINTS_MORE) or "results" in raw:
            return None
        task = result.task
        if task.loop or task.delegate_to or task.action in C._ACTION_DEBUG or task.action in C._ACTION_ALL_INCLUDES:
            return None
        return raw

    def v2_runner_on_ok(self, result):
        raw = self._one_line(result)
        if raw is None:
            return super().v2_runner_on_ok(result)
        if raw.get("changed", False):
            msg, color = "changed: [%s]" % result.host.get_name(), C.COLOR_CHANGED
        elif self.get_option("display_ok_hosts"):
            msg, color = "ok: [%s]" % result.host.get_name(), C.COLOR_OK
        else:
            return
        if self._last_task_banner != result.task._uuid:
            self._print_task_banner(result.task)
        self._display.display(msg, color=color)
