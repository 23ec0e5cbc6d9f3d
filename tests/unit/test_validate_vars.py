"""Role variables are checked in Python, beside the rule the module applies to the same value
(plugins/module_utils/<area>/*.validate_vars, called by the gds_validate filter from each role's
validate entry point): one rule where the Jinja copy and the module's disagreed."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gds.commission.plugins.filter.gds_validate import ROLE_VARIABLES, gds_validate
from ansible_collections.gds.commission.plugins.module_utils.hw import pci
from ansible_collections.gds.commission.plugins.module_utils.measure import perftest
from ansible_collections.gds.commission.plugins.module_utils.tune import acs, mounts, raid


# --------------------------------------------------------------------------------------------
# Where two copies disagreed: the one rule that won
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("port, ok", [(80, False), (1023, False), (1024, True), (64500, True), (65000, True),
                                      (65001, False)])
def test_one_port_range_for_the_role_and_the_module(port, ok):
    # unprivileged (the role's rule) and room below 65535 (the module's): 1024 to 65000, both places
    assert (perftest.validate_vars({"gds_rdma_bench_port_base": port}) == []) is ok
    assert (perftest.validate_vars({"gds_rdma_bench_peer_port_base": port}) == []) is ok
    if ok:
        assert perftest.settings_from({"port_base": port})["port_base"] == port
    else:
        with pytest.raises(perftest.BenchError, match="port_base must be an unprivileged TCP port from 1024 to 65000"):
            perftest.settings_from({"port_base": port})


@pytest.mark.parametrize("table", [{"1e3": 0.9}, {"inf": 0.9}, {400: "0.9"}, {"default": True}])
def test_one_bw_fraction_rule(table):
    # a rate in Gb/s as digits (or default) and a number as the fraction, in the module as in the role
    with pytest.raises(perftest.BenchError, match="is not rate_gbps: fraction"):
        perftest.bw_fraction(table, 400)
    assert "gds_rdma_bench_bw_fraction must be a fraction" in perftest.validate_vars({"gds_rdma_bench_bw_fraction": table})[0]
    assert perftest.bw_fraction({"400": 0.92, "default": 0.9}, 400) == 0.92


@pytest.mark.parametrize("path", ["/", "/snap/nfs", "/etc/nfs", "/var/lib/nfs", "/lib64/x", "/usr"])
def test_one_list_of_system_directories_for_arrays_and_network_mounts(path):
    assert raid.system_dir(path)
    assert any("gds_netfs_mount_root must not be / or inside a system directory" in message
               for message in mounts.validate_vars(dict(NETFS, gds_netfs_mount_root=path)))
    with pytest.raises(raid.RaidError, match="system directory|root directory"):
        raid.validate_mount_prefix(path.rstrip("/") + "/raid" if path != "/" else "/")


@pytest.mark.parametrize("path", ["/mnt/nfs", "/data", "/library", "/snapshots", "/boot1"])
def test_a_directory_beside_a_system_one_is_none(path):
    assert raid.system_dir(path) is None
    assert mounts.validate_vars(dict(NETFS, gds_netfs_mount_root=path)) == []


@pytest.mark.parametrize("text, bdf", [("0000:04:10.0", "0000:04:10.0"), ("04:10.0", "0000:04:10.0"),
                                       ("10000:E1:00.7", "10000:e1:00.7"), ("0000:4:10.0", None), ("04:10", None),
                                       ("0000:04:10.8", None)])
def test_one_pci_address_rule(text, bdf):
    assert pci.normalize_bdf(text) == bdf
    assert (acs.validate_vars({"gds_pcie_acs_bridges": [text], "gds_pcie_acs_setpci": ""}) == []) is (bdf is not None)


# --------------------------------------------------------------------------------------------
# Every validator: good values pass, each bad one is named with its value
# --------------------------------------------------------------------------------------------
NETFS = {"gds_netfs_min_io_size": 1048576, "gds_netfs_gpu_map": {}, "gds_netfs_mount_root": "/mnt/nfs",
         "gds_netfs_fstab": "/etc/fstab", "gds_netfs_mount_options": "vers=3,proto=rdma,hard",
         "gds_netfs_mounts": [{"client_if": "ib0", "server": "10.0.0.5", "export": "/export/data", "server_index": 0}]}
GOOD = {
    "gds_facts": {"gds_facts_expect": {"gpus": 8}, "gds_facts_link_baseline": "/var/lib/gds-commission/pcie_links.json"},
    "gds_pcie_acs": {"gds_pcie_acs_bridges": ["0000:04:10.0"], "gds_pcie_acs_setpci": "/usr/bin/setpci"},
    "gds_rdma": {"gds_rdma_port_rate_gbps": 400, "gds_rdma_nic_link_max": "PXB", "gds_rdma_modules_load_dir": "/etc/modules-load.d"},
    "gds_netfs": NETFS,
    "gds_raid": {"gds_raid_name_prefix": "raid", "gds_raid_mount_prefix": "/raid", "gds_raid_mkfs_options": ["-m", 0],
                  "gds_raid_chunk_kb": "512"},
    "gds_cufile": {"gds_cufile_path": "/etc/cufile.json", "gds_cufile_alternative_path": "/etc/gds-commission/cufile.json",
               "gds_cufile_alternative_priority": 1000, "gds_cufile_extra_keys": ["properties.x"],
               "gds_cufile_rdma_addresses": {"mlx5_0": "10.0.0.3"}},
    "gds_rdma_bench": {"gds_rdma_bench_tests": ["ib_write_bw"], "gds_rdma_bench_bw_fraction": {"default": 0.9, 400: 0.92},
                       "gds_rdma_bench_port_base": "18515", "gds_rdma_bench_poll_interval": 10, "gds_rdma_bench_peer": "b",
                       "gds_rdma_bench_perftest_dir": "/opt/perftest/bin"},
    "gds_slurm": {"gds_slurm_max_drain_percent": "10", "gds_slurm_max_drain_min": 1, "gds_slurm_reason_prefix": "gds:",
                  "gds_slurm_node_name": "gpu-01", "gds_slurm_verdict_file": "/var/lib/gds-commission/verdict.json",
                  "gds_slurm_healthcheck_path": "/usr/local/sbin/gds-healthcheck", "gds_slurm_scontrol": "scontrol"},
}
BAD = [
    ("gds_facts", "gds_facts_expect", {"gpus": -8}, "whole numbers >= 0"),
    ("gds_facts", "gds_facts_expect", {"disks": 8}, "'disks'"),
    ("gds_facts", "gds_facts_link_baseline", "/var/lib/../x.json", "/var/lib/../x.json"),
    ("gds_pcie_acs", "gds_pcie_acs_bridges", "0000:04:10.0", "must be a YAML list"),
    ("gds_pcie_acs", "gds_pcie_acs_setpci", "/usr/bin/setpci --x", "absolute path"),
    ("gds_rdma", "gds_rdma_port_rate_gbps", "fast", "fast"),
    ("gds_rdma", "gds_rdma_nic_link_max", "PCI", "got PCI"),
    ("gds_netfs", "gds_netfs_gpu_map", {"/mnt/a": [-1]}, "-1"),
    ("gds_netfs", "gds_netfs_fstab", "/etc/fs tab", "/etc/fs tab"),
    ("gds_netfs", "gds_netfs_mount_options", "hard intr", "hard intr"),
    ("gds_netfs", "gds_netfs_mounts", [dict(NETFS["gds_netfs_mounts"][0], client_if="ib:0")], "gds_netfs_mounts[0]"),
    ("gds_netfs", "gds_netfs_mounts", [NETFS["gds_netfs_mounts"][0]] * 2, "twice"),
    ("gds_netfs", "gds_netfs_mounts", ["ib0"], "gds_netfs_mounts[0]"),
    ("gds_raid", "gds_raid_name_prefix", "../x", "'../x'"),
    ("gds_raid", "gds_raid_mkfs_options", "-m 0", "'-m 0'"),
    ("gds_raid", "gds_raid_chunk_kb", 100, "100"),
    ("gds_cufile", "gds_cufile_alternative_path", "/etc/cufile.json", "two different paths"),
    ("gds_cufile", "gds_cufile_alternative_priority", "high", "high"),
    ("gds_cufile", "gds_cufile_rdma_addresses", {"mlx5_0": 167772160}, "167772160"),
    ("gds_rdma_bench", "gds_rdma_bench_tests", "ib_write_bw", "must be YAML lists"),
    ("gds_rdma_bench", "gds_rdma_bench_tests", ["ib_send_bw"], "ib_send_bw"),
    ("gds_rdma_bench", "gds_rdma_bench_timeout", 0, "gds_rdma_bench_timeout (0)"),
    ("gds_rdma_bench", "gds_rdma_bench_poll_interval", -1, "(-1)"),
    ("gds_rdma_bench", "gds_rdma_bench_osu_dir", "/opt/../etc", "/opt/../etc"),
    ("gds_rdma_bench", "gds_rdma_bench_peer", "a", "gds_rdma_bench_peer (a) must be another host"),
    ("gds_slurm", "gds_slurm_max_drain_percent", "250", "250"),
    ("gds_slurm", "gds_slurm_reason_prefix", "gds x", "gds x"),
    ("gds_slurm", "gds_slurm_node_name", "gpu[01-02]", "gpu[01-02]"),
    ("gds_slurm", "gds_slurm_scontrol", " ", "gds_slurm_scontrol must not be empty"),
]


@pytest.mark.parametrize("role", sorted(ROLE_VARIABLES))
def test_good_values_pass(role):
    assert gds_validate(GOOD[role], role, "a", ["a", "b"]) == []


@pytest.mark.parametrize("role, name, value, needle", BAD, ids=["%s-%r" % (b[1], b[2]) for b in BAD])
def test_each_bad_value_is_named(role, name, value, needle):
    errors = gds_validate(dict(GOOD[role], **{name: value}), role, "a", ["a", "b"])
    assert errors and all(isinstance(e, str) for e in errors)
    assert any(name in e and needle in e for e in errors), errors


def test_the_filter_refuses_what_it_cannot_check():
    with pytest.raises(AnsibleFilterError, match="no validator for role 'gds_iommu'"):
        gds_validate({}, "gds_iommu")
    with pytest.raises(AnsibleFilterError, match="must be a mapping"):
        gds_validate(["gds_netfs_mounts"], "gds_netfs")


def test_perftest_reads_the_procfs_it_is_given(tmp_path):
    """Every reader takes its root: a server is ready when net/tcp under procfs_root lists its port."""
    class Running(object):
        returncode = None

        def poll(self):
            return None

    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(
        "  sl  local_address rem_address   st\n   0: 00000000:4853 00000000:0000 0A 00000000:00000000\n")
    assert perftest.DEFAULTS["procfs_root"] == "/proc"
    assert perftest.settings_from({"procfs_root": str(tmp_path)})["procfs_root"] == str(tmp_path)
    assert perftest.wait_listening(Running(), 0x4853, 5, str(tmp_path)) == (True, None)
