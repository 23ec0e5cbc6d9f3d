"""Parsers for /proc/mounts, /proc/swaps and /proc/mdstat."""
import pytest

from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import (
    ProcfsError, base_disk, parse_mdstat, parse_mounts, parse_swaps, system_disks,
)

MDSTAT = """Personalities : [raid1] [raid0] [linear] [multipath] [raid6] [raid5] [raid4] [raid10]
md4 : active raid0 nvme9n1[1] nvme8n1[0]
      7501211648 blocks super 1.2 512k chunks

md0 : active raid1 nvme3n1p2[1] nvme2n1p2[0](F)
      1874715648 blocks super 1.2 [2/1] [U_]
      bitmap: 2/14 pages [8KB], 65536KB chunk

md127 : inactive nvme5n1[1](S) nvme4n1[0](S)
      7501211648 blocks super 1.2

md9 : active (auto-read-only) raid1 sdb1[1] sda1[0]
      1000 blocks super 1.2 [2/2] [UU]

unused devices: <none>
"""


def test_mdstat_arrays_members_levels_and_chunks():
    arrays = parse_mdstat(MDSTAT)
    assert sorted(arrays) == ["md0", "md127", "md4", "md9"]
    assert arrays["md4"]["level"] == "raid0" and arrays["md4"]["chunk_kb"] == 512
    assert [m["device"] for m in arrays["md4"]["members"]] == ["nvme8n1", "nvme9n1"]
    assert arrays["md0"]["members"][0]["flags"] == ["F"]
    assert arrays["md0"]["chunk_kb"] is None  # the bitmap chunk is not a RAID chunk
    assert arrays["md127"]["state"] == "inactive" and arrays["md127"]["level"] is None
    assert arrays["md9"]["readonly"] and arrays["md9"]["level"] == "raid1"


def test_mdstat_garbage_member_is_an_error():
    with pytest.raises(ProcfsError):
        parse_mdstat("md0 : active raid1 sda1[0] what?\n")


def test_mounts_unescape_and_swaps():
    mounts = parse_mounts("/dev/md1 /raid\\040data ext4 rw 0 0\n")
    assert mounts[0]["target"] == "/raid data"
    swaps = parse_swaps("Filename Type Size Used Priority\n/dev/nvme0n1p3 partition 1 0 -2\n/swap.img file 1 0 -3\n")
    assert [s["type"] for s in swaps] == ["partition", "file"]


def test_base_disk():
    assert base_disk("nvme0n1p2") == "nvme0n1"
    assert base_disk("sda3") == "sda"
    assert base_disk("nvme10n1") == "nvme10n1"


def test_system_disks_through_md_and_swap(tmp_path):
    mounts = parse_mounts("/dev/md0 / ext4 rw 0 0\n/dev/md4 /raid4 ext4 rw 0 0\n")
    swaps = parse_swaps("Filename Type\n/dev/nvme6n1p1 partition\n")
    disks = system_disks(str(tmp_path), str(tmp_path), mounts=mounts, swaps=swaps,
                         mdstat=parse_mdstat(MDSTAT))
    assert disks == {"nvme2n1", "nvme3n1", "nvme6n1"}


def test_partition_of_an_md_array_is_its_members(tmp_path):
    mounts = parse_mounts("/dev/md0p1 / ext4 rw 0 0\n")
    disks = system_disks(str(tmp_path), str(tmp_path), mounts=mounts, swaps=[],
                         mdstat=parse_mdstat(MDSTAT))
    assert disks == {"nvme2n1", "nvme3n1"}
