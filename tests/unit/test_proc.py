"""The one process runner (plugins/module_utils/core/proc.py): output, exit status, start failures, and
the timeout that kills the whole process group, grandchildren included."""
import os
import sys
import textwrap
import time

from ansible_collections.gds.commission.plugins.module_utils.core import proc as gds_proc

# a child that forks a sleeping grandchild (same process group), writes both pids, then either
# sleeps too or exits at once, leaving the grandchild holding the pipes
FAMILY = textwrap.dedent("""\
    import os, subprocess, sys, time
    grandchild = subprocess.Popen(["sleep", "300"])
    with open(sys.argv[1], "w") as handle:
        handle.write("%d %d" % (os.getpid(), grandchild.pid))
    print("started", flush=True)
    if sys.argv[2] == "stay":
        time.sleep(300)
""")


def group_members(pgid):
    """Live (not zombie) processes whose process group is ``pgid``."""
    members = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()  # state, ppid, pgrp, ...
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(pid))
    return members


def gone(pgid):
    """Whether the group is empty, given the kernel a moment to finish the killed processes'
    exits (their pipes close before they become zombies)."""
    deadline = time.time() + 10
    while group_members(pgid) and time.time() < deadline:
        time.sleep(0.05)
    return not group_members(pgid)


def run_family(tmp_path, mode):
    """(result, child pid = its process group, grandchild pid, seconds)."""
    pidfile = tmp_path / "pids"
    started = time.time()
    result = gds_proc.run([sys.executable, "-c", FAMILY, str(pidfile), mode], timeout=2)
    child, grandchild = (int(p) for p in pidfile.read_text().split())
    return result, child, grandchild, time.time() - started


def test_output_and_exit_status():
    result = gds_proc.run(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=30)
    assert result == gds_proc.ProcResult(3, "out\n", "err\n", False, None)
    assert gds_proc.run(["sh", "-c", "kill -TERM $$"], timeout=30).rc == -15


def test_undecodable_output_is_replaced():
    assert gds_proc.run(["printf", "a\\377b"], timeout=30).stdout == "a\ufffdb"


def test_a_missing_program_says_why():
    result = gds_proc.run(["/nonexistent/gdsbench"], timeout=30)
    assert result.rc is None and not result.timed_out
    assert result.error.startswith("could not start /nonexistent/gdsbench:")


def test_timeout_kills_the_child_and_its_grandchild(tmp_path):
    result, child, grandchild, _ = run_family(tmp_path, "stay")
    assert result.timed_out and result.rc is None and result.error is None
    assert result.stdout == "started\n"  # what it printed before the kill is kept
    assert grandchild != child and gone(child)


def test_a_grandchild_left_behind_holding_the_pipes_is_killed(tmp_path):
    # the child exits at once; its grandchild keeps stdout open, so the run lasts to the timeout
    result, child, grandchild, took = run_family(tmp_path, "exit")
    assert result.timed_out and took < 60
    assert gone(child)
