"""roles/gds_common: every role the tune playbook checks starts with the one shared preamble that
runs its own validate entry point, unless the tune playbook's first play checked it already."""
import os
import sys

import pytest
import simtree
import yaml
from conftest import COLLECTION, run_playbook_json, task_results


def tune_roles():
    with open(os.path.join(COLLECTION, "roles", "gds_tune", "vars", "main.yml")) as handle:
        return yaml.safe_load(handle)["__gds_tune_roles"]


def role_tasks(role, name="main.yml"):
    with open(os.path.join(COLLECTION, "roles", role, "tasks", name)) as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("role", tune_roles())
def test_each_checked_role_starts_with_the_shared_preamble_naming_itself(role):
    tasks = role_tasks(role)
    preamble = [t for t in tasks if "ansible.builtin.import_role" in t]
    assert len(preamble) == 1, "%s: no gds_common preamble in tasks/main.yml" % role
    # (gds_common's own arguments are the literals here: no argument-spec task per host for them)
    assert preamble[0]["ansible.builtin.import_role"] == {"name": "gds.commission.gds_common", "tasks_from": "validate_role",
                                                           "rolespec_validate": False}
    assert preamble[0]["vars"]["gds_common_role"] == role and set(preamble[0]["vars"]) <= {"gds_common_role", "gds_common_facts"}
    # first: before the role reads or changes anything
    assert tasks.index(preamble[0]) == 0
    # and no copy of it of the role's own: neither its validate nor the check that gds_facts ran
    assert not [t for t in tasks if t.get("ansible.builtin.include_tasks") == "validate.yml"]
    assert not [t for t in tasks if "ansible.builtin.assert" in t and "gds_facts_checks" in str(t)]


STEP_ROLES = [r for r in tune_roles() if r != "gds_reboot"]  # gds_tune's steps (gds_reboot: tune.yml's reboot plays)


@pytest.mark.parametrize("role", STEP_ROLES)
def test_main_is_the_preamble_then_the_steps_that_gds_tune_runs(role):
    """One body of work per role: main.yml is the preamble and steps.yml; gds_tune, after
    validate.yml's play checked the variables and its first step read the facts, runs steps.yml
    alone, without argument-spec checks per host (each is a task per host and role)."""
    tasks = role_tasks(role)
    assert len(tasks) == 2 and tasks[1]["ansible.builtin.import_tasks"] == "steps.yml", tasks
    with open(os.path.join(COLLECTION, "roles", role, "meta", "argument_specs.yml")) as handle:
        specs = yaml.safe_load(handle)["argument_specs"]
    assert specs["steps"] == specs["main"] == specs["validate"]
    steps = {t["ansible.builtin.import_role"]["name"]: t["ansible.builtin.import_role"] for t in role_tasks("gds_tune")}
    assert steps["gds.commission." + role] == {"name": "gds.commission." + role, "tasks_from": "steps",
                                               "rolespec_validate": False}
    assert list(steps) == ["gds.commission." + r for r in STEP_ROLES]


VALIDATE_VARS = {"gds_facts", "gds_pcie_acs", "gds_rdma", "gds_netfs", "gds_raid", "gds_cufile", "gds_rdma_bench", "gds_slurm"}


@pytest.mark.parametrize("role", sorted(set(tune_roles()) | {"gds_rdma_bench", "gds_slurm"}))
def test_each_validate_entry_point_is_one_task(role):
    """The rules live in Python beside the module's (plugins/filter/gds_validate.py names each role's
    validator); validate.yml only hands the role's variables over, through gds_common."""
    tasks = role_tasks(role, "validate.yml")
    if role in VALIDATE_VARS:
        assert len(tasks) == 1
        assert tasks[0]["ansible.builtin.import_role"] == {"name": "gds.commission.gds_common", "tasks_from": "validate_vars",
                                                           "rolespec_validate": False}
        assert tasks[0]["vars"] == {"gds_common_role": role}  # its variables' pattern: ROLE_VARIABLES
    else:  # nothing a spec cannot say: no task (its argument specs are checked when it is included)
        assert tasks == []


def test_every_validator_is_called_by_its_role():
    from ansible_collections.gds.commission.plugins.filter.gds_validate import ROLE_VARIABLES
    assert set(ROLE_VARIABLES) == VALIDATE_VARS


PLAY = """
- name: Run roles alone
  hosts: all
  gather_facts: false
  tasks:
    - name: Discover the topology
      gds.commission.gds_topology:
        sysfs_root: "{{ gds_root }}/sys"
        procfs_root: "{{ gds_root }}/proc"
    - name: Audit the network mounts
      ansible.builtin.include_role:
        name: gds.commission.gds_netfs
      when: inventory_hostname is search('netfs')
    - name: Write cufile.json
      ansible.builtin.include_role:
        name: gds.commission.gds_cufile
      when: inventory_hostname is search('cufile')
    - name: Reboot where needed
      ansible.builtin.include_role:
        name: gds.commission.gds_reboot
      when: inventory_hostname is search('reboot')
"""
CHECKED = {"gds_tune_validated": {"checked_roles": ["gds_netfs", "gds_cufile", "gds_reboot"]}}
BAD_MAP = {"gds_netfs_gpu_map": {"/mnt/nfs/ib0/data/0": "0,1"}}
BAD_KEYS = {"gds_cufile_extra_keys": ["properties..x"]}


def test_a_role_run_alone_checks_its_variables_and_not_after_the_tune_playbook_did(tmp_path):
    hosts = {"netfs-alone": BAD_MAP, "netfs-checked": dict(BAD_MAP, **CHECKED), "cufile-alone": BAD_KEYS,
             "reboot-alone": {}, "reboot-checked": CHECKED}
    inventory = {"all": {"hosts": {}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_live": False}}}
    for host, hostvars in hosts.items():
        root = simtree.build("dgx-a100", str(tmp_path / "sim" / host))
        inventory["all"]["hosts"][host] = dict(hostvars, gds_root=root)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(PLAY)
    _, data, _ = run_playbook_json(tmp_path / "hosts.yml", tmp_path / "play.yml")
    preamble, failed = {}, {}
    for name, host, res in task_results(data):
        if name.startswith("Check the role variables of "):
            preamble[host] = (name, bool(res.get("skipped")))
        if res.get("failed") and host not in failed:
            failed[host] = (name, str(res.get("msg")))
    # run alone: the role's own validate fails the bad value before the role does anything
    assert failed["netfs-alone"][0].endswith("Check the variables of gds_netfs") and "gds_netfs_gpu_map" in failed["netfs-alone"][1], failed
    assert failed["cufile-alone"][0].endswith("Check the variables of gds_cufile") and "properties..x" in failed["cufile-alone"][1]
    assert preamble["reboot-alone"] == ("Check the role variables of gds_reboot", False) and "reboot-alone" not in failed
    # checked by the tune playbook's first play (gds_tune_validated.checked_roles): skipped
    assert preamble["netfs-checked"] == ("Check the role variables of gds_netfs", True)
    assert preamble["reboot-checked"] == ("Check the role variables of gds_reboot", True)


ALONE = """
- name: Run gds_common and the tuning roles without gds_facts
  hosts: all
  gather_facts: false
  tasks:
    - name: Discover the topology, but not through gds_facts
      gds.commission.gds_topology:
        sysfs_root: "{{ gds_root }}/sys"
        procfs_root: "{{ gds_root }}/proc"
      when: inventory_hostname is search('cached')
    - name: Run gds_common itself
      ansible.builtin.include_role:
        name: gds.commission.gds_common
      when: inventory_hostname == 'common'
    - name: Run its variable check from a playbook
      ansible.builtin.include_role:
        name: gds.commission.gds_common
        tasks_from: validate_vars
      vars:
        gds_common_role: gds_netfs
      when: inventory_hostname == 'common-vars'
    - name: Run a tuning role
      ansible.builtin.include_role:
        name: "gds.commission.{{ inventory_hostname.split('-')[0] }}"
      when: inventory_hostname is search('-')
"""


def test_gds_common_owns_the_facts_check_and_refuses_to_run_by_itself(tmp_path):
    """The tuning roles decide from facts gds_facts read in this run (gds_facts_checks), never from a
    fact cache or a bare gds_topology run: gds_common checks that for each of them. Run by itself,
    gds_common refuses, as prometheus-community's internal _common role does."""
    hosts = ["common", "common-vars", "gds_pcie_acs-cached", "gds_iommu-none", "gds_driver-cached", "gds_rdma-none",
             "gds_raid-cached", "gds_raid-off"]
    inventory = {"all": {"hosts": {}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_live": False}}}
    for host in hosts:
        root = simtree.build("dgx-a100", str(tmp_path / "sim" / host))
        inventory["all"]["hosts"][host] = {"gds_root": root, "gds_raid_enabled": host != "gds_raid-off"}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(ALONE)
    _, data, _ = run_playbook_json(tmp_path / "hosts.yml", tmp_path / "play.yml")
    failed = {}
    for name, host, res in task_results(data):
        if res.get("failed") and host not in failed:
            failed[host] = (name, str(res.get("msg")))
    for host in ("common", "common-vars"):
        assert "gds_common is an internal role" in failed[host][1], failed
    for host, facts in (("gds_pcie_acs-cached", "ansible_facts['gds_topology'] and ansible_facts['gds_platform']"),
                        ("gds_iommu-none", "ansible_facts['gds_platform']"),
                        ("gds_driver-cached", "ansible_facts['gds_topology'] and ansible_facts['gds_platform']"),
                        ("gds_rdma-none", "ansible_facts['gds_topology']"), ("gds_raid-cached", "ansible_facts['gds_topology']")):
        role = host.split("-")[0]
        assert failed[host] == ("gds.commission.gds_common : Check the facts were read in this run for %s" % role,
                                "%s decides from %s, which gds_facts has not read in this run: run the gds_facts role first"
                                % (role, facts)), failed
    # gds_raid with gds_raid_enabled false reads no facts: it records that it planned nothing
    assert "gds_raid-off" not in failed, failed
