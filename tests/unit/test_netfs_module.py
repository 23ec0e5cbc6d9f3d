"""The gds_netfs module on fixture trees: facts, checks, and clean failures."""
from test_netfs_mounts import guide_topology, proc_tree


def test_module_returns_facts_and_checks(tmp_path, module_runner):
    proc = proc_tree(tmp_path, "guide-nfs-mountinfo")
    rc, result = module_runner("gds_netfs", {"topology": guide_topology(), "procfs_root": proc,
                                             "sysfs_root": str(tmp_path / "sys"),
                                             "expect_rdma": True, "tcp_verdict": "FAIL"})
    assert rc == 0 and not result.get("failed"), result
    assert result["changed"] is False
    mounts = result["ansible_facts"]["gds_netfs"]["mounts"]
    assert [m["nic"] for m in mounts] == ["mlx5_9", "mlx5_9", "mlx5_8", "mlx5_8"]
    assert result["mounts"] == mounts
    assert all(c["name"].startswith("netfs: ") for c in result["checks"])


def test_module_refuses_a_bad_gpu_map_by_name(tmp_path, module_runner):
    proc = proc_tree(tmp_path, "guide-nfs-mountinfo")
    rc, result = module_runner("gds_netfs", {"topology": guide_topology(), "procfs_root": proc,
                                             "gpu_map": {"/mnt/nfs/ib9/data/0": ["GPU0"]}})
    assert result.get("failed") and rc != 0
    assert "gpu_map[/mnt/nfs/ib9/data/0]" in result["msg"] and "GPU0" in result["msg"]
    assert "Traceback" not in result["msg"]


def test_module_names_an_unreadable_mount_table(tmp_path, module_runner):
    rc, result = module_runner("gds_netfs", {"topology": guide_topology(),
                                             "procfs_root": str(tmp_path / "nowhere")})
    assert result.get("failed") and "nowhere" in result["msg"]
