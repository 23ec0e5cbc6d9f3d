"""Bad input to gds_topology: skip with a warning or fail naming the path; never a traceback."""
import os

from conftest import run_module


def run(root, **extra):
    args = {"sysfs_root": os.path.join(root, "sys"), "procfs_root": os.path.join(root, "proc")}
    args.update(extra)
    rc, result = run_module("gds_topology", args)
    assert "Traceback" not in str(result)
    return rc, result


def test_garbled_sysfs_file_skips_device_with_warning(sim_node):
    root = sim_node("dgx-a100")
    with open(os.path.join(root, "sys/bus/pci/devices/0000:07:00.0/class"), "w") as handle:
        handle.write("not-a-number\n")
    rc, result = run(root)
    assert rc == 0
    assert any("0000:07:00.0" in w and "class" in w for w in result["warnings"])
    assert len(result["ansible_facts"]["gds_topology"]["gpus"]) == 7


def test_missing_sysfs_file_skips_device_with_warning(sim_node):
    root = sim_node("dgx-a100")
    os.remove(os.path.join(root, "sys/bus/pci/devices/0000:0f:00.0/vendor"))
    rc, result = run(root)
    assert rc == 0
    assert any("0000:0f:00.0" in w and "vendor" in w for w in result["warnings"])


def test_dangling_link_is_skipped_with_warning(sim_node):
    root = sim_node("dgx-a100")
    os.symlink("../../../devices/pci0000:00/0000:00:99.0",
               os.path.join(root, "sys/bus/pci/devices/0000:00:99.0"))
    rc, result = run(root)
    assert rc == 0
    assert any("dangling" in w and "0000:00:99.0" in w for w in result["warnings"])


def test_truncated_config_space_gives_unknown_acs(sim_node):
    root = sim_node("dgx-a100")
    path = os.path.join(root, "sys/bus/pci/devices/0000:04:10.0/config")
    with open(path, "rb") as handle:
        data = handle.read()
    with open(path, "wb") as handle:
        handle.write(data[:64])
    rc, result = run(root)
    assert rc == 0
    bridge = [b for b in result["ansible_facts"]["gds_topology"]["bridges"] if b["bdf"] == "0000:04:10.0"][0]
    assert bridge["acs_ctrl"] is None
    assert any("0000:04:10.0" in w and "config space is 64 bytes" in w for w in result["warnings"])


def test_missing_proc_mounts_fails_naming_the_file(sim_node):
    root = sim_node("dgx-a100")
    os.remove(os.path.join(root, "proc/mounts"))
    rc, result = run(root)
    assert rc != 0 and result["failed"]
    assert os.path.join(root, "proc", "mounts") in result["msg"]


def test_garbled_mdstat_fails_naming_the_file(sim_node):
    root = sim_node("dgx-a100")
    with open(os.path.join(root, "proc/mdstat"), "w") as handle:
        handle.write("md0 : active raid1 nvme3n1p2[1] ??garbage\n")
    rc, result = run(root)
    assert rc != 0
    assert os.path.join(root, "proc", "mdstat") in result["msg"]


def test_nonexistent_sysfs_root_fails_naming_it(tmp_path):
    rc, result = run_module("gds_topology", {"sysfs_root": str(tmp_path / "nope")})
    assert rc != 0 and str(tmp_path / "nope") in result["msg"]


def test_missing_bus_pci_is_empty_not_error(tmp_path):
    (tmp_path / "sys").mkdir()
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "mounts").write_text("")
    rc, result = run(str(tmp_path))
    assert rc == 0
    assert result["ansible_facts"]["gds_topology"]["gpus"] == []


def test_nvml_requested_but_unusable_fails_cleanly(sim_node):
    root = sim_node("cloud-vm")
    rc, result = run(root, gpu_index_source="nvml")
    assert rc != 0 and "NVML" in result["msg"]
