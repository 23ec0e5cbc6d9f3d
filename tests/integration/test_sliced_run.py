"""A run in slices, as AWX's job slicing runs it: each slice an ansible-playbook over part of the
inventory (--limit) with gds_report_scope=host and one gds_report_run_id, all writing one run
directory; then the merge playbook (gds.commission.merge). The merged report is the unsliced
run's: same hosts, verdicts, checks and HOST.json. A slice whose every host fails before the report
play still leaves its hosts' files (the gds_commission callback writes them)."""
import copy
import json
import os
import sys

import pytest
import yaml

from conftest import ROOT, run_playbook_json
from hostile import strict_json

PLAY = """
- name: Record
  hosts: all
  gather_facts: false
  tasks:
    - name: Record the benchmark figure
      ansible.builtin.set_fact:
        gds_bench_checks:
          - {name: "bench: raid1 seq_read: throughput_gib_s", verdict: PASS, expected: ">= 7 GiB/s",
             actual: "{{ read }}", low: 7.0, reference: 10.0, unit: GiB/s}
        gds_facts_checks: [{name: "topology: gpus", verdict: PASS, expected: 8, actual: 8}]
      when: read is defined
    - name: Break where the inventory says so
      ansible.builtin.fail:
        msg: broken on purpose
      when: broken | default(false)
- name: Report
  hosts: all
  gather_facts: false
  roles:
    - role: gds.commission.gds_report
"""
READS = {"a0": 10.0, "a1": 10.1, "a2": 9.9, "a3": 8.0, "h1": 20.0}
SLICES = ["a0,a1,bad", "a2,a3,h1", "lonely"]  # "lonely" fails alone: no report play runs in its slice


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sliced")
    hosts = dict((h, {"read": r, "gds_platform_profile": "dgx_h100" if h == "h1" else "dgx_a100"}) for h, r in READS.items())
    hosts["bad"] = {"read": 9.0, "broken": True, "gds_platform_profile": "dgx_a100"}
    hosts["lonely"] = {"broken": True}
    inventory = {"all": {"hosts": hosts, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_report_metrics_dir": "",
        "gds_report_fail": False}}}
    (tmp / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp / "play.yml").write_text(PLAY)
    out = {}
    rc, _, proc = run_playbook_json(tmp / "hosts.yml", tmp / "play.yml", timeout=600,
                                    env={"GDS_REPORTS_DIR": str(tmp / "push"), "GDS_RUN_ID": "nightly-1"})
    out["push"] = (rc, proc)
    for part in SLICES:
        # the run id as AWX gives it to every slice: an extra var (GDS_RUN_ID names another run here)
        rc, _, proc = run_playbook_json(tmp / "hosts.yml", tmp / "play.yml", timeout=600,
                                        extra_args=["--limit", part, "-e", "gds_report_scope=host",
                                                    "-e", "gds_report_run_id=nightly-1"],
                                        env={"GDS_REPORTS_DIR": str(tmp / "sliced"), "GDS_RUN_ID": "ignored"})
        out[part] = (rc, proc)
    rc, data, proc = run_playbook_json(tmp / "hosts.yml", os.path.join(ROOT, "playbooks", "merge.yml"), timeout=600,
                                       extra_args=["-e", "gds_merge_run_id=nightly-1"],
                                       env={"GDS_REPORTS_DIR": str(tmp / "sliced")})
    out["merge"] = (rc, proc)
    return tmp, out


def summary(path):
    doc = strict_json((path / "nightly-1" / "summary.json").read_bytes())
    for key in ("started", "finished"):
        doc.pop(key)
    return doc


def test_slices_write_host_files_only(runs):
    tmp, out = runs
    assert out["lonely"][0] != 0 and "the report play did not run" in out["lonely"][1].stderr
    names = sorted(os.listdir(str(tmp / "sliced" / "nightly-1")))
    for host in list(READS) + ["bad", "lonely"]:
        assert host + ".inputs.json" in names
    assert not (tmp / "sliced" / "ignored").exists()
    # each slice's own state, none shared
    assert len(os.listdir(str(tmp / "sliced" / ".state"))) == len(SLICES) + 1


def test_the_merged_slices_are_the_unsliced_run(runs):
    tmp, out = runs
    assert (tmp / "push" / "nightly-1" / "summary.json").exists(), out["push"][1].stdout[-2000:]
    merged, pushed = summary(tmp / "sliced"), summary(tmp / "push")
    assert merged == pushed
    assert {h: e["verdict"] for h, e in merged["hosts"].items()} == {
        "a0": "PASS", "a1": "PASS", "a2": "PASS", "a3": "PASS", "h1": "PASS", "bad": "ERROR", "lonely": "ERROR"}
    a3 = {c["name"]: c["verdict"] for c in merged["hosts"]["a3"]["checks"]}
    assert a3["fleet: raid1 seq_read: throughput_gib_s"] == "WARN"  # across slices: the slow one of its platform
    lonely = merged["hosts"]["lonely"]["checks"][-1]
    assert lonely["name"] == "host: play completed" and "Break where the inventory says so" in lonely["actual"]
    for host in READS:
        merged_doc = strict_json((tmp / "sliced" / "nightly-1" / (host + ".json")).read_bytes())
        assert merged_doc == strict_json((tmp / "push" / "nightly-1" / (host + ".json")).read_bytes()), host
    assert os.readlink(str(tmp / "sliced" / "latest")) == "nightly-1"
    assert json.loads((tmp / "sliced" / "history" / "a0.json").read_text())["runs"][0]["run_id"] == "nightly-1"


def test_the_merge_playbook_fails_naming_the_hosts_not_pass(runs):
    tmp, out = runs
    rc, proc = out["merge"]
    assert rc != 0 and "not PASS: bad, lonely" in proc.stdout, proc.stdout[-3000:]


@pytest.mark.parametrize("extra, expected", [(["-e", "awx_workflow_job_id=42"], "awx-42"),
                                             (["-e", "awx_workflow_job_id=42", "-e", "gds_report_run_id=nightly-3"], "nightly-3")])
def test_the_run_id_playbook_gives_one_id_to_the_workflows_later_jobs(tmp_path, extra, expected):
    """gds.commission.run_id, an AWX workflow's first node: its artifact (set_stats) is the run id
    of every slice and of the merge."""
    (tmp_path / "hosts.yml").write_text("all:\n  hosts: {}\n")
    rc, data, proc = run_playbook_json(tmp_path / "hosts.yml", os.path.join(ROOT, "playbooks", "run_id.yml"),
                                       extra_args=extra, env={"GDS_REPORTS_DIR": str(tmp_path / "r"),
                                                              "ANSIBLE_SHOW_CUSTOM_STATS": "true"})
    assert rc == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert data["global_custom_stats"] == {"gds_report_run_id": expected, "gds_merge_run_id": expected}
