"""A drift run never changes a node, whatever the variables: drift.yml on a live node
(gds_live: true) that may reboot (gds_reboot_ok: true) and whose IOMMU mode and ACS unit drifted.

Every command that changes a node is a stub on PATH that records its call; the node's connection
records each command and is unreachable for a reboot (tests/plugins/connection/recording.py). The
run must call none of them, never attempt the reboot, change no file and still report the drift;
or, started in a way that cannot be proven read-only, stop before anything runs on the node.
However it is started: --check on the builtin linear and free strategies, variables that say
otherwise, --tags, --start-at-task, without --check (refused), a site's own playbook that imports
the roles into a check-mode play. CI runs this file on the newest and the oldest ansible-core."""
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


@pytest.fixture(scope="module")
def tuned_node(tmp_path_factory):
    """An H100 node tuned once as a simulated node (each case drifts a copy of it)."""
    tmp_path = tmp_path_factory.mktemp("tuned")
    root = simtree.build("hgx-h100", str(tmp_path / "sim" / "node"))
    rc, _, proc = run(tmp_path, inventory(tmp_path, root, live=False), "tune.yml")
    assert rc == 0, proc.stdout[-3000:]
    return root


def drifted_node(tmp_path, tuned_node, remove_unit):
    """A copy of the tuned node, drifted: another IOMMU mode in the GRUB drop-in (the running mode
    already differs from the wanted one: a reboot would apply it), nvidia-fs unloaded, and the ACS
    boot-time unit gone or not enabled."""
    root = str(tmp_path / "sim" / "node")
    shutil.copytree(tuned_node, root, symlinks=True)
    with open(os.path.join(root, "etc/default/grub.d/99-gds-iommu.cfg"), "a") as handle:
        handle.write("GRUB_CMDLINE_LINUX=\"${GRUB_CMDLINE_LINUX} intel_iommu=off\"\n")
    shutil.rmtree(os.path.join(root, "sys", "module", "nvidia_fs"))
    if remove_unit:
        os.remove(os.path.join(root, "etc/systemd/system/gds-acs-disable.service"))
    return root


def run(tmp_path, hosts, playbook, extra_args=(), env=None):
    plugins = os.path.join(ROOT, "tests", "plugins", "connection")
    playbook = playbook if os.path.isabs(str(playbook)) else os.path.join(ROOT, "playbooks", playbook)
    return run_playbook_json(hosts, playbook, list(extra_args),
                             env=dict({"ANSIBLE_CONNECTION_PLUGINS": plugins,
                                       "GDS_REPORTS_DIR": str(tmp_path / "reports")}, **(env or {})))


# A site's own playbook that imports the roles into a play in check mode, run without --check:
# ansible_check_mode is false there, and the roles must still change nothing.
SITE_PLAYBOOK = """
- name: A site's drift check
  hosts: all
  gather_facts: false
  check_mode: true
  roles:
    - role: gds.commission.gds_tune

- name: Its report
  hosts: all
  gather_facts: false
  vars:
    gds_report_mode: drift
  roles:
    - role: gds.commission.gds_report
"""

ALL_ITEMS = ("iommu", "nvidia-fs", "unit")
# name: (the ACS unit removed, the command line, the environment, the drift items it must still
# report: None when the run must stop without a report, naming why)
CASES = {
    "unit-removed": (True, ["--check"], {}, ALL_ITEMS),
    "unit-not-enabled": (False, ["--check"], {}, ALL_ITEMS),
    # what a user may set, by mistake or on purpose, on a nightly command line
    "variables-say-act": (False, ["--check", "-e", json.dumps({
        "gds_drift_check": False, "ansible_check_mode": False, "ansible_diff_mode": False,
        "gds_reboot_batch": 1})], {}, ALL_ITEMS),
    # a site's ansible.cfg or environment with another builtin strategy
    "free-strategy": (True, ["--check"], {"ANSIBLE_STRATEGY": "free"}, ALL_ITEMS),
    "linear-strategy": (True, ["--check"], {"ANSIBLE_STRATEGY": "linear"}, ALL_ITEMS),
    "tags": (True, ["--check", "--tags", "pcie_acs,iommu"], {}, ("iommu", "unit")),
    # no --check: refused before a node is read
    "no-check": (True, [], {}, None),
    "no-check-variables-say-check": (True, ["-e", "ansible_check_mode=true"], {}, None),
    # past the refusal and past the facts that say the mode: every step that could change the node
    # fails on the missing fact
    "start-at-task-no-check": (True, ["--start-at-task", "Load nvidia-fs now and keep it loaded across reboots"], {}, None),
    "start-at-task": (True, ["--check", "--start-at-task", "gds.commission.gds_pcie_acs : *"],
                      {}, None),
    "site-playbook-without-check": (True, [], {"SITE": "1"}, ALL_ITEMS),
    "site-playbook-free": (True, [], {"SITE": "1", "ANSIBLE_STRATEGY": "free"}, ALL_ITEMS),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_drift_run_calls_nothing_that_changes_the_node(tmp_path, tuned_node, case):
    remove_unit, extra_args, case_env, reported = CASES[case]
    root = drifted_node(tmp_path, tuned_node, remove_unit)
    before = simtree.file_hashes(root)
    bin_dir, calls = stub_bin(tmp_path)
    connection_log = tmp_path / "connection.log"
    connection_log.write_text("")
    hosts = inventory(tmp_path, root, live=True, gds_reboot_ok=True)
    playbook = "drift.yml"
    env = {k: v for k, v in case_env.items() if k != "SITE"}
    if "SITE" in case_env:
        playbook = tmp_path / "site.yml"
        playbook.write_text(SITE_PLAYBOOK)
    rc, data, proc = run(tmp_path, hosts, playbook, extra_args,
                         env=dict(env, PATH=str(bin_dir) + os.pathsep + os.path.dirname(sys.executable)
                                  + os.pathsep + os.environ.get("PATH", ""),
                                  GDS_TEST_CONNECTION_LOG=str(connection_log)))
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
    results = list(task_results(data))
    if reported is None:
        # stopped: non-zero, and no task that could change the node ran anywhere
        assert rc != 0
        assert problems == [], "\n".join(problems)
        ran = [name for name, _, res in results if not res.get("skipped") and not res.get("failed")
               and name.split(" : ")[0] in TUNING_ROLES]
        assert ran == [] or case.startswith("start-at-task"), ran
        if case.startswith("no-check"):  # refused: no report, latest left alone
            assert not (tmp_path / "reports" / "latest").exists(), "a refused run moved latest"
            refusal = [res.get("msg") for name, _, res in results if res.get("failed")]
            assert refusal and "add --check" in refusal[0], refusal
            assert len(data["plays"]) == 1, [p["play"]["name"] for p in data["plays"]]
        else:  # the first step that needs them failed on the facts the run never read (the mode among them)
            failed = [(name, str(res.get("msg"))) for name, _, res in results if res.get("failed")]
            assert failed and any(fact in failed[0][1] for fact in ("gds_check_mode", "gds_platform")), failed
        return
    # (the report play fails the run on purpose when a host drifted)
    failed = [(name, res.get("msg")) for name, _, res in results
              if res.get("failed") and name != "gds.commission.gds_report : Fail when a host drifted"]
    if failed:
        problems.append("failed: %s" % failed)
    assert problems == [], "\n".join(problems)
    # the drift is still seen and reported: the run exits non-zero
    assert rc != 0
    drift = json.loads((tmp_path / "reports" / "latest" / "drift.json").read_text())
    settings = [item["setting"] for item in drift["hosts"]["node"]["items"]]
    found = {"iommu": any(s.endswith("99-gds-iommu.cfg") for s in settings),
             "nvidia-fs": "gds_driver : Report that nvidia-fs is not loaded" in settings,
             "unit": any("gds-acs-disable.service" in s or "boot-time unit" in s for s in settings)}
    assert sorted(k for k, v in found.items() if v) == sorted(reported), settings


TUNING_ROLES = ("gds.commission.gds_pcie_acs", "gds.commission.gds_iommu", "gds.commission.gds_driver",
                "gds.commission.gds_rdma", "gds.commission.gds_netfs", "gds.commission.gds_raid",
                "gds.commission.gds_cufile", "gds.commission.gds_reboot")
