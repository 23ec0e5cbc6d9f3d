"""The edges of a run (issue: fail closed, round 5): a run that judged no host is not green and
moves no `latest`; a check-mode commission FAILs nothing it did not run and never becomes
`latest`; a host in a platform group without a profile is ERROR naming the known ones; report
settings are each host's own (or the strictest of all), never one host's for the others."""
import json
import os
import sys

import pytest
import simtree
import yaml

from ansible_collections.gds.commission.plugins.module_utils.fleet import merge as gds_merge
from ansible_collections.gds.commission.plugins.module_utils.fleet.report import build_report, publish_run
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import topology_checks
from conftest import COLLECTION, ROOT, run_playbook_json

STARTED, FINISHED = "2026-11-26T03:00:00+00:00", "2026-11-26T03:20:00+00:00"


def reports_with_latest(tmp_path):
    """A reports directory whose latest points at an earlier run."""
    reports = tmp_path / "reports"
    (reports / "earlier").mkdir(parents=True)
    (reports / "earlier" / "summary.json").write_text("{}")
    os.symlink("earlier", str(reports / "latest"))
    return reports


def run(tmp_path, inventory, playbook, *args):
    reports = reports_with_latest(tmp_path)
    rc, data, proc = run_playbook_json(inventory, os.path.join(ROOT, "playbooks", playbook), list(args),
                                       env={"GDS_REPORTS_DIR": str(reports)})
    return rc, proc, reports


def run_dirs(reports):
    return sorted(n for n in os.listdir(str(reports)) if not n.startswith(".") and n not in ("latest", "earlier", "history"))


# --------------------------------------------------------------------------------------------
# No host judged
# --------------------------------------------------------------------------------------------
@pytest.mark.integration  # runs ansible-playbook
@pytest.mark.parametrize("playbook,args", [("drift.yml", ["--check"]), ("commission.yml", []), ("report.yml", [])])
@pytest.mark.parametrize("inventory", ["missing", "empty-groups"])
def test_a_run_that_targets_no_host_fails_and_moves_no_latest(tmp_path, playbook, args, inventory):
    path = tmp_path / "mysite"  # a mistyped path: Ansible warns and runs with the implicit localhost
    if inventory == "empty-groups":
        path = tmp_path / "hosts.yml"
        path.write_text(yaml.safe_dump({"all": {"children": {"dgx_a100": {"hosts": None}, "gpu": {}}}}))
    rc, proc, reports = run(tmp_path, path, playbook, *args)
    assert rc != 0, proc.stdout[-3000:]
    assert "no host to judge" in proc.stdout
    assert "no host was judged" in proc.stderr
    assert run_dirs(reports) == [] and os.readlink(str(reports / "latest")) == "earlier"


# --------------------------------------------------------------------------------------------
# A check-mode commission
# --------------------------------------------------------------------------------------------
@pytest.mark.integration  # runs ansible-playbook
def test_a_check_mode_commission_fails_nothing_it_did_not_run_and_is_never_latest(tmp_path):
    root = simtree.build("hgx-h100", str(tmp_path / "sim" / "node"))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"dgx_h100": {"hosts": {"node": {
        "gds_root": root, "gds_live": False, "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable}}}}}}))
    rc, proc, reports = run(tmp_path, inventory, "commission.yml", "--check")
    (run_id,) = run_dirs(reports)
    summary = json.loads((reports / run_id / "summary.json").read_text())
    checks = {c["name"]: c for c in summary["hosts"]["node"]["checks"]}
    assert summary["check_mode"] is True
    assert checks["bench: measured"]["verdict"] == "SKIP" and "check-mode" in checks["bench: measured"]["detail"]
    assert checks["bench: run"]["verdict"] == "SKIP"
    assert not [c for c in checks.values() if c["name"].startswith("bench") and c["verdict"] != "SKIP"]
    assert "Check mode" in (reports / run_id / "report.html").read_text()
    assert os.readlink(str(reports / "latest")) == "earlier", proc.stdout[-2000:]
    assert not os.path.exists(os.path.join(root, "var", "cache", "gds-commission"))  # nothing copied


def test_a_check_run_in_the_writer_skips_the_required_area_and_keeps_latest(tmp_path):
    reports = reports_with_latest(tmp_path)
    data = {"n": {"checks": [{"name": "acs: bridges", "verdict": "PASS", "expected": 0, "actual": 0}]}}
    run_dir, result, refused = publish_run(str(reports), "r1", STARTED, FINISHED, "commission", data, ["n"], {},
                                           required_areas=["bench"], check_run=True)
    assert refused == [] and os.readlink(str(reports / "latest")) == "earlier"
    assert result["summary"]["hosts"]["n"]["verdict"] == "PASS"
    publish_run(str(reports), "r2", STARTED, FINISHED, "commission", data, ["n"], {}, required_areas=["bench"])
    assert os.readlink(str(reports / "latest")) == "r2"
    checks = json.loads((reports / "r2" / "summary.json").read_text())["hosts"]["n"]["checks"]
    assert [c["verdict"] for c in checks if c["name"] == "bench: measured"] == ["FAIL"]


# --------------------------------------------------------------------------------------------
# A platform without a profile
# --------------------------------------------------------------------------------------------
TOPOLOGY = {"gpus": [{"index": 0}], "nvme": [], "nics": [], "groups": []}


def test_a_platform_group_without_a_profile_is_error_naming_the_known_ones():
    unknown = {"group": "dgx_h200", "known": ["dgx2", "dgx_a100", "dgx_h100"]}
    (check,) = [c for c in topology_checks(TOPOLOGY, None, None, unknown) if c["name"] == "topology: platform profile"]
    assert check["verdict"] == "ERROR" and "dgx_h200" in check["detail"] and "dgx_a100, dgx_h100" in check["detail"]
    (check,) = [c for c in topology_checks(TOPOLOGY, None, "dgx_h100") if c["name"] == "topology: platform profile"]
    assert check["verdict"] == "PASS"


def test_the_vars_plugin_marks_platform_like_groups_without_a_profile():
    sys.path.insert(0, os.path.join(COLLECTION, "plugins", "vars"))
    try:
        import gds_profiles
    finally:
        sys.path.pop(0)
    like = gds_profiles.PLATFORM_LIKE
    assert all(like.match(g) for g in ("dgx_h200", "hgx_b200", "gh200", "gb200", "DGX_B300", "dgx2"))
    assert not any(like.match(g) for g in ("gpu_nodes", "rack12", "simulated", "dgxfoo", "compute"))


def test_a_node_local_platform_without_a_profile_is_marked(tmp_path):
    import subprocess
    env = dict(os.environ, GDS_NODE_NAME="n1", GDS_NODE_PLATFORM="dgx_h200")
    out = json.loads(subprocess.run([sys.executable, os.path.join(ROOT, "inventory", "node-local", "node.py"), "--list"],
                                    env=env, capture_output=True, text=True, check=True).stdout)
    unknown = out["_meta"]["hostvars"]["n1"]["gds_platform_unknown"]
    assert unknown["group"] == "dgx_h200" and "dgx_h100" in unknown["known"]
    env["GDS_NODE_PLATFORM"] = "dgx_h100"
    out = json.loads(subprocess.run([sys.executable, os.path.join(ROOT, "inventory", "node-local", "node.py"), "--list"],
                                    env=env, capture_output=True, text=True, check=True).stdout)
    assert out["_meta"]["hostvars"]["n1"] == {}


# --------------------------------------------------------------------------------------------
# Report settings: each host's own, never one host's for the others
# --------------------------------------------------------------------------------------------
def bench_less():
    return {"checks": [{"name": "acs: bridges", "verdict": "PASS", "expected": 0, "actual": 0}]}


def test_required_areas_are_each_hosts_own():
    files, result = build_report("r1", STARTED, FINISHED, "commission", {"a": bench_less(), "b": bench_less()},
                                 ["a", "b"], {}, required_areas={"a": [], "b": ["bench"]})
    verdicts = {h: e["verdict"] for h, e in result["summary"]["hosts"].items()}
    assert verdicts == {"a": "PASS", "b": "FAIL"}


def test_a_merge_takes_no_hosts_settings_for_another(tmp_path):
    """A file of host 'a' (first by name) with required_areas [] no longer makes host 'b', with
    nothing measured, PASS; the counts are the largest any file asks for."""
    for host, areas, peers, keep in (("a", [], 1, 5), ("b", ["bench"], 4, 30)):
        files, dummy = gds_merge.host_scope_files("r1", STARTED, FINISHED, "commission", {host: bench_less()}, [host], {},
                                                  required_areas=areas, fleet_min_peers=peers, history_keep=keep)
        os.makedirs(str(tmp_path / "r1"), exist_ok=True)
        for name, text in files.items():
            (tmp_path / "r1" / name).write_text(text)
    result = gds_merge.merge_run(str(tmp_path), "r1", expected=["a", "b"])
    verdicts = {h: e["verdict"] for h, e in result["summary"]["hosts"].items()}
    assert verdicts == {"a": "PASS", "b": "FAIL"}
    assert any("fleet_min_peers" in n and "4" in n for n in result["notes"])
    assert any("history_keep" in n and "30" in n for n in result["notes"])


def test_a_merge_of_a_check_mode_run_is_never_latest(tmp_path):
    reports = reports_with_latest(tmp_path)
    files, dummy = gds_merge.host_scope_files("r1", STARTED, FINISHED, "commission", {"a": bench_less()}, ["a"], {},
                                              required_areas=["bench"], check_run=True)
    os.makedirs(str(reports / "r1"))
    for name, text in files.items():
        (reports / "r1" / name).write_text(text)
    result = gds_merge.merge_run(str(reports), "r1", expected=["a"])
    assert result["summary"]["hosts"]["a"]["verdict"] == "PASS"  # bench: measured SKIP, not FAIL
    assert os.readlink(str(reports / "latest")) == "earlier"


def test_gds_merge_without_the_hosts_is_never_green(tmp_path):
    """Three nodes, two of which wrote nothing: without --hosts or --nodes the merge sees one PASS
    node and cannot see the others, so it exits 2 saying so; with the hosts they are ERROR."""
    import subprocess
    measured = {"checks": [{"name": "bench: j: throughput_gib_s", "verdict": "PASS", "expected": ">= 1", "actual": 2}]}
    files, dummy = gds_merge.host_scope_files("r1", STARTED, FINISHED, "commission", {"a": measured}, ["a"], {},
                                              required_areas=["bench"])
    os.makedirs(str(tmp_path / "r1"))
    for name, text in files.items():
        (tmp_path / "r1" / name).write_text(text)
    merge = [sys.executable, os.path.join(ROOT, "scripts", "gds-merge"), "--run-id", "r1", "--reports-dir", str(tmp_path)]
    proc = subprocess.run(merge, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no --hosts or --nodes" in proc.stderr, proc.stderr
    assert subprocess.run(merge + ["--hosts-from-files"], capture_output=True, text=True, timeout=120).returncode == 0
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("a\nb\nc\n")
    proc = subprocess.run(merge + ["--hosts", str(hosts)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "b, c" in proc.stdout, proc.stdout
    assert proc.stdout.rstrip().endswith("report: %s/report.html" % (tmp_path / "r1"))


@pytest.mark.integration  # runs ansible-playbook
def test_the_push_report_holds_each_host_to_its_own_required_areas(tmp_path):
    """The report task runs once, on the first host: a required_areas [] in that host's inventory
    was every host's. Now a host that sets none is held to the play's value and the role's default."""
    checks = [{"name": "acs: bridges", "verdict": "PASS", "expected": 0, "actual": 0}]
    common = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_facts_checks": checks,
              "gds_report_metrics_dir": ""}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {
        "a": dict(common, gds_report_required_areas=[]), "b": dict(common)}}}))
    rc, proc, reports = run(tmp_path, inventory, "report.yml")
    (run_id,) = run_dirs(reports)
    summary = json.loads((reports / run_id / "summary.json").read_text())
    verdicts = {h: e["verdict"] for h, e in summary["hosts"].items()}
    assert verdicts == {"a": "PASS", "b": "FAIL"}, proc.stdout[-2000:]
    assert [c["name"] for c in summary["hosts"]["b"]["checks"] if c["verdict"] == "FAIL"] == ["bench: measured"]


def test_a_run_id_used_again_sets_the_earlier_runs_other_hosts_aside(tmp_path):
    """A second push run of the same name over fewer hosts: the first run's files of the hosts it
    lacks no longer sit beside its report; they are moved, not removed."""
    data = {h: bench_less() for h in ("a", "b", "c")}
    publish_run(str(tmp_path), "nightly", STARTED, FINISHED, "commission", data, ["a", "b", "c"], {})
    dummy, result, refused = publish_run(str(tmp_path), "nightly", STARTED, FINISHED, "commission",
                                         {"a": data["a"]}, ["a"], {})
    assert refused == [] and sorted(result["set_aside"]) == ["b.html", "b.json", "b.prom", "c.html", "c.json", "c.prom"]
    names = sorted(os.listdir(str(tmp_path / "nightly")))
    aside = [n for n in names if n.startswith(".earlier-")]
    assert [n for n in names if not n.startswith(".")] == ["a.html", "a.json", "a.prom", "junit.xml", "report.html", "summary.json"]
    assert len(aside) == 1 and sorted(os.listdir(str(tmp_path / "nightly" / aside[0]))) == [
        "b.html", "b.json", "b.prom", "c.html", "c.json", "c.prom"]
