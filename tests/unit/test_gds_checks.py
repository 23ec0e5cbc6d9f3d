"""The verdicts of the tuning roles, computed in their areas' files (hw/affinity, tune/acs, tune/iommu,
tune/driver): every branch of the ACS, IOMMU, driver, udev and topology checks, the gds_facts_expect and ExecStart path validators, and
the filter plugin the roles call them through."""
import copy
import os

import pytest
import simtree
from conftest import COLLECTION

from ansible_collections.gds.commission.plugins.module_utils.core.checks import VERDICTS
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover, expect_error, topology_checks
from ansible_collections.gds.commission.plugins.module_utils.tune.acs import acs_checks, unit_exec_error
from ansible_collections.gds.commission.plugins.module_utils.tune.driver import driver_checks, driver_reboot_pending, udev_check
from ansible_collections.gds.commission.plugins.module_utils.tune.iommu import iommu_checks
from ansible_collections.gds.commission.plugins.module_utils.hw.platform import collect


def by_name(checks):
    assert all(c["verdict"] in VERDICTS and set(c) <= {"name", "verdict", "expected", "actual", "detail", "area"}
               for c in checks)
    return {c["name"]: c for c in checks}


def platform_of(root, drives=None):
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    if drives is None:
        drives = [d["name"] for d in facts["nvme"] if not d["system"]]
    platform, _ = collect(os.path.join(root, "sys"), os.path.join(root, "proc"), root, block_devices=drives)
    return facts, platform


# --------------------------------------------------------------------------------------------
# ACS
# --------------------------------------------------------------------------------------------
def bridge(bdf, before, after, offset=0x148):
    return {"bdf": bdf, "acs_offset": offset, "before": before, "after": after}


RESULT = {"bridges": [bridge("0000:04:10.0", "0x001d", "0x0000"), bridge("0000:04:14.0", "0x0000", "0x0000"),
                      bridge("0000:04:18.0", None, None, offset=None)], "vfio_devices": []}
PLATFORM_613 = {"kernel": {"release": "6.12.0-1-generic"}, "acs_cmdline": {"device_lists": False}}


def test_acs_disabled_pass_counts_only_bridges_with_acs():
    checks = by_name(acs_checks(RESULT, "disabled"))
    main = checks["acs: disabled on GPU/NVMe/NIC bridges"]
    assert (main["verdict"], main["expected"], main["actual"]) == ("PASS", 0, 0)
    assert main["detail"] == "2 bridges with ACS Control 0x0000"
    assert checks["acs: kept disabled across reboots"]["actual"] == "gds-acs-disable.service"


def test_acs_check_mode_judges_the_bridges_as_they_are():
    main = by_name(acs_checks(RESULT, "disabled", check_mode=True))["acs: disabled on GPU/NVMe/NIC bridges"]
    assert main["verdict"] == "FAIL" and main["actual"] == 1 and main["detail"] == "ACS still on: 0000:04:10.0"


def test_acs_enabled_and_query():
    enabled = by_name(acs_checks(RESULT, "enabled"))["acs: enabled on GPU/NVMe/NIC bridges"]
    assert enabled["verdict"] == "FAIL" and "ACS off: 0000:04:10.0, 0000:04:14.0" == enabled["detail"]
    on = {"bridges": [bridge("0000:04:10.0", "0x001d", "0x001d")]}
    assert by_name(acs_checks(on, "enabled"))["acs: enabled on GPU/NVMe/NIC bridges"]["verdict"] == "PASS"
    query = by_name(acs_checks(on, "query"))
    assert query["acs: state of GPU/NVMe/NIC bridges"]["verdict"] == "WARN"
    assert "acs: kept disabled across reboots" not in query
    assert by_name(acs_checks(RESULT, "query"))["acs: state of GPU/NVMe/NIC bridges"]["verdict"] == "PASS"


def test_acs_without_bridges_is_a_skip():
    for result in (None, {"skipped": True}, {"bridges": [bridge("0000:04:18.0", None, None, offset=None)]}):
        assert [c["verdict"] for c in acs_checks(result, "disabled")] == ["SKIP"]


def test_acs_managed_by_the_dgx_package_is_verified_as_disabled():
    checks = by_name(acs_checks({"bridges": [bridge("0000:04:10.0", "0x001d", "0x001d")]}, "enabled",
                                managed_by="23.11-1"))
    main = checks["acs: disabled on GPU/NVMe/NIC bridges"]
    assert main["verdict"] == "FAIL" and main["detail"].endswith("(managed by nvidia-acs-disable 23.11-1)")
    assert checks["acs: kept disabled across reboots"]["actual"] == "nvidia-acs-disable 23.11-1"


@pytest.mark.parametrize("persist,live,platform,verdict,actual,detail", [
    ("none", True, {}, "WARN", "none", "ACS comes back at the next boot"),
    ("unit", False, {}, "PASS", "gds-acs-disable.service (written; not enabled on a simulated node)", "2 bridges"),
    ("cmdline", True, {"acs_cmdline": {"device_lists": True}}, "PASS", "pci=config_acs in 99-gds-acs.cfg", "2 bridges"),
    ("cmdline", True, PLATFORM_613, "WARN", "pci=config_acs in 99-gds-acs.cfg", "kernel 6.12.0-1-generic parses only"),
    ("both", True, PLATFORM_613, "PASS", "gds-acs-disable.service + pci=config_acs in 99-gds-acs.cfg",
     "the unit clears the others"),
])
def test_acs_persistence(persist, live, platform, verdict, actual, detail):
    check = by_name(acs_checks(RESULT, "disabled", persist=persist, live=live, platform=platform))[
        "acs: kept disabled across reboots"]
    assert (check["verdict"], check["actual"]) == (verdict, actual) and detail in check["detail"]


def test_acs_vfio_devices_changed_anyway_are_a_warning():
    checks = by_name(acs_checks(dict(RESULT, vfio_devices=["0000:12:00.0"]), "disabled"))
    assert checks["acs: devices bound to vfio-pci"]["verdict"] == "WARN"
    assert "0000:12:00.0" in checks["acs: devices bound to vfio-pci"]["detail"]


# --------------------------------------------------------------------------------------------
# IOMMU
# --------------------------------------------------------------------------------------------
IOMMU = {"mode": "pt", "units": ["dmar0"], "groups": 92, "group_types": {"identity": 92}, "cmdline": {"iommu": "pt"}}


@pytest.mark.parametrize("want,after_reboot,reboot_ok,verdict,needle", [
    ("pt", False, False, "PASS", "units dmar0, 92 groups"),
    ("off", False, False, "WARN", "applies at the next reboot (gds_reboot_ok is false)"),
    ("off", False, True, "WARN", "applies at the next reboot;"),
    ("off", True, True, "FAIL", "still pt after the reboot"),
    ("leave", False, False, "SKIP", "gds_iommu_mode is leave"),
])
def test_iommu_mode(want, after_reboot, reboot_ok, verdict, needle):
    checks = by_name(iommu_checks(IOMMU, want, after_reboot=after_reboot, reboot_ok=reboot_ok,
                                  dropin="/etc/default/grub.d/99-gds-iommu.cfg", update_grub=True))
    assert checks["iommu: mode"]["verdict"] == verdict and needle in checks["iommu: mode"]["detail"]
    assert ("iommu: boot configuration" in checks) == (want != "leave")


@pytest.mark.parametrize("live,update_grub,update_bootloader,verdict,needle", [
    (False, False, True, "PASS", "simulated node"),
    (True, True, True, "PASS", "update-grub ran"),
    (True, False, True, "WARN", "is not on this node"),
    (True, True, False, "WARN", "is off"),
])
def test_iommu_boot_configuration(live, update_grub, update_bootloader, verdict, needle):
    check = by_name(iommu_checks(IOMMU, "pt", live=live, params="intel_iommu=on iommu=pt",
                                 dropin="/x/99-gds-iommu.cfg", update_grub=update_grub,
                                 update_bootloader=update_bootloader))["iommu: boot configuration"]
    assert check["verdict"] == verdict and needle in check["detail"]
    assert check["expected"] == "intel_iommu=on iommu=pt" and check["actual"] == "99-gds-iommu.cfg"


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------
def test_driver_checks_on_the_a100_node(sim_node):
    topology, platform = platform_of(sim_node("dgx-a100"))
    checks = by_name(driver_checks(platform, "nvfs", gpus=8))
    assert checks["driver: NVIDIA kernel module"]["actual"] == "535.183.06 proprietary"
    assert checks["driver: GDS mode"]["verdict"] == "PASS"
    assert checks["driver: nvidia-fs loaded"]["verdict"] == "PASS"
    assert "driver: GPU peer memory for RDMA NICs" not in checks  # the gds_rdma role's check
    assert checks["driver: udev data for data drives"]["verdict"] == "PASS"
    assert "driver: P2PDMA support" not in checks


def test_driver_without_the_nvidia_module():
    platform = {"nvidia_driver": {"loaded": False}, "udev": {}}
    assert by_name(driver_checks(platform, "compat", gpus=2))["driver: NVIDIA kernel module"]["verdict"] == "FAIL"
    checks = by_name(driver_checks(platform, "compat", gpus=0))
    assert checks["driver: NVIDIA kernel module"]["verdict"] == "SKIP"
    assert checks["driver: GDS mode"]["verdict"] == "WARN" and "no GPUDirect" in checks["driver: GDS mode"]["detail"]


def nvfs_platform(loaded=True, proc_version=True, stats=True):
    return {"nvidia_driver": {"loaded": True, "version": "550.54.15", "open": True},
            "nvidia_fs": {"loaded": loaded, "version": "2.17.5" if loaded else None, "proc_version": proc_version,
                          "rw_stats_enabled": stats}, "udev": {}}


def test_driver_nvfs_branches():
    checks = by_name(driver_checks(nvfs_platform(), "nvfs"))
    assert checks["driver: NVIDIA kernel module"]["actual"] == "550.54.15 open"
    assert checks["driver: nvidia-fs IO statistics"]["verdict"] == "PASS"
    checks = by_name(driver_checks(nvfs_platform(loaded=False, proc_version=False, stats=False), "nvfs"))
    assert checks["driver: nvidia-fs loaded"]["verdict"] == "FAIL"
    assert checks["driver: nvidia-fs loaded"]["actual"] == "not loaded"
    assert checks["driver: nvidia-fs IO statistics"]["verdict"] == "WARN"
    assert "driver: nvidia-fs IO statistics" not in by_name(driver_checks(nvfs_platform(), "nvfs", rw_stats=False))


def p2p_platform(arch="x86_64", registry=None, multipath="Y", supported=True):
    return {"arch": arch, "kernel": {"release": "6.8.0"}, "p2pdma": {"supported": supported, "built_in": supported},
            "nvidia_driver": {"loaded": True, "version": "570.86", "open": True, "registry": registry or {},
                              "registry_dwords": None}, "nvme_multipath": multipath, "udev": {}}


def test_driver_p2pdma_branches_and_pending_options():
    platform = p2p_platform()
    checks = by_name(driver_checks(platform, "p2pdma"))
    assert checks["driver: P2PDMA support"]["verdict"] == "PASS"
    assert checks["driver: NVreg_RegistryDwords"]["verdict"] == "WARN"
    assert checks["driver: nvme_core multipath"]["detail"].endswith("(gds_reboot_ok is false)")
    assert driver_reboot_pending(platform, "p2pdma") == ["NVreg_RegistryDwords", "nvme_core multipath=N"]
    done = p2p_platform(registry={"RMForceStaticBar1": "1", "RmForceDisableIomapWC": "1"}, multipath="N")
    checks = by_name(driver_checks(done, "p2pdma"))
    assert checks["driver: NVreg_RegistryDwords"]["verdict"] == checks["driver: nvme_core multipath"]["verdict"] == "PASS"
    assert driver_reboot_pending(done, "p2pdma") == [] and driver_reboot_pending(platform, "nvfs") == []
    arm = p2p_platform(arch="aarch64", multipath="N", supported=False)
    checks = by_name(driver_checks(arm, "p2pdma"))
    assert "driver: NVreg_RegistryDwords" not in checks and checks["driver: P2PDMA support"]["verdict"] == "FAIL"
    assert driver_reboot_pending(arm, "p2pdma") == []


# --------------------------------------------------------------------------------------------
# udev data: what to check and how udevd writes the record (the product never writes it)
# --------------------------------------------------------------------------------------------
def test_udev_record_missing_for_one_drive_names_the_remedy(sim_node):
    root = sim_node(copy.deepcopy(dict(simtree.load_fixture("hgx-h100"),
                                       files={k: v for k, v in simtree.load_fixture("hgx-h100")["files"].items()
                                              if k != "run/udev/data/b259:4"})))
    _, platform = platform_of(root, drives=["nvme0n1", "nvme1n1"])
    check = udev_check(platform["udev"])
    assert (check["verdict"], check["expected"], check["actual"]) == ("FAIL", 2, 1)
    assert "no udev entry for nvme1n1 (259:4)" in check["detail"] and "cuFile cannot register" in check["detail"]
    assert "udevadm info /dev/nvme1n1" in check["detail"]
    assert "udevadm trigger --action=change /dev/nvme1n1" in check["detail"]
    assert os.path.join(root, "run", "udev", "data", "b259:4") in check["detail"]


def test_udev_database_missing_points_at_udevd_and_the_container_mount():
    check = udev_check({"path": "/run/udev", "readable": False, "missing": ["nvme0n1"],
                        "devices": [{"name": "nvme0n1", "dev": "259:0", "present": False}]})
    assert check["verdict"] == "FAIL" and check["actual"] == 0
    assert "systemd-udevd" in check["detail"] and "/run/udev is mounted" in check["detail"]


def test_udev_without_data_drives_is_a_skip_and_all_present_a_pass():
    assert udev_check({"devices": [], "missing": [], "readable": True})["verdict"] == "SKIP"
    ok = udev_check({"readable": True, "missing": [], "devices": [{"name": "md1", "dev": "9:1", "present": True}]})
    assert ok == {"name": "driver: udev data for data drives", "verdict": "PASS", "expected": 1, "actual": 1,
                  "area": "driver"}


# --------------------------------------------------------------------------------------------
# Topology and the platform profile
# --------------------------------------------------------------------------------------------
TOPOLOGY = {"gpus": [{}, {}], "nvme": [{"system": True}, {"system": False}], "nics": [],
            "groups": [{"id": 0, "nvme": ["nvme1n1"]}, {"id": 1, "nvme": []}]}


def test_topology_counts_groups_and_profile():
    checks = by_name(topology_checks(TOPOLOGY, {"gpus": 2, "data_drives": 2}, "dgx_a100"))
    assert checks["topology: gpus"]["verdict"] == "PASS"
    assert (checks["topology: data_drives"]["verdict"], checks["topology: data_drives"]["actual"]) == ("FAIL", 1)
    assert checks["topology: every group has a local drive"]["verdict"] == "WARN"
    assert checks["topology: platform profile"] == dict(checks["topology: platform profile"], verdict="PASS",
                                                        actual="dgx_a100")


def test_host_without_a_platform_profile_gets_a_warning():
    check = by_name(topology_checks(TOPOLOGY))["topology: platform profile"]
    assert check["verdict"] == "WARN" and "no profile applied" in check["detail"]


@pytest.mark.parametrize("expect,needle", [
    ("gpus=8", "must be a dict"),
    ({"gpu": 8}, "unknown key 'gpu'"),
    ({"gpus": "8"}, "gds_facts_expect.gpus must be a whole number"),
    ({"gpus": True}, "gds_facts_expect.gpus"),
    ({"nics": -1}, "gds_facts_expect.nics"),
])
def test_bad_expected_counts(expect, needle):
    assert needle in expect_error(expect)
    with pytest.raises(ValueError, match="gds_facts_expect"):
        topology_checks(TOPOLOGY, expect)
    assert expect_error({"gpus": 8, "groups": 0}) is None and expect_error(None) is None


# --------------------------------------------------------------------------------------------
# ExecStart of the root unit: an absolute path, nothing else
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/usr/bin/setpci", "/opt/pciutils-3.10/sbin/setpci"])
def test_unit_exec_accepts_plain_absolute_paths(path):
    assert unit_exec_error(path) is None


@pytest.mark.parametrize("path", ["setpci", "", None, "/usr/bin/setpci; rm -rf /", "/usr/bin/setpci -v",
                                  "/usr/bin/../../tmp/setpci", "/tmp/$HOME/setpci", "/usr/bin/set%npci",
                                  "/usr/bin/setpci\nExecStart=/bin/sh"])
def test_unit_exec_refuses_relative_paths_and_shell_words(path):
    assert unit_exec_error(path)


# --------------------------------------------------------------------------------------------
# The filter plugin, loaded from its file as Ansible loads it: it imports the collection's module_utils
# --------------------------------------------------------------------------------------------
def test_filter_plugin_imports_the_collection_module_utils():
    import importlib.util

    from ansible.errors import AnsibleFilterError
    spec = importlib.util.spec_from_file_location("gds_checks_filter", os.path.join(COLLECTION, "plugins", "filter",
                                                                                     "gds_checks.py"))
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    filters = plugin.FilterModule().filters()
    assert filters["gds_topology_checks"](TOPOLOGY)[-1]["verdict"] == "WARN"
    with pytest.raises(AnsibleFilterError, match="gds_facts_expect"):
        filters["gds_topology_checks"](TOPOLOGY, {"gpus": "eight"})
    with pytest.raises(AnsibleFilterError, match="gds_pcie_acs_setpci: 'setpci --version'"):
        filters["gds_unit_exec"]("setpci --version", "gds_pcie_acs_setpci")
    assert filters["gds_unit_exec"]("/usr/sbin/setpci") == "/usr/sbin/setpci"


def test_host_verdict():
    from ansible_collections.gds.commission.plugins.module_utils.core.checks import host_verdict
    assert host_verdict(["PASS", "WARN", "SKIP"]) == "PASS"
    assert host_verdict(["PASS", "FAIL", "WARN"]) == "FAIL"
    assert host_verdict(["FAIL", "ERROR"]) == "ERROR"
    assert host_verdict(["UNREACHABLE"]) == "UNREACHABLE"
    assert host_verdict(["BOGUS", "ERROR"]) == "ERROR"  # what is no verdict does not hide one


def test_one_verdict_list_and_one_order_everywhere():
    """gds_checks holds the verdicts and their order; the report, the metrics and the fleet page
    use those, not copies (one home per rule)."""
    from ansible_collections.gds.commission.plugins.module_utils.core import checks as gds_checks
    from ansible_collections.gds.commission.plugins.module_utils.fleet import metrics as gds_metrics
    from ansible_collections.gds.commission.plugins.module_utils.fleet import report as gds_report
    from ansible_collections.gds.commission.plugins.module_utils.measure import thresholds as gds_thresholds
    assert gds_report.VERDICTS is gds_checks.VERDICTS and gds_metrics.VERDICTS is gds_checks.VERDICTS
    assert gds_report.host_verdict is gds_checks.host_verdict
    assert not hasattr(gds_thresholds, "host_verdict")
    assert gds_checks.SEVERITY == ("SKIP", "PASS", "WARN", "FAIL", "ERROR", "UNREACHABLE")
    assert list(gds_report.FLEET_ORDER) == ["UNREACHABLE", "ERROR", "FAIL", "WARN", "PASS"]
    assert gds_metrics.area_verdicts([gds_checks.check("a: 1", "FAIL", 1, 1), gds_checks.check("a: 2", "UNREACHABLE", 1, 1),
                                      gds_checks.check("b: 1", "SKIP", 1, 1), gds_checks.check("b: 2", "PASS", 1, 1)]) == \
        {"a": "UNREACHABLE", "b": "PASS"}
    with pytest.raises(ValueError, match="verdict"):
        gds_checks.check("x: y", "MAYBE", 1, 1)
    assert gds_checks.check("pcie: link 0000:01:00.0", "PASS", 1, 1, bdf="0000:01:00.0", unit=None) == {
        "name": "pcie: link 0000:01:00.0", "verdict": "PASS", "expected": 1, "actual": 1, "bdf": "0000:01:00.0",
        "area": "pcie"}


def test_fold_skips_says_a_repeated_skip_once():
    from ansible_collections.gds.commission.plugins.module_utils.core.checks import check, fold_skips
    rows = [check("rdma: bench mlx5_%d port 1 ib_write_bw %s" % (n, mem), "SKIP", ">= 180 Gb/s", None, "simulated node")
            for n in range(3) for mem in ("host", "cuda")]
    other = check("rdma: bench mlx5_9 port 1 ib_read_bw host", "SKIP", None, None, "perftest not installed")
    passed = check("rdma: port mlx5_0/1", "PASS", "ACTIVE", "ACTIVE")
    out = fold_skips([passed] + rows[:2] + [other] + rows[2:])
    assert [c["name"] for c in out] == ["rdma: port mlx5_0/1", "rdma: bench (6 checks)",
                                        "rdma: bench mlx5_9 port 1 ib_read_bw host"]
    folded = out[1]
    assert (folded["verdict"], folded["actual"], folded["detail"]) == ("SKIP", "6 skipped", "simulated node")
    assert folded["covers"] == [c["name"] for c in rows]
    # fewer than three, another area or another reason: each stays as it is
    pair = rows[:2] + [check("nvme: nvme0 health", "SKIP", None, None, "simulated node")]
    assert fold_skips(pair) == pair


def test_core_keeps_only_what_every_area_uses():
    """Each area's verdicts live in its layer's file; core/checks.py holds the record, the verdicts
    and their order, and the helpers every area uses (one home per rule)."""
    from ansible_collections.gds.commission.plugins.module_utils.core import checks as core
    from ansible_collections.gds.commission.plugins.module_utils.hw import affinity
    from ansible_collections.gds.commission.plugins.module_utils.tune import acs, driver, iommu
    area = [name for name, value in vars(core).items()
            if callable(value) and getattr(value, "__module__", None) == core.__name__
            and (name.endswith(("_checks", "_check")) or name.startswith(("acs", "iommu", "driver", "udev", "topology")))]
    assert area == []
    assert (affinity.topology_checks, acs.acs_checks, iommu.iommu_checks, driver.driver_checks, driver.udev_check) \
        and acs.unit_exec_error and driver.udev_record_check
