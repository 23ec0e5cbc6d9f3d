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
    assert preamble[0]["ansible.builtin.import_role"] == {"name": "gds.commission.gds_common", "tasks_from": "validate_role"}
    assert preamble[0]["vars"] == {"gds_common_role": role}
    # first, or right after the check that gds_facts ran: before the role reads or changes anything
    assert tasks.index(preamble[0]) <= 1 and all("ansible.builtin.assert" in t for t in tasks[:tasks.index(preamble[0])])
    # and no copy of it of the role's own
    assert not [t for t in tasks if t.get("ansible.builtin.include_tasks") == "validate.yml"]


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
        name: gds.commission.cufile
      when: inventory_hostname is search('cufile')
    - name: Reboot where needed
      ansible.builtin.include_role:
        name: gds.commission.gds_reboot
      when: inventory_hostname is search('reboot')
"""
CHECKED = {"gds_checked_roles": ["gds_netfs", "cufile", "gds_reboot"]}
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
    assert failed["netfs-alone"][0] == "gds.commission.gds_netfs : Check gds_netfs_gpu_map", failed
    assert failed["cufile-alone"][0] == "gds.commission.cufile : Check gds_cufile_extra_keys" and "properties..x" in failed["cufile-alone"][1]
    assert preamble["reboot-alone"] == ("Check the role variables of gds_reboot", False) and "reboot-alone" not in failed
    # checked by the tune playbook's first play (gds_checked_roles): skipped
    assert preamble["netfs-checked"] == ("Check the role variables of gds_netfs", True)
    assert preamble["reboot-checked"] == ("Check the role variables of gds_reboot", True)
