"""The collection keeps its guarantees through Ansible's public contract alone.

- No private internals: no module of the collection imports ``ansible._internal`` or a name with a
  leading underscore from ``ansible``, or assigns to an attribute of an ansible module (patching
  Ansible for the whole process).
- No third-party strategy: the collection ships none, no play names one, ansible.cfg leaves the
  builtin default, and a run prints no deprecation.
- Check mode holds by the shape of the code: a task leaves check mode only to write the run's own
  outputs (on the controller, or the node's node_exporter textfile); every module of the collection
  supports check mode; the tuning roles decide from the mode their tasks run under
  (``ansible_facts['gds_check_mode']``), never from ``ansible_check_mode``, which follows only
  ``--check``; drift.yml's first play refuses a run Ansible does not run in check mode.
tests/integration/test_drift_never_acts.py runs drift against a recording node in each of these ways.
"""
import ast
import configparser
import glob
import os
import subprocess
import sys

import pytest
import yaml
from conftest import COLLECTION, ROOT

PY_FILES = sorted(glob.glob(os.path.join(COLLECTION, "**", "*.py"), recursive=True))
PY_FILES = [p for p in PY_FILES if "/tests/output/" not in p]
# where a task may leave check mode: the run's outputs, never a tuning step
NODE_OUTPUT_ACTIONS = {"gds.commission.gds_metrics"}  # the node's node_exporter textfile
CONTROLLER = {"localhost", "127.0.0.1", "::1"}
BUILTIN_STRATEGIES = {None, "linear", "free", "host_pinned", "debug", "ansible.builtin.linear",
                      "ansible.builtin.free", "ansible.builtin.host_pinned", "ansible.builtin.debug"}
TUNING_ROLES = ("gds_facts", "gds_pcie_acs", "gds_iommu", "gds_driver", "gds_rdma", "gds_netfs", "gds_raid", "gds_cufile",
                "gds_reboot", "gds_tune", "gds_common")


def relative(path):
    return os.path.relpath(path, ROOT)


def private_ansible_uses(path):
    """(line, what) of every private import from ansible and every assignment to an ansible module's
    attribute in the Python file ``path``."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    found, ansible_modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "ansible" or alias.name.startswith("ansible."):
                    if any(part.startswith("_") for part in alias.name.split(".")):
                        found.append((node.lineno, "import %s" % alias.name))
                    ansible_modules.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and (node.module == "ansible"
                                                                    or node.module.startswith("ansible.")):
            if any(part.startswith("_") for part in node.module.split(".")):
                found.append((node.lineno, "from %s import ..." % node.module))
            for alias in node.names:
                if alias.name.startswith("_"):
                    found.append((node.lineno, "from %s import %s" % (node.module, alias.name)))
                # a submodule imported by name (from ansible.vars import manager) can be patched too
                if alias.name[:1].islower():
                    ansible_modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            targets = [ast.Attribute(value=node.args[0], attr="?")] if node.args else []
        for target in targets:
            if isinstance(target, ast.Attribute):
                base = target.value
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name) and base.id in ansible_modules:
                    found.append((node.lineno, "assigns to %s" % ast.unparse(target)))
    return found


def test_nothing_in_the_collection_uses_ansible_private_names_or_patches_ansible():
    problems = ["%s:%d: %s" % (relative(path), line, what)
                for path in PY_FILES for line, what in private_ansible_uses(path)]
    assert problems == [], "\n".join(problems)


def repository_python():
    """Every Python file of the repository outside the collection: scripts (with or without .py),
    tests, the lab, the inventory scripts."""
    found = []
    for folder in ("scripts", "scripts/vm", "tests", "bench", "inventory"):
        for path in glob.glob(os.path.join(ROOT, folder, "**", "*"), recursive=True):
            if not os.path.isfile(path) or "__pycache__" in path:
                continue
            if path.endswith(".py"):
                found.append(path)
            elif "." not in os.path.basename(path):
                with open(path, "rb") as handle:
                    first = handle.readline()
                if first.startswith(b"#!") and b"python" in first:
                    found.append(path)
    return sorted(found)


def test_nothing_in_the_repository_imports_a_private_name_of_ansible_or_ansible_test():
    """Not the collection alone: the tests (conftest read ansible._internal), the scripts
    (ansible-test-bootstrap read ansible_test._internal) and the lab."""
    problems = []
    for path in repository_python():
        if path == os.path.abspath(__file__):
            continue  # its PATCHING sample is a string
        with open(path) as handle:
            tree = ast.parse(handle.read(), path)
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] + ["%s.%s" % (node.module, a.name) for a in node.names] \
                if isinstance(node, ast.ImportFrom) else []
            for name in names:
                parts = name.split(".")
                if parts[0] in ("ansible", "ansible_test") and any(
                        p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts[1:]):
                    problems.append("%s:%d: %s" % (relative(path), node.lineno, name))
    assert problems == [], "\n".join(problems)


def test_the_plugins_read_no_private_attribute_of_ansibles_objects():
    """A callback, vars, filter or action plugin reads Ansible's objects through their public
    methods and properties (play.get_variable_manager(), result.result ...), never ``x._name``."""
    problems = []
    for path in PY_FILES:
        if "/plugins/" not in path or "/module_utils/" in path or "/modules/" in path:
            continue
        with open(path) as handle:
            tree = ast.parse(handle.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    problems.append("%s:%d: %s" % (relative(path), node.lineno, ast.unparse(node)))
    assert problems == [], "\n".join(problems)


PATCHING = '''
import ansible.vars.manager
from ansible.vars import plugins as vars_plugins
from ansible._internal._templating._engine import TemplateEngine
from ansible.executor.task_result import _WireTaskResult
ansible.vars.manager.namespace_facts = len
vars_plugins.get_vars_from_path = len
setattr(vars_plugins, "x", 1)
'''


def test_the_scan_finds_what_the_strategy_plugin_did(tmp_path):
    """The check above is not vacuous: what plugins/strategy/gds_linear.py did is found."""
    path = tmp_path / "patching.py"
    path.write_text(PATCHING)
    found = [what for _, what in private_ansible_uses(str(path))]
    assert found == ["from ansible._internal._templating._engine import ...",
                     "from ansible.executor.task_result import _WireTaskResult",
                     "assigns to ansible.vars.manager.namespace_facts",
                     "assigns to vars_plugins.get_vars_from_path",
                     "assigns to vars_plugins.?"], found


def yaml_files(*roots):
    for root in roots:
        for path in sorted(glob.glob(os.path.join(root, "**", "*.yml"), recursive=True)):
            if "/tests/output/" not in path:
                yield path


def plays_and_tasks(node, inherited=None):
    """Every dict that is a play, a block or a task below ``node``, with the check_mode and
    delegate_to it inherits from its block."""
    inherited = inherited or {}
    if isinstance(node, list):
        for item in node:
            yield from plays_and_tasks(item, inherited)
    elif isinstance(node, dict):
        own = dict(inherited)
        for key in ("check_mode", "delegate_to"):
            if key in node:
                own[key] = node[key]
        yield node, own
        for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            if key in node:
                yield from plays_and_tasks(node[key], own)


def action_of(task):
    skip = {"name", "when", "register", "vars", "tags", "check_mode", "delegate_to", "run_once", "loop",
            "loop_control", "changed_when", "failed_when", "notify", "become", "ignore_errors", "no_log",
            "environment", "listen", "until", "retries", "delay", "args", "diff", "async", "poll", "throttle",
            "block", "rescue", "always", "any_errors_fatal", "module_defaults", "timeout", "delegate_facts"}
    keys = [k for k in task if k not in skip and not k.startswith("with_")]
    return keys[0] if len(keys) == 1 else None


def test_a_task_leaves_check_mode_only_to_write_the_runs_own_outputs():
    problems = []
    for path in yaml_files(os.path.join(COLLECTION, "roles"), os.path.join(COLLECTION, "playbooks"),
                           os.path.join(ROOT, "playbooks")):
        with open(path) as handle:
            doc = yaml.safe_load(handle)
        for node, scope in plays_and_tasks(doc):
            if "block" in node or "hosts" in node or scope.get("check_mode") is not False:
                continue
            if scope.get("delegate_to") in CONTROLLER or action_of(node) in NODE_OUTPUT_ACTIONS:
                continue
            problems.append("%s: %r leaves check mode on a node" % (relative(path), node.get("name")))
    assert problems == [], "\n".join(problems)


def test_no_play_names_a_third_party_strategy_and_the_collection_ships_none():
    assert not os.path.exists(os.path.join(COLLECTION, "plugins", "strategy"))
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "ansible.cfg"))
    assert cfg.get("defaults", "strategy", fallback=None) in BUILTIN_STRATEGIES
    problems = []
    for path in yaml_files(os.path.join(COLLECTION, "playbooks"), os.path.join(ROOT, "playbooks"),
                           os.path.join(ROOT, "molecule")):
        with open(path) as handle:
            doc = yaml.safe_load(handle)
        for play in doc if isinstance(doc, list) else []:
            if isinstance(play, dict) and play.get("strategy") not in BUILTIN_STRATEGIES:
                problems.append("%s: %s" % (relative(path), play.get("strategy")))
    assert problems == []


@pytest.mark.integration  # runs ansible-playbook
def test_a_drift_run_prints_no_deprecation():
    """ansible-core 2.19 deprecated third-party strategies: with deprecation warnings on, checking
    the syntax of drift.yml and commission.yml through the repository's ansible.cfg warns of nothing."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_DEPRECATION_WARNINGS="true")
    for playbook in ("drift.yml", "commission.yml"):
        proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "--syntax-check",
                               "-i", os.path.join(ROOT, "inventory", "demo"), os.path.join(ROOT, "playbooks", playbook)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "DEPRECATION" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(COLLECTION, "plugins", "modules", "*.py"))),
                         ids=os.path.basename)
def test_every_module_of_the_collection_supports_check_mode(path):
    action = os.path.join(COLLECTION, "plugins", "action", os.path.basename(path))
    if os.path.exists(action):  # the module file is its action plugin's documentation
        with open(action) as handle:
            tree = ast.parse(handle.read(), action)
        # ActionBase runs in check mode unless the plugin sets _supports_check_mode = False
        assert not [node for node in ast.walk(tree) if isinstance(node, ast.Assign)
                    and any(getattr(t, "attr", getattr(t, "id", None)) == "_supports_check_mode" for t in node.targets)
                    and getattr(node.value, "value", True) is False], relative(action)
        return
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    said = [kw.value.value for node in ast.walk(tree) if isinstance(node, ast.Call)
            for kw in node.keywords if kw.arg == "supports_check_mode" and isinstance(kw.value, ast.Constant)]
    assert said == [True], "%s: supports_check_mode %s" % (relative(path), said)


def test_the_tuning_roles_decide_from_the_mode_their_tasks_run_under():
    """ansible_check_mode is false in a play whose check_mode keyword is true (only --check sets
    it); the fact gds_check_mode is what Ansible told the module gds_platform."""
    problems = []
    for role in TUNING_ROLES:
        for path in yaml_files(os.path.join(COLLECTION, "roles", role)):
            with open(path) as handle:
                for number, line in enumerate(handle, 1):
                    if "ansible_check_mode" in line and not line.lstrip().startswith("#"):
                        problems.append("%s:%d: %s" % (relative(path), number, line.strip()))
    assert problems == [], "\n".join(problems)


def test_drift_first_refuses_a_run_not_in_check_mode():
    with open(os.path.join(COLLECTION, "playbooks", "drift.yml")) as handle:
        first = yaml.safe_load(handle)[0]
    assert first["check_mode"] is True and first["any_errors_fatal"] is True
    [task] = first["tasks"]
    assert task["ansible.builtin.assert"]["that"] == "ansible_check_mode"
    assert "always" in task["tags"]
