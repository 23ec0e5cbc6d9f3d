"""gds_managed_file: the tuning roles remove a file of theirs, never an admin's file of the same
name, never through a link (plugins/module_utils/core/files.py, managed_file / remove_managed)."""
import os
import sys

import pytest
import simtree
import yaml
from conftest import ROOT, run_playbook_json, task_results

OURS = "# Managed by gds-commission (role pcie_acs): re-run the tune playbook to change it.\n[Unit]\n"
THEIRS = "# my own unit, written by hand\n[Unit]\n"


def test_removes_its_own_file(tmp_path, module_runner):
    path = tmp_path / "gds-acs-disable.service"
    path.write_text(OURS)
    rc, res = module_runner("gds_managed_file", {"path": str(path)}, check_mode=True)
    assert rc == 0 and res["changed"] and path.exists()
    rc, res = module_runner("gds_managed_file", {"path": str(path)})
    assert rc == 0 and res["changed"] and res["left"] is None and not path.exists()
    rc, res = module_runner("gds_managed_file", {"path": str(path)})
    assert rc == 0 and not res["changed"] and not res["present"]


def test_leaves_what_is_not_its_own(tmp_path, module_runner):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text(OURS)
    cases = {"theirs": lambda p: p.write_text(THEIRS),
             "link-to-ours": lambda p: p.symlink_to(elsewhere),
             "dangling-link": lambda p: p.symlink_to(tmp_path / "nowhere"),
             "fifo": lambda p: os.mkfifo(p),
             "directory": lambda p: (p.mkdir(), (p / "x").write_text(OURS))}
    for case, make in cases.items():
        path = tmp_path / case
        make(path)
        for check_mode in (True, False):
            rc, res = module_runner("gds_managed_file", {"path": str(path)}, check_mode=check_mode)
            assert rc == 0 and not res["changed"] and res["present"], (case, res)
            assert res["left"] and any(str(path) in w for w in res.get("warnings", [])), (case, res)
            assert os.path.lexists(path), case
    assert elsewhere.read_text() == OURS


def test_relative_path_is_refused(module_runner):
    rc, res = module_runner("gds_managed_file", {"path": "etc/x.conf"})
    assert rc != 0 and "etc/x.conf" in res["msg"]


def test_writes_and_removes_a_roles_files_in_one_run(tmp_path, module_runner):
    """files: each written when it differs (directories made, atomically), removed only when it
    is the product's; check mode touches nothing and names every difference as a drift item."""
    unit, dropin, theirs = tmp_path / "etc" / "unit.service", tmp_path / "grub.d" / "99-x.cfg", tmp_path / "theirs.cfg"
    dropin.parent.mkdir()
    dropin.write_text(OURS)
    theirs.write_text(THEIRS)
    files = [{"path": str(unit), "content": OURS + "ExecStart=/bin/true\n"},
             {"path": str(dropin), "state": "absent"}, {"path": str(theirs), "state": "absent"}]
    rc, res = module_runner("gds_managed_file", {"files": files}, check_mode=True)
    assert rc == 0 and res["changed"] and not unit.exists() and dropin.exists(), res
    assert res["drift"] == [{"setting": str(unit), "expected": files[0]["content"], "actual": "absent"},
                            {"setting": str(dropin), "expected": "absent", "actual": OURS}]
    assert res["files"][str(theirs)]["left"] and any(str(theirs) in w for w in res["warnings"])
    rc, res = module_runner("gds_managed_file", {"files": files, "_ansible_diff": True})
    assert rc == 0 and res["changed"] and unit.read_text() == files[0]["content"] and not dropin.exists()
    assert oct(unit.stat().st_mode & 0o777) == "0o644" and theirs.read_text() == THEIRS
    assert [d["before_header"] for d in res["diff"]] == [str(unit), str(dropin)]
    assert {path: entry["changed"] for path, entry in res["files"].items()} == {
        str(unit): True, str(dropin): True, str(theirs): False}
    # a second run changes nothing; a mode that differs is a drift item of its own
    rc, res = module_runner("gds_managed_file", {"files": files})
    assert rc == 0 and not res["changed"] and res["drift"] == []
    unit.chmod(0o600)
    rc, res = module_runner("gds_managed_file", {"files": files[:1]}, check_mode=True)
    assert res["drift"] == [{"setting": "%s mode" % unit, "expected": "0644", "actual": "0600"}]


def test_bad_files_entries_are_refused_by_name(tmp_path, module_runner):
    for entry, needle in (({"path": "etc/x.conf", "content": "x"}, "files[0].path"),
                          ({"path": str(tmp_path / "x"), "content": "x", "mode": "rw"}, "files[0].mode"),
                          ({"path": str(tmp_path / "x")}, "has no content"),
                          ({"path": str(tmp_path / "x"), "content": "x", "owner": "no-such-user-here"}, "files[0].owner")):
        rc, res = module_runner("gds_managed_file", {"files": [entry]})
        assert rc != 0 and needle in res["msg"] and "Traceback" not in res["msg"], (entry, res)
        assert not (tmp_path / "x").exists()


PLAY = """
- name: Tune
  ansible.builtin.import_playbook: {tune}
"""


@pytest.mark.integration  # runs ansible-playbook
def test_roles_leave_an_admins_file_of_the_same_name(tmp_path):
    """IO statistics off (gds_driver) and no ACS persistence (pcie_acs): the role removes its own
    nvidia_fs.conf, unit and drop-in, but not files of those names that an admin wrote."""
    root = simtree.build("hgx-h100", str(tmp_path / "sim" / "node"))
    files = {"etc/modprobe.d/nvidia_fs.conf": "options nvidia_fs max_streams=32\n",
             "etc/systemd/system/gds-acs-disable.service": THEIRS,
             "etc/default/grub.d/99-gds-acs.cfg": "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX quiet\"\n"}
    for rel, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "w") as handle:
            handle.write(text)
    hosts = tmp_path / "hosts.yml"
    hosts.write_text(yaml.safe_dump({"all": {"hosts": {"node": {
        "gds_root": root, "gds_live": False, "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable, "gds_driver_nvfs_rw_stats": False,
        "gds_pcie_acs_persist": "none"}}}}))
    rc, data, proc = run_playbook_json(hosts, os.path.join(ROOT, "playbooks", "tune.yml"),
                                       ["--tags", "facts,pcie_acs,gds_driver"])
    assert rc == 0, proc.stdout[-3000:]
    for rel, text in files.items():
        with open(os.path.join(root, rel)) as handle:
            assert handle.read() == text, rel
    # each role removes its files in its one gds_managed_file run, which names what it left
    left = sorted(path for _, _, res in task_results(data) for path, entry in (res.get("files") or {}).items()
                  if entry.get("left"))
    assert left == sorted(os.path.join(root, rel) for rel in files), left
