"""What keeps a run over hundreds of nodes linear: one state-file write per task (not per event),
one pass to collect the report's host data, no facts copied per host per task, reboots in
batches; and the fleet inventory generator."""
import configparser
import os
import sys

import pytest
import yaml
from conftest import COLLECTION, ROOT, run_playbook_json, task_results

sys.path.insert(0, os.path.join(COLLECTION, "plugins", "callback"))
sys.path.insert(0, os.path.join(COLLECTION, "plugins", "filter"))
import fleet  # noqa: E402
import simtree  # noqa: E402
import gds_commission  # noqa: E402
import gds_report_hosts  # noqa: E402


# --------------------------------------------------------------------------------------------
# the gds_commission callback: the state file is written per task, not per event
# --------------------------------------------------------------------------------------------
class _Host:
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


class _Task:
    check_mode = True

    def __init__(self, name, action="ansible.builtin.copy"):
        self.name, self.action = name, action

    def get_name(self):
        return self.name


class _Result:
    """The callback's public view of a result (CallbackTaskResult: host, task, result, is_changed())."""
    def __init__(self, host, task, result):
        self.host, self.task, self.result = _Host(host), task, result

    def is_changed(self):
        return bool(self.result.get("changed"))


def test_callback_writes_the_state_once_per_task_not_once_per_host(tmp_path, monkeypatch):
    monkeypatch.setenv("GDS_REPORTS_DIR", str(tmp_path))
    monkeypatch.setenv("GDS_RUN_ID", "run-1")
    cb = gds_commission.CallbackModule()
    cb.state["run_id"], cb.path = "run-1", str(tmp_path / "state.json")
    writes = []
    real = cb._save
    monkeypatch.setattr(cb, "_save", lambda: (writes.append(1), real()))
    task = _Task("Write cufile.json")
    cb.v2_playbook_on_task_start(task, False)
    for i in range(200):
        cb.v2_runner_on_ok(_Result("node%03d" % i, task, {"changed": True, "diff": {"before_header": "/etc/x", "after": "a", "before": "b"}}))
    cb.v2_runner_on_failed(_Result("node200", task, {"msg": "boom"}))
    assert len(writes) <= 1
    cb.v2_playbook_on_task_start(_Task("next"), False)  # what the next task (the report) reads is complete
    assert len(writes) <= 2
    import json
    state = json.loads((tmp_path / "state.json").read_text())
    assert len(state["drift"]) == 200 and state["hosts"]["node200"]["failures"][0]["msg"] == "boom"


class _ArrivedResult(_Result):
    """A result as ansible-core hands it to a callback: reading ``result`` converts the whole of it
    (here: counted); ``is_changed()`` asks the result as it arrived."""
    def __init__(self, host, task, result, reads):
        self.host, self.task, self._reads, self._data = _Host(host), task, reads, result

    @property
    def result(self):
        self._reads.append(self.host.get_name())
        return self._data

    def is_changed(self):
        return bool(self._data.get("changed"))


def test_callback_converts_only_results_with_a_change(tmp_path, monkeypatch):
    """Ansible converts a result for each callback that reads it, facts included, in its one-threaded
    main process: the callback reads only the results that changed something (drift), and keeps
    nothing of the hosts' results (what they recorded it reads from their variables at the end)."""
    monkeypatch.setenv("GDS_REPORTS_DIR", str(tmp_path))
    monkeypatch.setenv("GDS_RUN_ID", "run-1")
    cb = gds_commission.CallbackModule()
    cb.state["run_id"], cb.path = "run-1", str(tmp_path / "state.json")
    import re
    cb.writer = gds_commission.report_writer()
    cb.check_vars = re.compile(cb.writer.CHECK_VARS)
    task = _Task("Write cufile.json")
    task.check_mode = True
    cb.v2_playbook_on_task_start(task, False)
    reads = []
    cb.v2_runner_on_ok(_ArrivedResult("quiet", task, {"changed": False, "msg": "x" * 1000}, reads))
    cb.v2_runner_item_on_ok(_ArrivedResult("quiet", task, {"changed": False, "item": 1}, reads))
    assert reads == []
    facts = {"ansible_facts": {"gds_cufile_checks": [{"name": "cufile: x", "verdict": "PASS"}]}, "changed": False}
    cb.v2_runner_on_ok(_ArrivedResult("facts", task, facts, reads))
    changed = {"changed": True, "diff": {"before_header": "/etc/x", "after": "a", "before": "b"}}
    cb.v2_runner_on_ok(_ArrivedResult("drifted", task, changed, reads))
    assert set(reads) == {"drifted"} and [*cb.state["drift"]] == ["drifted"]
    assert "cufile: x" not in repr(vars(cb))  # nothing a host recorded is kept


# --------------------------------------------------------------------------------------------
# gds_report: the hosts' data in one pass
# --------------------------------------------------------------------------------------------
def test_report_collection_is_one_pass_without_a_per_host_loop():
    with open(os.path.join(COLLECTION, "roles", "gds_report", "tasks", "main.yml")) as handle:
        tasks = yaml.safe_load(handle)
    collect = [t for t in tasks if "gds_report_hosts(" in str(t.get("vars", ""))]
    assert collect and not any("loop" in t or "with_items" in t for t in collect)
    # the task's own variable, not a set_fact: the fleet's records never come back to the main
    # process as a result it copies and converts for the callbacks
    assert collect[0].get("gds.commission.gds_report", {}).get("hosts") == "{{ __gds_report_hosts }}"
    assert not any("__gds_report_hosts" in str(t.get("ansible.builtin.set_fact", "")) for t in tasks)


def test_report_hosts_filter_collects_what_each_host_recorded():
    hostvars = {
        "a": {"ansible_facts": {"gds_topology": {"gpus": [1]}, "gds_platform": {"kernel": "6.8"}},
              "gds_facts_checks": [{"name": "topology: x"}], "gds_bench_checks": [[{"name": "bench: y"}]],
              "gds_raid_arrays": [{"name": "md0"}], "gds_iommu_reboot_required": True, "other_checks": [1],
              "gds_rdma_bench_results": [{"nic": "mlx5_0", "gbps": 390.0}]},
        "b": {"ansible_facts": {}, "gds_driver_reboot_required": False},
    }
    out = gds_report_hosts.gds_report_hosts(["a", "b"], hostvars, r"^(gds|pcie_acs)_[a-z0-9_]*checks$")
    assert out["a"] == {"checks": [{"name": "topology: x"}, {"name": "bench: y"}], "topology": {"gpus": [1]},
                        "arrays": [{"name": "md0"}], "bench": [], "rdma_bench": [{"nic": "mlx5_0", "gbps": 390.0}],
                        "reboot_required": True, "platform": {"kernel": "6.8"}}
    assert out["b"] == {"checks": [], "topology": None, "arrays": [], "bench": [], "rdma_bench": [],
                        "reboot_required": False, "platform": None}


def test_report_hosts_filter_bad_pattern_names_the_variable():
    from ansible.errors import AnsibleFilterError
    with pytest.raises(AnsibleFilterError, match="gds_report_check_vars"):
        gds_report_hosts.gds_report_hosts(["a"], {"a": {}}, "([")


# --------------------------------------------------------------------------------------------
# ansible.cfg: facts are neither re-decoded from a persistent cache nor deep-copied into
# top-level variables for every host and task
# --------------------------------------------------------------------------------------------
def test_ansible_cfg_keeps_facts_cheap_per_task():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "ansible.cfg"))
    assert cfg.get("defaults", "fact_caching") == "memory"
    assert cfg.getboolean("defaults", "inject_facts_as_vars") is False


FACT_NAMES = ("gds_topology", "gds_platform", "ansible_distribution", "ansible_os_family", "ansible_kernel",
              "ansible_hostname", "ansible_fqdn", "ansible_architecture", "ansible_processor", "ansible_memtotal_mb")


def test_no_role_reads_facts_as_top_level_variables():
    """inject_facts_as_vars is off: a fact is ansible_facts['name'], never a bare variable."""
    import re
    bad = []
    for base in ("roles", "playbooks"):
        for dirpath, _, files in os.walk(os.path.join(COLLECTION, base)):
            if os.path.basename(dirpath) == "meta":
                continue
            for name in files:
                if not name.endswith((".yml", ".yaml", ".j2")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path) as handle:
                    for number, line in enumerate(handle, 1):
                        if line.lstrip().startswith("#"):
                            continue
                        for expr in re.findall(r"\{\{.*?\}\}|\{%.*?%\}|^\s*(?:that|when|failed_when|changed_when):.*$", line):
                            for fact in FACT_NAMES:
                                for m in re.finditer(r"(?<![\w'\".\[])%s\b" % fact, expr):
                                    bad.append("%s:%d: %s" % (os.path.relpath(path, ROOT), number, line.strip()))
    assert not bad, "facts used as top-level variables:\n" + "\n".join(bad)


# --------------------------------------------------------------------------------------------
# reboots in batches
# --------------------------------------------------------------------------------------------
def _reboot_play():
    with open(os.path.join(COLLECTION, "playbooks", "tune.yml")) as handle:
        plays = yaml.safe_load(handle)
    return [p for p in plays if any((r.get("role") if isinstance(r, dict) else r) == "gds.commission.gds_reboot" for r in p.get("roles", []))][0]


@pytest.mark.parametrize("variables, serial, max_fail", [
    ({}, "10%", 0),
    ({"gds_reboot_batch": 4, "gds_reboot_max_fail_percent": 25}, 4, 25),
])
def test_reboot_play_reboots_in_batches(variables, serial, max_fail):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template
    play = _reboot_play()
    templar = Templar(loader=DataLoader(), variables=variables)
    assert str(templar.template(trust_as_template(play["serial"].strip()))) == str(serial)
    assert int(templar.template(trust_as_template(play["max_fail_percentage"].strip()))) == max_fail


def test_reboot_batches_hold_only_the_nodes_that_reboot():
    """Nodes that do not reboot (drift, check mode, simulated, gds_reboot_ok false) stay out of the
    batches: the batched play takes the group that only rebooting nodes join."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template
    play = _reboot_play()
    templar = Templar(loader=DataLoader(), variables={"groups": {"all": ["a", "b", "c"], "gds_reboot_pending": ["b"]}})
    assert list(templar.template(trust_as_template(play["hosts"]))) == ["b"]
    assert list(Templar(loader=DataLoader(), variables={"groups": {"all": ["a"]}}).template(trust_as_template(play["hosts"]))) == []
    with open(os.path.join(COLLECTION, "roles", "gds_reboot", "tasks", "select.yml")) as handle:
        tasks = yaml.safe_load(handle)
    grouping = [t for t in tasks if "ansible.builtin.group_by" in t][0]
    assert grouping["ansible.builtin.group_by"]["key"] == "gds_reboot_pending"
    assert set(grouping["when"]) >= {"gds_reboot_ok | bool", "gds_live | default(true) | bool", "not ansible_facts['gds_check_mode']"}


# --------------------------------------------------------------------------------------------
# the fleet inventory generator
# --------------------------------------------------------------------------------------------
def test_fleet_inventory_mixes_fixtures_and_groups(tmp_path):
    data = fleet.write(6, str(tmp_path / "inv"), str(tmp_path / "sim"))
    hosts = data["all"]["children"]["simulated"]["hosts"]
    assert list(hosts) == ["fleet-%04d" % i for i in range(1, 7)]
    assert [h["gds_sim_fixture"] for h in hosts.values()][:4] == list(fleet.DEFAULT_FIXTURES)
    assert set(data["all"]["children"]["dgx_a100"]["hosts"]) == {"fleet-0001", "fleet-0005"}
    assert os.path.isfile(str(tmp_path / "inv" / "group_vars" / "simulated.yml"))
    assert os.path.isdir(str(tmp_path / "sim" / "fleet-0006" / "sys" / "bus" / "pci" / "devices"))
    with open(str(tmp_path / "inv" / "hosts.yml")) as handle:
        assert yaml.safe_load(handle) == data


@pytest.mark.parametrize("count, fixtures, message", [(0, fleet.DEFAULT_FIXTURES, "at least 1"),
                                                       (2, ("dgx-a100", "nope"), "unknown fixture")])
def test_fleet_inventory_bad_input(tmp_path, count, fixtures, message):
    with pytest.raises(ValueError, match=message):
        fleet.write(count, str(tmp_path / "inv"), fixtures=fixtures)


# --------------------------------------------------------------------------------------------
# gds_facts_reuse: a later play of the same run keeps the facts an earlier play read
# --------------------------------------------------------------------------------------------
REUSE_PLAYS = """
- hosts: all
  gather_facts: false
  roles:
    - role: gds.commission.gds_facts
      gds_facts_reuse: {first}
    - role: gds.commission.gds_netfs
      gds_netfs_reuse: {first}
- hosts: all
  gather_facts: false
  roles:
    - role: gds.commission.gds_facts
      gds_facts_reuse: true
    - role: gds.commission.gds_netfs
      gds_netfs_reuse: true
"""


@pytest.mark.integration  # runs ansible-playbook
@pytest.mark.parametrize("first", [False, True])
def test_gds_facts_reuse_keeps_the_facts_of_an_earlier_play(tmp_path, first):
    root = simtree.build("dgx-a100", str(tmp_path / "sim" / "node"))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"node": {"gds_root": root}}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_live": False}}}))
    (tmp_path / "play.yml").write_text(REUSE_PLAYS.format(first=str(first).lower()))
    rc, data, proc = run_playbook_json(tmp_path / "hosts.yml", tmp_path / "play.yml", timeout=600)
    assert rc == 0, proc.stdout[-3000:]
    discover = [res for name, _, res in task_results(data) if name == "gds.commission.gds_facts : Discover the PCIe topology from sysfs"]
    includes = [res for name, _, res in task_results(data)
                if name == "gds.commission.gds_facts : Discover the topology and read the platform facts"]
    # the first play reads the facts (reuse or not: nothing was read before it), the second keeps them
    assert len(includes) == 2 and not includes[0].get("skipped") and includes[1].get("skipped")
    assert len(discover) == 1 and discover[0]["ansible_facts"]["gds_topology"]["gpus"]
    # the same for the audit of the network mounts (bench.yml run alone audits them)
    audits = [res for name, _, res in task_results(data) if name == "gds.commission.gds_netfs : Audit the network mounts against the NICs of the GPUs"]
    assert len(audits) == 1 and audits[0]["checks"]


# --------------------------------------------------------------------------------------------
# commission.yml: tune.yml reads the facts, bench.yml keeps them; a tuning step that changed what
# they describe reads that part again
# --------------------------------------------------------------------------------------------
SHOW_TOPOLOGY = {"name": "Show the topology the run ends with", "hosts": "all", "gather_facts": False, "tasks": [
    {"name": "Topology", "ansible.builtin.debug": {"msg": "{{ ansible_facts['gds_topology'] }}"}}]}


@pytest.mark.integration  # runs ansible-playbook
def test_commission_reads_the_facts_once_and_again_only_what_tuning_changed(tmp_path):
    root = simtree.build("dgx-a100", str(tmp_path / "sim" / "node"))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"node": {"gds_root": root}}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_live": False}}}))
    # commission.yml without the benchmark itself (it needs the compiled gdsbench): tune.yml, then
    # bench.yml's play with its facts and network mount roles as bench.yml sets them
    with open(os.path.join(COLLECTION, "playbooks", "bench.yml")) as handle:
        bench = yaml.safe_load(handle)[0]
    bench["roles"] = [r for r in bench["roles"] if r["role"] != "gds.commission.gds_bench"]
    (tmp_path / "play.yml").write_text(yaml.safe_dump([
        {"name": "Tune", "ansible.builtin.import_playbook": os.path.join(COLLECTION, "playbooks", "tune.yml")},
        bench, SHOW_TOPOLOGY]))

    def run():
        rc, data, proc = run_playbook_json(tmp_path / "hosts.yml", tmp_path / "play.yml", timeout=900)
        assert rc == 0, proc.stdout[-3000:]
        results = list(task_results(data))
        count = {name: sum(1 for n, _, res in results if n == name and not res.get("skipped"))
                 for name in ("gds.commission.gds_facts : Discover the PCIe topology from sysfs",
                              "gds.commission.gds_facts : Read the platform facts (kernel, IOMMU, drivers, packages, udev)",
                              "gds.commission.gds_netfs : Audit the network mounts against the NICs of the GPUs")}
        return count, [res for n, _, res in results if n == "Topology"][0]["msg"]

    # first run: pcie_acs clears ACS and reads the topology again, gds_driver and gds_rdma the
    # platform; bench.yml's play reads nothing
    count, topology = run()
    assert count == {"gds.commission.gds_facts : Discover the PCIe topology from sysfs": 2,
                     "gds.commission.gds_facts : Read the platform facts (kernel, IOMMU, drivers, packages, udev)": 3,
                     "gds.commission.gds_netfs : Audit the network mounts against the NICs of the GPUs": 1}, count
    with_acs = [b for b in topology["bridges"] if b["acs_cap"] is not None]
    assert with_acs and all(b["acs_ctrl"] == 0 for b in with_acs), "the facts still show ACS before tuning"
    # second run: nothing changes, so everything is read once
    count, _ = run()
    assert set(count.values()) == {1}, count


# --------------------------------------------------------------------------------------------
# registered results do not repeat the facts: a module given the topology echoes only its size
# --------------------------------------------------------------------------------------------
def test_a_module_result_does_not_echo_the_topology_it_was_given(sim_node, module_runner):
    import json
    from ansible_collections.gds.commission.plugins.module_utils.core.module import ECHO_LIMIT, echoed
    from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
    root = sim_node("dgx-a100")
    topology, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    assert len(json.dumps(topology)) > 20 * ECHO_LIMIT
    from ansible.release import __version__ as core
    args = {"topology": topology, "procfs_root": os.path.join(root, "proc"), "sysfs_root": os.path.join(root, "sys"),
            "use_ip": False}
    if tuple(int(part) for part in core.split(".")[:2]) >= (2, 21):
        # 2.21 echoes the arguments only when asked (inject_invocation); 2.19 always does and refuses the flag
        args["_ansible_inject_invocation"] = True
    rc, result = module_runner("gds_netfs", args)
    assert rc == 0 and result["checks"], result
    echo = result["invocation"]["module_args"]
    assert echo["topology"].startswith("dict of %d keys, " % len(topology)) and echo["topology"].endswith(": not echoed")
    assert echo["procfs_root"] == os.path.join(root, "proc")  # small arguments as they are
    assert len(json.dumps(result["invocation"])) < 2 * ECHO_LIMIT
    assert echoed({"text": "x" * (ECHO_LIMIT + 1), "few": [1, 2]}) == {
        "text": "str, %d characters: not echoed" % (ECHO_LIMIT + 1), "few": [1, 2]}


# --------------------------------------------------------------------------------------------
# a drift run: the tasks a node costs the controller
# --------------------------------------------------------------------------------------------
@pytest.mark.integration  # runs ansible-playbook
def test_a_drift_run_checks_each_role_once_and_runs_each_roles_files_in_one_step(tmp_path):
    """What a dgx-a100 node costs the controller per drift run (each task is a step of Ansible's
    one-threaded main process per node): each role's argument specs are checked once (the first
    play), not again by the tuning play or for gds_common; the tuning play runs each role's steps
    without the preamble the first play made redundant; a role's files are one gds_managed_file
    run. docs/fleet.md gives the count before and after."""
    root = simtree.build("dgx-a100", str(tmp_path / "sim" / "node"))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"node": {"gds_root": root}}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_live": False}}}))
    env = {"GDS_REPORTS_DIR": str(tmp_path / "reports")}
    rc, _, proc = run_playbook_json(tmp_path / "hosts.yml", os.path.join(ROOT, "playbooks", "tune.yml"), env=env)
    assert rc == 0, proc.stdout[-3000:]
    rc, data, proc = run_playbook_json(tmp_path / "hosts.yml", os.path.join(ROOT, "playbooks", "drift.yml"), ["--check"], env=env)
    assert rc == 0, proc.stdout[-3000:]
    names = [name for name, host, _ in task_results(data) if host == "node"]
    specs = [n for n in names if " : Validating arguments against arg spec " in n]
    with open(os.path.join(COLLECTION, "roles", "gds_tune", "vars", "main.yml")) as handle:
        tune_roles = yaml.safe_load(handle)["__gds_tune_roles"]
    # every tuning role's variables in one task (validate.yml's play: gds_validate_roles, no include and
    # no argument-spec task per role), the report role's argument specs once
    [checked] = [res for name, host, res in task_results(data)
                 if host == "node" and name == "gds.commission.gds_tune : Check the variables of each role"]
    assert checked["checked_roles"] == tune_roles and not checked.get("failed"), checked
    assert len(specs) == 1 and specs[0].startswith("gds.commission.gds_report : "), specs
    assert not [n for n in specs if n.startswith("gds.commission.gds_common")], specs
    assert not [n for n in names if " : Check the facts were read" in n or n.startswith("Check the role variables of ")]
    files = [n for n in names if n.startswith(("gds.commission.gds_pcie_acs", "gds.commission.gds_iommu", "gds.commission.gds_driver"))
             and any(word in n for word in (" : Write ", " : Remove ", " : Create ", " : Load nvidia-fs at boot", " : Set the nvidia-fs"))]
    assert len(files) == 3, files
    # 151 tasks a node four rounds ago, 84, 82 and 63 the last three, the includes among them
    # (docs/fleet.md counts the tasks of the log); what forks a worker is what did not skip (the
    # strategy skips in the controller): 34 last round, when the refusals were asserts and three
    # roles copied their module's checks in a task of their own
    worked = [name for name, host, res in task_results(data) if host == "node" and not res.get("skipped")]
    assert len(names) <= 59 and len(worked) <= 28, (len(names), worked)
