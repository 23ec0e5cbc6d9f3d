"""What the tune playbook left on the simulated nodes, read through testinfra, and a check-mode run
on a drifted node that changes nothing and reports the difference.

testinfra runs once per inventory host (sim-a100, sim-h100; connection local). The nodes' trees
are under $GDS_SIM_ROOT/<host> (molecule.yml points it at the scenario's ephemeral directory)."""
import json
import os
import struct
import subprocess
import sys

import pytest

PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SIM_ROOT = os.environ["GDS_SIM_ROOT"]
ACS_CTRL_AT = 0x148 + 6  # the fixtures put ACS at 0x148 (as QEMU's pcie-root-port does)

# The shared PCI model decides the scope, as the role does (via gds_topology).

if os.path.join(PROJECT, "collections") not in sys.path:  # the collection's code, as ansible_collections.*
    sys.path.insert(0, os.path.join(PROJECT, "collections"))
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover  # noqa: E402

sys.path.insert(0, os.path.join(PROJECT, "tests", "fixtures"))
import simtree  # noqa: E402

EXPECTED = {
    "sim-a100": {"iommu": "amd_iommu=off", "bridges": 42, "untouched": ["0000:20:03.2", "0000:20:03.3"]},
    "sim-h100": {"iommu": "intel_iommu=on iommu=pt", "bridges": 28, "untouched": []},
}


def node_root(host):
    return os.path.join(SIM_ROOT, host.backend.get_hostname())


def scope(root):
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    return [b["bdf"] for b in facts["bridges"] if b["acs_cap"] is not None]


def acs_ctrl(host, root, bdf):
    data = host.file(os.path.join(root, "sys", "bus", "pci", "devices", bdf, "config")).content
    return struct.unpack_from("<H", data, ACS_CTRL_AT)[0]


def test_acs_control_cleared_in_the_config_files(host):
    root = node_root(host)
    bridges = scope(root)
    assert len(bridges) == EXPECTED[host.backend.get_hostname()]["bridges"]
    assert {bdf: acs_ctrl(host, root, bdf) for bdf in bridges} == {bdf: 0 for bdf in bridges}
    for bdf in EXPECTED[host.backend.get_hostname()]["untouched"]:  # above the OS drives only
        assert acs_ctrl(host, root, bdf) == 0x001D


def test_boot_unit_clears_the_same_bridges(host):
    root = node_root(host)
    unit = host.file(os.path.join(root, "etc", "systemd", "system", "gds-acs-disable.service"))
    assert unit.is_file and unit.mode == 0o644
    lines = unit.content_string.splitlines()
    assert "Type=oneshot" in lines and "WantedBy=sysinit.target" in lines
    assert [l for l in lines if l.startswith("ExecStart=")] == [
        "ExecStart=/usr/bin/setpci -s %s ECAP_ACS+0x6.w=0000" % bdf for bdf in scope(root)]


def test_grub_dropins(host):
    root = node_root(host)
    iommu = host.file(os.path.join(root, "etc", "default", "grub.d", "99-gds-iommu.cfg"))
    assert iommu.is_file and iommu.mode == 0o644
    assert 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} %s"' % EXPECTED[host.backend.get_hostname()]["iommu"] \
        in iommu.content_string.splitlines()
    # persistence is the unit (the profiles' gds_pcie_acs_persist: unit): no ACS command line
    assert not host.file(os.path.join(root, "etc", "default", "grub.d", "99-gds-acs.cfg")).exists


def test_module_options_and_load_lists(host):
    root = node_root(host)
    etc = os.path.join(root, "etc")
    options = host.file(os.path.join(etc, "modprobe.d", "nvidia_fs.conf"))
    assert "options nvidia_fs rw_stats_enabled=1" in options.content_string.splitlines()
    for module in ("nvidia_fs", "nvidia_peermem"):
        load = host.file(os.path.join(etc, "modules-load.d", module + ".conf"))
        assert load.mode == 0o644 and load.content_string.splitlines()[-1] == module
    assert not host.file(os.path.join(etc, "modprobe.d", "gds-p2pdma.conf")).exists
    # the running module's parameter (a file of the simulated sysfs)
    assert host.file(os.path.join(root, "sys", "module", "nvidia_fs", "parameters",
                                  "rw_stats_enabled")).content_string == "1\n"


def test_check_mode_on_a_drifted_node_changes_nothing_and_reports_it():
    """Runs once (no host fixture): drift sim-h100, then the tune playbook with --check --diff."""
    root = os.path.join(SIM_ROOT, "sim-h100")
    config = os.path.join(root, "sys", "bus", "pci", "devices", "0000:39:02.0", "config")
    with open(config, "r+b") as handle:  # the fixture's own drift, back again
        handle.seek(ACS_CTRL_AT)
        handle.write(struct.pack("<H", 0x001D))
    os.remove(os.path.join(root, "etc", "systemd", "system", "gds-acs-disable.service"))
    with open(os.path.join(root, "etc", "modprobe.d", "nvidia_fs.conf"), "w") as handle:
        handle.write("options nvidia_fs rw_stats_enabled=0\n")
    before = {host: simtree.file_hashes(os.path.join(SIM_ROOT, host)) for host in EXPECTED}

    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    playbook = os.path.join(os.environ["MOLECULE_SCENARIO_DIRECTORY"], "converge.yml")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory,
                           playbook, "--check", "--diff"], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert {host: simtree.file_hashes(os.path.join(SIM_ROOT, host)) for host in EXPECTED} == before

    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    changed, drift, diffs = {}, [], []
    for play in result["plays"]:
        for task in play["tasks"]:
            for host, res in task["hosts"].items():
                if res.get("changed"):
                    changed.setdefault(host, []).append(task["task"]["name"])
                    drift += res.get("drift") or []
                    diffs += res.get("diff") if isinstance(res.get("diff"), list) else [res.get("diff") or {}]
    assert "sim-a100" not in changed, changed.get("sim-a100")
    assert {"gds.commission.gds_pcie_acs : Set ACS on the bridges between GPUs, NVMe drives and NICs",
            "gds.commission.gds_pcie_acs : Write the boot-time unit and the kernel command-line drop-in that keep ACS disabled",
            "gds.commission.gds_driver : Load nvidia-fs at boot and set its module options"} <= set(changed["sim-h100"]), changed["sim-h100"]
    assert {"setting": "acs: 0000:39:02.0 ACS control", "expected": "0x0000", "actual": "0x001d"} in drift
    assert any("0000:39:02.0 ACS control 0x001d (SV RR CR UF)" in (d.get("before") or "") for d in diffs)
    assert any("rw_stats_enabled=0" in (d.get("before") or "") and "rw_stats_enabled=1" in (d.get("after") or "")
               for d in diffs)
