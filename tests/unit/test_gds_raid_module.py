"""plugins/modules/gds_raid.py: plan-only on the fixture trees, the liveness guard, and the apply path
with run_command replaced by a recorder (mdadm never runs against this machine's disks)."""
import importlib.util
import io
import json
import os
from contextlib import redirect_stdout

import pytest
import simtree

from ansible.module_utils import basic
from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule
from ansible_collections.gds.commission.plugins.module_utils.tune import raid_host as gds_raid_host
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible.module_utils.testing import patch_module_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission")


@pytest.fixture(scope="module")
def a100(tmp_path_factory):
    root = simtree.build("dgx-a100", str(tmp_path_factory.mktemp("a100")))
    facts, _ = discover(root + "/sys", root + "/proc")
    return root, facts


@pytest.fixture(scope="module")
def dgx2(tmp_path_factory):
    root = simtree.build("dgx2", str(tmp_path_factory.mktemp("dgx2")))
    facts, _ = discover(root + "/sys", root + "/proc")
    return root, facts


def args_for(node, **extra):
    root, facts = node
    return dict(topology=facts, procfs_root=root + "/proc", sysfs_root=root + "/sys", **extra)


def test_plan_only_on_sim_a100_refuses_without_flags(module_runner, a100):
    rc, result = module_runner("gds_raid", args_for(a100, plan_only=True))
    assert rc == 0 and result["changed"] is False
    assert result["executed"] == [] and result["drift"] == []
    assert "allow_destroy is false" in result["plan"]["refused"][0]["reason"]
    assert [a["status"] for a in result["arrays"]] == ["existing"]
    assert result["plan"]["group_by"] == "affinity"


def test_plan_only_with_flags_plans_table_5_and_commands(module_runner, a100):
    rc, result = module_runner("gds_raid", args_for(a100, plan_only=True, allow_destroy=True,
                                                    allow_unmount=True))
    assert rc == 0 and result["changed"] is False and result["executed"] == []
    assert [(a["mount"], a["gpus"], a["status"]) for a in result["arrays"]] == [
        ("/raid1", [0, 1], "planned"), ("/raid2", [2, 3], "planned"),
        ("/raid3", [4, 5], "planned"), ("/raid4", [6, 7], "planned")]
    creates = [a for a in result["plan"]["actions"] if a["op"] == "create"]
    assert creates[0]["cmd"][:3] == ["mdadm", "--create", "/dev/md/raid1"]
    assert all(isinstance(a["text"], str) for a in result["plan"]["actions"])
    assert result["fstab_remove"] == ["/raid"]
    assert [m["path"] for m in result["mounts"]] == ["/raid1", "/raid2", "/raid3", "/raid4"]


def test_check_mode_reports_changes_and_drift_on_dgx2(module_runner, dgx2):
    rc, result = module_runner("gds_raid", args_for(dgx2), check_mode=True)
    assert rc == 0 and result["changed"] is True and result["executed"] == []
    assert [d["setting"] for d in result["drift"]] == [
        "raid: raid2 members", "raid: raid3 members", "raid: raid4 members"]
    assert result["drift"][0] == {"setting": "raid: raid2 members",
                                  "expected": "nvme4n1,nvme5n1 at /raid2", "actual": "no array"}


def test_fixture_tree_without_plan_only_is_refused(module_runner, a100):
    rc, result = module_runner("gds_raid", args_for(a100, allow_destroy=True))
    assert rc != 0 and result["failed"]
    assert "plan_only" in result["msg"] and a100[0] in result["msg"]


def test_bad_topology_is_a_clean_failure(module_runner, a100):
    root, _ = a100
    rc, result = module_runner("gds_raid", {"topology": {"nvme": []}, "plan_only": True,
                                            "procfs_root": root + "/proc"})
    assert rc != 0 and "topology.groups" in result["msg"]
    rc, result = module_runner("gds_raid", args_for(a100, plan_only=True, chunk_kb=100))
    assert rc != 0 and "chunk_kb" in result["msg"]


def test_unreadable_procfs_is_a_clean_failure(module_runner, tmp_path, a100):
    (tmp_path / "mdstat").write_text("md0 : active raid1 what?\n")
    rc, result = module_runner("gds_raid", {"topology": a100[1], "plan_only": True,
                                            "procfs_root": str(tmp_path)})
    assert rc != 0 and str(tmp_path / "mdstat") in result["msg"]


# --------------------------------------------------------------------------------------------
# The apply path, in-process, with every command recorded and answered by a fake
# --------------------------------------------------------------------------------------------
def load_module():
    spec = importlib.util.spec_from_file_location("gds_raid_mod", os.path.join(COLLECTION, "plugins", "modules",
                                                                               "gds_raid.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class FakeSystem(object):
    """Answers the module's commands like a DGX A100 would; records every argv."""

    def __init__(self, fail_on=None):
        self.calls = []
        self.fail_on = fail_on

    def run_command(self, args, check_rc=False, **_kw):
        assert isinstance(args, list), "commands must be argument lists, got %r" % (args,)
        self.calls.append(list(args))
        if self.fail_on and args[:len(self.fail_on)] == self.fail_on:
            return 1, "", "mdadm: cannot open /dev/nvme4n1: Device or resource busy"
        if args[:3] == ["mdadm", "--detail", "--export"]:
            if args[3] == "/dev/md1":
                return 0, ("MD_LEVEL=raid0\nMD_DEVICES=8\nMD_METADATA=1.2\n"
                           "MD_UUID=11111111:22222222:33333333:44444444\nMD_NAME=dgxa100:1\n"), ""
            return 0, "MD_LEVEL=raid1\nMD_UUID=99999999:99999999:99999999:99999999\n", ""
        if args[:2] == ["blkid", "-p"]:
            if args[-2:] == ["UUID", args[-1]] or "UUID" in args:
                return 0, "fs-%s\n" % os.path.basename(args[-1]), ""
            return 0, "ext4\n", ""
        if args[:3] == ["mdadm", "--detail", "--brief"]:
            n = args[3][-1]
            return 0, ("ARRAY %s metadata=1.2 name=dgxa100:raid%s UUID=0000000%s:00000000:00000000:00000000\n"
                       % (args[3], n, n)), ""
        if args[0] == "wipefs" and "--all" not in args:
            return 0, "", ""
        return 0, "", ""


def run_in_process(mod, args, fake, monkeypatch, check_mode=False):
    monkeypatch.setattr(gds_raid_host, "is_live_root", lambda _root, _live: True)
    monkeypatch.setattr(gds_raid_host, "DEV_MD", "/nonexistent-dev-md")
    monkeypatch.setattr(GdsModule, "run_command",
                        lambda self, args, **kw: fake.run_command(args, **kw))
    tools = {"mdadm", "blkid", "wipefs", "udevadm", "update-initramfs", "umount", "mkfs.ext4"}
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: name if name in tools else None)
    payload = dict(args)
    if check_mode:
        payload["_ansible_check_mode"] = True
    out = io.StringIO()
    with patch_module_args(payload), redirect_stdout(out), pytest.raises(SystemExit):
        mod.main()
    return json.loads(out.getvalue())


def test_apply_regroups_a100_in_order(a100, tmp_path, monkeypatch):
    conf = tmp_path / "mdadm.conf"
    conf.write_text("MAILADDR root\nARRAY /dev/md0 metadata=1.2 UUID=99999999:99999999:99999999:99999999\n"
                    "ARRAY /dev/md1 metadata=1.2 UUID=11111111:22222222:33333333:44444444\n")
    fake = FakeSystem()
    result = run_in_process(load_module(), args_for(a100, allow_destroy=True, allow_unmount=True,
                                                    mdadm_conf=str(conf)), fake, monkeypatch)
    assert result["changed"] is True, result.get("msg")
    executed = [" ".join(c) for c in result["executed"]]
    assert executed[:2] == ["umount /raid", "mdadm --stop /dev/md1"]
    assert executed[2:10] == ["mdadm --zero-superblock /dev/nvme%dn1" % i for i in (0, 1, 4, 5, 6, 7, 8, 9)]
    assert executed[10:18] == ["wipefs --all /dev/nvme%dn1" % i for i in (0, 1, 4, 5, 6, 7, 8, 9)]
    assert executed[18:21] == [
        "mdadm --create /dev/md/raid1 --run --level=0 --chunk=512K --metadata=1.2 --name=raid1 "
        "--raid-devices=2 /dev/nvme0n1 /dev/nvme1n1",
        "udevadm settle",
        "mkfs.ext4 -F -q -b 4096 -L raid1 -E stride=128,stripe_width=256 /dev/md/raid1"]
    assert executed[-1] == "update-initramfs -u"
    # never a command on the OS drives
    assert not any("nvme2n1" in c or "nvme3n1" in c or "/dev/md0" == c.split()[-1] for c in executed)
    text = conf.read_text()
    assert "11111111:22222222" not in text and "ARRAY /dev/md0" in text
    assert [l.split()[1] for l in text.splitlines() if l.startswith("ARRAY /dev/md/")] == [
        "/dev/md/raid1", "/dev/md/raid2", "/dev/md/raid3", "/dev/md/raid4"]
    assert list(tmp_path.glob("mdadm.conf.*"))  # backup_local kept the old file
    assert result["mdadm_conf"]["changed"] is True
    assert result["mounts"][0] == {"path": "/raid1", "src": "UUID=fs-raid1", "fstype": "ext4",
                                   "device": "/dev/md/raid1", "name": "raid1"}
    assert [a["status"] for a in result["arrays"]] == ["created"] * 4
    assert result["fstab_remove"] == ["/raid"]


def test_check_mode_runs_only_read_only_probes(a100, tmp_path, monkeypatch):
    fake = FakeSystem()
    result = run_in_process(load_module(), args_for(a100, allow_destroy=True, allow_unmount=True,
                                                    mdadm_conf=str(tmp_path / "c")),
                            fake, monkeypatch, check_mode=True)
    assert result["changed"] is True and result["executed"] == []
    for call in fake.calls:
        assert call[:3] in (["mdadm", "--detail", "--export"], ["blkid", "-p", "-o"]) \
            or (call[0] == "wipefs" and "--all" not in call), call
    assert not (tmp_path / "c").exists()
    assert result["existing"][1]["uuid"] == "11111111:22222222:33333333:44444444"


def test_plan_only_runs_nothing_even_when_live(a100, monkeypatch):
    fake = FakeSystem()
    result = run_in_process(load_module(), args_for(a100, plan_only=True, allow_destroy=True,
                                                    allow_unmount=True), fake, monkeypatch)
    assert fake.calls == [] and result["changed"] is False


def test_a_failing_command_stops_with_what_was_done(a100, tmp_path, monkeypatch):
    fake = FakeSystem(fail_on=["mdadm", "--create", "/dev/md/raid2"])
    result = run_in_process(load_module(), args_for(a100, allow_destroy=True, allow_unmount=True,
                                                    mdadm_conf=str(tmp_path / "c")), fake, monkeypatch)
    assert result["failed"] is True
    assert result["msg"].startswith("mdadm --create /dev/md/raid2 --run")
    assert "Device or resource busy" in result["msg"]
    assert result["executed"][-1][:3] == ["mdadm", "--create", "/dev/md/raid2"]
    assert not any(c[0] == "mkfs.ext4" and c[-1] == "/dev/md/raid2" for c in fake.calls)


def test_partition_held_by_device_mapper_refuses_its_drive(module_runner, sim_node):
    root = sim_node("dgx2")
    holders = os.path.join(root, "sys", "block", "nvme4n1", "nvme4n1p1", "holders", "dm-0")
    os.makedirs(holders)
    facts, _ = discover(root + "/sys", root + "/proc")
    rc, result = module_runner("gds_raid", dict(topology=facts, procfs_root=root + "/proc",
                                                sysfs_root=root + "/sys", plan_only=True,
                                                allow_destroy=True, allow_unmount=True))
    assert rc == 0
    assert result["plan"]["refused"] == [{"array": "raid2", "members": ["nvme4n1", "nvme5n1"],
                                          "reason": "nvme4n1 is in use by dm-0"}]
    assert [a["name"] for a in result["arrays"]] == ["raid1", "raid3", "raid4"]


def test_missing_mdadm_is_a_clear_failure_before_anything_runs(a100, tmp_path, monkeypatch):
    fake = FakeSystem()
    mod = load_module()
    monkeypatch.setattr(gds_raid_host, "is_live_root", lambda _root, _live: True)
    monkeypatch.setattr(gds_raid_host, "DEV_MD", "/nonexistent-dev-md")
    monkeypatch.setattr(GdsModule, "run_command",
                        lambda self, args, **kw: fake.run_command(args, **kw))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None:
                        name if name in {"blkid", "wipefs", "umount", "mkfs.ext4"} else None)
    out = io.StringIO()
    with patch_module_args(args_for(a100, allow_destroy=True, allow_unmount=True,
                                    mdadm_conf=str(tmp_path / "c"))), \
            redirect_stdout(out), pytest.raises(SystemExit):
        mod.main()
    result = json.loads(out.getvalue())
    assert result["failed"] and result["msg"].startswith("mdadm is not installed on this node")
    # only read-only probes ran
    assert all(c[0] == "blkid" or (c[0] == "wipefs" and "--all" not in c) for c in fake.calls)


# --------------------------------------------------------------------------------------------
# Names and paths from variables: refused before anything is read, probed or planned
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("option,value", [
    ("name_prefix", "../../nvme2n1p"), ("name_prefix", "raid/../../sda"),
    ("mount_prefix", "/boot/raid"), ("mount_prefix", "/raid/../etc/raid"),
    ("mkfs_options", ["-q", "/dev/nvme2n1p1"]),
])
def test_traversing_names_are_refused_before_anything_runs(a100, tmp_path, monkeypatch, option, value):
    fake = FakeSystem()
    result = run_in_process(load_module(), args_for(a100, allow_destroy=True, allow_unmount=True,
                                                    mdadm_conf=str(tmp_path / "c"), **{option: value}),
                            fake, monkeypatch)
    assert result["failed"] is True
    assert result["msg"].startswith(option) and str(value[-1] if isinstance(value, list) else value) in result["msg"]
    assert fake.calls == []  # not even a read-only probe
    assert "plan" not in result and "executed" not in result
    assert not (tmp_path / "c").exists()


def test_traversing_name_prefix_is_refused_on_a_fixture_tree(module_runner, a100):
    rc, result = module_runner("gds_raid", args_for(a100, plan_only=True, name_prefix="../../nvme2n1p"))
    assert rc != 0 and result["msg"].startswith("name_prefix '../../nvme2n1p'")
    assert "plan" not in result


# --------------------------------------------------------------------------------------------
# System drives and mounted members
# --------------------------------------------------------------------------------------------
def test_system_drive_is_never_planned_whatever_the_facts_say(dgx2, tmp_path, monkeypatch):
    """nvme0n1/nvme1n1 hold / and /boot/efi (procfs): even put into a group with the facts' system
    flag cleared, nothing touches them."""
    root, facts = dgx2
    lying = dict(facts, nvme=[dict(d, system=False) for d in facts["nvme"]],
                 groups=[dict(g, nvme=g["nvme"] + ["nvme0n1", "nvme1n1"]) if g["id"] == 1 else g
                         for g in facts["groups"]])
    fake = FakeSystem()
    result = run_in_process(load_module(), dict(args_for((root, lying), allow_destroy=True,
                                                         allow_unmount=True),
                                                mdadm_conf=str(tmp_path / "c")), fake, monkeypatch)
    assert "failed" not in result, result.get("msg")
    refused = {r["array"]: r["reason"] for r in result["plan"]["refused"]}
    assert "md0 holds system drives nvme0n1,nvme1n1" in refused["raid1"]
    assert not any("nvme0n1" in " ".join(c) or "nvme1n1" in " ".join(c) or c[-1] == "/dev/md0"
                   for c in fake.calls if "--all" in c or c[:2] in (["mdadm", "--stop"], ["mdadm", "--zero-superblock"])
                   or c[0] in ("mkfs.ext4", "umount"))
    assert not any("nvme0n1" in " ".join(c) or "nvme1n1" in " ".join(c) for c in result["executed"])


def test_mounted_member_is_not_touched_without_allow_unmount(module_runner, sim_node):
    root = sim_node("dgx2")
    with open(os.path.join(root, "proc", "mounts"), "a") as handle:
        handle.write("/dev/nvme4n1p1 /scratch xfs rw 0 0\n")
    facts, _ = discover(root + "/sys", root + "/proc")
    args = dict(topology=facts, procfs_root=root + "/proc", sysfs_root=root + "/sys", plan_only=True,
                allow_destroy=True)
    rc, result = module_runner("gds_raid", args)
    assert rc == 0
    refused = {r["array"]: r["reason"] for r in result["plan"]["refused"]}
    assert "nvme4n1 is mounted at /scratch and allow_unmount is false" in refused["raid2"]
    assert not any("nvme4n1" in str(a) for a in result["plan"]["actions"])
    rc, allowed = module_runner("gds_raid", dict(args, allow_unmount=True))
    assert allowed["plan"]["refused"] == []
    assert [a["path"] for a in allowed["plan"]["actions"] if a["op"] == "umount"] == ["/scratch"]


# --------------------------------------------------------------------------------------------
# The report checks the module returns
# --------------------------------------------------------------------------------------------
def test_module_returns_the_report_checks(module_runner, a100):
    rc, result = module_runner("gds_raid", args_for(a100, plan_only=True))
    plan_check = result["checks"][0]
    assert (plan_check["name"], plan_check["verdict"], plan_check["actual"]) == ("raid: plan", "WARN", "refused")
    assert "allow_destroy is false (role variable gds_raid_allow_destroy)" in plan_check["detail"]
    rc, result = module_runner("gds_raid", args_for(a100, plan_only=True, refused_verdict="FAIL"))
    assert result["checks"][0]["verdict"] == "FAIL"
    rc, result = module_runner("gds_raid", args_for(a100, plan_only=True, p2pdma=True))
    assert result["checks"][0] == dict(result["checks"][0], name="raid: md RAID with P2PDMA", verdict="FAIL",
                                       actual="/dev/md1")
    rc, result = module_runner("gds_raid", args_for(a100, enabled=False))
    assert rc == 0 and result["changed"] is False and result["arrays"] == []
    assert [(c["name"], c["verdict"], c["actual"]) for c in result["checks"]] == [("raid: plan", "SKIP", "disabled")]


def test_p2pdma_never_applies_even_when_asked(a100, tmp_path, monkeypatch):
    fake = FakeSystem()
    result = run_in_process(load_module(), args_for(a100, allow_destroy=True, allow_unmount=True, p2pdma=True,
                                                    mdadm_conf=str(tmp_path / "c")), fake, monkeypatch)
    assert result["changed"] is False and result["executed"] == []
    assert [a["status"] for a in result["arrays"]] == ["planned"] * 4
    # md1 still holds the data drives: the plan is not applied with P2PDMA
    assert result["checks"][0] == dict(result["checks"][0], name="raid: md RAID with P2PDMA", verdict="FAIL",
                                       actual="/dev/md1")
    assert all(c["verdict"] == "SKIP" and c["actual"] == "planned, not applied" for c in result["checks"][1:])
