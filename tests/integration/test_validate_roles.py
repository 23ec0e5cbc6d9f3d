"""The action gds_validate_roles: the tune and drift playbooks' first play checks every tuning role's
variables in one task per host, as each role's `validate` entry point does when it is included (the
argument specs, then the role's rules), with the role's defaults beneath the host's variables."""
import glob
import os
import sys

import pytest
import yaml
from conftest import COLLECTION, run_playbook_json, task_results
from test_validate_vars import BAD

with open(os.path.join(COLLECTION, "roles", "gds_tune", "vars", "main.yml")) as _handle:
    TUNE_ROLES = yaml.safe_load(_handle)["__gds_tune_roles"]

PLAY = """
- name: Check the variables
  hosts: all
  gather_facts: false
  tasks:
    - name: Check the variables of each role
      gds.commission.gds_validate_roles:
        roles: "{{ check_roles | default(tune_roles) }}"
"""
# the rules' cases of the tuning roles (the others are not in tune.yml's first play)
CASES = [case for case in BAD if case[0] in TUNE_ROLES]


def run(tmp_path, hosts):
    inventory = {"all": {"hosts": hosts, "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                                  "tune_roles": TUNE_ROLES}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(PLAY)
    _, data, _ = run_playbook_json(tmp_path / "hosts.yml", tmp_path / "play.yml")
    return {host: res for name, host, res in task_results(data) if name == "Check the variables of each role"}


def test_each_roles_rules_and_specs_fail_the_host_naming_role_variable_and_value(tmp_path):
    hosts = {"good": {}}
    for index, (role, name, value, _) in enumerate(CASES):
        hosts["rule%02d" % index] = {name: value}
    # what only the argument specs say: a boolean, a choice, and a choice through a templated default
    hosts.update({"spec-bool": {"gds_raid_enabled": "maybe"}, "spec-choice": {"gds_iommu_mode": "sideways"},
                  "spec-default": {"gds_mode": "bogus"}, "spec-template": {"gds_cufile_extra_keys": "{{ no_such_variable }}"}})
    results = run(tmp_path, hosts)
    assert not results["good"].get("failed"), results["good"]
    assert results["good"]["checked_roles"] == TUNE_ROLES
    for index, (role, name, value, needle) in enumerate(CASES):
        res = results["rule%02d" % index]
        assert res.get("failed") and "checked_roles" not in res, (role, name, value)
        # the rule's words, or the argument specs' where they refuse it first (Ansible's messages:
        # "argument 'gds_rdma_port_rate_gbps' is of type str ...", "gds_facts_expect.disks. Supported ...",
        # "Elements value for option 'gds_netfs_mounts' ...")
        assert any(p.startswith(role + ": ") and name in p and (needle.strip("'") in p or "'%s'" % name in p)
                   for p in res["problems"]), (role, name, res["problems"])
    [problem] = results["spec-bool"]["problems"]
    assert problem.startswith("gds_raid: argument 'gds_raid_enabled' is of type str and we were unable to convert to bool: "
                              "The value 'maybe' is not a valid boolean."), problem
    assert [p for p in results["spec-choice"]["problems"] if "gds_iommu_mode" in p and "sideways" in p and p.startswith("gds_iommu: ")]
    # gds_driver_mode's default is "{{ gds_mode | default('nvfs') }}": templated with the host's gds_mode
    assert [p for p in results["spec-default"]["problems"] if p.startswith("gds_driver: ") and "gds_driver_mode" in p and "bogus" in p]
    assert results["spec-template"]["problems"] == [
        "gds_cufile: gds_cufile_extra_keys: cannot be templated: 'no_such_variable' is undefined"]


def test_a_role_it_cannot_check_fails_the_task_naming_it(tmp_path):
    results = run(tmp_path, {"unknown": {"check_roles": ["gds_pcie_acs", "no_such_role"]}, "text": {"check_roles": "gds_pcie_acs"},
                             "no-validate": {"check_roles": ["gds_report"]}, "path": {"check_roles": ["../roles/pcie_acs"]}})
    assert results["unknown"]["failed"] and "roles/no_such_role/meta/argument_specs.yml" in results["unknown"]["msg"]
    assert results["text"]["failed"] and "roles must be a non-empty list of role names, got 'gds_pcie_acs'" in results["text"]["msg"]
    assert results["no-validate"]["problems"] == ["gds_report: roles/gds_report/meta/argument_specs.yml has no entry point 'validate'"]
    assert results["path"]["problems"] == ["../roles/pcie_acs: not a role name of this collection (a short name such as gds_pcie_acs)"]


def test_the_tuning_roles_have_no_public_variable_above_the_inventory():
    """The action reads a role's defaults beneath the host's variables; a public variable in the
    role's vars/main.yml (which wins over the inventory inside the role) would be checked with the
    wrong value there."""
    for role in TUNE_ROLES:
        for path in glob.glob(os.path.join(COLLECTION, "roles", role, "vars", "*.yml")):
            with open(path) as handle:
                names = list(yaml.safe_load(handle) or {})
            assert all(name.startswith("__") for name in names), (path, names)


@pytest.mark.parametrize("role", TUNE_ROLES)
def test_every_tuning_role_has_the_entry_point_the_action_reads(role):
    with open(os.path.join(COLLECTION, "roles", role, "meta", "argument_specs.yml")) as handle:
        specs = yaml.safe_load(handle)["argument_specs"]
    assert specs["validate"] == specs["main"]
