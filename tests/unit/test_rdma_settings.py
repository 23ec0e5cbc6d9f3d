"""The gds_rdma module: GPU-NIC pairing verdicts, port state and rate, GPU peer memory (persist,
load, check mode, drift), and SKIP on a node without RDMA devices."""
import os
import stat

import pytest

from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.tune.rdma import choose_peermem, pairing_checks, port_checks

SHIPPED = {"kernel": {"release": "6.8.0-60-generic", "version": [6, 8, 0]},
           "nvidia_driver": {"open": False, "version": "550.54.15"},
           "modules": {"peermem": "nvidia_peermem", "shipped": {"nvidia_peermem": True, "nv_peer_mem": False}}}
NOTHING = {"kernel": {"release": "5.4.0-150-generic", "version": [5, 4, 0]},
           "nvidia_driver": {"open": False},
           "modules": {"peermem": None, "shipped": {"nvidia_peermem": False, "nv_peer_mem": False}}}


def _topology(root):
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    return facts


@pytest.fixture
def mix(sim_node):
    root = sim_node("rdma-mix")
    return root, _topology(root)


def _by_name(checks):
    return {c["name"]: c for c in checks}


def test_gpu_whose_best_nic_is_farther_than_the_profile_fails_naming_both(mix):
    _, topo = mix
    checks = _by_name(pairing_checks(topo, "PIX"))
    assert checks["rdma: GPU0 NIC pairing"]["verdict"] == "PASS"
    bad = checks["rdma: GPU3 NIC pairing"]
    assert bad["verdict"] == "FAIL"
    assert "GPU3" in bad["detail"] and "mlx5_4" in bad["detail"] and "0000:86:00.0" in bad["detail"]
    assert bad["actual"] == "mlx5_4 PXB" and bad["expected"] == "PIX or closer"
    assert _by_name(pairing_checks(topo, "PXB"))["rdma: GPU3 NIC pairing"]["verdict"] == "PASS"


def test_ports_fail_when_down_or_at_another_rate_naming_the_port(mix):
    _, topo = mix
    checks = _by_name(port_checks(topo, 400))
    assert checks["rdma: port mlx5_0/1"]["verdict"] == "PASS"
    down = checks["rdma: port mlx5_5/1"]
    assert down["verdict"] == "FAIL" and "state DOWN" in down["detail"] and "phys_state Disabled" in down["detail"]
    slow = checks["rdma: port mlx5_4/2"]
    assert slow["verdict"] == "FAIL" and "200 Gb/s, not 400 Gb/s" in slow["detail"] and "ibp134s0d1" in slow["detail"]
    assert checks["rdma: port mlx5_4/1"]["verdict"] == "PASS"
    # without an expected rate only the state counts
    assert _by_name(port_checks(topo, None))["rdma: port mlx5_4/2"]["verdict"] == "PASS"


def test_node_without_rdma_devices_skips_with_the_reason(sim_node, module_runner, tmp_path):
    root = sim_node("cloud-vm")
    rc, result = module_runner("gds_rdma", {"topology": _topology(root), "platform": SHIPPED,
                                            "sysfs_root": os.path.join(root, "sys"),
                                            "modules_load_dir": str(tmp_path / "ml"), "live": False,
                                            "nic_link_max": "PXB", "port_rate_gbps": 400})
    assert rc == 0, result
    assert result["checks"] and {c["verdict"] for c in result["checks"]} == {"SKIP"}
    assert all("no RDMA device" in c["detail"] for c in result["checks"])
    assert not result["changed"] and not (tmp_path / "ml").exists()


def _run(module_runner, root, topo, load_dir, check_mode=False, **extra):
    args = {"topology": topo, "platform": SHIPPED, "sysfs_root": os.path.join(root, "sys"),
            "modules_load_dir": str(load_dir), "live": False}
    args.update(extra)
    return module_runner("gds_rdma", args, check_mode=check_mode)


def test_peermem_persisted_idempotent_and_check_mode_changes_nothing(mix, module_runner, tmp_path):
    root, topo = mix
    load_dir = tmp_path / "modules-load.d"
    rc, result = _run(module_runner, root, topo, load_dir, check_mode=True)
    assert rc == 0 and result["changed"]
    assert not load_dir.exists()
    assert {"setting": str(load_dir / "nvidia_peermem.conf"), "expected": "nvidia_peermem",
            "actual": "absent"} in result["drift"]
    rc, result = _run(module_runner, root, topo, load_dir)
    assert rc == 0 and result["changed"]
    assert (load_dir / "nvidia_peermem.conf").read_text().splitlines()[-1] == "nvidia_peermem"
    peer = _by_name(result["checks"])["rdma: GPU peer memory"]
    assert peer["verdict"] == "WARN" and "next boot" in peer["detail"]  # a simulated node cannot load it
    rc, again = _run(module_runner, root, topo, load_dir)
    assert rc == 0 and not again["changed"]
    rc, check = _run(module_runner, root, topo, load_dir, check_mode=True)
    # only the down port is left as drift (mlx5_5 of the fixture): peer memory is in place
    assert rc == 0 and [d["setting"] for d in check["drift"]] == ["rdma port mlx5_5/1"]


def test_peermem_already_loaded_by_another_file_is_left_alone(mix, module_runner, tmp_path):
    root, topo = mix
    load_dir = tmp_path / "ml"
    load_dir.mkdir()
    (load_dir / "gpu.conf").write_text("# from the admin\nnvidia-peermem  # dashes as modprobe allows\n")
    os.makedirs(os.path.join(root, "sys", "module", "nvidia_peermem"))
    rc, result = _run(module_runner, root, topo, load_dir)
    assert rc == 0 and not result["changed"]
    assert sorted(os.listdir(load_dir)) == ["gpu.conf"]
    peer = _by_name(result["checks"])["rdma: GPU peer memory"]
    assert peer["verdict"] == "PASS" and "gpu.conf" in peer["actual"]


def test_live_node_loads_the_module_with_modprobe(mix, module_runner, tmp_path, monkeypatch):
    root, topo = mix
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "modprobe"
    # the fake modprobe makes /sys/module/<name> appear, as loading does
    fake.write_text("#!/bin/sh\nmkdir -p '%s/sys/module/'\"$1\"\necho \"$@\" >> '%s/modprobe.log'\n" % (root, tmp_path))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))
    rc, result = _run(module_runner, root, topo, tmp_path / "ml", live=True, check_mode=True)
    assert rc == 0 and not (tmp_path / "modprobe.log").exists()
    assert {"setting": "rdma peer memory module", "expected": "nvidia_peermem loaded", "actual": "not loaded"} in result["drift"]
    rc, result = _run(module_runner, root, topo, tmp_path / "ml", live=True)
    assert rc == 0 and result["changed"]
    assert (tmp_path / "modprobe.log").read_text().split() == ["nvidia_peermem"]
    assert _by_name(result["checks"])["rdma: GPU peer memory"]["verdict"] == "PASS"
    fake.write_text("#!/bin/sh\necho 'modprobe: FATAL: Module nv_peer_mem not found' >&2\nexit 1\n")
    rc, result = _run(module_runner, root, topo, tmp_path / "ml2", live=True, peermem="nv_peer_mem",
                      platform=dict(SHIPPED, modules={"peermem": None, "shipped": None}))
    assert rc != 0 and "modprobe nv_peer_mem failed" in result["msg"] and "not found" in result["msg"]


@pytest.mark.parametrize("want, platform, method, reason", [
    ("auto", SHIPPED, "nvidia_peermem", None),
    ("auto", dict(NOTHING, modules={"peermem": "nv_peer_mem", "shipped": {"nv_peer_mem": True}}), "nv_peer_mem", None),
    ("auto", dict(NOTHING, kernel={"release": "6.8.0", "version": [6, 8, 0]},
                  nvidia_driver={"open": True}), "dmabuf", None),
    ("auto", NOTHING, None, "Linux 5.12+ (this one is 5.4.0-150-generic)"),
    ("dmabuf", dict(SHIPPED, nvidia_driver={"open": False}), None, "the open NVIDIA kernel module (proprietary loaded)"),
    ("nv_peer_mem", SHIPPED, None, "nv_peer_mem is neither loaded nor shipped"),
    ("none", SHIPPED, "none", "gds_rdma_peermem is none"),
])
def test_peermem_method_follows_what_the_node_provides(tmp_path, want, platform, method, reason):
    got, why = choose_peermem(want, platform, str(tmp_path))
    assert got == method
    assert (why is None) if reason is None else (reason in why)


def test_dmabuf_needs_no_module_and_passes(mix, module_runner, tmp_path):
    root, topo = mix
    platform = dict(NOTHING, kernel={"release": "6.8.0", "version": [6, 8, 0]}, nvidia_driver={"open": True})
    rc, result = _run(module_runner, root, topo, tmp_path / "ml", peermem="dmabuf", platform=platform)
    assert rc == 0 and not result["changed"] and not (tmp_path / "ml").exists()
    assert _by_name(result["checks"])["rdma: GPU peer memory"]["verdict"] == "PASS"
    rc, result = _run(module_runner, root, topo, tmp_path / "ml", peermem="auto", platform=NOTHING)
    peer = _by_name(result["checks"])["rdma: GPU peer memory"]
    assert rc == 0 and peer["verdict"] == "FAIL" and "DMA-BUF" in peer["detail"]


def test_port_rate_drift_in_check_mode(mix, module_runner, tmp_path):
    root, topo = mix
    rc, result = _run(module_runner, root, topo, tmp_path / "ml", check_mode=True, port_rate_gbps=400, peermem="none")
    assert rc == 0 and result["changed"]
    items = {d["setting"]: d for d in result["drift"]}
    assert items["rdma port mlx5_4/2"] == {"setting": "rdma port mlx5_4/2", "expected": "ACTIVE LinkUp 400 Gb/s",
                                           "actual": "ACTIVE LinkUp 200 Gb/s"}
    assert "rdma port mlx5_5/1" in items and "rdma port mlx5_0/1" not in items
    # not in check mode a port that differs is a FAIL, not a change
    rc, result = _run(module_runner, root, topo, tmp_path / "ml", port_rate_gbps=400, peermem="none")
    assert rc == 0 and not result["changed"] and "rdma port mlx5_4/2" in [d["setting"] for d in result["drift"]]


@pytest.mark.parametrize("args, message", [
    ({"topology": {"gpus": []}}, "topology.nics is missing"),
    ({"topology": {"gpus": [], "nics": [], "matrix": {}}, "port_rate_gbps": -5}, "port_rate_gbps must be a positive"),
    ({"topology": {"gpus": [], "nics": [], "matrix": {}}, "nic_link_max": "FAR"}, "nic_link_max"),
])
def test_bad_input_is_a_clear_error(module_runner, args, message):
    rc, result = module_runner("gds_rdma", args)
    assert rc != 0 and message in result["msg"] and "Traceback" not in result["msg"]
