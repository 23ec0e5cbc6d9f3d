"""Shared test fixtures: the collection importable as ansible_collections.gds.commission.*, simulated nodes."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission")
# gdsbench's sources and build (what the gds_bench role ships); the lab (scripts, results) is ROOT/bench
GDSBENCH_SRC = os.path.join(COLLECTION, "roles", "gds_bench", "files", "bench")
LAB = os.path.join(ROOT, "bench")
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
# integration tests (tests/integration) import the helpers and shared cases of the unit tests
if os.path.join(ROOT, "tests", "unit") not in sys.path:
    sys.path.append(os.path.join(ROOT, "tests", "unit"))
# the collection's code imports itself as ansible_collections.gds.commission.* (Ansible's collection loader
# gives it those names): collections/ on sys.path gives the tests the same
if os.path.join(ROOT, "collections") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "collections"))

import simtree  # noqa: E402


@pytest.fixture
def sim_node(tmp_path):
    """Build a simulated node from a fixture name (or dict) and return its root directory."""
    def build(fixture, name="node"):
        return simtree.build(fixture, str(tmp_path / name))
    return build


def run_module(name, args, check_mode=False):
    """Run the collection's plugins/modules/<name>.py as Ansible would (JSON args on stdin); returns (rc, result dict)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    payload = dict(args)
    if check_mode:
        payload["_ansible_check_mode"] = True
    proc = subprocess.run([sys.executable, os.path.join(COLLECTION, "plugins", "modules", name + ".py")],
                          input=json.dumps({"ANSIBLE_MODULE_ARGS": payload}),
                          capture_output=True, text=True, env=env, timeout=120)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("module %s printed no JSON (rc=%d):\nstdout=%s\nstderr=%s"
                             % (name, proc.returncode, proc.stdout, proc.stderr))
    try:  # as ansible-core's controller reads it: a string that is not valid UTF-8 (a lone
        # surrogate) fails the task ("Refusing to deserialize an invalid UTF8 string value")
        json.dumps(result, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise AssertionError("ansible-core refuses the result of module %s: not valid UTF-8: %s" % (name, exc))
    # ansible-core 2.19 wraps warnings as {"event": {"msg": ...}}: the tests read the text
    result["warnings"] = [w["event"]["msg"] if isinstance(w, dict) else w
                          for w in result.get("warnings", [])]
    return proc.returncode, result


@pytest.fixture
def module_runner():
    return run_module


def run_playbook_json(inventory_file, playbook_file, extra_args=(), env=None, timeout=900):
    """Run ansible-playbook with the ansible.posix.json callback; returns (rc, the JSON, proc)."""
    bin_dir = os.path.dirname(sys.executable)
    run_env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
                   ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CACHE_PLUGIN="memory",
                   ANSIBLE_FORKS="8", ANSIBLE_DEPRECATION_WARNINGS="false",
                   PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    run_env.update(env or {})
    proc = subprocess.run([os.path.join(bin_dir, "ansible-playbook"), "-i", str(inventory_file), str(playbook_file)]
                          + list(extra_args), cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=timeout)
    try:
        data = json.loads(proc.stdout[proc.stdout.index("{"):])
    except ValueError:
        raise AssertionError("no JSON from ansible-playbook (rc=%d)\n%s\n%s"
                             % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
    return proc.returncode, data, proc


def task_results(data):
    """(task name, host, result) of every task of a run_playbook_json run, in order."""
    for play in data["plays"]:
        for task in play["tasks"]:
            for host, res in task["hosts"].items():
                yield task["task"]["name"], host, res


# --------------------------------------------------------------------------------------------
# Layers: a test under tests/unit is a unit test unless marked integration; everything else is
# integration. A unit test that starts a playbook, a daemon or a build fails (the guard below), so
# `pytest -m unit` stays the quick loop it says it is.
# --------------------------------------------------------------------------------------------
UNIT_DIR = os.path.join(ROOT, "tests", "unit") + os.sep
# what makes a test integration: Ansible's runners and builders, the daemons and the clients that
# need them, browsers and guests
INTEGRATION_COMMANDS = frozenset((
    "ansible-playbook", "ansible-galaxy", "ansible-builder", "ansible-test", "molecule", "slurmctld", "slurmd",
    "munged", "scontrol", "srun", "sbatch", "prometheus-node-exporter", "chromium", "qemu-system-x86_64"))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if str(item.fspath).startswith(UNIT_DIR) and not item.get_closest_marker("integration"):
            item.add_marker(pytest.mark.unit)
        elif not item.get_closest_marker("integration"):
            item.add_marker(pytest.mark.integration)


class IntegrationInUnitTest(AssertionError):
    pass


@pytest.fixture(autouse=True)
def _unit_runs_no_playbook(request, monkeypatch):
    """A unit test (or a fixture it uses) that starts one of INTEGRATION_COMMANDS fails, naming it."""
    if not request.node.get_closest_marker("unit"):
        yield
        return
    popen_init = subprocess.Popen.__init__

    def refuse(self, args, *more, **kwargs):
        program = args if isinstance(args, (str, bytes)) else (args[0] if args else "")
        name = os.path.basename(os.fsdecode(program).split()[0]) if program else ""
        if name in INTEGRATION_COMMANDS:
            raise IntegrationInUnitTest("%s started %s: mark it @pytest.mark.integration or move it to tests/integration"
                                        % (request.node.nodeid, name))
        return popen_init(self, args, *more, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    yield
