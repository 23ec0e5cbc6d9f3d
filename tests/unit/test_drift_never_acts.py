"""A drift run never changes a node, whatever the variables: drift.yml on a live node
(gds_live: true) that may reboot (gds_reboot_ok: true) and whose IOMMU mode and ACS unit drifted.

Every command that changes a node is a stub on PATH that records its call; the node's connection
records each command and is unreachable for a reboot (tests/plugins/connection/recording.py). The
run must call none of them, never attempt the reboot, change no file and still report the drift."""
import json
import os
import shutil
import stat
import sys

import pytest
import simtree
import yaml
from conftest import COLLECTION, ROOT, run_playbook_json, task_results

# what a tuning or reboot step would run on a live node
NODE_CHANGERS = ("reboot", "shutdown", "systemctl", "update-grub", "update-initramfs", "dracut", "modprobe",
                 "mdadm", "setpci", "grub2-mkconfig", "grubby", "rmmod", "insmod")
# a stub answers as the tool would on a healthy node, so that a run which calls it goes on (and
# shows every other call too); systemctl show: a unit that is there and enabled
STUB = """#!/bin/sh
echo "$(basename "$0") $*" >> "{log}"
if [ "$(basename "$0")" = systemctl ] && [ "$1" = show ]; then
  printf 'Id=%s\\nLoadState=loaded\\nUnitFileState=enabled\\nActiveState=active\\n' "$2"
fi
exit 0
"""


def stub_bin(tmp_path):
    """A directory of recording stubs, and the file they record into."""
    bin_dir, log = tmp_path / "stub-bin", tmp_path / "stub-calls.log"
    bin_dir.mkdir()
    log.write_text("")
    for name in NODE_CHANGERS:
        path = bin_dir / name
        path.write_text(STUB.format(log=log))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir, log


def inventory(tmp_path, root, live, **extra):
    hostvars = dict({"gds_root": root, "gds_live": live, "ansible_connection": "recording",
                     "ansible_python_interpreter": sys.executable, "gds_platform_profile": "test"}, **extra)
    path = tmp_path / ("hosts-live.yml" if live else "hosts.yml")
    path.write_text(yaml.safe_dump({"all": {"hosts": {"node": hostvars}}}))
    return path


def drifted_node(tmp_path, remove_unit):
    """An H100 node tuned once as a simulated node, then drifted: another IOMMU mode in the GRUB
    drop-in (the running mode already differs from the wanted one: a reboot would apply it),
    nvidia-fs unloaded, and the ACS boot-time unit gone or not enabled."""
    root = simtree.build("hgx-h100", str(tmp_path / "sim" / "node"))
    rc, _, proc = run(tmp_path, inventory(tmp_path, root, live=False), "tune.yml")
    assert rc == 0, proc.stdout[-3000:]
    with open(os.path.join(root, "etc/default/grub.d/99-gds-iommu.cfg"), "a") as handle:
        handle.write("GRUB_CMDLINE_LINUX=\"${GRUB_CMDLINE_LINUX} intel_iommu=off\"\n")
    shutil.rmtree(os.path.join(root, "sys", "module", "nvidia_fs"))
    if remove_unit:
        os.remove(os.path.join(root, "etc/systemd/system/gds-acs-disable.service"))
    return root


def run(tmp_path, hosts, playbook, extra_args=(), env=None):
    plugins = os.path.join(ROOT, "tests", "plugins", "connection")
    return run_playbook_json(hosts, os.path.join(ROOT, "playbooks", playbook), list(extra_args),
                             env=dict({"ANSIBLE_CONNECTION_PLUGINS": plugins,
                                       "GDS_REPORTS_DIR": str(tmp_path / "reports")}, **(env or {})))


# (the ACS unit removed, what a user may set, by mistake or on purpose, on a nightly command line)
CASES = {
    "unit-removed": (True, []),
    "unit-not-enabled": (False, []),
    "variables-say-act": (False, ["-e", json.dumps({"gds_drift_check": False, "ansible_check_mode": False,
                                                    "ansible_diff_mode": False, "gds_reboot_batch": 1})]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_drift_run_calls_nothing_that_changes_the_node(tmp_path, case):
    remove_unit, extra_args = CASES[case]
    root = drifted_node(tmp_path, remove_unit)
    before = simtree.file_hashes(root)
    bin_dir, calls = stub_bin(tmp_path)
    connection_log = tmp_path / "connection.log"
    hosts = inventory(tmp_path, root, live=True, gds_reboot_ok=True)
    rc, data, proc = run(tmp_path, hosts, "drift.yml", extra_args,
                         env={"PATH": str(bin_dir) + os.pathsep + os.path.dirname(sys.executable)
                              + os.pathsep + os.environ.get("PATH", ""),
                              "GDS_TEST_CONNECTION_LOG": str(connection_log)})
    problems = []
    if calls.read_text():
        problems.append("called: %s" % calls.read_text())
    attempts = [line for line in connection_log.read_text().splitlines()
                if any(word in line for word in ("shutdown", "reboot", "boot_id"))]
    if attempts:
        problems.append("connection attempts to reboot: %s" % attempts)
    # the run's one output on a node: its drift textfile for node_exporter (a file of its own)
    metrics = "var/lib/prometheus/node-exporter/gds_commission_drift.prom"
    if {k: v for k, v in simtree.file_hashes(root).items() if k != metrics} != before:
        after = simtree.file_hashes(root)
        problems.append("files changed: %s" % sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k)))
    reboot_plays = [play["play"]["name"] for play in data["plays"] if "eboot" in play["play"]["name"]]
    if reboot_plays:
        problems.append("reboot plays ran: %s" % reboot_plays)
    # (the report play fails the run on purpose when a host drifted)
    failed = [(name, res.get("msg")) for name, _, res in task_results(data)
              if res.get("failed") and name != "gds.commission.gds_report : Fail when a host drifted"]
    if failed:
        problems.append("failed: %s" % failed)
    assert problems == [], "\n".join(problems)
    # the drift is still seen and reported: the run exits non-zero
    assert rc != 0
    drift = json.loads((tmp_path / "reports" / "latest" / "drift.json").read_text())
    settings = [item["setting"] for item in drift["hosts"]["node"]["items"]]
    assert any(s.endswith("99-gds-iommu.cfg") for s in settings), settings
    assert "gds_driver : Report that nvidia-fs is not loaded" in settings, settings
    unit = [s for s in settings if "gds-acs-disable.service" in s or "boot-time unit" in s]
    assert unit, settings


STRATEGY_PLAY = """
- name: A play in check mode
  hosts: all
  gather_facts: false
  check_mode: true
  strategy: gds.commission.gds_linear
  tasks:
    - name: A task that asks to leave check mode
      ansible.builtin.copy:
        dest: "{out}/written-on-the-node"
        content: "x"
        mode: "0644"
      check_mode: false
    - name: A task delegated to the controller may (the run's report)
      ansible.builtin.copy:
        dest: "{out}/written-on-the-controller"
        content: "x"
        mode: "0644"
      delegate_to: localhost
      check_mode: false
    - name: What ansible_check_mode says
      ansible.builtin.debug:
        msg: "{{{{ ansible_check_mode }}}}"
"""


def test_a_check_mode_play_keeps_every_task_in_check_mode(tmp_path):
    """plugins/strategy/gds_linear.py: a task's check_mode: false does not take it out of a
    check-mode play (except on the controller), and ansible_check_mode tells the truth."""
    (tmp_path / "play.yml").write_text(STRATEGY_PLAY.format(out=tmp_path))
    hosts = tmp_path / "hosts.yml"
    hosts.write_text(yaml.safe_dump({"all": {"hosts": {"node": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    rc, data, proc = run_playbook_json(hosts, tmp_path / "play.yml")
    assert rc == 0, proc.stdout[-2000:]
    assert not (tmp_path / "written-on-the-node").exists()
    assert (tmp_path / "written-on-the-controller").exists()
    said = [res["msg"] for name, _, res in task_results(data) if name == "What ansible_check_mode says"]
    assert said == [True]
