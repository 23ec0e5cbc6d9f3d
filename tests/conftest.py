"""Shared test fixtures: module_utils importable as ansible.module_utils.*, simulated nodes."""
import json
import os
import subprocess
import sys

import ansible.module_utils
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
if os.path.join(ROOT, "module_utils") not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(os.path.join(ROOT, "module_utils"))

import simtree  # noqa: E402


@pytest.fixture
def sim_node(tmp_path):
    """Build a simulated node from a fixture name (or dict) and return its root directory."""
    def build(fixture, name="node"):
        return simtree.build(fixture, str(tmp_path / name))
    return build


def run_module(name, args, check_mode=False):
    """Run library/<name>.py as Ansible would (JSON args on stdin); returns (rc, result dict)."""
    env = dict(os.environ, ANSIBLE_MODULE_UTILS=os.path.join(ROOT, "module_utils"),
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "tests", "shim")] + sys.path))
    payload = dict(args)
    if check_mode:
        payload["_ansible_check_mode"] = True
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "library", name + ".py")],
                          input=json.dumps({"ANSIBLE_MODULE_ARGS": payload}),
                          capture_output=True, text=True, env=env, timeout=120)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("module %s printed no JSON (rc=%d):\nstdout=%s\nstderr=%s"
                             % (name, proc.returncode, proc.stdout, proc.stderr))
    # ansible-core 2.19 wraps warnings as {"event": {"msg": ...}}: the tests read the text
    result["warnings"] = [w["event"]["msg"] if isinstance(w, dict) else w
                          for w in result.get("warnings", [])]
    return proc.returncode, result


@pytest.fixture
def module_runner():
    return run_module
