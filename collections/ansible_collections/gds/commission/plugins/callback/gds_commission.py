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
- When a playbook that has a ``gds_report`` play ends without that play having written the report
  (every host failed, so Ansible ran no later play), writes it here, with the same writer
  (plugins/module_utils/fleet/report.py) and what each host recorded read from its host variables
  as the report play reads them: the failed hosts are ERROR with the task and message that broke
  them. Ansible's exit status stays non-zero. Nothing of the hosts' results is kept on the way: a
  copy of every host's facts in this process made each fork of a worker dearer (docs/fleet.md).
- In host scope (``gds_report_scope: host``: several runs share one run directory, a node each
  under Slurm or a slice each in AWX) its state file is this process's own, and its report is each
  host's inputs file for the merge (plugins/module_utils/fleet/merge.py).
The state file is rewritten before each task starts and at the end, when an event changed it, so it
is complete when a task (the report play's) reads it; once per event made a drift run of N hosts
write O(N^2) bytes.
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
  - enabled in ansible.cfg (callbacks_enabled = gds.commission.gds_commission)
notes:
  - Run directories go under C(GDS_REPORTS_DIR), default C(reports/) beside the ansible.cfg in use.
"""

import datetime
import json
import os
import re

from ansible import constants as C
from ansible.plugins.callback import CallbackBase

_MAX_TEXT = 600
REPORT_ACTION = "gds_report"
MERGE_ACTION = "gds_merge"
PROGRESS_ACTION = "gds_bench_progress"


def _short(value):
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + "..."


def drift_items(task_name, result):
    """Drift items of one changed check-mode result (an item that is no dict is its setting)."""
    if isinstance(result.get("drift"), list) and result["drift"]:
        return [{"setting": str(item.get("setting")), "expected": _short(item.get("expected")),
                 "actual": _short(item.get("actual"))} if isinstance(item, dict)
                else {"setting": str(_short(item)), "expected": None, "actual": None} for item in result["drift"]]
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


def refused_outside_check_mode(result):
    """True for the failure of drift.yml's first play: its assert that Ansible runs it in check mode
    (ansible_check_mode), known by the assertion, not by the task's name."""
    return (result.task.action in ("assert", "ansible.builtin.assert", "ansible.legacy.assert")
            and result.result.get("assertion") == "ansible_check_mode")


_ROLE_PREFIX = "gds.commission."


def _task_name(task):
    """A task's name as the reports show it: this collection's roles by their short names
    (Ansible prefixes a collection role's tasks with its full name, gds.commission.<role>)."""
    name = task.get_name()
    return name[len(_ROLE_PREFIX):] if name.startswith(_ROLE_PREFIX) else name


def failure_text(result):
    """A failed result's reason: its msg, and the stderr of a module that broke without one."""
    msg = result.get("msg")
    extra = result.get("module_stderr") or result.get("stderr")
    if isinstance(result.get("argument_errors"), list):  # validate_argument_spec: the variables at fault
        extra = "; ".join(str(e) for e in result["argument_errors"] if str(e) not in str(msg))
    if extra and msg and str(extra).strip()[:80] in str(msg):
        extra = None  # already in the message
    text = "; ".join(str(part).strip() for part in (msg, extra) if part)
    return _short(text or "failed")


def _plain(text):
    """``text`` with every character but letters, digits, ``.``, ``_`` and ``-`` as ``_`` (a file name part)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text) or "_"


def closing_lines(result):
    """The last lines of a run's output, from its report task's result (gds_report, gds_merge): the
    verdict's counts and the hosts that are not PASS, or the drifted hosts, and where the report is."""
    run_dir = result.get("run_dir") or "?"
    if "drifted" in result:
        drifted = result.get("drifted") or []
        return ["gds_commission: drifted or not checked: %s" % (_listed(drifted) or "none"),
                "gds_commission: drift: %s/report.html (%s/drift.json)" % (run_dir, run_dir)]
    if "inputs" in result:  # host scope: each host's inputs file, no report yet
        return ["gds_commission: host files: %s/*.inputs.json (gds-merge makes the report)" % run_dir]
    summ = result.get("summary") or {}
    counts = ", ".join("%s %s" % item for item in (summ.get("counts") or {}).items())
    lines = ["gds_commission: %s%s; not PASS: %s" % (counts, " (check mode: measures nothing, not made latest)"
                                                     if summ.get("check_mode") else "",
                                                     _listed(result.get("not_pass") or []) or "none"),
             "gds_commission: report: %s/report.html" % run_dir]
    return lines


def _listed(hosts, most=20):
    hosts = [str(h) for h in hosts]
    return ", ".join(hosts[:most]) + (" and %d more" % (len(hosts) - most) if len(hosts) > most else "")


def report_writer():
    """The collection's fleet/report module_utils, the one writer of reports."""
    from ansible_collections.gds.commission.plugins.module_utils.fleet import report
    return report


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gds_commission"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self.state = {"run_id": None, "hosts": {}, "drift": {}}
        self.path = None         # reports/.state/RUN.json
        self.targets = []        # every host a play targeted, in order
        self.guard_hosts = set()  # run by playbooks/targets.yml only, never judged
        self._check_cli = False   # --check (set_options reads it)
        self.last_play = None    # its variable manager holds what the hosts recorded
        self.closing = []        # the run's last lines (closing_lines), said after the recap
        self.report_mode = None  # the playbook's gds_report play, if it has one: commission or drift
        self.report_play = None
        self.writer = None       # plugins/module_utils/fleet/report
        self.required_areas, self.check_vars = (), None  # as the report play would use them
        self.scope, self.report_dir = "run", None         # gds_report_scope, gds_report_dir

    def _root(self):
        from ansible_collections.gds.commission.plugins.module_utils.core.spec import reports_root
        return reports_root(os.environ, C.CONFIG_FILE, os.getcwd())

    def v2_playbook_on_start(self, playbook):
        # the run's settings are read at its first play's start: only then do the hosts' variables
        # exist (Ansible makes them as it runs the play), and nothing runs on a host before it
        self._starting = playbook
        self._playbooks_started = getattr(self, "_playbooks_started", 0) + 1

    def _begin(self):
        """The playbook's run settings, once, before anything of it runs (see v2_playbook_on_start)."""
        playbook, self._starting = getattr(self, "_starting", None), None
        if playbook is None:
            return
        try:
            self.writer = report_writer()
        except Exception as exc:  # no report of our own then, and the playbook still runs
            self._display.warning("gds_commission: cannot load plugins/module_utils/fleet/report: %s" % exc)
        self.report_play = self._report_play(playbook)
        self.report_mode = str((self.report_play.vars or {}).get("gds_report_mode", "commission")) \
            if self.report_play is not None else None
        if self.writer and (self.report_play is not None or self.check_vars is None):
            self.required_areas, self.check_vars = self._report_settings()
        default = datetime.datetime.now().strftime("%Y%m%dT%H%M%S") + "-%d" % os.getpid()
        # gds_report_run_id (an extra var: AWX's slices of one job) names the run, else GDS_RUN_ID
        named = self._play_vars(self.report_play or next(iter(self._plays(playbook)), None), ("gds_report_run_id",))
        which = "gds_report_run_id" if named.get("gds_report_run_id") else "GDS_RUN_ID"
        run_id = str(named.get("gds_report_run_id") or os.environ.get("GDS_RUN_ID") or default)
        error = self.writer.run_id_error(run_id) if self.writer else None
        if error:  # a run id is a directory and a file name: never a path out of reports/
            self._display.warning("gds_commission: %s: %s; this run is %s" % (which, error, default))
            run_id = default
        root = self._root()
        path = os.path.join(root, ".state", run_id + ".json")
        if self.scope == "host":  # runs that share the run id keep their own states
            path = os.path.join(root, ".state", "%s.%s.%d.json" % (run_id, _plain(os.uname().nodename), os.getpid()))
        if not self.state.get("started") and self.scope != "host":
            # the same run id in a second invocation (bench.yml, then report.yml): one run
            try:
                self.state.update(json.loads(self._state_file(lambda folder: folder.read(run_id + ".json"), path) or "{}"))
            except Exception:  # an unreadable state starts afresh; one in the way is refused in _save
                pass
        self.path = path
        # a run is as old as its first playbook: later playbooks of one command line keep it
        started = self.state.get("started") or datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        self.state.update(run_id=run_id, started=started, playbook=self._playbook_name(),
                          reports_dir=root, report_written=False)
        os.environ["GDS_RUN_ID"] = run_id
        os.environ["GDS_RUN_STATE"] = self.path
        os.environ["GDS_REPORTS_DIR"] = root
        self._save()

    def _playbook_name(self):
        """The playbook's file name, from the command line (ansible.context) in the order Ansible
        starts them; "" when it cannot be told."""
        try:
            from ansible import context
            args = list(context.CLIARGS.get("args") or [])
            return os.path.basename(str(args[self._playbooks_started - 1]))
        except Exception:
            return ""

    @staticmethod
    def _plays(playbook):
        try:
            return list(playbook.get_plays())
        except Exception:
            return []

    @staticmethod
    def _play_vars(play, names):
        """{name: value} of the variables ``names`` as a task of ``play`` on its first host would
        see them, through the variable manager's public get_vars: the extra vars, then the play's
        own vars, then the first host's (inventory, facts; there once Ansible runs the play), then
        the role defaults; templated. What cannot be read is left out."""
        out = {}
        try:
            from ansible.template import Templar
            manager = play.get_variable_manager()
            variables = manager.get_vars(play=play)
            hosts = variables.get("ansible_play_hosts_all") or []
            hostvars = variables.get("hostvars")
            own = hostvars[hosts[0]] if hosts and hostvars is not None and hosts[0] in hostvars else {}
            extra, play_vars = manager.extra_vars or {}, play.get_vars() or {}
            templar = Templar(loader=play.get_loader(), variables=variables)
            for name in names:
                if name in extra or name in play_vars or name not in own:
                    if name in variables:
                        out[name] = templar.template(variables[name])
                else:
                    out[name] = own[name]
        except Exception:  # no play or no variables to read: the defaults
            pass
        return out

    @staticmethod
    def _report_play(playbook):
        """The playbook's play that runs the gds_report role, else None."""
        try:
            for play in playbook.get_plays():
                if any(role.get_name() in ("gds_report", "gds.commission.gds_report") for role in play.get_roles()):
                    return play
        except Exception:  # a playbook shape we do not know: no fallback report, nothing breaks
            return None
        return None

    def _report_settings(self):
        """(required areas, compiled check-variable pattern) as the report play would use them,
        from its role's defaults, the inventory (its first host's), play and extra vars; the
        defaults of plugins/module_utils/fleet/report when they cannot be read. Sets the scope
        (gds_report_scope, else GDS_REPORT_SCOPE) and the report play's directory."""
        areas, pattern = list(self.writer.REQUIRED_AREAS), self.writer.CHECK_VARS
        found = self._play_vars(self.report_play, ("gds_report_required_areas", "gds_report_check_vars",
                                                   "gds_report_scope", "gds_report_dir"))
        try:
            if "gds_report_required_areas" in found:
                areas = [str(a) for a in found["gds_report_required_areas"]]
            if "gds_report_check_vars" in found:
                pattern = str(found["gds_report_check_vars"])
        except Exception:  # not a list: the role's defaults (the report play fails on it, naming it)
            pass
        self.scope = "host" if str(found.get("gds_report_scope") or os.environ.get("GDS_REPORT_SCOPE")) == "host" else "run"
        self.report_dir = os.path.abspath(str(found["gds_report_dir"])) if found.get("gds_report_dir") else None
        try:
            return areas, re.compile(pattern)
        except re.error:  # the report play fails on it, naming it (gds_report_hosts)
            return areas, re.compile(self.writer.CHECK_VARS)

    def v2_playbook_on_play_start(self, play):
        self.last_play = play
        self._begin()
        if (play.vars or {}).get("gds_run_guard"):  # playbooks/targets.yml: the controller, not a target
            self.guard_hosts.add("localhost")
            return
        try:  # the play's hosts as its tasks see them (the limit aside), through the public variables
            hosts = list(play.get_variable_manager().get_vars(play=play, include_hostvars=False)["ansible_play_hosts_all"])
        except Exception:
            hosts = []
        for host in hosts:
            if host not in self.targets:
                self.targets.append(host)

    def _touch(self):
        self._dirty = True

    def _flush(self):
        if getattr(self, "_dirty", False):
            self._save()

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._begin()
        self._flush()

    def v2_playbook_on_handler_task_start(self, task):
        self._flush()

    def _state_file(self, action, path=None):
        """``action(folder)`` on the state file's directory (reports/.state/) through
        fleet/output.py: the directory above it is the user's, the state directory is opened
        without following a link, and nothing but a file of its own there is replaced."""
        folder = os.path.dirname(path or self.path)
        with (self.writer or report_writer()).OutDir(os.path.dirname(folder)) as reports, \
                reports.child(os.path.basename(folder)) as state_dir:
            return action(state_dir)

    def _save(self):
        self._dirty = False
        if not self.path:
            return
        text = json.dumps(self.state, indent=1, sort_keys=True, default=str)
        try:
            self._state_file(lambda folder: folder.write(os.path.basename(self.path), text, sync=False))
        except Exception as exc:  # RefusedPath names what is in the way: said once, the run goes on
            if not getattr(self, "_save_refused", False):
                self._save_refused = True
                self._display.warning("gds_commission: cannot keep the run state: %s" % exc)

    def _host(self, result):
        self._begin()
        return self.state["hosts"].setdefault(result.host.get_name(), {})

    def v2_runner_on_unreachable(self, result):
        self._host(result).update(unreachable=True, task=_task_name(result.task),
                                  msg=_short(result.result.get("msg")))
        self._touch()

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if ignore_errors:
            return
        if refused_outside_check_mode(result):
            self.state["refused"] = failure_text(result.result)
        self._host(result).setdefault("failures", []).append(
            {"task": _task_name(result.task), "msg": failure_text(result.result)})
        self._touch()

    def _changed_in_check_mode(self, result):
        res = result.result
        if not res.get("changed") or res.get("skipped"):
            return
        if not (result.task.check_mode is True or getattr(self, "_check_cli", False)):
            return
        items = self.state["drift"].setdefault(result.host.get_name(), [])
        items.extend(drift_items(_task_name(result.task), res))
        self._touch()

    @staticmethod
    def _nothing_to_read(result):
        """True when ``result`` holds no change (all but the drifted results of a drift run): it is not
        converted for this callback (Ansible converts each result it reads, facts included, in its
        one-threaded main process: docs/fleet.md). ``is_changed()`` is the callback result's public
        question, answered from the result as it arrived."""
        return not result.is_changed()

    def v2_runner_on_ok(self, result):
        self._begin()
        action = result.task.action.split(".")[-1]
        if action == REPORT_ACTION:
            self.state["report_written"] = True
            self._touch()
        if action in (REPORT_ACTION, MERGE_ACTION):  # the run's verdict, said last (v2_playbook_on_stats)
            self.closing = closing_lines(result.result)
        if self._nothing_to_read(result) or "results" in result.result:
            return  # loop results arrive one by one in v2_runner_item_on_ok
        self._changed_in_check_mode(result)

    def v2_runner_item_on_ok(self, result):
        if result.task.action.split(".")[-1] == PROGRESS_ACTION:
            self._job_ended(result)
        if not self._nothing_to_read(result):
            self._changed_in_check_mode(result)

    def _job_ended(self, result):
        """A benchmark job's end as it happens (roles/gds_bench follows the run job by job): its
        verdict and the seconds it took of those expected, then the next job's start."""
        res = result.result
        step = res.get(res.get("ansible_loop_var") or "item")
        if not isinstance(step, dict) or step.get("state") != "ended":
            return  # the first job's start is the loop item's own label
        from ansible_collections.gds.commission.plugins.module_utils.measure.progress import progress_line
        host = result.host.get_name()
        line = progress_line(host, res.get("event"))
        if line is None:
            line = "%s %s: %s after %s s" % (host, step.get("label"), "the run ended first" if res.get("finished")
                                             else "no end seen", res.get("waited_s"))
        # on stderr, as the run's last lines: stdout stays the stdout callback's (ansible.posix.json)
        self._display.display("gds_commission: %s" % line, stderr=True)
        following = progress_line(host, res.get("next"))
        if following:
            self._display.display("gds_commission: %s" % following, stderr=True)

    def v2_playbook_on_stats(self, stats):
        """Write the report when the playbook's report play did not (every host failed before it);
        end with the run's verdict and where its report is (after Ansible's recap)."""
        self._begin()
        self._flush()
        try:
            self._stats(stats)
        finally:
            for line in self.closing:
                self._display.display(line, stderr=True)

    def _stats(self, stats):
        if self.state.get("refused"):  # the run read nothing: no report, latest stays where it was
            self._display.display("gds_commission: the run was refused, no report written: %s" % self.state["refused"],
                                  stderr=True)
            return
        if not self.report_mode or self.state.get("report_written") or not self.path:
            return
        hosts = list(self.targets)
        for host in sorted(stats.processed):
            if host not in hosts and host not in self.guard_hosts:
                hosts.append(host)
        if not hosts:  # nothing judged: no report, latest stays (playbooks/targets.yml fails the run)
            self._display.display("gds_commission: no host was judged (the inventory gave the run none); "
                                  "no report written, %s left as it was" % os.path.join(self.state["reports_dir"], "latest"),
                                  stderr=True)
            return
        states = json.loads(json.dumps(self.state["hosts"]))
        for host in hosts:
            entry = states.setdefault(host, {})
            if stats.summarize(host)["failures"] and not entry.get("unreachable"):
                entry["broken"] = True
        now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        reports_dir = self.report_dir or self.state["reports_dir"]  # where the report play writes
        try:
            writer = self.writer or report_writer()
            # the same map of inputs as the report play's filter (fleet/report.host_inputs)
            hostvars, data = self._hostvars(), {}
            for host in hosts:
                if host in hostvars:  # each lookup gathers the host's variables anew: once a host
                    variables = hostvars[host]
                    data[host] = writer.host_inputs(variables, variables.get("ansible_facts") or {}, self.check_vars)
            if self.scope == "host":  # each host's inputs file, as the report play's module writes it (no latest)
                from ansible_collections.gds.commission.plugins.module_utils.fleet import merge
                files, result = merge.host_scope_files(self.state["run_id"], self.state["started"], now, self.report_mode,
                                                       data, hosts, states, drift=self.state.get("drift"),
                                                       required_areas=self.required_areas, check_run=self._check_cli)
                run_dir, refused = writer.write_run_dir(reports_dir, self.state["run_id"], files), []
            else:  # the one writer of a run's report, latest included (fleet/report.publish_run)
                run_dir, result, refused = writer.publish_run(
                    reports_dir, self.state["run_id"], self.state["started"], now, self.report_mode, data, hosts, states,
                    drift=self.state.get("drift"), required_areas=self.required_areas, check_run=self._check_cli)
        except Exception as exc:  # never hide the play's own failure behind a callback traceback
            self._display.warning("gds_commission: could not write the report of the failed run: %s" % exc)
            return
        for why in refused:  # latest someone else's: the run's directory stands, latest is left alone
            self._display.warning("gds_commission: the report is in %s, but %s" % (run_dir, why))
        self.state["report_written"] = True
        self._save()
        self.closing = closing_lines(dict(result, run_dir=run_dir))
        bad = result.get("not_pass", result.get("drifted", []))
        which = "drifted or not checked" if self.report_mode == "drift" else "not PASS"
        self._display.display("gds_commission: the report play did not run (no host left); wrote %s%s "
                              "(%s: %s)" % (run_dir, " (host files)" if self.scope == "host" else "", which,
                                            ", ".join(bad) or "none"), stderr=True)

    def _hostvars(self):
        """The hosts' variables as a template's ``hostvars`` reads them (templated when read), from
        the variable manager of the last play (its public get_vars); none when there is no play to
        ask (every host is ERROR for its failure then, with nothing it recorded)."""
        if self.last_play is None:
            return {}
        try:
            return self.last_play.get_variable_manager().get_vars(play=self.last_play).get("hostvars") or {}
        except Exception as exc:
            self._display.warning("gds_commission: cannot read the hosts' variables: %s" % exc)
            return {}

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super(CallbackModule, self).set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        try:
            from ansible import context
            self._check_cli = bool(context.CLIARGS.get("check"))
        except Exception:
            self._check_cli = False
