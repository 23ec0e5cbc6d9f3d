"""The gds_commission callback: run start across playbooks, and the report when every host failed."""
import importlib.util
import json
import os
import sys

import pytest
import yaml

from conftest import COLLECTION, run_playbook_json

spec = importlib.util.spec_from_file_location(
    "gds_commission_callback", os.path.join(COLLECTION, "plugins", "callback", "gds_commission.py"))
callback = importlib.util.module_from_spec(spec)
spec.loader.exec_module(callback)


class Named(object):
    def __init__(self, name, **extra):
        self.name = name
        self.__dict__.update(extra)

    def get_name(self):
        return self.name


class Play(object):
    def __init__(self, roles, play_vars=None):
        self.roles, self.vars, self.hosts = [Named(r) for r in roles], play_vars or {}, "all"

    def get_roles(self):
        return self.roles


class Playbook(object):
    def __init__(self, name, plays):
        self.name, self.plays = name, plays

    def get_plays(self):
        return self.plays


def start(cb, playbook):
    """A playbook's start as Ansible sends it: the playbook, then its first play (the callback
    reads the run's settings there, once the hosts' variables exist)."""
    cb.v2_playbook_on_start(playbook)
    cb.v2_playbook_on_play_start(playbook.plays[0])


class Result(object):
    """The callback's public view of a task result (ansible.executor.task_result.CallbackTaskResult)."""
    def __init__(self, host, task, result, action="ansible.builtin.set_fact"):
        self.host, self.task, self.result = Named(host), Named(task, action=action, check_mode=False), result

    def is_changed(self):
        return bool(self.result.get("changed"))


class Stats(object):
    def __init__(self, failures):
        self.failures = failures
        self.processed = dict.fromkeys(failures, 1)

    def summarize(self, host):
        return {"failures": self.failures.get(host, 0), "unreachable": 0}


COMMISSION = [Play(["gds_facts", "gds_pcie_acs"]), Play(["gds_bench"]), Play(["gds_report"])]


@pytest.fixture
def cb(tmp_path, monkeypatch):
    monkeypatch.setenv("GDS_REPORTS_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("GDS_RUN_ID", "run-1")
    monkeypatch.delenv("GDS_RUN_STATE", raising=False)
    return callback.CallbackModule()


def test_a_run_starts_with_its_first_playbook(cb, tmp_path):
    start(cb, Playbook("bench.yml", [Play(["gds_bench"])]))
    cb.state["started"] = "2026-01-01T00:00:00+00:00"  # as if bench.yml had run an hour
    cb._save()
    start(cb, Playbook("report.yml", [Play(["gds_report"])]))
    assert cb.state["started"] == "2026-01-01T00:00:00+00:00"
    # a second invocation with the same run id continues that run
    again = callback.CallbackModule()
    start(again, Playbook("report.yml", [Play(["gds_report"])]))
    assert again.state["started"] == "2026-01-01T00:00:00+00:00"


def test_every_host_failed_still_gets_the_report(cb, tmp_path):
    start(cb, Playbook("commission.yml", COMMISSION))
    checks = [{"name": "facts: gpus", "verdict": "PASS", "expected": 8, "actual": 8}]
    # what the hosts recorded, as the last play's variable manager holds it (a real one:
    # test_fallback_report_reads_hosts_as_the_report_play_would)
    cb._hostvars = lambda: {"a": {"gds_facts_checks": checks, "ansible_facts": {}}, "b": {}}
    cb.v2_runner_on_failed(Result("a", "pcie_acs : Disable ACS", {"msg": "devices are bound to vfio-pci: 0000:3b:00.0"}))
    cb.v2_runner_on_failed(Result("b", "cufile : Validate", {"msg": "MODULE FAILURE", "module_stderr": "bad override"}))
    cb.v2_playbook_on_stats(Stats({"a": 1, "b": 1}))
    run = tmp_path / "reports" / "run-1"
    assert sorted(os.listdir(run)) == ["a.html", "a.json", "a.prom", "b.html", "b.json", "b.prom", "junit.xml", "report.html",
                                    "summary.json"]
    assert os.readlink(tmp_path / "reports" / "latest") == "run-1"
    summ = json.loads((run / "summary.json").read_text())
    assert summ["counts"]["ERROR"] == 2
    a = {c["name"]: c for c in summ["hosts"]["a"]["checks"]}
    assert a["facts: gpus"]["verdict"] == "PASS"  # what it recorded before it broke
    assert "Disable ACS" in a["host: play completed"]["actual"] and "vfio-pci" in a["host: play completed"]["detail"]
    b = summ["hosts"]["b"]["checks"][-1]
    assert b["verdict"] == "ERROR" and "bad override" in b["detail"]


def test_drift_run_where_every_host_failed(cb, tmp_path):
    start(cb, Playbook("drift.yml", [Play(["gds_pcie_acs"]), Play(["gds_report"], {"gds_report_mode": "drift"})]))
    cb.v2_runner_on_failed(Result("a", "pcie_acs : Check", {"msg": "bad BDF"}))
    cb.v2_playbook_on_stats(Stats({"a": 1}))
    drift = json.loads((tmp_path / "reports" / "run-1" / "drift.json").read_text())
    assert drift["hosts"]["a"]["drifted"] is None and "bad BDF" in drift["hosts"]["a"]["detail"]


def test_roles_of_the_collection_keep_their_short_names_in_the_report(cb, tmp_path):
    """Ansible names a collection role's task `gds.commission.<role> : <task>`, and the report play's
    role gds.commission.gds_report: the report reads as before, with the role's short name."""
    plays = [Play(["gds.commission.gds_pcie_acs"]), Play(["gds.commission.gds_report"])]
    start(cb, Playbook("commission.yml", plays))
    assert cb.report_mode == "commission"
    cb.v2_runner_on_failed(Result("a", "gds.commission.gds_pcie_acs : Disable ACS", {"msg": "bound to vfio-pci"}))
    assert cb.state["hosts"]["a"]["failures"] == [{"task": "gds_pcie_acs : Disable ACS", "msg": "bound to vfio-pci"}]
    cb.v2_playbook_on_stats(Stats({"a": 1}))
    summ = json.loads((tmp_path / "reports" / "run-1" / "summary.json").read_text())
    broke = summ["hosts"]["a"]["checks"][-1]
    assert broke["verdict"] == "ERROR" and "gds_pcie_acs : Disable ACS" in broke["actual"] and "gds.commission" not in broke["actual"]


def test_no_second_report_when_the_report_play_ran(cb, tmp_path):
    start(cb, Playbook("commission.yml", COMMISSION))
    cb.v2_runner_on_ok(Result("a", "Write the report", {"changed": False}, action="gds_report"))
    cb.v2_playbook_on_stats(Stats({}))
    assert not (tmp_path / "reports" / "run-1").exists()


def test_no_report_from_a_playbook_without_one(cb, tmp_path):
    start(cb, Playbook("tune.yml", COMMISSION[:1]))
    cb.v2_runner_on_failed(Result("a", "x", {"msg": "y"}))
    cb.v2_playbook_on_stats(Stats({"a": 1}))
    assert not (tmp_path / "reports" / "run-1").exists()


def test_a_run_id_that_is_no_plain_name_is_replaced_with_a_warning(cb, tmp_path, monkeypatch):
    warnings = []
    monkeypatch.setattr(cb, "_display", type("D", (), {"warning": lambda self, msg: warnings.append(msg)})())
    monkeypatch.setenv("GDS_RUN_ID", "../../escape")
    start(cb, Playbook("commission.yml", COMMISSION))
    assert cb.state["run_id"] != "../../escape" and "GDS_RUN_ID" in warnings[0]
    assert os.path.dirname(cb.path) == str(tmp_path / "reports" / ".state")
    assert os.environ["GDS_RUN_ID"] == cb.state["run_id"]


def test_drift_items_of_odd_module_results():
    items = callback.drift_items("t", {"drift": [{"setting": "a", "expected": 1, "actual": 2}, "bare", None]})
    assert [i["setting"] for i in items] == ["a", "bare", "None"]


def test_fallback_report_of_odd_host_names_stays_in_reports_dir(cb, tmp_path):
    start(cb, Playbook("commission.yml", COMMISSION))
    for host in ("rack1/../../../a", "gpu+01", "gpu=01"):
        cb.v2_runner_on_failed(Result(host, "t", {"msg": "boom \x1b[2J"}))
    cb.v2_playbook_on_stats(Stats({"rack1/../../../a": 1, "gpu+01": 1, "gpu=01": 1}))
    run = tmp_path / "reports" / "run-1"
    assert sorted(os.listdir(run)) == ["gpu%2B01.html", "gpu%2B01.json", "gpu%2B01.prom", "gpu%3D01.html",
                                       "gpu%3D01.json", "gpu%3D01.prom", "junit.xml", "rack1%2F..%2F..%2F..%2Fa.html",
                                       "rack1%2F..%2F..%2F..%2Fa.json", "rack1%2F..%2F..%2F..%2Fa.prom",
                                       "report.html", "summary.json"]
    assert sorted(os.listdir(tmp_path)) == ["reports"]


FAILING_PLAY = """
- name: Tune
  hosts: all
  gather_facts: false
  any_errors_fatal: true
  tasks:
    - name: Record
      ansible.builtin.set_fact:
        gds_facts_checks: [{name: "topology: gpus", verdict: PASS, expected: 8, actual: 8}]
        site_extra_checks: [{name: "site: rack", verdict: PASS, expected: 1, actual: 1}]
        gds_rdma_bench_checks: [{name: "rdma: bench mlx5_0", verdict: PASS, expected: 1, actual: 1}]
        gds_rdma_bench_results: [{nic: mlx5_0, port: 1, test: ib_write_bw, memory: host, gbps: 390.0}]
    - name: Break
      ansible.builtin.fail:
        msg: broken on purpose
      when: inventory_hostname == 'bad'
- name: Report
  hosts: all
  gather_facts: false
  roles:
    - role: gds.commission.gds_report
"""


@pytest.mark.integration  # runs ansible-playbook
def test_fallback_report_reads_hosts_as_the_report_play_would(tmp_path):
    """Every host stopped before the report play (any_errors_fatal): the callback's own report
    reads the same inputs as the report play's filter (gds_rdma_bench_results included) and judges
    with the report play's required areas and check variables (here from the inventory)."""
    inventory = {"all": {"hosts": {"bad": {}, "good": {}}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_report_metrics_dir": "",
        "gds_report_required_areas": ["rdma"],
        "gds_report_check_vars": "^(gds|site)_[a-z0-9_]*checks$"}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(FAILING_PLAY)
    rc, _, proc = run_playbook_json(tmp_path / "hosts.yml", tmp_path / "play.yml", timeout=600,
                                    env={"GDS_REPORTS_DIR": str(tmp_path / "reports"), "GDS_RUN_ID": "run-9"})
    assert rc != 0 and "the report play did not run" in proc.stderr, proc.stderr[-2000:]
    good = json.loads((tmp_path / "reports" / "run-9" / "good.json").read_text())
    names = [c["name"] for c in good["checks"]]
    assert good["rdma_bench"] == [{"nic": "mlx5_0", "port": 1, "test": "ib_write_bw", "memory": "host", "gbps": 390.0}]
    assert "site: rack" in names and "rdma: bench mlx5_0" in names
    assert "bench: measured" not in names and "rdma: measured" not in names and good["verdict"] == "PASS"


def test_host_scope_keeps_its_own_state_and_writes_only_host_files(cb, tmp_path, monkeypatch):
    """Runs that share a run id (nodes under Slurm, AWX slices: gds_report_scope host) neither read
    nor write one another's state, and the report of a run whose hosts all failed is their inputs
    files for the merge: no summary, no latest."""
    monkeypatch.setenv("GDS_REPORT_SCOPE", "host")
    shared = tmp_path / "reports" / ".state"
    shared.mkdir(parents=True)
    (shared / "run-1.json").write_text(json.dumps({"started": "2020-01-01T00:00:00+00:00",
                                                   "hosts": {"other": {"unreachable": True}}}))
    start(cb, Playbook("commission.yml", COMMISSION))
    assert os.path.dirname(cb.path) == str(shared) and cb.path != str(shared / "run-1.json")
    assert "other" not in cb.state["hosts"] and cb.state["started"] != "2020-01-01T00:00:00+00:00"
    cb.v2_runner_on_failed(Result("a", "pcie_acs : Disable ACS", {"msg": "bound to vfio-pci"}))
    cb.v2_playbook_on_stats(Stats({"a": 1}))
    run = tmp_path / "reports" / "run-1"
    assert sorted(os.listdir(run)) == ["a.inputs.json", "a.json", "a.prom"]
    assert not (tmp_path / "reports" / "latest").exists()
    assert json.loads((shared / "run-1.json").read_text())["hosts"] == {"other": {"unreachable": True}}
    from ansible_collections.gds.commission.plugins.module_utils.fleet.merge import merge_run
    broke = merge_run(str(tmp_path / "reports"), "run-1")["summary"]["hosts"]["a"]["checks"][-1]
    assert broke["name"] == "host: play completed" and "Disable ACS" in broke["actual"]


def test_the_runs_last_lines_are_its_verdict_and_where_its_report_is():
    commission = {"run_dir": "/r/run-1", "not_pass": ["b"],
                  "summary": {"counts": {"PASS": 1, "FAIL": 1, "ERROR": 0, "UNREACHABLE": 0}, "hosts": {"a": {}, "b": {}}}}
    assert callback.closing_lines(commission) == [
        "gds_commission: PASS 1, FAIL 1, ERROR 0, UNREACHABLE 0; not PASS: b",
        "gds_commission: report: /r/run-1/report.html"]
    check = dict(commission, summary=dict(commission["summary"], check_mode=True))
    assert "check mode: measures nothing, not made latest" in callback.closing_lines(check)[0]
    drift = {"run_dir": "/r/d-1", "drifted": ["h%d" % i for i in range(25)], "drift": {}}
    assert callback.closing_lines(drift) == ["gds_commission: drifted or not checked: %s and 5 more"
                                             % ", ".join("h%d" % i for i in range(20)),
                                             "gds_commission: drift: /r/d-1/report.html (/r/d-1/drift.json)"]
    assert callback.closing_lines({"run_dir": "/r/x", "drifted": [], "drift": {}})[0].endswith(": none")
    host_scope = {"run_dir": "/r/s", "inputs": ["a.inputs.json"], "summary": {"counts": {"PASS": 1}, "hosts": {"a": {}}}}
    assert callback.closing_lines(host_scope) == ["gds_commission: host files: /r/s/*.inputs.json (gds-merge makes the report)"]


def test_the_last_lines_follow_the_recap_even_when_the_report_play_wrote_the_report(cb, tmp_path):
    lines = []
    cb._display = type("D", (), {"display": lambda s, text, **kw: lines.append(text), "warning": lambda s, t: None})()
    start(cb, Playbook("commission.yml", COMMISSION))
    cb.v2_runner_on_ok(Result("a", "Write the report", {"changed": False, "run_dir": "/r/run-1", "not_pass": [],
                                                        "summary": {"counts": {"PASS": 1}, "hosts": {"a": {}}}},
                              action="gds.commission.gds_report"))
    cb.v2_playbook_on_stats(Stats({}))
    assert lines[-2:] == ["gds_commission: PASS 1; not PASS: none", "gds_commission: report: /r/run-1/report.html"]
