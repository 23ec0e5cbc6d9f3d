"""The gds_rdma role through the real tune playbook on simulated nodes: variables checked before
anything changes, peer memory persisted once (idempotent), drift in check mode, pairing and port
verdicts from the profile keys, SKIP on a node without RDMA devices."""
import os
import sys

import pytest
import simtree
import yaml
from conftest import run_playbook_json, task_results

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SHOW = """
- name: Tune
  ansible.builtin.import_playbook: {tune}

- name: Show what every host recorded
  hosts: all
  gather_facts: false
  tasks:
    - name: Recorded
      ansible.builtin.debug:
        msg: "{{{{ gds_rdma_checks.checks if gds_rdma_checks is defined else none }}}}"
      tags: [always]
"""
RDMA_TASK = "Put GPU peer memory in place and check the RDMA NICs"
PROFILE = {"gds_rdma_nic_link_max": "PIX", "gds_rdma_port_rate_gbps": 400}
HOSTS = {
    "mix": ("rdma-mix", PROFILE),
    "vm": ("cloud-vm", PROFILE),
    # the role's defaults (no profile): pairing reported, not judged; any rate
    "defaults": ("rdma-mix", {}),
    "bad-rate": ("rdma-mix", {"gds_rdma_port_rate_gbps": -100}),
    "bad-rate-type": ("rdma-mix", {"gds_rdma_port_rate_gbps": "fast"}),
    "bad-peermem": ("rdma-mix", {"gds_rdma_peermem": "mlx"}),
    "bad-link": ("rdma-mix", {"gds_rdma_nic_link_max": "PCI"}),
    "bad-dir": ("rdma-mix", {"gds_rdma_modules_load_dir": "etc/modules-load.d"}),
}


def _play(tmp, check=False):
    _, data, _ = run_playbook_json(tmp / "hosts.yml", tmp / "show.yml",
                                   ["--tags", "facts,gds_rdma"] + (["--check", "--diff"] if check else []),
                                   env={"GDS_REPORTS_DIR": str(tmp / "reports")})
    out = {host: {"failed": None, "changed": [], "checks": None, "rdma": None} for host in HOSTS}
    for name, host, res in task_results(data):
        if res.get("failed") and out[host]["failed"] is None:
            out[host]["failed"] = {"task": name, "msg": str(res.get("msg"))}
        if res.get("changed"):
            out[host]["changed"].append(name)
        if name.endswith(RDMA_TASK):
            out[host]["rdma"] = res
        if name == "Recorded" and res.get("msg"):
            out[host]["checks"] = {c["name"]: c for c in res["msg"]}
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rdma-role")
    inventory = {"all": {"hosts": {}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_live": False}}}
    roots = {}
    for host, (fixture, hostvars) in HOSTS.items():
        roots[host] = simtree.build(fixture, str(tmp / "sim" / host))
        inventory["all"]["hosts"][host] = dict(hostvars, gds_root=roots[host])
    (tmp / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp / "show.yml").write_text(SHOW.format(tune=os.path.join(ROOT, "playbooks", "tune.yml")))
    first_check = _play(tmp, check=True)
    first = _play(tmp)
    second = _play(tmp)
    check = _play(tmp, check=True)
    return {"first_check": first_check, "first": first, "second": second, "check": check, "roots": roots}


@pytest.mark.parametrize("host, needle", [
    ("bad-rate", "gds_rdma_port_rate_gbps must be null or a positive number"),
    ("bad-rate-type", "gds_rdma_port_rate_gbps"),
    ("bad-peermem", "gds_rdma_peermem"),
    ("bad-link", "gds_rdma_nic_link_max must be null or one of PIX, PXB, PHB, NODE, SYS, got PCI"),
    ("bad-dir", "gds_rdma_modules_load_dir (etc/modules-load.d)"),
])
def test_bad_variables_fail_before_anything_changes(runs, host, needle):
    failed = runs["first"][host]["failed"]
    assert failed and needle in failed["msg"], runs["first"][host]
    assert runs["first"][host]["changed"] == []
    assert not os.path.exists(os.path.join(runs["roots"][host], "etc", "modules-load.d"))


def test_peermem_persisted_once_and_check_mode_reports_drift(runs):
    conf = os.path.join(runs["roots"]["mix"], "etc", "modules-load.d", "nvidia_peermem.conf")
    before = runs["first_check"]["mix"]["rdma"]
    assert before["changed"] and conf in [d["setting"] for d in before["drift"]]
    assert RDMA_TASK in " ".join(runs["first"]["mix"]["changed"])
    with open(conf) as handle:
        assert "nvidia_peermem" in handle.read().split()
    assert not [t for t in runs["second"]["mix"]["changed"] if RDMA_TASK in t]
    drift = {d["setting"]: d for d in runs["check"]["mix"]["rdma"]["drift"]}
    assert conf not in drift
    assert drift["rdma port mlx5_4/2"]["actual"] == "ACTIVE LinkUp 200 Gb/s"
    assert drift["rdma port mlx5_5/1"]["expected"] == "ACTIVE LinkUp 400 Gb/s"


def test_profile_keys_decide_pairing_and_port_verdicts(runs):
    checks = runs["first"]["mix"]["checks"]
    assert checks["rdma: GPU0 NIC pairing"]["verdict"] == "PASS"
    assert checks["rdma: GPU3 NIC pairing"]["verdict"] == "FAIL" and "mlx5_4" in checks["rdma: GPU3 NIC pairing"]["detail"]
    assert checks["rdma: port mlx5_2/1"]["verdict"] == "FAIL"  # RoCE at 100 Gb/s, profile 400
    assert checks["rdma: port mlx5_0/1"]["verdict"] == "PASS"
    # a simulated node cannot load the module: persisted, loads at the next boot
    assert checks["rdma: GPU peer memory"]["verdict"] == "WARN"


def test_role_defaults_report_pairing_without_judging_it(runs):
    checks = runs["first"]["defaults"]["checks"]
    assert runs["first"]["defaults"]["failed"] is None
    assert checks["rdma: GPU3 NIC pairing"]["verdict"] == "PASS"
    assert checks["rdma: port mlx5_4/2"]["verdict"] == "PASS"
    assert checks["rdma: port mlx5_5/1"]["verdict"] == "FAIL"  # down is down, whatever the profile


def test_node_without_rdma_devices_skips(runs):
    checks = runs["first"]["vm"]["checks"]
    assert checks and {c["verdict"] for c in checks.values()} == {"SKIP"}
    assert not os.path.exists(os.path.join(runs["roots"]["vm"], "etc", "modules-load.d", "nvidia_peermem.conf"))
