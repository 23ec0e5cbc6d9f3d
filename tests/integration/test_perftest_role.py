"""The gds_rdma_bench role through playbooks/rdma_bench.yml on simulated nodes: bad variable
values fail in validate naming the variable; a simulated node runs nothing and records SKIP rows.
One ansible-playbook run covers every case (one host each)."""
import os
import sys

import pytest
import simtree
import yaml
from conftest import COLLECTION, run_playbook_json, task_results

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(COLLECTION, "roles", "gds_rdma_bench")

SHOW = """
- name: Measure
  ansible.builtin.import_playbook: {playbook}

- name: Show what every host recorded
  hosts: all
  gather_facts: false
  tasks:
    - name: Recorded
      ansible.builtin.debug:
        msg:
          checks: "{{{{ gds_rdma_bench_checks | default(none) }}}}"
          results: "{{{{ gds_rdma_bench_results | default(none) }}}}"
"""

BAD = {
    "tests-string": ({"gds_rdma_bench_tests": "ib_write_bw"}, "gds_rdma_bench_tests must be YAML lists"),
    "tests-unknown": ({"gds_rdma_bench_tests": ["ib_send_bw"]}, "ib_send_bw"),
    "fraction-above-one": ({"gds_rdma_bench_bw_fraction": {400: 1.5}}, "gds_rdma_bench_bw_fraction must be a fraction"),
    "fraction-bad-rate": ({"gds_rdma_bench_bw_fraction": {"fast": 0.9}}, "gds_rdma_bench_bw_fraction must be a fraction"),
    "relative-dir": ({"gds_rdma_bench_perftest_dir": "opt/perftest/bin"},
                     "gds_rdma_bench_perftest_dir must be an absolute directory"),
    "dotdot-dir": ({"gds_rdma_bench_osu_dir": "/opt/../etc"}, "gds_rdma_bench_osu_dir must be an absolute directory"),
    "unknown-peer": ({"gds_rdma_bench_peer": "no-such-host"}, "gds_rdma_bench_peer (no-such-host) must be another host"),
    "low-port": ({"gds_rdma_bench_port_base": 80}, "gds_rdma_bench_port_base (80)"),
    "negative-floor": ({"gds_rdma_bench_min_gbps": -1}, "gds_rdma_bench_min_gbps (-1"),
}


@pytest.fixture(scope="module")
def role_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rdma_role")
    inventory = {"all": {"hosts": {}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_live": False}}}
    # a tree per host: gds_facts writes files under gds_root (its link baseline)
    inventory["all"]["hosts"]["good"] = {"gds_root": simtree.build("dgx-a100", str(tmp / "sim" / "good"))}
    for host, (hostvars, _) in BAD.items():
        inventory["all"]["hosts"][host] = dict(hostvars, gds_root=simtree.build("dgx-a100", str(tmp / "sim" / host)))
    (tmp / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp / "show.yml").write_text(SHOW.format(playbook=os.path.join(ROOT, "playbooks", "rdma_bench.yml")))
    rc, data, _ = run_playbook_json(tmp / "hosts.yml", tmp / "show.yml")
    results = {host: {"failed": None, "changed": [], "recorded": None} for host in inventory["all"]["hosts"]}
    for name, host, res in task_results(data):
        if res.get("failed") and results[host]["failed"] is None:
            results[host]["failed"] = {"task": name, "msg": str(res.get("msg"))}
        if res.get("changed"):
            results[host]["changed"].append(name)
        if name == "Recorded":
            results[host]["recorded"] = res["msg"]
    return rc, results


@pytest.mark.parametrize("host", sorted(BAD))
def test_bad_values_fail_in_validate_naming_the_variable(role_run, host):
    rc, results = role_run
    failed = results[host]["failed"]
    assert rc != 0 and failed, results[host]
    assert BAD[host][1] in failed["msg"], failed
    assert results[host]["recorded"] is None  # failed before anything ran


def pt_row_names(rows):
    from ansible_collections.gds.commission.plugins.module_utils.measure.perftest import row_name
    return [row_name(dict(r)) for r in rows]


def test_simulated_node_runs_nothing_and_records_skips(role_run):
    _, results = role_run
    good = results["good"]
    # gds_facts writes its first link baseline; the measurement itself changes nothing
    assert good["failed"] is None, good
    assert [t for t in good["changed"] if t.startswith("gds_rdma_bench")] == [], good
    rows, checks = good["recorded"]["results"], good["recorded"]["checks"]
    assert rows and {r["verdict"] for r in rows} == {"SKIP"}, rows
    assert not [r for r in rows if r["cmd"] or r["gbps"] is not None]
    # one reason, one check: the rows skipped on a simulated node fold into one (core/checks.fold_skips)
    assert len(checks) == 1 and checks[0]["name"] == "rdma: bench (%d checks)" % len(rows), checks
    assert checks[0]["verdict"] == "SKIP" and checks[0]["detail"] == "simulated node"
    assert sorted(checks[0]["covers"]) == sorted(pt_row_names(rows))
    # every NIC of the fixture is in the plan
    fixture = yaml.safe_load(open(os.path.join(ROOT, "tests", "fixtures", "dgx-a100.yml")))
    assert {r["nic"] for r in rows} == {n["rdma"] for n in fixture["nics"] if n.get("rdma")}


