"""After the reboot side effect: the boot itself brought the commissioned state back.

The state tests (arrays, mounts, ACS, cuFile, data) run again after the reboot too; these add
what only a boot can show. Before the reboot they are skipped.
"""
import shlex

import pytest


@pytest.fixture(autouse=True)
def _after_reboot_only(rebooted):
    if rebooted is None:
        pytest.skip("runs after the reboot side effect (molecule/vm/reboot.yml)")


def test_guest_really_rebooted(guest, rebooted):
    now = guest.out("cat /proc/sys/kernel/random/boot_id").strip()
    assert now == rebooted["boot_id_after"] != rebooted["boot_id_before"]
    assert rebooted["system_state"] in ("running", "degraded")


def test_booted_with_the_grub_cfg_command_line(guest, rebooted):
    """The reboot booted what update-grub generated, so the IOMMU drop-in is live now."""
    assert rebooted["boot_source"] == "grub.cfg", "the guest has no grub.cfg: update-grub never ran"
    cmdline = guest.out("cat /proc/cmdline").split()
    script = ("GRUB_CMDLINE_LINUX=; GRUB_CMDLINE_LINUX_DEFAULT=; "
              "for f in /etc/default/grub.d/*.cfg; do . \"$f\"; done; "
              "echo $GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX_DEFAULT")
    for arg in guest.out("sh -c %s" % shlex.quote(script)).split():
        assert arg in cmdline, "%s (from the drop-in) is not on the running kernel's command line" % arg


def test_no_failed_units(guest, rebooted):
    failed = guest.out("systemctl list-units --failed --plain --no-legend").strip()
    assert not failed, "failed units after the reboot:\n%s" % failed


def test_arrays_assembled_at_boot(guest, expected_arrays):
    for want in expected_arrays:
        md = guest.md_of_mount(want["mount"])
        assert md, "%s was not mounted at boot" % want["mount"]
        state = guest.out("cat /sys/block/%s/md/array_state" % md).strip()
        assert state in ("clean", "active", "active-idle"), "%s is %s" % (md, state)


def test_acs_boot_unit_cleared_acs(guest, topo, prepared):
    """The kernel sets ACS on the root ports at every boot; a boot-time unit must clear it again."""
    uplinks = sorted(sw["root_port"] for sw in topo["switches"])
    for bdf in uplinks:
        assert int(prepared["acs_at_boot"][bdf], 16) != 0, "the kernel did not set ACS at boot on %s" % bdf
        assert guest.acs_ctrl(bdf) == 0, "ACS Control on %s is not 0 after the reboot" % bdf
    units = guest.out("systemctl list-units --all --plain --no-legend --type=service | awk '{print $1}'").split()
    acs_units = [u for u in units if "acs" in u.lower()]
    assert acs_units, "no ACS boot unit among the services"
    for unit in acs_units:
        show = guest.out("systemctl show -p Result -p ActiveState -p UnitFileState %s" % unit)
        props = dict(line.split("=", 1) for line in show.splitlines() if "=" in line)
        assert props.get("UnitFileState") == "enabled", "%s: %s" % (unit, props)
        assert props.get("Result") == "success", "%s: %s" % (unit, props)


def test_module_options_persisted(guest):
    """Every `options MOD key=value` in modprobe.d (the product's and the distribution's) is what
    the loaded module has after the boot; options of modules not loaded here (nvidia_fs) are skipped."""
    lines = guest.out("grep -h '^options' /etc/modprobe.d/*.conf 2>/dev/null || true").splitlines()
    checked = 0
    for line in lines:
        words = line.split()
        module = words[1].replace("-", "_")
        for opt in words[2:]:
            if "=" not in opt:
                continue
            key, value = opt.split("=", 1)
            param = guest.host.file("/sys/module/%s/parameters/%s" % (module, key))
            if not guest.host.file("/sys/module/%s" % module).exists:
                continue  # not loaded here (e.g. nvidia_fs without a GPU)
            assert param.exists, "%s has no parameter %s" % (module, key)
            actual = param.content_string.strip()
            assert actual in (value, {"1": "Y", "0": "N"}.get(value, value)), (
                "%s.%s is %s, modprobe.d says %s" % (module, key, actual, value))
            checked += 1
    if not checked:
        pytest.skip("no modprobe.d option of a module loaded in the guest to check")
