"""The roles renamed after their variables (pcie_acs -> gds_pcie_acs, nvme_raid -> gds_raid,
cufile -> gds_cufile, iommu -> gds_iommu) keep their old names for the deprecation period: a
playbook that names the old role runs the new one, its variables still checked, with a note on
the console. Ansible routes no roles (meta/runtime.yml's plugin_routing is for plugins), so the old
names are roles of their own, written by make roles."""
import os
import sys

import pytest
import simtree
import yaml
from conftest import ROOT, run_playbook_json, task_results

PLAYBOOK = """
- name: Old role names, as a site's playbook of the last release wrote them
  hosts: all
  gather_facts: false
  tasks:
    - name: Check the raid variables through the old name
      ansible.builtin.include_role:
        name: gds.commission.nvme_raid
        tasks_from: validate

    - name: Read the node
      ansible.builtin.include_role:
        name: gds.commission.gds_facts

    - name: Plan the arrays through the old name
      ansible.builtin.include_role:
        name: gds.commission.nvme_raid

    - name: Recorded
      ansible.builtin.debug:
        msg: "{{ gds_raid_checks | default(none) }}"
"""


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("renamed")
    node = simtree.build("dgx-a100", str(tmp / "sim" / "good"))
    inventory = {"all": {"hosts": {"good": {"gds_root": node}, "bad": {"gds_root": node, "gds_raid_chunk_kb": 100}},
                         "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                  "gds_live": False}}}
    (tmp / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp / "play.yml").write_text(PLAYBOOK)
    rc, data, proc = run_playbook_json(tmp / "hosts.yml", tmp / "play.yml")
    return rc, data, proc


@pytest.mark.integration
def test_an_old_role_name_runs_the_new_role_and_says_so(played):
    rc, data, _ = played
    results = list(task_results(data))
    notes = [res["msg"] for name, host, res in results if name.endswith("Say that the role was renamed")]
    assert notes and all("gds.commission.nvme_raid is deprecated: use gds.commission.gds_raid" in n for n in notes)
    recorded = [res["msg"] for name, host, res in results if name == "Recorded" and host == "good"]
    assert recorded and recorded[0] and all(c["name"].startswith("raid: ") for c in recorded[0])
    ran = {name.split(" : ")[0] for name, host, _ in results if host == "good" and " : " in name}
    assert "gds.commission.gds_raid" in ran


@pytest.mark.integration
def test_an_old_role_name_still_checks_the_variables(played):
    rc, data, _ = played
    failed = [(name, res) for name, host, res in task_results(data) if host == "bad" and res.get("failed")]
    assert rc != 0 and failed
    assert "gds_raid_chunk_kb" in str(failed[0][1].get("msg")) and "100" in str(failed[0][1].get("msg"))


def test_each_old_name_is_a_role_written_from_the_new_ones_spec():
    from ansible_collections.gds.commission.plugins.module_utils import roles
    renamed = {spec.renamed_from: spec.name for spec in roles.SPECS if spec.renamed_from}
    assert renamed == {"pcie_acs": "gds_pcie_acs", "nvme_raid": "gds_raid", "cufile": "gds_cufile", "iommu": "gds_iommu"}
    base = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission", "roles")
    for old, new in renamed.items():
        old_specs = yaml.safe_load(open(os.path.join(base, old, "meta", "argument_specs.yml")))["argument_specs"]
        new_specs = yaml.safe_load(open(os.path.join(base, new, "meta", "argument_specs.yml")))["argument_specs"]
        assert set(old_specs) == set(new_specs)
        for entry in new_specs:
            assert old_specs[entry]["options"] == new_specs[entry]["options"]
            assert old_specs[entry]["short_description"].startswith("Deprecated: renamed gds.commission.%s" % new)
            assert os.path.exists(os.path.join(base, old, "tasks", entry + ".yml"))
