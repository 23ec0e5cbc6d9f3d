"""The gds_rdma_bench module end to end (JSON in, JSON out) without running a benchmark."""

TOPOLOGY = {"nics": [{"name": "rxe0", "bdf": "0000:03:00.0", "numa_node": -1, "software": True,
                      "ports": [{"port": 1, "state": "ACTIVE", "phys_state": "LinkUp", "rate_gbps": 10}]}],
            "gpus": [], "matrix": {}}


def test_no_rdma_device_skips(module_runner):
    rc, result = module_runner("gds_rdma_bench", {"topology": {"nics": [], "gpus": [], "matrix": {}},
                                                  "tests": ["ib_write_bw"]})
    assert rc == 0, result
    assert [(r["memory"], r["verdict"], r["reason"]) for r in result["results"]] == [
        ("host", "SKIP", "no RDMA device"), ("cuda", "SKIP", "no RDMA device")]
    assert [c["name"] for c in result["checks"]] == ["rdma: bench ib_write_bw host", "rdma: bench ib_write_bw cuda"]


def test_check_mode_runs_nothing(module_runner):
    rc, result = module_runner("gds_rdma_bench", {"topology": TOPOLOGY, "tests": ["ib_write_bw"],
                                                  "min_gbps": 1.0}, check_mode=True)
    assert rc == 0 and not result["changed"]
    rows = {(r["memory"], r["verdict"], r["reason"]) for r in result["results"]}
    assert rows == {("host", "SKIP", "check mode: nothing was run"), ("cuda", "SKIP", "no NVIDIA GPU")}
    assert result["results"][0]["threshold_gbps"] == 1.0


def test_plan_mode_returns_keys_and_ports(module_runner):
    rc, result = module_runner("gds_rdma_bench", {"topology": TOPOLOGY, "mode": "plan", "tests": ["ib_read_bw"],
                                                  "memory": ["host"], "port_base": 20000})
    assert rc == 0
    assert [(r["key"], r["tcp_port"]) for r in result["runs"]] == [("0:1:ib_read_bw:host:near", 20000)]


def test_bad_settings_fail_naming_the_key(module_runner):
    rc, result = module_runner("gds_rdma_bench", {"topology": TOPOLOGY, "bw_fraction": {"400": 2}})
    assert rc != 0 and result["failed"]
    assert result["msg"] == "gds_rdma_bench: bw_fraction: '400': the fraction must be in (0, 1], got 2"
    rc, result = module_runner("gds_rdma_bench", {"topology": TOPOLOGY, "mode": "client", "runs": []})
    assert rc != 0 and "peer_address" in result["msg"]
