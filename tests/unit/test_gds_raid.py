"""RAID planning (plugins/module_utils/tune/raid.py): the guide's Table 5, the refusals, the commands."""
import pytest
import simtree

from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import mounted_disks, parse_mdstat, parse_mounts, system_disks
from ansible_collections.gds.commission.plugins.module_utils.tune.raid import (
    RaidError, command, describe, desired_arrays, existing_arrays, parse_detail_export, plan,
    stripe_geometry, update_mdadm_conf, validate_options,
)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    """Topology facts and procfs of the guide's systems, built once for this file."""
    out = {}
    for name in ("dgx2", "dgx-a100", "hgx-h100"):
        root = simtree.build(name, str(tmp_path_factory.mktemp(name)))
        facts, _ = discover(root + "/sys", root + "/proc")
        out[name] = (root, facts)
    return out


def plan_node(nodes, name, **options):
    """What plugins/modules/gds_raid.py does in plan_only mode, on a fixture tree."""
    root, facts = nodes[name]
    proc, sys_ = root + "/proc", root + "/sys"
    with open(proc + "/mdstat") as handle:
        mdstat = parse_mdstat(handle.read())
    with open(proc + "/mounts") as handle:
        mounts = parse_mounts(handle.read())
    system = system_disks(proc, sys_) | {d["name"] for d in facts["nvme"] if d["system"]}
    disk_mounts = mounted_disks(proc, sys_)
    desired = desired_arrays(facts, options.pop("group_by", "affinity"))
    existing = existing_arrays(mdstat, mounts, disk_mounts=disk_mounts)
    return plan(desired, existing, system=system, disk_mounts=disk_mounts, mounts=mounts,
                topology=facts, **options)


def ops(result, op):
    return [a for a in result["actions"] if a["op"] == op]


# --------------------------------------------------------------------------------------------
# The guide's systems
# --------------------------------------------------------------------------------------------
TABLE_5 = [  # /raidN, GPUs, drives (DGX A100, the guide's Table 5)
    ("/raid1", [0, 1], ["nvme0n1", "nvme1n1"]),
    ("/raid2", [2, 3], ["nvme4n1", "nvme5n1"]),
    ("/raid3", [4, 5], ["nvme6n1", "nvme7n1"]),
    ("/raid4", [6, 7], ["nvme8n1", "nvme9n1"]),
]


def test_dgx_a100_regroup_reproduces_table_5(nodes):
    result = plan_node(nodes, "dgx-a100", allow_destroy=True, allow_unmount=True)
    assert [(a["mount"], a["gpus"], a["members"]) for a in result["result"]] == TABLE_5
    assert [a["device"] for a in result["result"]] == ["/dev/md/raid%d" % i for i in range(1, 5)]
    assert result["refused"] == []
    assert result["summary"] == ["regroup md1 (8 drives across 4 switches) into 4 arrays "
                                 "(raid1, raid2, raid3, raid4)"]
    # order: unmount, stop, zero, wipe, then create/mkfs/mount per array, then fstab cleanup
    order = [a["op"] for a in result["actions"]]
    assert order[:2] == ["umount", "stop"]
    assert order[-1] == "fstab_remove" and result["actions"][-1]["path"] == "/raid"
    assert [a["device"] for a in ops(result, "stop")] == ["/dev/md1"]
    assert len(ops(result, "zero_superblock")) == 8 and len(ops(result, "wipe")) == 8
    assert not any(a["device"] in ("/dev/nvme2n1", "/dev/nvme3n1") for a in ops(result, "wipe"))
    for mkfs in ops(result, "mkfs"):
        assert (mkfs["stride"], mkfs["stripe_width"]) == (128, 256)


def test_dgx_a100_default_flags_refuse_and_keep_md1_for_all_gpus(nodes):
    result = plan_node(nodes, "dgx-a100")
    assert [a["action"] for a in result["arrays"]] == ["refuse"] * 4
    reason = result["refused"][0]["reason"]
    assert "allow_destroy is false" in reason and "md1 is mounted at /raid" in reason
    assert result["actions"] == []
    assert result["summary"][0].startswith("regroup md1 (8 drives across 4 switches) into 4 arrays")
    assert "; refused: " in result["summary"][0]
    [left] = result["result"]
    assert (left["device"], left["mount"], left["status"]) == ("/dev/md1", "/raid", "existing")
    assert left["gpus"] == list(range(8)) and len(left["members"]) == 8


def test_dgx_a100_mounted_array_needs_allow_unmount(nodes):
    result = plan_node(nodes, "dgx-a100", allow_destroy=True)
    reason = result["refused"][0]["reason"]
    assert "md1 is mounted at /raid and allow_unmount is false" in reason
    assert "allow_destroy" not in reason
    assert result["actions"] == []


def test_dgx2_keeps_md127_and_creates_the_other_three(nodes):
    result = plan_node(nodes, "dgx2")
    kept, *created = result["result"]
    assert (kept["device"], kept["mount"], kept["status"]) == ("/dev/md127", "/nvme23", "kept")
    assert kept["gpus"] == [0, 1, 2, 3] and kept["members"] == ["nvme2n1", "nvme3n1"]
    assert [(a["mount"], a["members"], a["gpus"]) for a in created] == [
        ("/raid2", ["nvme4n1", "nvme5n1"], [4, 5, 6, 7]),
        ("/raid3", ["nvme6n1", "nvme7n1"], [8, 9, 10, 11]),
        ("/raid4", ["nvme8n1", "nvme9n1"], [12, 13, 14, 15]),
    ]
    # nothing is stopped or wiped: the OS array md0 and md127 stay as they are
    assert not ops(result, "stop") and not ops(result, "umount") and not ops(result, "wipe")
    assert len(ops(result, "create")) == 3
    assert result["summary"][0] == "keep md127 (nvme2n1,nvme3n1) at /nvme23 for GPUs 0,1,2,3"


def test_h100_without_arrays_creates_four(nodes):
    result = plan_node(nodes, "hgx-h100")
    assert [a["members"] for a in result["result"]] == [
        ["nvme0n1", "nvme1n1"], ["nvme2n1", "nvme3n1"], ["nvme4n1", "nvme5n1"], ["nvme6n1", "nvme7n1"]]
    assert all("nvme8n1" not in a["members"] and "nvme9n1" not in a["members"]
               for a in result["result"])


def test_switch_grouping_on_the_fixtures_matches_affinity(nodes):
    by_switch = plan_node(nodes, "dgx-a100", group_by="switch", allow_destroy=True, allow_unmount=True)
    assert [(a["mount"], a["gpus"], a["members"]) for a in by_switch["result"]] == TABLE_5


# --------------------------------------------------------------------------------------------
# Synthetic cases: refusals and idempotence
# --------------------------------------------------------------------------------------------
def topo(drives, groups=(), gpus=()):
    """A minimal gds_topology: drives = {name: switch or (switch, system)}."""
    nvme = []
    for name, spec in drives.items():
        switch, system = spec if isinstance(spec, tuple) else (spec, False)
        nvme.append({"name": name, "switch": switch, "system": system})
    return {"nvme": nvme, "groups": list(groups), "gpus": list(gpus)}


TWO_GROUPS = topo({"nvme0n1": "s1", "nvme1n1": "s1", "nvme2n1": "s2", "nvme3n1": "s2",
                   "nvme8n1": (None, True)},
                  groups=[{"id": 1, "gpus": [0], "nvme": ["nvme0n1", "nvme1n1"]},
                          {"id": 2, "gpus": [1], "nvme": ["nvme2n1", "nvme3n1"]}])


def run_plan(facts, mdstat="", mounts="", **kw):
    mdstat = parse_mdstat(mdstat)
    mounts = parse_mounts(mounts)
    disk_mounts = kw.pop("disk_mounts", {})
    existing = existing_arrays(mdstat, mounts, disk_mounts=disk_mounts,
                               holders=kw.pop("holders", None), details=kw.pop("details", None))
    return plan(desired_arrays(facts, kw.pop("group_by", "affinity")), existing,
                system=kw.pop("system", {"nvme8n1"}), disk_mounts=disk_mounts, mounts=mounts,
                topology=facts, **kw)


def test_array_holding_a_system_drive_is_never_touched():
    mdstat = "md9 : active raid0 nvme8n1[1] nvme1n1[0]\n      100 blocks super 1.2 512k chunks\n"
    result = run_plan(TWO_GROUPS, mdstat, allow_destroy=True, allow_unmount=True)
    refused = {r["array"]: r["reason"] for r in result["refused"]}
    assert "md9 holds system drive nvme8n1" in refused["raid1"]
    assert not any(a.get("device") == "/dev/md9" for a in result["actions"])
    assert not any("nvme8n1" in str(a) for a in result["actions"])
    # the other group does not depend on md9 and is still created
    assert [a["name"] for a in result["arrays"] if a["action"] == "create"] == ["raid2"]
    assert result["result"][-1]["name"] == "raid2"


def test_planned_system_drive_is_refused_even_if_facts_disagree():
    facts = topo({"nvme0n1": "s1", "nvme1n1": "s1"},
                 groups=[{"id": 1, "gpus": [0], "nvme": ["nvme0n1", "nvme1n1"]}])
    result = run_plan(facts, system={"nvme1n1"}, allow_destroy=True, allow_unmount=True)
    assert "nvme1n1 is a system drive" in result["refused"][0]["reason"]
    assert result["actions"] == []


def test_system_flag_in_facts_keeps_a_drive_out_of_the_plan():
    facts = topo({"nvme0n1": "s1", "nvme1n1": ("s1", True)},
                 groups=[{"id": 1, "gpus": [0], "nvme": ["nvme0n1", "nvme1n1"]}])
    assert desired_arrays(facts)[0]["members"] == ["nvme0n1"]


def test_no_allow_destroy_refuses_stopping_an_unmounted_array():
    mdstat = ("md1 : active raid0 nvme3n1[3] nvme2n1[2] nvme1n1[1] nvme0n1[0]\n"
              "      100 blocks super 1.2 512k chunks\n")
    result = run_plan(TWO_GROUPS, mdstat)
    assert {r["array"] for r in result["refused"]} == {"raid1", "raid2"}
    assert "stopping md1 destroys its data and allow_destroy is false" in result["refused"][0]["reason"]
    assert "allow_unmount" not in result["refused"][0]["reason"]
    allowed = run_plan(TWO_GROUPS, mdstat, allow_destroy=True)
    assert allowed["refused"] == [] and [a["op"] for a in allowed["actions"]][0] == "stop"


def test_mounted_array_is_refused_without_allow_unmount_and_unmounted_with_it():
    mdstat = ("md1 : active raid0 nvme3n1[3] nvme2n1[2] nvme1n1[1] nvme0n1[0]\n"
              "      100 blocks super 1.2 512k chunks\n")
    mounts = "/dev/md1 /raid ext4 rw 0 0\n/dev/md1p2 /raid/scratch ext4 rw 0 0\n"
    refused = run_plan(TWO_GROUPS, mdstat, mounts, allow_destroy=True)
    assert "md1 is mounted at /raid,/raid/scratch and allow_unmount is false" in \
        refused["refused"][0]["reason"]
    done = run_plan(TWO_GROUPS, mdstat, mounts, allow_destroy=True, allow_unmount=True)
    # the deepest mount point first
    assert [a["path"] for a in ops(done, "umount")] == ["/raid/scratch", "/raid"]
    assert [a["path"] for a in ops(done, "fstab_remove")] == ["/raid", "/raid/scratch"]


def test_array_with_a_drive_no_plan_uses_is_refused():
    mdstat = "md1 : active raid0 nvme5n1[2] nvme1n1[1] nvme0n1[0]\n      100 blocks super 1.2 512k chunks\n"
    result = run_plan(TWO_GROUPS, mdstat, allow_destroy=True, allow_unmount=True)
    assert "md1 also holds nvme5n1, which no planned array uses" in result["refused"][0]["reason"]
    assert not any("nvme5n1" in str(a) for a in result["actions"])


def test_array_used_by_device_mapper_is_refused():
    mdstat = "md1 : active raid0 nvme1n1[1] nvme0n1[0]\n      100 blocks super 1.2 512k chunks\n"
    facts = topo({"nvme0n1": "s1", "nvme1n1": "s1", "nvme2n1": "s1"},
                 groups=[{"id": 1, "gpus": [0], "nvme": ["nvme0n1", "nvme1n1", "nvme2n1"]}])
    result = run_plan(facts, mdstat, holders={"md1": ["dm-0"]}, allow_destroy=True,
                      allow_unmount=True)
    assert "md1 is in use by dm-0" in result["refused"][0]["reason"]


def test_free_drive_with_signatures_needs_allow_destroy_and_is_wiped():
    sig = {"nvme0n1": ["gpt", "PMBR"], "nvme1n1": []}
    refused = run_plan(TWO_GROUPS, signatures=dict(sig, nvme2n1=[], nvme3n1=[]))
    assert refused["refused"][0]["array"] == "raid1"
    assert "nvme0n1 carries gpt,PMBR and allow_destroy is false" in refused["refused"][0]["reason"]
    assert [a["name"] for a in refused["arrays"] if a["action"] == "create"] == ["raid2"]
    done = run_plan(TWO_GROUPS, signatures=dict(sig, nvme2n1=[], nvme3n1=[]), allow_destroy=True)
    assert [a["device"] for a in ops(done, "wipe")] == ["/dev/nvme0n1"]


def test_mounted_free_drive_needs_both_flags():
    mounts = "/dev/nvme2n1p1 /scratch xfs rw 0 0\n"
    disk_mounts = {"nvme2n1": ["/scratch"]}
    refused = run_plan(TWO_GROUPS, "", mounts, disk_mounts=disk_mounts, allow_destroy=True)
    assert "nvme2n1 is mounted at /scratch and allow_unmount is false" in refused["refused"][0]["reason"]
    done = run_plan(TWO_GROUPS, "", mounts, disk_mounts=disk_mounts, allow_destroy=True,
                    allow_unmount=True)
    assert [a["path"] for a in ops(done, "umount")] == ["/scratch"]


def test_mount_point_in_use_by_something_else_is_refused():
    result = run_plan(TWO_GROUPS, "", "/dev/sdb1 /raid2 ext4 rw 0 0\n")
    assert result["refused"] == [{"array": "raid2", "members": ["nvme2n1", "nvme3n1"],
                                  "reason": "/raid2 is already a mount point of /dev/sdb1"}]


def test_name_taken_by_an_unrelated_array_is_refused():
    mdstat = "md125 : active raid0 sdc[1] sdb[0]\n      100 blocks super 1.2 512k chunks\n"
    result = run_plan(TWO_GROUPS, mdstat, details={"md125": {"MD_NAME": "other:raid1"}})
    assert "the name raid1 is taken by md125" in result["refused"][0]["reason"]


def test_second_run_is_a_no_op():
    mdstat = ("md126 : active raid0 nvme3n1[1] nvme2n1[0]\n      100 blocks super 1.2 512k chunks\n\n"
              "md127 : active raid0 nvme1n1[1] nvme0n1[0]\n      100 blocks super 1.2 512k chunks\n")
    mounts = "/dev/md127 /raid1 ext4 rw 0 0\n/dev/md126 /raid2 ext4 rw 0 0\n"
    details = {"md127": {"MD_DEVNAME": "raid1", "MD_NAME": "node:raid1", "MD_LEVEL": "raid0"},
               "md126": {"MD_DEVNAME": "raid2", "MD_NAME": "node:raid2", "MD_LEVEL": "raid0"}}
    result = run_plan(TWO_GROUPS, mdstat, mounts, details=details)
    assert result["actions"] == [] and result["refused"] == []
    assert [(a["device"], a["mount"], a["status"]) for a in result["result"]] == [
        ("/dev/md/raid1", "/raid1", "kept"), ("/dev/md/raid2", "/raid2", "kept")]


def test_kept_array_found_unmounted_is_mounted_or_refused_without_filesystem():
    mdstat = "md127 : active raid0 nvme1n1[1] nvme0n1[0]\n      100 blocks super 1.2 512k chunks\n"
    facts = topo({"nvme0n1": "s1", "nvme1n1": "s1"},
                 groups=[{"id": 1, "gpus": [0], "nvme": ["nvme0n1", "nvme1n1"]}])
    unknown = run_plan(facts, mdstat)
    assert [(a["op"], a["path"]) for a in unknown["actions"]] == [("mount", "/raid1")]
    with_fs = run_plan(facts, mdstat, fstypes={"/dev/md127": "xfs"})
    assert with_fs["actions"][0]["fstype"] == "xfs"
    no_fs = run_plan(facts, mdstat, fstypes={"/dev/md127": None})
    assert "md127 has no filesystem; formatting it needs allow_destroy" in no_fs["refused"][0]["reason"]
    formatted = run_plan(facts, mdstat, fstypes={"/dev/md127": None}, allow_destroy=True)
    assert [a["op"] for a in formatted["actions"]] == ["mkfs", "mount"]


def test_kept_array_with_another_level_is_kept_with_a_note():
    mdstat = "md5 : active raid1 nvme1n1[1] nvme0n1[0]\n      100 blocks super 1.2 [2/2] [UU]\n"
    facts = topo({"nvme0n1": "s1", "nvme1n1": "s1"},
                 groups=[{"id": 1, "gpus": [0], "nvme": ["nvme0n1", "nvme1n1"]}])
    result = run_plan(facts, mdstat, "/dev/md5 /data ext4 rw 0 0\n")
    assert result["arrays"][0]["action"] == "keep"
    assert result["arrays"][0]["notes"] == ["md5 is raid1, not raid0: kept as found"]


def test_switch_grouping_without_gpus_leaves_switchless_drives_alone():
    facts = topo({"nvme0n1": "0000:01:00.0", "nvme1n1": "0000:01:00.0", "nvme2n1": "0000:05:00.0",
                  "nvme3n1": "0000:05:00.0", "nvme4n1": None, "nvme5n1": ("0000:05:00.0", True)})
    desired = desired_arrays(facts, "switch")
    assert [(a["name"], a["members"], a["gpus"]) for a in desired] == [
        ("raid1", ["nvme0n1", "nvme1n1"], []), ("raid2", ["nvme2n1", "nvme3n1"], [])]
    assert desired_arrays(facts, "affinity") == []  # no GPU, no group
    result = run_plan(facts, group_by="switch", system={"nvme5n1"})
    assert not any("nvme4n1" in str(a) or "nvme5n1" in str(a) for a in result["actions"])


def test_prefixes_and_bad_input():
    desired = desired_arrays(TWO_GROUPS, mount_prefix="/data/gds/", name_prefix="gds")
    assert [(a["device"], a["mount"]) for a in desired] == [
        ("/dev/md/gds1", "/data/gds1"), ("/dev/md/gds2", "/data/gds2")]
    with pytest.raises(RaidError, match="group_by"):
        desired_arrays(TWO_GROUPS, "rack")
    with pytest.raises(RaidError, match="topology.groups"):
        desired_arrays({"nvme": []})
    with pytest.raises(RaidError, match="chunk_kb"):
        run_plan(TWO_GROUPS, chunk_kb=500)


# --------------------------------------------------------------------------------------------
# Commands and mdadm.conf
# --------------------------------------------------------------------------------------------
def test_stripe_geometry():
    assert stripe_geometry(512, 2) == {"stride": 128, "stripe_width": 256}
    assert stripe_geometry(512, 8) == {"stride": 128, "stripe_width": 1024}
    assert stripe_geometry(64, 4) == {"stride": 16, "stripe_width": 64}
    assert stripe_geometry(4, 3) == {"stride": 1, "stripe_width": 3}


def test_command_lines():
    result = run_plan(TWO_GROUPS, chunk_kb=256)
    create = ops(result, "create")[0]
    assert command(create) == [
        "mdadm", "--create", "/dev/md/raid1", "--run", "--level=0", "--chunk=256K",
        "--metadata=1.2", "--name=raid1", "--raid-devices=2", "/dev/nvme0n1", "/dev/nvme1n1"]
    mkfs = ops(result, "mkfs")[0]
    assert command(mkfs, ["-m", "0"]) == [
        "mkfs.ext4", "-F", "-q", "-b", "4096", "-L", "raid1", "-E", "stride=64,stripe_width=128",
        "-m", "0", "/dev/md/raid1"]
    assert command({"op": "stop", "device": "/dev/md1"}) == ["mdadm", "--stop", "/dev/md1"]
    assert command({"op": "zero_superblock", "device": "/dev/nvme0n1p2"}) == [
        "mdadm", "--zero-superblock", "/dev/nvme0n1p2"]
    assert command({"op": "wipe", "device": "/dev/nvme0n1"}) == ["wipefs", "--all", "/dev/nvme0n1"]
    assert command({"op": "umount", "path": "/raid"}) == ["umount", "/raid"]
    assert command({"op": "mount", "device": "/dev/md/raid1", "path": "/raid1"}) is None
    single = {"op": "create", "device": "/dev/md/raid1", "name": "raid1", "chunk_kb": 512,
              "members": ["/dev/nvme1n1"]}
    assert "--force" in command(single) and command(single)[-1] == "/dev/nvme1n1"
    assert all(describe(a) for a in result["actions"])


def test_zero_superblock_targets_the_partition_members():
    mdstat = "md3 : active raid0 nvme1n1p1[1] nvme0n1p1[0]\n      100 blocks super 1.2 512k chunks\n"
    facts = topo({"nvme0n1": "s1", "nvme1n1": "s1", "nvme2n1": "s1"},
                 groups=[{"id": 1, "gpus": [0], "nvme": ["nvme0n1", "nvme1n1", "nvme2n1"]}])
    result = run_plan(facts, mdstat, allow_destroy=True)
    assert [a["device"] for a in ops(result, "zero_superblock")] == ["/dev/nvme0n1p1", "/dev/nvme1n1p1"]
    assert [a["device"] for a in ops(result, "wipe")] == ["/dev/nvme0n1", "/dev/nvme1n1"]


def test_parse_detail_export():
    detail = parse_detail_export("MD_LEVEL=raid0\nMD_DEVICES=2\nMD_METADATA=1.2\n"
                                 "MD_UUID=1b2c3d4e:5f607182:93a4b5c6:d7e8f901\nMD_DEVNAME=raid1\n"
                                 "MD_NAME=dgx01:raid1\nMD_DEVICE_dev_nvme0n1_ROLE=0\n")
    assert detail["MD_LEVEL"] == "raid0" and detail["MD_DEVNAME"] == "raid1"
    existing = existing_arrays(parse_mdstat("md127 : active raid0 nvme1n1[1] nvme0n1[0]\n"),
                               parse_mounts("/dev/md127 /raid1 ext4 rw 0 0\n"),
                               details={"md127": detail})
    assert existing[0]["device"] == "/dev/md/raid1" and existing[0]["md_name"] == "raid1"
    assert existing[0]["uuid"] == "1b2c3d4e:5f607182:93a4b5c6:d7e8f901"


def test_alias_mount_sources_are_resolved():
    existing = existing_arrays(parse_mdstat("md127 : active raid0 nvme1n1[1] nvme0n1[0]\n"),
                               parse_mounts("/dev/md/raid1 /raid1 ext4 rw 0 0\n"),
                               aliases={"/dev/md/raid1": "md127"})
    assert existing[0]["mounts"] == ["/raid1"]


MDADM_CONF = """# mdadm.conf
HOMEHOST <system>
MAILADDR root
ARRAY /dev/md0 metadata=1.2 name=dgx:0 UUID=aaaaaaaa:aaaaaaaa:aaaaaaaa:aaaaaaaa
ARRAY /dev/md1 metadata=1.2 name=dgx:1
   UUID=BBBBBBBB:bbbbbbbb:bbbbbbbb:bbbbbbbb devices=/dev/nvme0n1
"""


def test_update_mdadm_conf_removes_stopped_and_adds_created():
    new = update_mdadm_conf(MDADM_CONF, ["bbbbbbbb:bbbbbbbb:bbbbbbbb:bbbbbbbb"], [
        "ARRAY /dev/md/raid1 metadata=1.2 name=dgx:raid1 UUID=cccccccc:cccccccc:cccccccc:cccccccc"])
    assert "name=dgx:1" not in new and "devices=/dev/nvme0n1" not in new  # continuation line too
    assert "ARRAY /dev/md0 " in new and "ARRAY /dev/md/raid1 " in new
    single = update_mdadm_conf(
        "ARRAY /dev/md1 metadata=1.2 UUID=bbbbbbbb:bbbbbbbb:bbbbbbbb:bbbbbbbb\n"
        "   devices=/dev/nvme0n1,/dev/nvme1n1\nMAILADDR root\n",
        ["BBBBBBBB:bbbbbbbb:bbbbbbbb:bbbbbbbb"], [])
    assert single == "MAILADDR root\n"
    again = update_mdadm_conf(new, [], [
        "ARRAY /dev/md/raid1 metadata=1.2 name=dgx:raid1 UUID=cccccccc:cccccccc:cccccccc:cccccccc"])
    assert again == new


# --------------------------------------------------------------------------------------------
# Names and paths from variables (shared with the module and role tests)
# --------------------------------------------------------------------------------------------
BAD_OPTIONS = [
    ("name_prefix", "../../nvme2n1p"),      # /dev/md/../../nvme2n1p1: the EFI partition
    ("name_prefix", "raid/../../sda"),
    ("name_prefix", "-raid"),
    ("name_prefix", ".raid"),
    ("name_prefix", "raid x"),
    ("name_prefix", ""),
    ("name_prefix", "123"),
    ("name_prefix", "r" * 30),
    ("mount_prefix", "raid"),
    ("mount_prefix", "/"),
    ("mount_prefix", "/raid/../etc/raid"),
    ("mount_prefix", "/mnt//raid"),
    ("mount_prefix", "/mnt/./raid"),
    ("mount_prefix", "/boot/raid"),
    ("mount_prefix", "/etc/raid"),
    ("mount_prefix", "/usr/local/raid"),
    ("mount_prefix", "/var/raid"),
    ("mount_prefix", "/mnt/ra id"),
    ("mount_prefix", "/mnt/$(reboot)"),
    ("mkfs_options", ["-m 0"]),
    ("mkfs_options", ["/dev/nvme2n1p1"]),
    ("mkfs_options", ["-q", "/dev/sda"]),
    ("mkfs_options", ["-m", "0", "extra"]),
    ("mkfs_options", ["-E", "/dev/sda"]),
    ("mkfs_options", ["-m", "0;reboot"]),
    ("mkfs_options", [""]),
]
GOOD_OPTIONS = [
    ("name_prefix", "raid"), ("name_prefix", "gds-a.1_x"), ("name_prefix", "r" * 29),
    ("mount_prefix", "/raid"), ("mount_prefix", "/data/gds/"), ("mount_prefix", "/mnt/raid"),
    ("mount_prefix", "/boot"),  # /boot1 is not /boot
    ("mkfs_options", []), ("mkfs_options", ["-m", "0"]), ("mkfs_options", ["-m0", "-T", "largefile"]),
    ("mkfs_options", ["-E", "lazy_itable_init=0,packed_meta_blocks=1", "-O", "^has_journal"]),
]


@pytest.mark.parametrize("option,value", BAD_OPTIONS, ids=[repr(v) for _, v in BAD_OPTIONS])
def test_bad_names_and_paths_are_refused_naming_the_option(option, value):
    with pytest.raises(RaidError) as err:
        validate_options(**{option: value})
    assert option in str(err.value)
    shown = value[-1] if isinstance(value, list) else value
    assert repr(shown) in str(err.value) or (option == "mount_prefix" and shown in str(err.value))


@pytest.mark.parametrize("option,value", GOOD_OPTIONS, ids=[repr(v) for _, v in GOOD_OPTIONS])
def test_good_names_and_paths_pass(option, value):
    validate_options(**{option: value})


def test_desired_arrays_refuses_a_traversing_prefix_before_planning():
    with pytest.raises(RaidError, match=r"name_prefix '\.\./\.\./nvme2n1p'"):
        desired_arrays(TWO_GROUPS, name_prefix="../../nvme2n1p")
    with pytest.raises(RaidError, match="mount_prefix '/etc/raid'"):
        desired_arrays(TWO_GROUPS, mount_prefix="/etc/raid")


def test_drive_names_from_the_facts_cannot_leave_dev():
    facts = topo({"nvme0n1": "s1", "../nvme2n1p1": "s1"},
                 groups=[{"id": 1, "gpus": [0], "nvme": ["nvme0n1", "../nvme2n1p1"]}])
    with pytest.raises(RaidError, match=r"topology.nvme\[1\].name: '\.\./nvme2n1p1'"):
        desired_arrays(facts)


def test_mkfs_command_refuses_options_that_name_a_device():
    mkfs = ops(run_plan(TWO_GROUPS), "mkfs")[0]
    with pytest.raises(RaidError, match="mkfs_options"):
        command(mkfs, ["/dev/nvme2n1p1"])


def test_system_array_matching_a_planned_array_is_not_kept_as_data():
    """Facts that put exactly the OS array's drives into a group: refused, never "kept" (which
    would format it when it has no filesystem, mount it and hand it to the benchmark)."""
    facts = topo({"nvme0n1": "s1", "nvme1n1": "s1"},
                 groups=[{"id": 1, "gpus": [0], "nvme": ["nvme0n1", "nvme1n1"]}])
    mdstat = "md0 : active raid1 nvme1n1p2[1] nvme0n1p2[0]\n      100 blocks super 1.2 [2/2] [UU]\n"
    for mounts, fstypes in (("/dev/md0 / ext4 rw 0 0\n", None), ("", {"/dev/md0": None})):
        result = run_plan(facts, mdstat, mounts, system={"nvme0n1", "nvme1n1"}, fstypes=fstypes,
                          allow_destroy=True, allow_unmount=True)
        assert [a["action"] for a in result["arrays"]] == ["refuse"]
        assert "md0 holds system drives nvme0n1,nvme1n1" in result["refused"][0]["reason"]
        assert result["actions"] == [] and result["result"] == []
