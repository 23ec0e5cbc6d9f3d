"""The link baseline: written at commissioning, compared (read-only) in check mode."""
import importlib.util
import json
import os

from conftest import COLLECTION
from simtree import file_hashes

_SPEC = importlib.util.spec_from_file_location(
    "gds_commission_callback", os.path.join(COLLECTION, "plugins", "callback", "gds_commission.py"))
callback = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(callback)

DSP, NVME, GPU, GPU_PORT = "0000:04:10.0", "0000:08:00.0", "0000:07:00.0", "0000:06:00.0"


def setup(sim_node, module_runner):
    root = sim_node("dgx-a100")
    baseline = os.path.join(root, "var", "lib", "gds-commission", "pcie_links.json")

    def run(check_mode=False):
        rc, result = module_runner("gds_topology", {
            "sysfs_root": os.path.join(root, "sys"), "procfs_root": os.path.join(root, "proc"),
            "gpu_index_source": "pci", "link_baseline": baseline}, check_mode=check_mode)
        assert rc == 0, result
        return result
    return root, baseline, run


def set_link(root, bdf, name, text):
    with open(os.path.join(root, "sys", "bus", "pci", "devices", bdf, name), "w") as handle:
        handle.write(text)


def test_first_run_writes_second_run_changes_nothing(sim_node, module_runner):
    root, baseline, run = setup(sim_node, module_runner)
    first = run()
    assert first["changed"] is True and first["drift"] == []
    links = json.load(open(baseline))["links"]
    assert links[NVME] == "x4 16.0 GT/s" and links[DSP] == "x4 16.0 GT/s"
    assert links[GPU] == links[GPU_PORT] == "x16 up to 16.0 GT/s"
    assert len(links) == len(first["ansible_facts"]["gds_topology"]["pcie_links"])
    second = run()
    assert second["changed"] is False and second["drift"] == []
    drift_run = run(check_mode=True)
    assert drift_run["changed"] is False and drift_run["drift"] == []


def test_a_changed_link_is_drift_and_check_mode_writes_nothing(sim_node, module_runner):
    root, baseline, run = setup(sim_node, module_runner)
    run()
    set_link(root, DSP, "current_link_width", "2\n")
    set_link(root, NVME, "current_link_width", "2\n")
    before = file_hashes(root)
    result = run(check_mode=True)
    assert result["changed"] is True
    assert result["drift"] == [
        {"setting": "pcie link " + DSP, "expected": "x4 16.0 GT/s", "actual": "x2 16.0 GT/s"},
        {"setting": "pcie link " + NVME, "expected": "x4 16.0 GT/s", "actual": "x2 16.0 GT/s"}]
    assert file_hashes(root) == before
    # the callback's drift machinery reports the module's own items, nothing else
    assert callback.drift_items("Discover the PCIe topology from sysfs", result) == result["drift"]
    checks = {c["name"]: c["verdict"] for c in result["checks"]}
    assert checks["pcie: link " + NVME] == "FAIL" and checks["pcie: link " + DSP] == "FAIL"
    # commissioning again takes the new state, keeping the old baseline
    again = run()
    assert again["changed"] is True and os.path.isfile(again["backup_file"])
    assert json.load(open(again["backup_file"]))["links"][NVME] == "x4 16.0 GT/s"
    assert json.load(open(baseline))["links"][NVME] == "x2 16.0 GT/s"


def test_an_idle_gpu_is_no_drift(sim_node, module_runner):
    root, baseline, run = setup(sim_node, module_runner)
    run()
    set_link(root, GPU, "current_link_speed", "2.5 GT/s PCIe\n")
    set_link(root, GPU_PORT, "current_link_speed", "2.5 GT/s PCIe\n")
    result = run(check_mode=True)
    assert result["changed"] is False and result["drift"] == []
    set_link(root, GPU, "current_link_width", "8\n")
    result = run(check_mode=True)
    assert result["drift"] == [{"setting": "pcie link " + GPU, "expected": "x16 up to 16.0 GT/s",
                                "actual": "x8 up to 16.0 GT/s"}]


def test_a_vanished_link_and_a_missing_or_broken_baseline(sim_node, module_runner):
    root, baseline, run = setup(sim_node, module_runner)
    result = run(check_mode=True)  # never commissioned
    assert not os.path.exists(baseline)
    assert result["changed"] is True
    assert result["drift"] == [{"setting": "pcie link baseline " + baseline,
                                "expected": "a baseline of 88 links", "actual": "missing"}]
    run()
    doc = json.load(open(baseline))
    doc["links"]["0000:99:00.0"] = "x16 16.0 GT/s"
    with open(baseline, "w") as handle:
        json.dump(doc, handle)
    assert run(check_mode=True)["drift"] == [
        {"setting": "pcie link 0000:99:00.0", "expected": "x16 16.0 GT/s", "actual": "absent"}]
    with open(baseline, "w") as handle:
        handle.write("{not json")
    drift = run(check_mode=True)["drift"]
    assert len(drift) == 1 and baseline + " is not JSON" in drift[0]["actual"]
    assert run()["changed"] is True and json.load(open(baseline))["links"][NVME] == "x4 16.0 GT/s"


def test_an_unwritable_baseline_fails_naming_the_file(sim_node, module_runner):
    root = sim_node("dgx-a100")
    blocker = os.path.join(root, "blocker")
    open(blocker, "w").close()
    rc, result = module_runner("gds_topology", {
        "sysfs_root": os.path.join(root, "sys"), "procfs_root": os.path.join(root, "proc"),
        "gpu_index_source": "pci", "link_baseline": os.path.join(blocker, "pcie_links.json")})
    assert rc != 0 and result["failed"]
    assert "cannot write the link baseline %s/pcie_links.json" % blocker in result["msg"]
    assert "Traceback" not in json.dumps(result)


def test_without_a_baseline_option_nothing_is_written(sim_node, module_runner):
    root = sim_node("dgx-a100")
    before = file_hashes(root)
    rc, result = module_runner("gds_topology", {
        "sysfs_root": os.path.join(root, "sys"), "procfs_root": os.path.join(root, "proc"), "gpu_index_source": "pci"})
    assert rc == 0 and result["changed"] is False and "drift" not in result
    assert file_hashes(root) == before
    names = [c["name"] for c in result["checks"]]
    assert len([n for n in names if n.startswith("pcie: link ")]) == 88
