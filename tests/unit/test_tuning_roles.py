"""The tuning roles (pcie_acs, iommu, gds_driver) through the real tune playbook, on simulated nodes
built from the fixtures: refusals, bad variable values, platform variants, check mode.

One ansible-playbook run covers many hosts (each a case); the JSON callback says, per host, which
task failed with which message, and a last play prints the checks each host recorded."""
import copy
import os
import sys

import pytest
import simtree
import yaml
from conftest import COLLECTION, ROOT, run_playbook_json, task_results

TAGS = "facts,pcie_acs,iommu,gds_driver,gds_rdma"

SHOW = """
- name: Tune
  ansible.builtin.import_playbook: {tune}

- name: Show what every host recorded
  hosts: all
  gather_facts: false
  tasks:
    - name: Recorded
      ansible.builtin.debug:
        msg:
          checks: "{{{{ (gds_facts_checks | default([])) + (gds_pcie_acs_checks | default([])) + (gds_iommu_checks | default([]))
                      + (gds_driver_checks | default([])) }}}}"
          reboot: "{{{{ gds_reboot_required | default(none) }}}}"
      tags: [always]
"""


def variant(name, files=None, drop=(), **changes):
    data = copy.deepcopy(simtree.load_fixture(name))
    data.update(changes)
    merged = dict(data.get("files") or {})
    for prefix in drop:
        merged = {k: v for k, v in merged.items() if not k.startswith(prefix)}
    merged.update(files or {})
    data["files"] = merged
    return data


def gh200():
    """A GH200-like node: the H100 fixture's tree with a Grace CPU and an aarch64 kernel."""
    return variant("hgx-h100", files={
        "proc/cpuinfo": "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
                        "CPU variant\t: 0x0\nCPU part\t: 0xd4f\nCPU revision\t: 0\n\n",
        "proc/sys/kernel/osrelease": "6.8.0-1013-nvidia-64k\n",
        "lib/modules/6.8.0-1013-nvidia-64k/modules.dep": "updates/dkms/nvidia-fs.ko:\nupdates/dkms/nvidia-peermem.ko:\n",
    })


def with_vfio(name, rdma):
    data = variant(name)
    data["nics"] = [dict(n, driver="vfio-pci") if n["rdma"] == rdma else n for n in data["nics"]]
    return data


def run_playbook(tmp_path, hosts, extra_args=(), check=False):
    """Build every host's tree, write an inventory, run tune.yml; return (rc, per-host results, roots)."""
    roots = {}
    inventory = {"all": {"hosts": {}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_live": False}}}
    for host, (fixture, hostvars) in hosts.items():
        root = simtree.build(fixture, str(tmp_path / "sim" / host))
        roots[host] = root
        inventory["all"]["hosts"][host] = dict(hostvars, gds_root=root)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "show.yml").write_text(SHOW.format(tune=os.path.join(ROOT, "playbooks", "tune.yml")))
    rc, data, _ = run_playbook_json(tmp_path / "hosts.yml", tmp_path / "show.yml",
                                    ["--tags", TAGS] + (["--check", "--diff"] if check else []) + list(extra_args))
    results = {host: {"failed": None, "changed": [], "checks": None, "reboot": None} for host in hosts}
    for name, host, res in task_results(data):
        if host not in results:
            continue
        if res.get("failed") and not res.get("ignore_errors") and results[host]["failed"] is None:
            results[host]["failed"] = {"task": name, "msg": str(res.get("msg"))}
        if res.get("changed"):
            results[host]["changed"].append(name)
        if name == "Recorded":
            results[host]["checks"] = {c["name"]: c for c in res["msg"]["checks"]}
            results[host]["reboot"] = res["msg"]["reboot"]
    return rc, results, roots


def read(root, rel):
    with open(os.path.join(root, rel)) as handle:
        return handle.read()


# --------------------------------------------------------------------------------------------
# Refusals and bad values: each host one case, one playbook run
# --------------------------------------------------------------------------------------------
BAD = {
    # bad values of public variables: fail in the tune playbook's first step, naming the variable
    "bad-gds-mode": ("dgx-a100", {"gds_mode": "fast"}, "gds_mode", "nvfs, p2pdma, compat"),
    "bad-driver-mode": ("dgx-a100", {"gds_driver_mode": "nvme"}, "gds_driver_mode", "nvfs, p2pdma, compat"),
    "bad-acs-state": ("dgx-a100", {"gds_pcie_acs_state": "off"}, "gds_pcie_acs_state", "disabled, enabled, query"),
    "bad-acs-flag": ("dgx-a100", {"gds_pcie_acs_allow_with_vfio": "sometimes"}, "gds_pcie_acs_allow_with_vfio", "bool"),
    "bad-acs-bdfs": ("dgx-a100", {"gds_pcie_acs_bridges": ["0000:04:10.0", "04:10"]}, "gds_pcie_acs_bridges", "'04:10'"),
    "bad-acs-bdf-type": ("dgx-a100", {"gds_pcie_acs_bridges": {"a": 1}}, "gds_pcie_acs_bridges", "list"),
    "bad-acs-persist": ("dgx-a100", {"gds_pcie_acs_persist": "grub"}, "gds_pcie_acs_persist", "unit, cmdline, both, none"),
    "bad-iommu-mode": ("dgx-a100", {"gds_iommu_mode": "strict"}, "gds_iommu_mode", "auto, off, pt, on, leave"),
    "bad-reboot-flag": ("dgx-a100", {"gds_reboot_ok": "perhaps"}, "gds_reboot_ok", "bool"),
    "bad-live-flag": ("dgx-a100", {"gds_live": "maybe"}, "gds_live", "bool"),
    "bad-rw-stats": ("dgx-a100", {"gds_driver_nvfs_rw_stats": "loud"}, "gds_driver_nvfs_rw_stats", "bool"),
    # a string where a list belongs: the argument specs would split it at commas, the role by characters
    "acs-bridge-string": ("dgx-a100", {"gds_pcie_acs_bridges": "0000:04:10.0"}, "gds_pcie_acs_bridges",
                          "must be a YAML list"),
    # written into a root systemd unit: an absolute path and nothing else
    "bad-setpci": ("dgx-a100", {"gds_pcie_acs_setpci": "/usr/bin/setpci; reboot"}, "gds_pcie_acs_setpci",
                   "absolute path"),
    "relative-setpci": ("dgx-a100", {"gds_pcie_acs_setpci": "setpci"}, "gds_pcie_acs_setpci", "absolute path"),
    "bad-expect-type": ("dgx-a100", {"gds_facts_expect": {"gpus": "eight"}}, "gds_facts_expect", "gpus"),
    "bad-expect-value": ("dgx-a100", {"gds_facts_expect": {"gpus": -8}}, "gds_facts_expect", "whole numbers >= 0"),
    "relative-link-baseline": ("dgx-a100", {"gds_facts_link_baseline": "var/pcie_links.json"},
                               "gds_facts_link_baseline", "absolute file path"),
    "bad-reboot-timeout": ("dgx-a100", {"gds_reboot_timeout": "soon"}, "gds_reboot_timeout", "int"),
    # the roles after the platform ones: still checked before anything changes
    "bad-raid-group-by": ("dgx-a100", {"gds_raid_group_by": "rack"}, "gds_raid_group_by", "affinity, switch"),
    "bad-cufile-backup": ("dgx-a100", {"gds_cufile_backup": "sometimes"}, "gds_cufile_backup", "bool"),
}

REFUSED = {
    # safety refusals, after the variables passed
    "vfio": (with_vfio("dgx-a100", "mlx5_1"), {}, "Set ACS", "vfio-pci (0000:12:00.0)"),
    "lockdown": (variant("dgx-a100", files={"sys/kernel/security/lockdown": "none [integrity] confidentiality\n"}),
                 {}, "Set ACS", "kernel lockdown is 'integrity'"),
    "p2pdma-md-raid": ("dgx-a100", {"gds_mode": "p2pdma"}, "Refuse a GDS driver mode the node cannot run",
                       "md arrays hold data drives: md1 (nvme0n1,nvme1n1,nvme4n1"),
    # the gds_raid role's default (gds_raid_enabled: true) is enough to refuse
    "p2pdma-raid-planned": ("hgx-h100", {"gds_mode": "p2pdma"},
                            "Refuse a GDS driver mode the node cannot run", "gds_raid_enabled is true"),
    "p2pdma-old-kernel": (variant("hgx-h100", files={
        "proc/sys/kernel/osrelease": "5.15.0-105-generic\n",
        "proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.08  Tue Mar  5 2024\n"}),
        {"gds_mode": "p2pdma", "gds_raid_enabled": False}, "Refuse a GDS driver mode the node cannot run",
        "Linux 6.2+ or a kernel with p2pdma_pgmap_ops (this one is 5.15.0-105-generic) and the open NVIDIA kernel module"),
    "nvfs-missing": (variant("hgx-h100", drop=("sys/module/nvidia_fs", "proc/driver/nvidia-fs", "lib/modules")),
                     {}, "Refuse a GDS driver mode the node cannot run", "has no nvidia-fs module"),
    "grace-pt": (gh200(), {"gds_iommu_mode": "pt"}, "Refuse an IOMMU mode this node cannot run",
                 "gds_iommu_mode=pt: this is a Grace Hopper node"),
    # an Arm server that is no Grace (Neoverse N1): its SMMU has no "off" on the command line
    "arm-off": (variant("hgx-h100", files={
        "proc/cpuinfo": "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
                        "CPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n"}),
        {"gds_iommu_mode": "off"}, "Refuse an IOMMU mode this node cannot run",
        "gds_iommu_mode=off is not available on aarch64"),
    "cmdline-old-kernel": ("dgx-a100", {"gds_pcie_acs_persist": "cmdline"},
                           "Refuse a command-line parameter the kernel does not understand",
                           "kernel 5.4.0-52-generic does not understand pci=config_acs="),
}


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("refusals")
    hosts = {name: (fixture, hostvars) for name, (fixture, hostvars, _, _) in list(BAD.items()) + list(REFUSED.items())}
    return run_playbook(tmp, hosts)


@pytest.mark.parametrize("host", sorted(BAD))
def test_bad_values_fail_early_naming_the_variable(failing_run, host):
    rc, results, roots = failing_run
    _, _, variable, needle = BAD[host]
    failed = results[host]["failed"]
    assert rc != 0 and failed, results[host]
    assert variable in failed["msg"] and needle in failed["msg"], failed
    # early: nothing on the node changed (the ACS config files are untouched)
    assert results[host]["changed"] == [], results[host]["changed"]
    assert not os.path.exists(os.path.join(roots[host], "etc", "systemd", "system", "gds-acs-disable.service"))


@pytest.mark.parametrize("host", sorted(REFUSED))
def test_refusals(failing_run, host):
    rc, results, roots = failing_run
    _, _, task, needle = REFUSED[host]
    failed = results[host]["failed"]
    assert failed, results[host]
    assert task in failed["task"] and needle in failed["msg"], failed
    assert "Set ACS on the bridges between GPUs, NVMe drives and NICs" not in results[host]["changed"]


# --------------------------------------------------------------------------------------------
# Platform variants that pass
# --------------------------------------------------------------------------------------------
GOOD = {
    "a100": ("dgx-a100", {"gds_iommu_mode": "off"}),
    "h100-p2pdma": ("hgx-h100", {"gds_mode": "p2pdma", "gds_iommu_mode": "pt", "gds_raid_enabled": False,
                                 "gds_pcie_acs_persist": "both", "gds_pcie_acs_cmdline_param": "disable_acs_redir"}),
    # gds_reboot_ok, but a simulated node is never rebooted
    "gh200": (gh200(), {"gds_reboot_ok": True}),
    "dgx-package": (variant("dgx-a100", files={
        "var/lib/dpkg/status": "Package: nvidia-acs-disable\nStatus: install ok installed\nVersion: 23.11-1\n"}), {}),
    "no-udev": (variant("hgx-h100", drop=("run/",)), {"gds_iommu_mode": "pt"}),
    "mlnx-ofed": (variant("dgx-a100", drop=("sys/module/nvidia_peermem",), files={
        "lib/modules/5.4.0-52-generic/modules.dep": "updates/dkms/nvidia.ko:\nupdates/dkms/nvidia-fs.ko:\nextra/nv_peer_mem.ko:\n"}),
        {"gds_iommu_mode": "pt", "gds_mode": "compat", "gds_pcie_acs_state": "enabled"}),
}


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("variants")
    # the reboot play in batches of two hosts (a fleet reboots a few nodes at a time)
    return run_playbook(tmp, GOOD, extra_args=["-e", "gds_reboot_batch=2"])


def test_variants_converge(good_run):
    rc, results, _ = good_run
    assert rc == 0, {h: r["failed"] for h, r in results.items() if r["failed"]}


def test_a100_everything_in_place(good_run):
    _, results, roots = good_run
    root, checks = roots["a100"], results["a100"]["checks"]
    assert checks["acs: disabled on GPU/NVMe/NIC bridges"]["verdict"] == "PASS"
    unit = read(root, "etc/systemd/system/gds-acs-disable.service")
    assert "ExecStart=/usr/bin/setpci -s 0000:04:10.0 ECAP_ACS+0x6.w=0000" in unit and "Type=oneshot" in unit
    assert unit.count("ExecStart=") == int(checks["acs: disabled on GPU/NVMe/NIC bridges"]["detail"].split()[0]) == 42
    assert not os.path.exists(os.path.join(root, "etc/default/grub.d/99-gds-acs.cfg"))
    assert 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} amd_iommu=off"' in read(root, "etc/default/grub.d/99-gds-iommu.cfg")
    assert "options nvidia_fs rw_stats_enabled=1" in read(root, "etc/modprobe.d/nvidia_fs.conf")
    assert read(root, "etc/modules-load.d/nvidia_fs.conf").splitlines()[-1] == "nvidia_fs"
    assert read(root, "etc/modules-load.d/nvidia_peermem.conf").splitlines()[-1] == "nvidia_peermem"
    assert read(root, "sys/module/nvidia_fs/parameters/rw_stats_enabled") == "1\n"
    assert checks["driver: nvidia-fs IO statistics"]["verdict"] == "PASS"
    assert checks["driver: NVIDIA kernel module"]["actual"] == "535.183.06 proprietary"
    assert checks["driver: udev data for data drives"] == dict(checks["driver: udev data for data drives"],
                                                               verdict="PASS", expected=9, actual=9)
    assert checks["iommu: mode"]["verdict"] == "PASS" and results["a100"]["reboot"] is False


def test_p2pdma_node_gets_its_options_and_waits_for_a_reboot(good_run):
    _, results, roots = good_run
    root, checks = roots["h100-p2pdma"], results["h100-p2pdma"]["checks"]
    options = read(root, "etc/modprobe.d/gds-p2pdma.conf")
    assert 'options nvidia NVreg_RegistryDwords="RMForceStaticBar1=1;RmForceDisableIomapWC=1;"' in options
    assert "options nvme_core multipath=N" in options
    assert not os.path.exists(os.path.join(root, "etc/modules-load.d/nvidia_fs.conf"))
    assert checks["driver: P2PDMA support"]["verdict"] == "PASS"
    assert checks["driver: nvme_core multipath"]["verdict"] == "WARN"
    assert results["h100-p2pdma"]["reboot"] is True
    dropin = read(root, "etc/default/grub.d/99-gds-acs.cfg")
    assert '\\"pci=disable_acs_redir=0000:15:01.0;0000:17:00.0;' in dropin
    assert os.path.exists(os.path.join(root, "etc/systemd/system/gds-acs-disable.service"))
    assert checks["acs: kept disabled across reboots"]["actual"].endswith("pci=disable_acs_redir in 99-gds-acs.cfg")


def test_grace_hopper_keeps_the_iommu_on(good_run):
    _, results, roots = good_run
    assert 'iommu.passthrough=0"' in read(roots["gh200"], "etc/default/grub.d/99-gds-iommu.cfg")
    check = results["gh200"]["checks"]["iommu: mode"]
    assert check["expected"] == "on" and check["actual"] == "pt" and check["verdict"] == "WARN"
    assert results["gh200"]["reboot"] is True


def test_dgx_package_node_is_left_alone_but_verified(good_run):
    _, results, roots = good_run
    root, checks = roots["dgx-package"], results["dgx-package"]["checks"]
    assert not os.path.exists(os.path.join(root, "etc/systemd/system/gds-acs-disable.service"))
    fresh = simtree.file_hashes(simtree.build(GOOD["dgx-package"][0], os.path.join(os.path.dirname(root), "fresh")))
    now = simtree.file_hashes(root)
    configs = [k for k in fresh if k.endswith("/config")]
    assert configs and all(fresh[k] == now[k] for k in configs)  # no bridge written
    assert checks["acs: disabled on GPU/NVMe/NIC bridges"]["verdict"] == "FAIL"  # verified: still on
    assert "nvidia-acs-disable 23.11-1" in checks["acs: disabled on GPU/NVMe/NIC bridges"]["detail"]
    assert checks["acs: kept disabled across reboots"]["actual"] == "nvidia-acs-disable 23.11-1"


def test_missing_udev_data_is_reported(good_run):
    _, results, _ = good_run
    check = results["no-udev"]["checks"]["driver: udev data for data drives"]
    assert check["verdict"] == "FAIL" and check["actual"] == 0 and "cuFile cannot register" in check["detail"]
    # the remedy is udevd's: the check says where to look, the product writes no udev record
    assert "systemd-udevd" in check["detail"] and "/run/udev is mounted" in check["detail"]


def test_host_in_no_platform_group_gets_a_warning(good_run):
    _, results, _ = good_run
    check = results["a100"]["checks"]["topology: platform profile"]
    assert check["verdict"] == "WARN" and "no profile applied" in check["detail"]


def test_peer_memory_module_name_follows_what_the_node_ships(good_run):
    _, results, roots = good_run
    root = roots["mlnx-ofed"]
    assert read(root, "etc/modules-load.d/nv_peer_mem.conf").splitlines()[-1] == "nv_peer_mem"
    assert not os.path.exists(os.path.join(root, "etc/modules-load.d/nvidia_fs.conf"))  # compat mode
    checks = results["mlnx-ofed"]["checks"]
    assert checks["driver: GDS mode"]["verdict"] == "WARN"
    assert checks["acs: enabled on GPU/NVMe/NIC bridges"]["verdict"] == "PASS"
    assert not os.path.exists(os.path.join(root, "etc/systemd/system/gds-acs-disable.service"))


# --------------------------------------------------------------------------------------------
# Check mode on a drifted node
# --------------------------------------------------------------------------------------------
@pytest.mark.integration  # runs ansible-playbook
def test_check_mode_changes_nothing_and_reports_the_drift(tmp_path):
    hosts = {"drifted": ("hgx-h100", {})}
    rc, results, roots = run_playbook(tmp_path / "first", hosts)
    assert rc == 0
    root = roots["drifted"]
    # drift: one bridge back on, the unit gone, another IOMMU mode in the drop-in, stats off
    config = os.path.join(root, "sys", "bus", "pci", "devices", "0000:17:03.0", "config")
    with open(config, "r+b") as handle:
        handle.seek(0x148 + 6)
        handle.write(b"\x1d\x00")
    os.remove(os.path.join(root, "etc/systemd/system/gds-acs-disable.service"))
    with open(os.path.join(root, "etc/default/grub.d/99-gds-iommu.cfg"), "a") as handle:
        handle.write("GRUB_CMDLINE_LINUX=\"${GRUB_CMDLINE_LINUX} intel_iommu=off\"\n")
    with open(os.path.join(root, "sys/module/nvidia_fs/parameters/rw_stats_enabled"), "w") as handle:
        handle.write("0\n")
    before = {host: simtree.file_hashes(r) for host, r in roots.items()}
    # the same trees, now in check mode (run_playbook rebuilds trees: reuse the inventory instead)
    rc, data, proc = run_playbook_json(tmp_path / "first" / "hosts.yml", os.path.join(ROOT, "playbooks", "tune.yml"),
                                       ["--tags", TAGS, "--check", "--diff"])
    assert rc == 0, proc.stdout[-3000:]
    assert {host: simtree.file_hashes(r) for host, r in roots.items()} == before
    changed = {}
    drift = []
    for name, host, res in task_results(data):
        if res.get("changed"):
            changed.setdefault(host, []).append(name)
            drift += res.get("drift") or []
    assert set(changed["drifted"]) == {
        "gds.commission.gds_pcie_acs : Set ACS on the bridges between GPUs, NVMe drives and NICs",
        "gds.commission.gds_pcie_acs : Write the boot-time unit and the kernel command-line drop-in that keep ACS disabled",
        "gds.commission.gds_iommu : Write the GRUB drop-in with the IOMMU parameters",
        "gds.commission.gds_driver : Turn IO statistics on in the running nvidia-fs"}, changed["drifted"]
    assert [d for d in drift if d["setting"].startswith("acs: ")] == [
        {"setting": "acs: 0000:17:03.0 ACS control", "expected": "0x0000", "actual": "0x001d"}]
    # the files the roles write (gds_managed_file): each one that differs, by its path
    files = {os.path.relpath(d["setting"], root): d for d in drift if not d["setting"].startswith("acs: ")}
    assert set(files) == {"etc/systemd/system/gds-acs-disable.service", "etc/default/grub.d/99-gds-iommu.cfg"}, files
    assert files["etc/systemd/system/gds-acs-disable.service"]["actual"] == "absent"
    assert "intel_iommu=off" in files["etc/default/grub.d/99-gds-iommu.cfg"]["actual"]
    # the first play checked every role's variables: the tuning play runs each role's steps without
    # its own copy of those checks (roles/gds_common's preamble) and without its argument specs again
    names = [name for name, _, _ in task_results(data)]
    assert not [n for n in names if n.startswith("Check the role variables of ") or " : Check the facts were read" in n]
    # (in one task: gds_validate_roles, no argument-spec task of the roles' own)
    checked = [res for name, _, res in task_results(data) if name == "gds.commission.gds_tune : Check the variables of each role"]
    assert checked and all("gds_pcie_acs" in res["checked_roles"] and not res.get("failed") for res in checked), checked
    for role in ("gds_facts", "pcie_acs", "iommu", "gds_driver", "gds_rdma"):
        assert not [n for n in names if n.startswith("gds.commission.%s : Validating arguments against arg spec" % role)]
