# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one runner of the benchmarks' processes (gds_bench's gdsbench, measure/perftest.py's perftest
servers and clients, mpirun): each command in its own process group with a timeout, and the
whole group killed when it runs out, so nothing it forked outlives it. In the spirit of
community.general's plugins/module_utils/cmd_runner.py, without its argument formatting: the callers
build their argv themselves.
"""
from __future__ import annotations

import os
import signal
import subprocess
from collections import namedtuple

# rc: the exit status (negative: killed by that signal; None: never ran or timed out);
# error: why it could not start (rc None, nothing ran)
ProcResult = namedtuple("ProcResult", "rc stdout stderr timed_out error")

REAP_TIMEOUT = 10


def _text(data):
    return (data or b"").decode("utf-8", "replace")


def start(cmd, env=None):
    """Popen of ``cmd`` with piped output, leader of a new session: its process group id is its
    pid, so :func:`kill` reaches every process it forks. Raises OSError when it cannot start."""
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)


def kill(proc):
    """SIGKILL the process group of ``proc`` (a started leader that already exited included:
    a child it left may still hold the pipes) and reap the leader; (stdout, stderr) it printed,
    empty when something outside the group still holds its pipes open."""
    try:
        # the group id cannot be reused while one of its members lives
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass  # the group is gone already
    try:
        out, err = proc.communicate(timeout=REAP_TIMEOUT)
    except subprocess.TimeoutExpired:
        return "", ""
    return _text(out), _text(err)


def run(cmd, timeout, env=None, started=None):
    """Run ``cmd`` to its end or for at most ``timeout`` seconds, then kill its process group.

    ``started(pid)`` is called once it runs (its pid is its process group's id: a watcher beside
    it finds the processes it forks). Returns ProcResult(rc, stdout, stderr, timed_out, error);
    output is decoded as UTF-8 with undecodable bytes replaced."""
    try:
        proc = start(cmd, env)
    except OSError as exc:
        return ProcResult(None, "", "", False, "could not start %s: %s" % (cmd[0], exc))
    if started is not None:
        started(proc.pid)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = kill(proc)
        return ProcResult(None, out, err, True, None)
    return ProcResult(proc.returncode, _text(out), _text(err), False, None)
