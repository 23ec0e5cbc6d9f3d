"""The gds_raid role through ansible-playbook on simulated nodes: its validate entry point
refuses bad names and paths before anything runs, and the role records its checks as
gds_raid_checks (from the module; never appended to a shared gds_checks).

One run covers every case (each host one case): a first play is the tune playbook's pre-check
(the role's `validate` entry point), a second runs gds_facts and nvme_raid."""
import json
import os
import subprocess
import sys

import pytest
import simtree
import yaml

from test_gds_raid import BAD_OPTIONS, GOOD_OPTIONS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)

PLAYBOOK = """
- name: Check the variables first, as the tune playbook does
  hosts: all
  gather_facts: false
  tasks:
    - name: Check the nvme_raid variables
      ansible.builtin.include_role:
        name: gds.commission.gds_raid
        tasks_from: validate

- name: Plan the arrays
  hosts: all
  gather_facts: false
  roles:
    - gds.commission.gds_facts
    - gds.commission.gds_raid
  tasks:
    - name: Recorded
      ansible.builtin.debug:
        msg:
          raid: "{{ gds_raid_checks | default(none) }}"
          shared: "{{ gds_checks | default(none) }}"
          arrays: "{{ gds_raid_arrays | default(none) }}"
"""

BAD = {"bad-%d" % i: ({"gds_raid_" + option: value}, "gds_raid_" + option, value)
       for i, (option, value) in enumerate(BAD_OPTIONS)}
BAD.update({
    "bad-chunk": ({"gds_raid_chunk_kb": 100}, "gds_raid_chunk_kb", 100),
    "bad-verdict": ({"gds_raid_refused_verdict": "PASS"}, "gds_raid_refused_verdict", "WARN, FAIL"),
    "bad-mkfs-type": ({"gds_raid_mkfs_options": "-m 0"}, "gds_raid_mkfs_options", "list"),
})
GOOD_VALUES = {"good-%d" % i: {"gds_raid_" + option: value} for i, (option, value) in enumerate(GOOD_OPTIONS)}
NODES = {
    "a100": ("dgx-a100", {}),
    "a100-fail": ("dgx-a100", {"gds_raid_refused_verdict": "FAIL"}),
    "h100": ("hgx-h100", {}),
    "off": ("hgx-h100", {"gds_raid_enabled": False}),
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nvme_raid")
    inventory = {"all": {"hosts": {}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_live": False}}}
    empty = tmp / "empty"
    empty.mkdir()
    for host, (hostvars, _, _) in BAD.items():
        inventory["all"]["hosts"][host] = dict(hostvars, gds_root=str(empty))
    for host, hostvars in GOOD_VALUES.items():
        # only the pre-check: a tree without sysfs stops them at gds_facts, after validate passed
        inventory["all"]["hosts"][host] = dict(hostvars, gds_root=str(empty))
    roots = {}
    for host, (fixture, hostvars) in NODES.items():
        roots[host] = simtree.build(fixture, str(tmp / "sim" / host))
        inventory["all"]["hosts"][host] = dict(hostvars, gds_root=roots[host])
    (tmp / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp / "play.yml").write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_CACHE_PLUGIN="memory", ANSIBLE_FORKS="8", ANSIBLE_DEPRECATION_WARNINGS="false",
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(tmp / "hosts.yml"), str(tmp / "play.yml")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    try:
        data = json.loads(proc.stdout[proc.stdout.index("{"):])
    except ValueError:
        raise AssertionError("no JSON from ansible-playbook (rc=%d)\n%s\n%s" % (proc.returncode, proc.stdout[-3000:],
                                                                               proc.stderr[-3000:]))
    results = {h: {"failed": None, "tasks": [], "changed": [], "recorded": None} for h in inventory["all"]["hosts"]}
    for play in data["plays"]:
        for task in play["tasks"]:
            for host, res in task["hosts"].items():
                results[host]["tasks"].append(task["task"]["name"])
                if res.get("failed") and results[host]["failed"] is None:
                    results[host]["failed"] = {"task": task["task"]["name"], "msg": str(res.get("msg"))}
                if res.get("changed"):
                    results[host]["changed"].append(task["task"]["name"])
                if task["task"]["name"] == "Recorded":
                    results[host]["recorded"] = res["msg"]
    return results, roots


@pytest.mark.parametrize("host", sorted(BAD))
def test_bad_values_are_refused_by_the_pre_check_naming_the_variable(run, host):
    results, _ = run
    _, variable, value = BAD[host]
    failed = results[host]["failed"]
    assert failed, results[host]
    shown = value[-1] if isinstance(value, list) and value else value
    assert variable in failed["msg"] and str(shown) in failed["msg"], failed
    # refused in the pre-check play: the module never ran, nothing planned or changed
    assert not any("Plan the md RAID0 arrays" in t for t in results[host]["tasks"])
    assert results[host]["changed"] == []


@pytest.mark.parametrize("host", sorted(GOOD_VALUES))
def test_good_values_pass_the_pre_check(run, host):
    results, _ = run
    failed = results[host]["failed"]
    assert failed is None or "validate" not in failed["task"] and "Check gds_raid" not in failed["task"], failed


def checks_of(results, host):
    recorded = results[host]["recorded"]
    assert recorded is not None, results[host]["failed"]
    assert recorded["shared"] is None  # never the shared list
    return {c["name"]: c for c in recorded["raid"]}


def test_refused_regrouping_is_recorded_with_the_refused_verdict(run):
    results, roots = run
    warn, fail = checks_of(results, "a100"), checks_of(results, "a100-fail")
    assert (warn["raid: plan"]["verdict"], warn["raid: plan"]["actual"]) == ("WARN", "refused")
    assert fail["raid: plan"]["verdict"] == "FAIL"
    assert "allow_destroy is false (role variable gds_raid_allow_destroy)" in warn["raid: plan"]["detail"]
    assert results["a100"]["recorded"]["arrays"][0]["mount"] == roots["a100"] + "/raid"


def test_planned_arrays_on_a_simulated_node(run):
    results, roots = run
    checks = checks_of(results, "h100")
    assert (checks["raid: plan"]["verdict"], checks["raid: plan"]["actual"]) == ("SKIP", "planned (simulated node)")
    assert [a["mount"] for a in results["h100"]["recorded"]["arrays"]] == [
        roots["h100"] + "/raid%d" % i for i in range(1, 5)]
    assert all(os.path.isdir(a["mount"]) for a in results["h100"]["recorded"]["arrays"])


def test_disabled_role_records_that_it_is_off(run):
    results, roots = run
    checks = checks_of(results, "off")
    assert list(checks) == ["raid: plan"] and checks["raid: plan"]["actual"] == "disabled"
    assert results["off"]["recorded"]["arrays"] == []
    assert not os.path.exists(os.path.join(roots["off"], "raid1"))


