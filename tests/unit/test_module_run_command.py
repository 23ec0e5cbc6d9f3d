"""core/module.GdsModule.run_command: every tool a module runs is bounded (a stuck mdadm or scontrol
never stalls a node's run) and runs as AnsibleModule would run it."""
import os
import time

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gds.commission.plugins.module_utils.core import module as gds_module


@pytest.fixture
def module():
    with patch_module_args({}):
        yield gds_module.GdsModule(argument_spec={})


def test_a_command_that_hangs_is_killed_at_its_timeout(module, tmp_path):
    child = tmp_path / "child.pid"
    started = time.monotonic()
    # the shell forks a sleeper: the whole process group goes, not only the shell
    rc, out, err = module.run_command(["sh", "-c", "sleep 600 & echo $! > %s; wait" % child], timeout=1)
    assert rc == gds_module.TIMED_OUT_RC
    assert "did not finish within 1 s" in err
    pid = int(child.read_text())
    for _ in range(50):
        if not os.path.exists("/proc/%d" % pid) or open("/proc/%d/stat" % pid).read().split()[2] == "Z":
            break
        time.sleep(0.1)
    else:
        pytest.fail("the forked sleeper outlived the timeout")
    assert time.monotonic() - started < 60


def test_output_status_and_locale(module):
    rc, out, err = module.run_command(["sh", "-c", "echo $LC_ALL; echo oops >&2; exit 3"])
    assert (rc, out, err) == (3, "C\n", "oops\n")


def test_a_command_that_cannot_start(module):
    rc, out, err = module.run_command(["/nonexistent/tool", "x"])
    assert rc == 127 and "could not start /nonexistent/tool" in err
    with pytest.raises(OSError):
        module.run_command(["/nonexistent/tool"], handle_exceptions=False)


def test_every_module_runs_its_tools_through_the_bounded_runner():
    """No module reaches around it: no subprocess of their own, no AnsibleModule.run_command."""
    from conftest import COLLECTION
    offenders = []
    for folder in ("modules", "module_utils"):
        for base, _, files in os.walk(os.path.join(COLLECTION, "plugins", folder)):
            for name in files:
                path = os.path.join(base, name)
                if not name.endswith(".py") or path.endswith(os.path.join("core", "proc.py")):
                    continue
                text = open(path).read()
                if "AnsibleModule.run_command" in text or "subprocess.run(" in text or "os.system(" in text \
                        or "subprocess.Popen(" in text or "check_output(" in text:
                    offenders.append(os.path.relpath(path, COLLECTION))
    assert offenders == []


def test_ansibles_own_callers_pass_bytes_file_names(module, tmp_path):
    """AnsibleModule itself runs lsattr and chattr through run_command with a bytes path (a backup
    made by backup_local, a file's attributes): the path reaches the tool as the file name, never as
    "b'...'"."""
    path = tmp_path / "f"
    path.write_text("x")
    rc, out, err = module.run_command(["ls", os.fsencode(str(path))])
    assert (rc, out.strip()) == (0, str(path)), err
    backup = module.backup_local(str(path))  # copies attributes: lsattr on the file, chattr on the copy
    assert open(backup).read() == "x"


def test_an_option_it_does_not_implement_is_refused_naming_it(module):
    with pytest.raises(SystemExit):
        module.run_command(["true"], cwd="/")
