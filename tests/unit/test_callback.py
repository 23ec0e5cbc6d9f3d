"""The gds_commission callback: run start across playbooks, and the report when every host failed."""
import importlib.util
import json
import os

import pytest

from conftest import ROOT

spec = importlib.util.spec_from_file_location(
    "gds_commission_callback", os.path.join(ROOT, "plugins", "callback", "gds_commission.py"))
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
        self._file_name, self.plays = name, plays

    def get_plays(self):
        return self.plays


class Result(object):
    def __init__(self, host, task, result, action="ansible.builtin.set_fact"):
        self._host, self._task, self._result = Named(host), Named(task, action=action, check_mode=False), result


class Stats(object):
    def __init__(self, failures):
        self.failures = failures
        self.processed = dict.fromkeys(failures, 1)

    def summarize(self, host):
        return {"failures": self.failures.get(host, 0), "unreachable": 0}


COMMISSION = [Play(["gds_facts", "pcie_acs"]), Play(["gds_bench"]), Play(["gds_report"])]


@pytest.fixture
def cb(tmp_path, monkeypatch):
    monkeypatch.setenv("GDS_REPORTS_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("GDS_RUN_ID", "run-1")
    monkeypatch.delenv("GDS_RUN_STATE", raising=False)
    return callback.CallbackModule()


def test_a_run_starts_with_its_first_playbook(cb, tmp_path):
    cb.v2_playbook_on_start(Playbook("bench.yml", [Play(["gds_bench"])]))
    cb.state["started"] = "2026-01-01T00:00:00+00:00"  # as if bench.yml had run an hour
    cb._save()
    cb.v2_playbook_on_start(Playbook("report.yml", [Play(["gds_report"])]))
    assert cb.state["started"] == "2026-01-01T00:00:00+00:00"
    # a second invocation with the same run id continues that run
    again = callback.CallbackModule()
    again.v2_playbook_on_start(Playbook("report.yml", [Play(["gds_report"])]))
    assert again.state["started"] == "2026-01-01T00:00:00+00:00"


def test_every_host_failed_still_gets_the_report(cb, tmp_path):
    cb.v2_playbook_on_start(Playbook("commission.yml", COMMISSION))
    checks = [{"name": "facts: gpus", "verdict": "PASS", "expected": 8, "actual": 8}]
    cb.v2_runner_on_ok(Result("a", "Record", {"ansible_facts": {"gds_facts_checks": checks}}))
    cb.v2_runner_on_failed(Result("a", "pcie_acs : Disable ACS", {"msg": "devices are bound to vfio-pci: 0000:3b:00.0"}))
    cb.v2_runner_on_failed(Result("b", "cufile : Validate", {"msg": "MODULE FAILURE", "module_stderr": "bad override"}))
    cb.v2_playbook_on_stats(Stats({"a": 1, "b": 1}))
    run = tmp_path / "reports" / "run-1"
    assert sorted(os.listdir(run)) == ["a.json", "a.prom", "b.json", "b.prom", "junit.xml", "report.html", "summary.json"]
    assert os.readlink(tmp_path / "reports" / "latest") == "run-1"
    summ = json.loads((run / "summary.json").read_text())
    assert summ["counts"]["ERROR"] == 2
    a = {c["name"]: c for c in summ["hosts"]["a"]["checks"]}
    assert a["facts: gpus"]["verdict"] == "PASS"  # what it recorded before it broke
    assert "Disable ACS" in a["host: play completed"]["actual"] and "vfio-pci" in a["host: play completed"]["detail"]
    b = summ["hosts"]["b"]["checks"][-1]
    assert b["verdict"] == "ERROR" and "bad override" in b["detail"]


def test_drift_run_where_every_host_failed(cb, tmp_path):
    cb.v2_playbook_on_start(Playbook("drift.yml", [Play(["pcie_acs"]), Play(["gds_report"], {"gds_report_mode": "drift"})]))
    cb.v2_runner_on_failed(Result("a", "pcie_acs : Check", {"msg": "bad BDF"}))
    cb.v2_playbook_on_stats(Stats({"a": 1}))
    drift = json.loads((tmp_path / "reports" / "run-1" / "drift.json").read_text())
    assert drift["hosts"]["a"]["drifted"] is None and "bad BDF" in drift["hosts"]["a"]["detail"]


def test_no_second_report_when_the_report_play_ran(cb, tmp_path):
    cb.v2_playbook_on_start(Playbook("commission.yml", COMMISSION))
    cb.v2_runner_on_ok(Result("a", "Write the report", {"changed": False}, action="gds_report"))
    cb.v2_playbook_on_stats(Stats({}))
    assert not (tmp_path / "reports" / "run-1").exists()


def test_no_report_from_a_playbook_without_one(cb, tmp_path):
    cb.v2_playbook_on_start(Playbook("tune.yml", COMMISSION[:1]))
    cb.v2_runner_on_failed(Result("a", "x", {"msg": "y"}))
    cb.v2_playbook_on_stats(Stats({"a": 1}))
    assert not (tmp_path / "reports" / "run-1").exists()
