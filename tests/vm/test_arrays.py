"""md regrouping on the guest: one RAID0 per PCIe switch, mounted and persistent; nothing else lost."""
import pytest


def _expected_disks(guest, expected_arrays):
    by_serial = guest.serial_to_disk()
    return [dict(a, disks=sorted(by_serial[s] for s in a["serials"])) for a in expected_arrays]


def test_mdstat_has_one_raid0_per_switch(guest, expected_arrays):
    mdstat = guest.mdstat()
    want = sorted(tuple(a["disks"]) for a in _expected_disks(guest, expected_arrays))
    got = sorted(tuple(a["members"]) for a in mdstat.values() if a["level"] == "raid0")
    for members in want:
        assert members in got, "no RAID0 of exactly %s in /proc/mdstat: %s" % (list(members), mdstat)
    for name, a in mdstat.items():
        assert a["state"] == "active", "%s is %s in /proc/mdstat" % (name, a["state"])


@pytest.mark.parametrize("index", [0, 1])
def test_array_per_switch_mounted_with_right_members(guest, expected_arrays, index):
    want = _expected_disks(guest, expected_arrays)[index]
    md = guest.md_of_mount(want["mount"])
    assert md, "%s is not mounted" % want["mount"]
    detail = guest.md_detail("/dev/" + md)
    assert detail["raid_level"] == "raid0"
    assert detail["members"] == want["disks"], (
        "%s (%s) has %s, expected the drives of switch %s below %s: %s"
        % (want["mount"], md, detail["members"], want["switch"], want["root_port"], want["disks"]))
    assert "clean" in detail["state"] or "active" in detail["state"], detail["state"]
    fs = guest.host.mount_point(want["mount"])
    assert fs.filesystem == "ext4"


@pytest.mark.parametrize("index", [0, 1])
def test_array_mount_is_persistent(guest, expected_arrays, index):
    """In fstab (by UUID or label, not by the unstable mdN name) or a systemd mount unit."""
    mount = expected_arrays[index]["mount"]
    fstab = guest.host.run("findmnt --fstab -n -o SOURCE --mountpoint %s" % mount)
    unit = guest.host.run("systemctl show -p FragmentPath --value $(systemd-escape -p --suffix=mount %s)" % mount)
    frag = unit.stdout.strip()
    in_unit = frag.startswith("/etc/systemd/system/") or frag.startswith("/usr/lib/systemd/system/")
    assert fstab.rc == 0 or in_unit, "%s is neither in /etc/fstab nor a systemd mount unit" % mount
    if fstab.rc == 0:
        src = fstab.stdout.strip()
        assert not src.startswith("/dev/md") or src.startswith("/dev/md/"), (
            "fstab mounts %s from %s: md numbers change across boots, use UUID=" % (mount, src))


def test_arrays_recorded_in_mdadm_conf(guest, expected_arrays):
    conf = guest.out("grep -h '^ARRAY' /etc/mdadm/mdadm.conf || true")
    for want in expected_arrays:
        md = guest.md_of_mount(want["mount"])
        assert md, "%s is not mounted" % want["mount"]
        uuid = guest.md_detail("/dev/" + md)["uuid"]
        assert uuid in conf, "array %s (%s) missing from /etc/mdadm/mdadm.conf:\n%s" % (md, uuid, conf)


def test_default_array_is_gone(guest, prepared):
    """The DGX default array across both switches was meant to go: no trace left to assemble."""
    old = prepared["default_array"]
    scan = guest.out("mdadm --detail --scan")
    assert old["md_uuid"] not in scan, "the DGX default array %s is still assembled" % old["md_uuid"]
    conf = guest.out("grep -h '^ARRAY' /etc/mdadm/mdadm.conf || true")
    assert old["md_uuid"] not in conf, "mdadm.conf still lists the destroyed array %s" % old["md_uuid"]
    assert guest.mount_source(old["mount"]) is None, "%s is still mounted" % old["mount"]


def test_fstab_has_no_dangling_uuid(guest):
    """Every UUID= in fstab names a file system that exists (no entry left for a destroyed array)."""
    uuids = guest.out("awk '$1 ~ /^UUID=/ {sub(/^UUID=/, \"\", $1); print $1}' /etc/fstab").split()
    missing = [u for u in uuids if guest.host.run("blkid -U %s" % u).rc != 0]
    assert not missing, "fstab names file systems that no longer exist: %s" % missing


def test_array_outside_every_group_survived(guest, prepared):
    """/keep sits on a root-port drive behind no switch: same array, same file system, same data."""
    keep = prepared["keep_array"]
    md = guest.md_of_mount(keep["mount"])
    assert md, "%s is no longer mounted" % keep["mount"]
    detail = guest.md_detail("/dev/" + md)
    assert detail["uuid"] == keep["md_uuid"], "the array under %s was re-created" % keep["mount"]
    assert detail["members"] == [guest.serial_to_disk()["gds-keep"]]
    assert guest.out("findmnt -n -o UUID --mountpoint %s" % keep["mount"]).strip() == keep["fs_uuid"]
    assert guest.sha256(keep["file"]) == keep["sha256"], "%s changed" % keep["file"]


def test_system_drive_untouched(guest, prepared):
    os_ = prepared["os"]
    disk = guest.serial_to_disk()[os_["serial"]]
    assert guest.out("findmnt -n -o UUID --mountpoint /").strip() == os_["fs_uuid"]
    assert guest.sha256(os_["file"]) == os_["sha256"]
    examine = guest.host.run("mdadm --examine /dev/%s" % disk)
    assert examine.rc != 0 and "No md superblock" in (examine.stderr + examine.stdout), (
        "the system drive %s carries an md superblock:\n%s" % (disk, examine.stdout))
    for md in guest.mdstat().values():
        assert disk not in md["members"], "the system drive %s is in an array" % disk
