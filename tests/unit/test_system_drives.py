"""System drives found by major:minor (mountinfo, /sys/dev/block), whatever name they are mounted
under, and mount tables with bytes that are not UTF-8."""
import copy
import os

import pytest
from conftest import run_module

from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import (
    ProcfsError, mounted_disks, parse_mountinfo, parse_mounts, read_mounts, source_disks, system_disks,
)

# One switch below one root port: a GPU and three drives, all PIX to each other. nvme0 carries
# the OS in partitions; nvme1/nvme2 are data drives unless a test puts the OS on them.
NODE = {
    "host_bridges": {"0000:00": 0},
    "bridges": {"0000:00:01.0": 0x01, "0000:01:00.0": 0x02, "0000:02:00.0": 0x03,
                "0000:02:01.0": 0x04, "0000:02:02.0": 0x05, "0000:02:03.0": 0x06},
    "gpus": {"bdfs": ["0000:03:00.0"]},
    "nvme": [{"bdf": "0000:04:00.0", "ctrl": "nvme0", "partitions": 3},
             {"bdf": "0000:05:00.0", "ctrl": "nvme1", "partitions": 2},
             {"bdf": "0000:06:00.0", "ctrl": "nvme2", "partitions": 2}],
    "proc": {"cmdline": "BOOT_IMAGE=/vmlinuz root=PARTUUID=0c2f ro\n"},
}


def node(sim_node, mounts, mountinfo=True, **extra):
    fixture = copy.deepcopy(NODE)
    fixture["proc"]["mounts"] = mounts
    fixture["mountinfo"] = mountinfo
    for key, value in extra.items():
        if key == "proc":
            fixture["proc"].update(value)
        else:
            fixture[key] = value
    root = sim_node(fixture)
    return root, os.path.join(root, "sys"), os.path.join(root, "proc")


def system_flags(root):
    facts, warnings = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    return sorted(d["name"] for d in facts["nvme"] if d["system"]), facts, warnings


def test_dev_root_resolved_by_major_minor(sim_node):
    root, sys_, proc = node(sim_node, "/dev/root / ext4 rw,relatime 0 0\n",
                            mount_devices={"/dev/root": "nvme0n1p2"})
    with open(os.path.join(proc, "self", "mountinfo")) as handle:
        assert " 259:2 / / " in handle.read()
    assert os.path.realpath(os.path.join(sys_, "dev", "block", "259:2")).endswith("/nvme0n1/nvme0n1p2")
    system, facts, _ = system_flags(root)
    assert system == ["nvme0n1"]
    assert facts["groups"][0]["nvme"] == ["nvme1n1", "nvme2n1"]


def test_dev_root_without_mountinfo_takes_root_from_cmdline(sim_node):
    root, sys_, proc = node(sim_node, "/dev/root / ext4 rw 0 0\n", mountinfo=False,
                            proc={"cmdline": "BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 ro\n"})
    assert not os.path.exists(os.path.join(proc, "self", "mountinfo"))
    assert read_mounts(proc)[0]["devno"] is None  # the /proc/mounts fallback
    assert system_flags(root)[0] == ["nvme0n1"]


def test_unresolvable_root_is_reported_not_ignored(sim_node):
    root, sys_, proc = node(sim_node, "/dev/root / ext4 rw 0 0\n", mountinfo=False)
    unresolved = []
    assert system_disks(proc, sys_, unresolved=unresolved) == set()
    assert unresolved == [("/", "/dev/root")]
    _, _, warnings = system_flags(root)
    assert any("/dev/root" in w and "system drive" in w for w in warnings)


def test_gds_raid_does_not_plan_the_dev_root_drive(sim_node):
    root, sys_, proc = node(sim_node, "/dev/root / ext4 rw 0 0\n",
                            mount_devices={"/dev/root": "nvme0n1p2"})
    facts, _ = discover(sys_, proc)
    rc, result = run_module("gds_raid", {"topology": facts, "procfs_root": proc, "sysfs_root": sys_,
                                         "plan_only": True, "allow_destroy": True})
    assert rc == 0, result
    planned = {m for a in result["arrays"] for m in a["members"]}
    assert planned == {"nvme1n1", "nvme2n1"}


def test_lvm_over_partitions_mounted_by_alias(sim_node):
    # LVM's /dev/vg0/root is a udev alias of dm-0; dm-0 sits on partitions of nvme0 and nvme1.
    root, sys_, proc = node(sim_node, "/dev/vg0/root / xfs rw 0 0\n/dev/nvme0n1p1 /boot/efi vfat rw 0 0\n",
                            dm={"dm-0": {"name": "vg0-root", "slaves": ["nvme0n1p3", "nvme1n1p2"]}},
                            mount_devices={"/dev/vg0/root": "dm-0"})
    assert system_flags(root)[0] == ["nvme0n1", "nvme1n1"]
    assert mounted_disks(proc, sys_) == {"nvme0n1": ["/", "/boot/efi"], "nvme1n1": ["/"]}


def test_md_on_partitions_mounted_by_md_alias(sim_node):
    mdstat = ("Personalities : [raid1]\nmd0 : active raid1 nvme2n1p2[1] nvme1n1p2[0]\n"
              "      1000 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n")
    root, sys_, proc = node(sim_node, "/dev/md/root / ext4 rw 0 0\n", proc={"mdstat": mdstat},
                            mount_devices={"/dev/md/root": "md0"})
    assert os.path.realpath(os.path.join(sys_, "dev", "block", "9:0")).endswith("/block/md0")
    system, facts, _ = system_flags(root)
    assert system == ["nvme1n1", "nvme2n1"]
    assert facts["groups"][0]["nvme"] == ["nvme0n1"]


def test_anonymous_device_numbers_fall_back_to_the_name(tmp_path):
    # btrfs and other multi-device file systems report major 0: the source name decides.
    mounts = parse_mountinfo("25 1 0:31 / / rw - btrfs /dev/nvme3n1p2 rw\n")
    assert mounts[0]["devno"] == "0:31"
    assert system_disks(str(tmp_path), str(tmp_path), mounts=mounts, swaps=[], mdstat={}) == {"nvme3n1"}


# --------------------------------------------------------------------------------------------
# Bytes that are not UTF-8, and the kernel's octal escapes
# --------------------------------------------------------------------------------------------
def test_mount_fields_decode_exactly_the_kernel_escapes():
    mounts = parse_mounts("/dev/md1 /raid\\040a\\011b\\012c\\134d\\134040e ext4 rw 0 0\n")
    assert mounts[0]["target"] == "/raid a\tb\nc\\d\\040e"
    info = parse_mountinfo("36 25 9:1 / /my\\040raid rw,relatime shared:7 master:1 - ext4 /dev/md1 rw\n")
    assert info[0]["target"] == "/my raid" and info[0]["devno"] == "9:1" and info[0]["fstype"] == "ext4"


def test_mount_point_with_non_utf8_bytes(sim_node):
    root, sys_, proc = node(sim_node, "", mountinfo=False)
    target = b"/data/\xff\xfe caf\xe9"
    with open(os.path.join(proc, "mounts"), "wb") as handle:
        handle.write(b"/dev/nvme0n1p2 / ext4 rw 0 0\n/dev/nvme1n1 " + target.replace(b" ", b"\\040")
                     + b" ext4 rw 0 0\n")
    assert mounted_disks(proc, sys_)["nvme1n1"] == [os.fsdecode(target)]
    rc, result = run_module("gds_topology", {"sysfs_root": sys_, "procfs_root": proc})
    assert rc == 0 and "codec" not in str(result), result
    nvme = result["ansible_facts"]["gds_topology"]["nvme"]
    assert [d["name"] for d in nvme if d["system"]] == ["nvme0n1"]


def test_mountinfo_with_non_utf8_bytes(sim_node):
    root, sys_, proc = node(sim_node, "/dev/root / ext4 rw 0 0\n", mount_devices={"/dev/root": "nvme0n1p2"})
    path = os.path.join(proc, "self", "mountinfo")
    with open(path, "ab") as handle:
        handle.write(b"40 21 259:5 / /srv/\xc3\x28 ext4 rw shared:9 - ext4 /dev/nvme1n1 rw\n")
    assert mounted_disks(proc, sys_)["nvme1n1"] == [os.fsdecode(b"/srv/\xc3\x28")]


def test_binary_garbage_in_mdstat_names_the_file(sim_node):
    root, sys_, proc = node(sim_node, "/dev/nvme0n1p2 / ext4 rw 0 0\n", mountinfo=False)
    path = os.path.join(proc, "mdstat")
    with open(path, "wb") as handle:
        handle.write(b"Personalities : [raid1]\n\x00\xff\xfe\x81garbage\nmd0 : active raid1 nvme1n1[0] \xff\xfe[1]\n")
    rc, result = run_module("gds_topology", {"sysfs_root": sys_, "procfs_root": proc})
    assert rc != 0 and "Traceback" not in str(result)
    assert path in result["msg"] and "codec" not in result["msg"]


def test_udev_alias_without_mountinfo_is_reported(sim_node):
    root, sys_, proc = node(sim_node, "/dev/disk/by-uuid/5a1b /boot ext4 rw 0 0\n", mountinfo=False)
    unresolved = []
    assert system_disks(proc, sys_, unresolved=unresolved) == set()
    assert unresolved == [("/boot", "/dev/disk/by-uuid/5a1b")]


# --------------------------------------------------------------------------------------------
# A loop of md slaves: the disks below are unknown, never "no disk"
# --------------------------------------------------------------------------------------------
def md_loop(sim_node):
    """/ on md0, whose only slave is md1, whose only slave is md0 (sysfs as a kernel never lays it
    out; a corrupted or hostile tree)."""
    mdstat = ("Personalities : [raid0]\nmd0 : active raid0 nvme1n1p2[0]\n"
              "      1000 blocks super 1.2 512k chunks\n\nunused devices: <none>\n")
    root, sys_, proc = node(sim_node, "/dev/md/root / ext4 rw 0 0\n", proc={"mdstat": mdstat},
                            mount_devices={"/dev/md/root": "md0"})
    md0 = os.path.realpath(os.path.join(sys_, "block", "md0"))
    md1 = os.path.join(os.path.dirname(md0), "md1")
    os.remove(os.path.join(md0, "slaves", "nvme1n1p2"))
    os.makedirs(os.path.join(md1, "slaves"))
    os.symlink(md1, os.path.join(md0, "slaves", "md1"))
    os.symlink(md0, os.path.join(md1, "slaves", "md0"))
    os.symlink(md1, os.path.join(sys_, "block", "md1"))
    return root, sys_, proc


def test_a_loop_of_md_slaves_is_an_error_naming_it_not_no_disk(sim_node):
    dummy, sys_, proc = md_loop(sim_node)
    unresolved = []
    with pytest.raises(ProcfsError, match=r"slaves links of block devices form a loop \(md0 -> md1 -> md0\): "
                                          r"the disks below md0 are unknown") as info:
        system_disks(proc, sys_, unresolved=unresolved)
    assert isinstance(info.value, ValueError)  # a job loop taking bad input as its failure reports it
    with pytest.raises(ProcfsError, match="md0 -> md1 -> md0"):
        source_disks("/dev/md0", sys_, {})
    # the topology refuses to tell system drives from data drives rather than calling none system
    with pytest.raises(ProcfsError, match="md0 -> md1 -> md0.*needed to tell system drives from data drives"):
        discover(sys_, proc)
    rc, result = run_module("gds_topology", {"sysfs_root": sys_, "procfs_root": proc})
    assert rc != 0 and "md0 -> md1 -> md0" in result["msg"] and "Traceback" not in result["msg"], result
    # nor does the RAID planner plan around drives it cannot tell
    rc, result = run_module("gds_raid", {"topology": {"gpus": [], "nvme": []}, "procfs_root": proc,
                                         "sysfs_root": sys_, "plan_only": True})
    assert rc != 0 and "md0 -> md1 -> md0" in result["msg"] and "Traceback" not in result["msg"], result


def test_a_loop_of_mdstat_members_is_an_error_naming_it(tmp_path):
    mdstat = {"md0": {"members": [{"device": "md1"}]}, "md1": {"members": [{"device": "md0"}]}}
    mounts = parse_mounts("/dev/md0 / ext4 rw 0 0\n")
    with pytest.raises(ProcfsError, match=r"members of md arrays form a loop \(md0 -> md1 -> md0\)"):
        system_disks(str(tmp_path), str(tmp_path), mounts=mounts, swaps=[], mdstat=mdstat)
    # nested arrays without a loop still resolve
    mdstat = {"md0": {"members": [{"device": "md1"}, {"device": "md2"}]}, "md1": {"members": [{"device": "nvme0n1"}]},
              "md2": {"members": [{"device": "nvme1n1p1"}]}}
    assert system_disks(str(tmp_path), str(tmp_path), mounts=mounts, swaps=[], mdstat=mdstat) == {"nvme0n1", "nvme1n1"}
