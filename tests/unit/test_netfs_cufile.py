"""cufile.json for network file systems: the RDMA mounts' NIC addresses in rdma_dev_addr_list and
the fs.<type> sections, with the key names of the installed GDS version."""
import json

from ansible_collections.gds.commission.plugins.module_utils.tune.cufile import (
    gds_version, loads, remote_fs_keys, remote_schema, section_keys, validate,
)
from ansible_collections.gds.commission.plugins.module_utils.tune.mounts import audit
from test_cufile_vendor import MANAGED, TOOLKIT, VENDOR_TEXT, args, vendor_node
from test_netfs_mounts import guide_topology, proc_tree

ADDRESSES = {"ib9": ["192.168.0.20"], "ib8": "192.168.1.20"}


def guide_mounts(tmp_path):
    return audit(proc_tree(tmp_path, "guide-nfs-mountinfo"), str(tmp_path / "sys"), guide_topology(),
                 interface_addresses=ADDRESSES)


def with_library(root, version="1.15.1"):
    lib = root / "usr" / "local" / "cuda-13.0" / "targets" / "x86_64-linux" / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / ("libcufile.so." + version)).write_text("")
    (lib / "libcufile.so.0").write_text("")  # the soname says nothing about the version
    return root


def test_version_from_the_library_file_name(tmp_path):
    root = with_library(vendor_node(tmp_path))
    assert gds_version(str(root)) == ("1.15.1", "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcufile.so.1.15.1")
    assert gds_version(str(tmp_path / "empty")) == (None, None)


def test_section_keys_include_the_commented_ones():
    assert section_keys(VENDOR_TEXT, "fs.nfs") == {"rdma_dev_addr_list", "mount_table"}
    assert section_keys(VENDOR_TEXT, "fs.gpfs") == {"gds_write_support", "gds_async_support",
                                                   "rdma_dev_addr_list"}
    assert section_keys(VENDOR_TEXT, "fs.weka") == {"rdma_write_support"}
    assert "rdma_load_balancing_policy" in section_keys(VENDOR_TEXT, "properties")
    assert section_keys(VENDOR_TEXT, "fs.nosuch") is None


def test_guide_mounts_go_to_the_nfs_mount_table(tmp_path):
    root = with_library(vendor_node(tmp_path))
    schema = remote_schema(str(root), [str(root) + TOOLKIT])
    assert (schema["version"], schema["source"]) == ("1.15.1", TOOLKIT)
    config, listed, notes = remote_fs_keys(guide_mounts(tmp_path), schema)
    assert config["properties"]["rdma_dev_addr_list"] == ["192.168.0.20", "192.168.1.20"]
    assert config["fs"]["nfs"]["mount_table"] == {
        "/mnt/nfs/ib9/data/0": {"rdma_dev_addr_list": ["192.168.0.20"]},
        "/mnt/nfs/ib9/data/1": {"rdma_dev_addr_list": ["192.168.0.20"]},
        "/mnt/nfs/ib8/data/0": {"rdma_dev_addr_list": ["192.168.1.20"]},
        "/mnt/nfs/ib8/data/1": {"rdma_dev_addr_list": ["192.168.1.20"]}}
    assert [m["nic"] for m in listed] == ["mlx5_9", "mlx5_9", "mlx5_8", "mlx5_8"] and notes == []
    assert validate(config) == []


def test_version_without_a_mount_table_gets_the_section_list(tmp_path):
    mounts = [{"mountpoint": "/gpfs/fs1", "fs": "gpfs", "rdma": True, "client_address": "10.0.0.5"},
              {"mountpoint": "/mnt/weka", "fs": "weka", "rdma": True, "client_address": "10.0.1.5"},
              {"mountpoint": "/mnt/tcp", "fs": "nfs", "rdma": False, "transport": "tcp",
               "client_address": "10.0.2.5"},
              {"mountpoint": "/mnt/v6", "fs": "nfs", "rdma": True, "client_address": "fd00::5",
               "netdev": "ib0"}]
    schema = {"version": "1.15.1", "source": TOOLKIT,
              "keys": {"properties": ["rdma_dev_addr_list"], "fs.gpfs": ["rdma_dev_addr_list"],
                       "fs.weka": [], "fs.nfs": ["mount_table", "rdma_dev_addr_list"]}}
    config, listed, notes = remote_fs_keys(mounts, schema)
    assert config["fs"] == {"gpfs": {"rdma_dev_addr_list": ["10.0.0.5"]}}
    assert config["properties"]["rdma_dev_addr_list"] == ["10.0.0.5", "10.0.1.5"]
    assert any(n.startswith("fs.weka:") for n in notes)
    assert "/mnt/tcp: tcp transport, not RDMA" in notes
    assert any(n.startswith("/mnt/v6: no IPv4") for n in notes)


def test_no_toolkit_file_uses_the_documented_names(tmp_path):
    schema = remote_schema(str(tmp_path), [])
    assert schema["source"] == "documentation" and schema["version"] is None
    assert schema["keys"]["fs.weka"] == ["mount_table", "rdma_dev_addr_list"]


def test_module_merges_the_mounts_into_the_vendor_file(module_runner, tmp_path):
    root = with_library(vendor_node(tmp_path))
    mounts = guide_mounts(tmp_path)
    managed = dict(MANAGED, properties=dict(MANAGED["properties"], rdma_dev_addr_list=["192.168.9.9"]))
    rc, result = module_runner("gds_cufile", args(root, config=managed, netfs_mounts=mounts))
    assert rc == 0 and not result.get("failed"), result
    written = loads(open(str(root) + "/etc/gds-commission/cufile.json").read())
    assert written["properties"]["rdma_dev_addr_list"] == ["192.168.9.9", "192.168.0.20", "192.168.1.20"]
    assert sorted(written["fs"]["nfs"]["mount_table"]) == sorted(m["mountpoint"] for m in mounts)
    assert result["gds_version"] == "1.15.1"
    check = next(c for c in result["checks"] if c["name"] == "cufile: remote file systems")
    assert check["verdict"] == "PASS" and "libcufile 1.15.1" in check["detail"] and TOOLKIT in check["detail"]
    assert "/mnt/nfs/ib9/data/0 192.168.0.20" in check["actual"]
    rc, again = module_runner("gds_cufile", args(root, config=managed, netfs_mounts=mounts))
    assert rc == 0 and again["changed"] is False, json.dumps(again["drift"])
