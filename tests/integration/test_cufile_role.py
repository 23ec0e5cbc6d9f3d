"""The gds_cufile role through ansible-playbook on simulated roots: the vendor's alternatives layout,
a second run and check mode that change nothing, the checks recorded as gds_cufile_checks, and
the validate entry point naming a bad variable before anything changes."""
import json
import os
import subprocess
import sys

import pytest
import yaml

from test_cufile_vendor import ADMIN_BOTH, OURS, TOOLKIT, VENDOR, VENDOR_TEXT, follow, survivors, vendor_node
from ansible_collections.gds.commission.plugins.module_utils.tune.cufile import key_order, loads

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
PLAY = """
- name: Commission cufile.json
  hosts: all
  gather_facts: false
  tasks:
    - name: Validate
      ansible.builtin.include_role: {name: gds.commission.gds_cufile, tasks_from: validate}
    - name: Commission
      ansible.builtin.include_role: {name: gds.commission.gds_cufile}
    - name: Recorded
      ansible.builtin.debug: {msg: "{{ gds_cufile_checks.checks }}"}
"""
BAD = {
    "bad-mode": ({"gds_mode": "fast"}, "gds_cufile_mode", "nvfs, p2pdma, compat"),
    "bad-keys": ({"gds_cufile_extra_keys": ["properties.ok", "properties..x"]}, "gds_cufile_extra_keys",
                 "properties..x"),
    "bad-path": ({"gds_cufile_alternative_path": "etc/cufile.json"}, "gds_cufile_alternative_path",
                 "etc/cufile.json"),
    "bad-address": ({"gds_cufile_rdma_addresses": {"mlx5_0": "10.0.0.300", "mlx5_1": "10.0.0.3"}},
                    "gds_cufile_rdma_addresses", "10.0.0.300"),
    "bad-priority": ({"gds_cufile_alternative_priority": "high"}, "gds_cufile_alternative_priority", "int"),
}


def run(tmp_path, hosts, check=False):
    inventory = {"all": {"hosts": hosts, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_live": False}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CACHE_PLUGIN="memory",
               ANSIBLE_DEPRECATION_WARNINGS="false", GDS_REPORTS_DIR=str(tmp_path / "reports"),
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    cmd = [os.path.join(BIN, "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
           str(tmp_path / "play.yml")] + (["--check", "--diff"] if check else [])
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    try:
        data = json.loads(proc.stdout[proc.stdout.index("{"):])
    except ValueError:
        raise AssertionError("no JSON (rc=%d)\n%s\n%s" % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
    out = {host: {"failed": None, "changed": [], "checks": None, "drift": []} for host in hosts}
    for play in data["plays"]:
        for task in play["tasks"]:
            for host, res in task["hosts"].items():
                if res.get("failed") and out[host]["failed"] is None:
                    out[host]["failed"] = {"task": task["task"]["name"], "msg": str(res.get("msg"))}
                if res.get("changed"):
                    out[host]["changed"].append(task["task"]["name"])
                    out[host]["drift"].extend(res.get("drift") or [])
                if task["task"]["name"] == "Recorded":
                    out[host]["checks"] = res["msg"]
    return out


@pytest.fixture(scope="module")
def vendor_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cufile-role")
    root = vendor_node(tmp)
    hosts = {"vendor": {"gds_root": str(root), "gds_mode": "nvfs"}}
    hosts.update({name: dict(hostvars, gds_root=str(vendor_node(tmp / name)))
                  for name, (hostvars, _, _) in BAD.items()})
    check = run(tmp, {"vendor": hosts["vendor"]}, check=True)
    untouched = follow(root, "/etc/cufile.json")[-1] == TOOLKIT and not os.path.exists(str(root) + OURS)
    first = run(tmp, hosts)
    second = run(tmp, {"vendor": hosts["vendor"]})
    return {"root": root, "check": check["vendor"], "untouched": untouched, "first": first,
            "second": second["vendor"]}


def test_role_keeps_the_vendor_file_and_selects_ours(vendor_runs):
    root, first = vendor_runs["root"], vendor_runs["first"]["vendor"]
    assert first["failed"] is None, first
    assert (root / TOOLKIT.lstrip("/")).read_text() == VENDOR_TEXT
    assert follow(root, "/etc/cufile.json") == ["/etc/cufile.json", "/etc/alternatives/cufile.json", OURS]
    assert (root / "var/lib/dpkg/alternatives/cufile.json").read_text() == ADMIN_BOTH
    config = loads((root / OURS.lstrip("/")).read_text())
    assert survivors(VENDOR, config) == key_order(VENDOR)
    assert config["properties"]["allow_compat_mode"] is False
    checks = {c["name"]: c for c in first["checks"]}
    assert checks["cufile: configuration"]["actual"] == "written"
    assert checks["cufile: allow_compat_mode"]["verdict"] == "PASS"


def test_role_second_run_changes_nothing(vendor_runs):
    second = vendor_runs["second"]
    assert second["failed"] is None and second["changed"] == [], second
    assert {c["name"]: c["actual"] for c in second["checks"]}["cufile: configuration"] == "in place"


def test_role_check_mode_reports_per_key_and_changes_nothing(vendor_runs):
    check = vendor_runs["check"]
    assert vendor_runs["untouched"]
    settings = [d["setting"].rsplit(": ", 1)[1] for d in check["drift"]]
    assert settings == ["properties.allow_compat_mode", "alternative"], check["drift"]
    assert all(d["setting"].startswith(str(vendor_runs["root"]) + "/etc/cufile.json: ") for d in check["drift"])


@pytest.mark.parametrize("host", sorted(BAD))
def test_validate_names_the_bad_variable_before_any_change(vendor_runs, host):
    _, variable, value = BAD[host]
    failed = vendor_runs["first"][host]["failed"]
    assert failed and variable in failed["msg"] and value in failed["msg"], failed
    assert failed["task"] not in ("Merge the managed keys into cufile.json",)
