"""The gds_report role through ansible-playbook on a small fleet: platforms and tolerances from
each host's own variables, the textfile on every node, the history across runs, nothing
reported as changed."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import run_playbook_json, task_results

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
PLAY = """
- name: Report
  hosts: all
  gather_facts: false
  roles:
    - role: gds.commission.gds_report
"""


def checks(read):
    return [{"name": "bench: raid1 seq_read: throughput_gib_s", "verdict": "PASS", "expected": ">= 7 GiB/s",
             "actual": read, "low": 7.0, "reference": 10.0, "unit": "GiB/s"}]


def fleet(tmp_path, reads, extra=None):
    hosts = {}
    for host, (platform, read) in reads.items():
        hosts[host] = {"gds_root": str(tmp_path / "nodes" / host), "gds_platform_profile": platform,
                       "gds_bench_checks": checks(read)}
        hosts[host].update((extra or {}).get(host) or {})
    return hosts


def run(tmp_path, hosts, run_id):
    inventory = {"all": {"hosts": hosts, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_live": False,
        "gds_report_fail": False}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(PLAY)
    rc, data, proc = run_playbook_json(tmp_path / "hosts.yml", tmp_path / "play.yml", timeout=600,
                                       env={"GDS_REPORTS_DIR": str(tmp_path / "reports"), "GDS_RUN_ID": run_id})
    assert rc == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    changed = [(name, host) for name, host, res in task_results(data) if res.get("changed")]
    return changed


def host_doc(tmp_path, run_id, host):
    return json.loads((tmp_path / "reports" / run_id / (host + ".json")).read_text())


def fleet_check(doc):
    return next(c for c in doc["checks"] if c["name"] == "fleet: raid1 seq_read: throughput_gib_s")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("fleet-role")
    reads = {"a1": ("dgx_a100", 10.0), "a2": ("dgx_a100", 10.1), "a3": ("dgx_a100", 9.9),
             "slow": ("dgx_a100", 8.5), "loose": ("dgx_a100", 8.5), "h1": ("dgx_h100", 20.0)}
    # "loose" trails as much as "slow" but its own variables allow 20 %
    hosts = fleet(tmp_path, reads, {"loose": {"gds_report_fleet_tolerance": 0.20}})
    first = run(tmp_path, hosts, "run-1")
    reads["a1"] = ("dgx_a100", 7.5)
    second = run(tmp_path, fleet(tmp_path, reads, {"loose": {"gds_report_fleet_tolerance": 0.20}}), "run-2")
    return tmp_path, first, second


def test_role_groups_by_each_hosts_profile_and_tolerance(two_runs):
    tmp_path, first, _ = two_runs
    assert fleet_check(host_doc(tmp_path, "run-1", "slow"))["verdict"] == "WARN"
    assert fleet_check(host_doc(tmp_path, "run-1", "loose"))["verdict"] == "PASS"
    assert fleet_check(host_doc(tmp_path, "run-1", "a1"))["verdict"] == "PASS"
    h1 = host_doc(tmp_path, "run-1", "h1")
    assert h1["profile"] == "dgx_h100" and not [c for c in h1["checks"] if c["name"].startswith("fleet: ")]
    assert first == []  # the report and the textfiles are the run's output: nothing changed


def test_role_puts_the_textfile_on_every_node(two_runs):
    tmp_path, _, _ = two_runs
    for host in ("a1", "a2", "a3", "slow", "loose", "h1"):
        path = tmp_path / "nodes" / host / "var" / "lib" / "prometheus" / "node-exporter" / "gds_commission.prom"
        text = path.read_text()
        assert text == (tmp_path / "reports" / "run-2" / (host + ".prom")).read_text()
        assert 'gds_commission_verdict{verdict="PASS"} 1' in text
    # a1 lost 25 % since run-1 (the last file written is run-2's)
    a1 = (tmp_path / "nodes" / "a1" / "var/lib/prometheus/node-exporter/gds_commission.prom").read_text()
    assert 'gds_commission_area_verdict{area="history",verdict="WARN"} 1' in a1
    if shutil.which("promtool"):
        proc = subprocess.run(["promtool", "check", "metrics"], input=a1, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_role_keeps_history_and_warns_on_a_loss_since_the_last_pass(two_runs):
    tmp_path, _, second = two_runs
    check = next(c for c in host_doc(tmp_path, "run-2", "a1")["checks"]
                 if c["name"] == "history: raid1 seq_read: throughput_gib_s")
    assert check["verdict"] == "WARN" and check["previous_run"] == "run-1"
    assert "10 GiB/s then, 7.5 GiB/s now" in check["detail"]
    runs = json.loads((tmp_path / "reports" / "history" / "a1.json").read_text())["runs"]
    assert [r["run_id"] for r in runs] == ["run-1", "run-2"]
    assert second == []
