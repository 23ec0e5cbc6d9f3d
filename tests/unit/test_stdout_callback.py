"""The stdout callback gds_default prints what ansible.builtin.default prints, line for line, and
the repository's ansible.cfg uses it."""
import configparser
import os
import re
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT

# every kind of result the default callback prints: ok and changed lines, facts, a skip, a
# warning, a debug message, a loop, an include, a delegation, a verbose result, a failure
PLAYBOOK = """
- name: Every kind of result
  hosts: all
  gather_facts: false
  tasks:
    - name: Ok with facts
      ansible.builtin.set_fact:
        recorded: [{name: "x: y", verdict: PASS}]
    - name: Changed
      ansible.builtin.command: "true"
      changed_when: true
    - name: Not changed
      ansible.builtin.command: "true"
      changed_when: false
    - name: Skipped
      ansible.builtin.debug: {msg: never}
      when: false
    - name: A module's warning and deprecation
      warns: {}
    - name: Debug message
      ansible.builtin.debug: {msg: "the recorded checks: {{ recorded }}"}
    - name: Loop
      ansible.builtin.set_fact:
        item_{{ item }}: "{{ item }}"
      loop: [1, 2]
    - name: Include
      ansible.builtin.include_tasks: included.yml
    - name: Delegated
      ansible.builtin.command: "true"
      changed_when: false
      delegate_to: localhost
    - name: Verbose always
      ansible.builtin.debug: {var: recorded}
    - name: Fails, ignored
      ansible.builtin.command: "false"
      ignore_errors: true
"""
WARNS = """#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule
module = AnsibleModule(argument_spec={})
module.warn("a warning of the module")
module.deprecate("a deprecation of the module", version="9.0.0", collection_name="gds.commission")
module.exit_json(changed=False)
"""


def _run(tmp_path, callback, verbosity):
    (tmp_path / "included.yml").write_text("- name: Inside\n  ansible.builtin.set_fact: {inside: 1}\n")
    (tmp_path / "library").mkdir(exist_ok=True)
    (tmp_path / "library" / "warns.py").write_text(WARNS)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"one": {}, "two": {}}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK=callback,
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORKS="1",
               GDS_REPORTS_DIR=str(tmp_path / "reports"))
    bin_dir = os.path.dirname(sys.executable)
    proc = subprocess.run([os.path.join(bin_dir, "ansible-playbook"), "-i", "hosts.yml", "play.yml"]
                          + (["-" + "v" * verbosity] if verbosity else []),
                          cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300)
    # a failed command prints its times: the one thing that differs between two runs
    times = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+|\d+:\d\d:\d\d\.\d+")
    return proc.returncode, [times.sub("TIME", line) for line in proc.stdout.splitlines() if not line.startswith("Using ")]


@pytest.mark.parametrize("verbosity", [0, 1])
def test_gds_default_prints_what_the_default_prints(tmp_path, verbosity):
    rc, default = _run(tmp_path, "ansible.builtin.default", verbosity)
    rc2, ours = _run(tmp_path, "gds.commission.gds_default", verbosity)
    assert rc == rc2 == 0
    for start in ("changed: [one]", "ok: [two]", "skipping: [one]", "[WARNING]: a warning of the module", "...ignoring"):
        assert [line for line in default if line.startswith(start)], start
    assert ours == default


def test_the_repositorys_ansible_cfg_uses_it():
    config = configparser.ConfigParser()
    config.read(os.path.join(ROOT, "ansible.cfg"))
    assert config["defaults"]["stdout_callback"] == "gds.commission.gds_default"
