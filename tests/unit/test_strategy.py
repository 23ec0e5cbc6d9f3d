"""Strategy gds_linear: linear's scheduling, with the Jinja plugins imported once in the controller
instead of once in every worker process (plugins/strategy/gds_linear.py)."""
import ast
import os
import subprocess
import sys

import yaml
from conftest import COLLECTION, ROOT, run_playbook_json, task_results

# a filter plugin that writes the pid of every process that imports it
PROBE = '''
import os
with open(os.environ["GDS_PROBE_LOG"], "a") as handle:
    handle.write("%d\\n" % os.getpid())


class FilterModule(object):
    def filters(self):
        return {"gds_probe_double": lambda value: value * 2}
'''


def play(tmp_path, strategy, filter_name, filter_source, tasks):
    """Run ``tasks`` on 3 local hosts under ``strategy`` with a probe filter that writes to a log;
    (the log's lines, the task results)."""
    (tmp_path / "filter").mkdir(exist_ok=True)
    (tmp_path / "filter" / (filter_name + ".py")).write_text(filter_source)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"n%d" % i: {} for i in range(3)}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}))
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": tasks}]))
    log = tmp_path / ("%s-%s.log" % (filter_name, strategy))
    rc, data, proc = run_playbook_json(tmp_path / "hosts.yml", tmp_path / "play.yml", timeout=300, env={
        "ANSIBLE_STRATEGY": strategy, "ANSIBLE_FORKS": "4", "GDS_PROBE_LOG": str(log),
        "GDS_REPORTS_DIR": str(tmp_path / "reports"),
        "ANSIBLE_FILTER_PLUGINS": "%s:%s" % (tmp_path / "filter", os.path.join(COLLECTION, "plugins", "filter"))})
    assert rc == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return log.read_text().splitlines(), list(task_results(data))


def run(tmp_path, strategy):
    """Run a 3-host, 3-task playbook that templates the probe filter; (importing pids, results shown)."""
    tasks = [{"name": "step %d" % i, "ansible.builtin.set_fact": {"value%d" % i: "{{ %d | gds_probe_double }}" % i}}
             for i in range(3)]
    tasks.append({"name": "show", "ansible.builtin.debug": {"msg": "{{ value0 }} {{ value1 }} {{ value2 }} {{ ansible_play_hosts | join(',') }}"}})
    lines, results = play(tmp_path, strategy, "gds_probe", PROBE, tasks)
    return set(lines), sorted(res["msg"] for name, _, res in results if name == "show")


def test_ansible_cfg_runs_gds_linear():
    import configparser
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "ansible.cfg"))
    assert cfg.get("defaults", "strategy") == "gds.commission.gds_linear"
    assert os.path.exists(os.path.join(COLLECTION, "plugins", "strategy", "gds_linear.py"))


def test_gds_linear_imports_the_filters_once_where_linear_imports_them_per_worker(tmp_path):
    linear_pids, linear_shown = run(tmp_path, "linear")
    ours_pids, ours_shown = run(tmp_path, "gds.commission.gds_linear")
    # 3 hosts x 3 templated tasks: under linear, every worker that compiles a template imports the filters
    assert len(linear_pids) >= 3, linear_pids
    # under gds_linear, only the controller does, before any worker forks
    assert len(ours_pids) == 1, ours_pids
    # and the run is the same
    assert ours_shown == linear_shown and len(ours_shown) == 3 and all(msg == "0 2 4 n0,n1,n2" for msg in ours_shown)


def test_gds_linear_loads_the_collections_own_filters_in_the_controller():
    """loader.all() holds only the builtin and legacy-path filters; this collection's are loaded by
    name, so the strategy asks for them itself (in a fresh process: the loader is global)."""
    script = ("import os\n"
              "from ansible.plugins.loader import filter_loader, init_plugin_loader\n"
              "init_plugin_loader([%r])\n"
              "from ansible_collections.gds.commission.plugins.strategy.gds_linear import load_jinja_plugins\n"
              "load_jinja_plugins()\n"
              "print(sorted(os.path.basename(p) for p in filter_loader._module_cache))\n" % os.path.join(ROOT, "collections"))
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg")))
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = set(ast.literal_eval(proc.stdout.strip().splitlines()[-1]))
    assert {os.path.basename(p) for p in os.listdir(os.path.join(COLLECTION, "plugins", "filter")) if p.endswith(".py")} <= loaded


# a filter that writes the pid of the process that calls it (not of the one that imports it)
CALLED = '''
import os


def gds_probe_called(value):
    with open(os.environ["GDS_PROBE_LOG"], "a") as handle:
        handle.write("%d %s\\n" % (os.getpid(), value))
    return value


class FilterModule(object):
    def filters(self):
        return {"gds_probe_called": gds_probe_called}
'''


def run_conditions(tmp_path, strategy):
    """Three hosts; a task skipped everywhere, one that runs on one host, one whose condition names a
    connection variable; (pids that evaluated each condition, task results)."""
    tasks = [
        {"name": "never", "ansible.builtin.debug": {"msg": "x"}, "register": "never",
         "when": "('never' | gds_probe_called) == 'no'"},
        {"name": "on n1", "ansible.builtin.set_fact": {"ran": True}, "register": "one",
         "when": ["('one' | gds_probe_called) == 'one'", "inventory_hostname == 'n1'"]},
        {"name": "connection", "ansible.builtin.debug": {"msg": "x"},
         "when": "('connection' | gds_probe_called) == 'no' and ansible_host is defined"},
        {"name": "show", "ansible.builtin.debug": {"msg": "{{ never }} {{ one }} {{ ran | default(false) }}"}},
    ]
    lines, results = play(tmp_path, strategy, "gds_probe_called", CALLED, tasks)
    pids = {}
    for line in lines:
        pid, what = line.split()
        pids.setdefault(what, set()).add(pid)
    return pids, [(name, host, {k: v for k, v in res.items() if k not in ("_ansible_no_log", "action")})
                  for name, host, res in results]


def test_gds_linear_skips_a_false_condition_without_a_worker_and_with_linears_result(tmp_path):
    linear_pids, linear_results = run_conditions(tmp_path, "linear")
    ours_pids, ours_results = run_conditions(tmp_path, "gds.commission.gds_linear")
    # linear evaluates every condition in a worker per host; gds_linear the false ones in the controller
    assert len(linear_pids["never"]) == 3 and len(ours_pids["never"]) == 1, (linear_pids, ours_pids)
    # a condition true on a host: that host's worker decides again (and runs the task)
    assert ours_pids["never"] < ours_pids["one"] and len(ours_pids["one"]) == 2
    # a condition on a connection variable (a worker adds those): left to the workers
    assert len(ours_pids["connection"]) == 3 and not ours_pids["connection"] & ours_pids["never"]
    # the same results, skips included (skip_reason, false_condition), and the same registered values
    assert ours_results == linear_results
    shown = sorted(res["msg"] for name, _, res in ours_results if name == "show")
    assert len(shown) == 3 and sum("True" in msg.split()[-1:] for msg in shown) == 1


# --------------------------------------------------------------------------------------------
# the controller's task variables take the host's facts without copying them for every task
# --------------------------------------------------------------------------------------------
def test_gds_linear_builds_task_variables_without_copying_the_facts_and_a_template_cannot_change_them():
    import ansible.vars.clean
    import ansible.vars.manager
    from ansible._internal._templating._engine import TemplateEngine
    from ansible.template import trust_as_template
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager
    from ansible_collections.gds.commission.plugins.strategy import gds_linear

    loader = DataLoader()
    manager = VariableManager(loader=loader, inventory=InventoryManager(loader=loader, sources="node,"))
    host = manager._inventory.get_host("node")
    topology = {"bridges": [{"bdf": "0000:17:00.0"}], "gpus": []}
    manager.set_host_facts("node", {"gds_topology": topology, "ansible_local": {"x": [1]}})
    stock = ansible.vars.manager.namespace_facts
    try:
        assert manager.get_vars(host=host)["ansible_facts"]["gds_topology"] is not topology  # Ansible copies
        gds_linear.share_facts_in_controller()
        facts = manager.get_vars(host=host)["ansible_facts"]
        assert facts["gds_topology"] is topology and facts["ansible_local"] == {"x": [1]}
        assert gds_linear.namespace_facts_shared({"ansible_os": 1, "a": 2}) == ansible.vars.clean.namespace_facts(
            {"ansible_os": 1, "a": 2})
        # a template that changes what it reads changes its own copy, never the facts
        engine = TemplateEngine(loader=loader, variables=manager.get_vars(host=host))
        for text in ("{{ ansible_facts['gds_topology']['bridges'].append(1) }}",
                     "{{ ansible_facts['gds_topology'].update({'gpus': [2]}) }}"):
            try:
                engine.template(trust_as_template(text))
            except Exception:  # a sandbox that refuses the call leaves the facts as they are too
                pass
        assert topology == {"bridges": [{"bdf": "0000:17:00.0"}], "gpus": []}
    finally:
        ansible.vars.manager.namespace_facts = stock


# --------------------------------------------------------------------------------------------
# the vars plugins are asked once per path, stage and entities in a run
# --------------------------------------------------------------------------------------------
class _Entity(object):
    def __init__(self, kind, name):
        self.base_type, self.name = kind, name


def test_vars_plugins_once_keeps_the_first_answer_for_the_same_question_only():
    from ansible_collections.gds.commission.plugins.strategy.gds_linear import VarsPluginsOnce
    calls = []

    def original(loader, path, entities, stage):
        calls.append((path, stage, [e.name for e in entities]))
        return {"n": len(calls)}

    once = VarsPluginsOnce(original, ["ansible.builtin.host_group_vars", "gds.commission.gds_profiles"])
    group, host = _Entity("group", "dgx_a100"), _Entity("host", "node1")
    assert once(None, "/inv", [group], "task") == once(None, "/inv", [_Entity("group", "dgx_a100")], "task") == {"n": 1}
    assert once(None, "/inv", [host], "task") == {"n": 2}  # another entity
    assert once(None, "/play", [group], "task") == {"n": 3}  # another path
    assert once(None, "/inv", [group], "inventory") == {"n": 4}  # another stage
    assert len(calls) == 4
    # a site's own vars plugin may answer differently each time: every call goes through
    site = VarsPluginsOnce(original, ["ansible.builtin.host_group_vars", "site.vault.dynamic_vars"])
    assert site(None, "/inv", [group], "task") != site(None, "/inv", [group], "task")


def test_task_variables_are_the_same_with_the_vars_plugins_asked_once(tmp_path):
    """group_vars/ and host_vars/ beside the inventory and beside the playbook, a host in two
    groups: VariableManager.get_vars gives the same variables for every task, with the plugins
    asked once."""
    import ansible.vars.manager
    import ansible.vars.plugins
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager
    from ansible_collections.gds.commission.plugins.strategy import gds_linear

    inv = tmp_path / "inv"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "host_vars").mkdir()
    (inv / "hosts.ini").write_text("[dgx]\nnode1\nnode2\n[rack7]\nnode1\n")
    (inv / "group_vars" / "all.yml").write_text("site: all\nlevel: all\n")
    (inv / "group_vars" / "dgx.yml").write_text("level: dgx\nrack: none\n")
    (inv / "group_vars" / "rack7.yml").write_text("rack: 7\n")
    (inv / "host_vars" / "node2.yml").write_text("level: node2\n")
    loader = DataLoader()
    manager = VariableManager(loader=loader, inventory=InventoryManager(loader=loader, sources=str(inv / "hosts.ini")))
    hosts = [manager._inventory.get_host(name) for name in ("node1", "node2")]
    keys = ("site", "level", "rack")

    def seen():
        return [{k: manager.get_vars(host=host).get(k) for k in keys} for host in hosts]

    stock = (ansible.vars.manager.get_vars_from_path, ansible.vars.plugins.get_vars_from_path)
    try:
        before = seen()
        assert before == [{"site": "all", "level": "dgx", "rack": 7}, {"site": "all", "level": "node2", "rack": "none"}]
        gds_linear.vars_plugins_once_in_controller()
        once = ansible.vars.plugins.get_vars_from_path
        assert once.enabled and ansible.vars.manager.get_vars_from_path is once
        assert seen() == seen() == before
        asked = len(once.answers)
        seen()
        assert len(once.answers) == asked  # nothing asked again
        gds_linear.vars_plugins_once_in_controller()  # the next play: a fresh memory, the same function below
        assert ansible.vars.plugins.get_vars_from_path.original is stock[1]
    finally:
        ansible.vars.manager.get_vars_from_path, ansible.vars.plugins.get_vars_from_path = stock
