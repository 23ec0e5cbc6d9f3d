"""Planning, thresholds, verdicts and command lines of the RDMA benchmark (no process runs)."""
import pytest

from ansible_collections.gds.commission.plugins.module_utils.measure import perftest as pt


def port(n=1, state="ACTIVE", rate=400, layer="InfiniBand"):
    return {"port": n, "state": state, "phys_state": "LinkUp" if state == "ACTIVE" else "Disabled",
            "rate_gbps": rate, "link_layer": layer, "netdev": None}


def topology(ports=None, software=False, gpus=True):
    """Two GPUs and two NICs: mlx5_0 on GPU0's switch (GPU1 across the sockets), mlx5_1 on GPU1's."""
    nics = [{"name": "mlx5_1", "bdf": "0000:c1:00.0", "netdev": "ibp193s0", "netdevs": ["ibp193s0"],
             "numa_node": 1, "software": software, "ports": [port()]},
            {"name": "mlx5_0", "bdf": "0000:19:00.0", "netdev": "ibp25s0", "netdevs": ["ibp25s0"],
             "numa_node": 0, "software": software, "ports": ports if ports is not None else [port()]}]
    gpu_list = [{"index": 0, "bdf": "0000:1b:00.0", "numa_node": 0, "nics": ["mlx5_0"], "nic_link": "PIX"},
                {"index": 1, "bdf": "0000:c3:00.0", "numa_node": 1, "nics": ["mlx5_1"], "nic_link": "PIX"}]
    matrix = {"GPU0": {"mlx5_0": "PIX", "mlx5_1": "SYS"}, "GPU1": {"mlx5_0": "SYS", "mlx5_1": "PIX"}}
    return {"nics": nics, "gpus": gpu_list if gpus else [], "matrix": matrix if gpus else {}}


def settings(**kw):
    return pt.settings_from(dict({"tests": ["ib_write_bw", "ib_read_bw", "ib_write_lat"]}, **kw))


def test_plan_per_nic_port_host_near_and_far_gpu():
    rows = pt.plan(topology(), settings())
    mlx0 = [r for r in rows if r["nic"] == "mlx5_0"]
    assert rows[0]["nic"] == "mlx5_0"  # NICs in natural name order, whatever the facts' order
    assert [(r["test"], r["memory"], r["gpu"], r["affine"]) for r in mlx0] == [
        ("ib_write_bw", "host", None, True), ("ib_write_bw", "cuda", 0, True), ("ib_write_bw", "cuda", 1, False),
        ("ib_read_bw", "host", None, True), ("ib_read_bw", "cuda", 0, True), ("ib_read_bw", "cuda", 1, False),
        ("ib_write_lat", "host", None, True), ("ib_write_lat", "cuda", 0, True)]
    assert {r["link"] for r in mlx0 if r["memory"] == "cuda"} == {"PIX", "SYS"}
    assert [r["gpu"] for r in rows if r["nic"] == "mlx5_1" and r["memory"] == "cuda" and r["affine"]] == [1, 1, 1]
    assert len({r["tcp_port"] for r in rows}) == len(rows)
    assert all(r["verdict"] is None for r in rows)


def test_far_gpu_off_and_no_far_gpu_when_all_equally_near():
    assert not [r for r in pt.plan(topology(), settings(far_gpu=False)) if not r["affine"]]
    topo = topology()
    topo["matrix"] = {"GPU0": {"mlx5_0": "NODE", "mlx5_1": "NODE"}, "GPU1": {"mlx5_0": "NODE", "mlx5_1": "NODE"}}
    assert not [r for r in pt.plan(topo, settings()) if not r["affine"]]


def test_no_rdma_device_rows_skip():
    rows = pt.plan({"nics": [], "gpus": [], "matrix": {}}, settings(tests=["ib_write_bw", "osu_bw"]))
    assert {(r["test"], r["memory"]) for r in rows} == {("ib_write_bw", "host"), ("ib_write_bw", "cuda"),
                                                         ("osu_bw", "cuda")}
    assert {(r["verdict"], r["reason"]) for r in rows} == {("SKIP", "no RDMA device")}


def test_no_gpu_cuda_rows_skip():
    rows = pt.plan(topology(gpus=False), settings())
    cuda = [r for r in rows if r["memory"] == "cuda"]
    assert cuda and {(r["verdict"], r["reason"]) for r in cuda} == {("SKIP", "no NVIDIA GPU")}
    assert {r["verdict"] for r in rows if r["memory"] == "host"} == {None}


def test_down_port_fails_with_the_port():
    rows = pt.plan(topology(ports=[port(1), port(2, state="DOWN")]), settings())
    down = [r for r in rows if r["nic"] == "mlx5_0" and r["port"] == 2]
    assert down and {r["verdict"] for r in down} == {"FAIL"}
    assert "port 2 of mlx5_0 is DOWN (Disabled)" in down[0]["reason"]
    assert {r["verdict"] for r in rows if r["port"] == 1} == {None}
    # the kernel's own spelling in sysfs ("4: ACTIVE") is active too
    assert {r["verdict"] for r in pt.plan(topology(ports=[port(1, state="4: ACTIVE")]), settings())} == {None}


@pytest.mark.parametrize("fraction, rate, expected", [
    (0.90, 400, 360.0),
    ({"default": 0.8, 200: 0.9, "400": 0.95}, 400, 380.0),
    ({"default": 0.8, 200: 0.9}, 200, 180.0),
    ({"default": 0.8, 200: 0.9}, 100, 80.0),
])
def test_threshold_fraction_of_port_rate(fraction, rate, expected):
    nic = {"name": "mlx5_0", "software": False}
    assert pt.threshold_gbps(nic, port(rate=rate), settings(bw_fraction=fraction)) == expected


def test_threshold_floor_and_software_device():
    s = settings(min_gbps=2.5)
    assert pt.threshold_gbps({"software": False}, port(rate=10), s) == 9.0
    assert pt.threshold_gbps({"software": False}, port(rate=1), s) == 2.5
    # rxe reports its netdev's nominal speed: only the absolute floor counts
    assert pt.threshold_gbps({"software": True}, port(rate=100), s) == 2.5
    assert pt.threshold_gbps({"software": True}, port(rate=100), settings()) is None
    assert pt.threshold_gbps({"software": False}, port(rate=None), settings()) is None


def test_plan_rows_carry_thresholds():
    rows = pt.plan(topology(software=True), settings(min_gbps=1.0, lat_us_max=50))
    bw = [r for r in rows if r["test"] == "ib_write_bw"]
    assert {r["threshold_gbps"] for r in bw if r["affine"]} == {1.0}
    assert {r["threshold_gbps"] for r in bw if not r["affine"]} == {None}  # judged by the gain
    assert {r["lat_us_max"] for r in rows if r["test"] == "ib_write_lat"} == {50.0}
    assert {r["threshold_gbps"] for r in rows if r["test"] == "ib_write_lat"} == {None}


@pytest.mark.parametrize("gbps, verdict", [(300.0, "FAIL"), (370.0, "WARN"), (390.0, "PASS")])
def test_bandwidth_verdicts(gbps, verdict):
    row = pt.plan(topology(), settings())[0]
    row["gbps"] = gbps
    assert pt.judge(row, settings())["verdict"] == verdict
    assert row["threshold_gbps"] == 360.0


@pytest.mark.parametrize("lat, limit, verdict", [(6.0, 5.0, "FAIL"), (4.9, 5.0, "WARN"), (1.1, 5.0, "PASS"),
                                                 (99.0, 0, "PASS")])
def test_latency_verdicts(lat, limit, verdict):
    s = settings(lat_us_max=limit)
    row = [r for r in pt.plan(topology(), s) if r["test"] == "ib_write_lat"][0]
    row["lat_us"] = lat
    assert pt.judge(row, s)["verdict"] == verdict


def test_commands_pinned_cuda_by_bus_id_json_and_address():
    s = settings()
    rows = pt.plan(topology(), s)
    near = [r for r in rows if r["memory"] == "cuda" and r["affine"]][0]
    features = {"out_json": True, "use_cuda": True, "use_cuda_bus_id": True, "report_gbits": True}
    client = pt.perftest_command("/opt/perftest/bin/ib_write_bw", near, s, features, "client",
                                 json_file="/tmp/x/client.json", numactl_path="/usr/bin/numactl")
    assert client[:3] == ["/usr/bin/numactl", "--cpunodebind=0", "--membind=0"]
    assert client[3:8] == ["/opt/perftest/bin/ib_write_bw", "-d", "mlx5_0", "-i", "1"]
    for arg in ("--report_gbits", "--use_cuda_bus_id=0000:1b:00.0", "--out_json",
                "--out_json_file=/tmp/x/client.json"):
        assert arg in client
    assert client[-1] == "127.0.0.1"
    server = pt.perftest_command("ib_write_bw", near, s, features, "server")
    assert server[0] == "ib_write_bw" and server[-1] != "127.0.0.1"
    assert server[server.index("-p") + 1] == str(near["tcp_port"])


def test_commands_without_json_bus_id_or_numactl():
    s = settings(extra_args=["-x", "3"])
    rows = pt.plan(topology(), s)
    far = [r for r in rows if not r["affine"]][0]
    features = {"out_json": False, "use_cuda": True, "use_cuda_bus_id": False, "report_gbits": True}
    cmd = pt.perftest_command("ib_write_bw", far, s, features, "client", address="10.0.0.2",
                              json_file="/tmp/x.json")
    assert "--use_cuda=1" in cmd and not [a for a in cmd if a.startswith("--out_json")]
    assert cmd[0] == "ib_write_bw" and cmd[-3:] == ["-x", "3", "10.0.0.2"]
    lat = [r for r in rows if r["test"] == "ib_write_lat"][0]
    cmd = pt.perftest_command("ib_write_lat", lat, s, features, "server")
    assert cmd[cmd.index("-n") + 1] == "1000" and "--report_gbits" not in cmd and "-D" not in cmd


def test_osu_command_device_buffers_on_the_nic():
    s = pt.settings_from({"tests": ["osu_bw"], "osu_mpirun_args": ["--allow-run-as-root"]})
    row = [r for r in pt.plan(topology(), s) if r["affine"]][0]
    cmd = pt.osu_command("/opt/omb/osu_bw", row, s, "localhost:2")
    assert cmd[:5] == ["mpirun", "-np", "2", "--host", "localhost:2"]
    assert "--allow-run-as-root" in cmd and "UCX_NET_DEVICES=mlx5_0:1" in cmd
    assert cmd[-4:] == ["-d", "cuda", "D", "D"]


FOUND = {"perftest": {t: "/usr/bin/" + t for t in pt.PERFTEST_TESTS},
         "features": {t: {"out_json": False, "use_cuda": False, "use_cuda_bus_id": False, "report_gbits": True}
                      for t in pt.PERFTEST_TESTS},
         "numactl": None, "osu": {}, "osu_cuda": False, "mpirun": None}


def test_skip_reasons():
    rows = pt.plan(topology(), pt.settings_from({}))
    reasons = {(r["test"], r["memory"]): pt.skip_reason(r, FOUND) for r in rows}
    assert reasons[("ib_write_bw", "host")] is None
    assert reasons[("ib_write_bw", "cuda")] == "perftest built without CUDA"
    assert reasons[("osu_bw", "cuda")] == "OSU micro-benchmarks not installed (osu_bw not found)"
    found = dict(FOUND, perftest={}, osu={"osu_bw": "/x/osu_bw"}, mpirun="/usr/bin/mpirun")
    assert pt.skip_reason(rows[0], found) == "perftest not installed (ib_write_bw not found)"
    osu = [r for r in rows if r["test"] == "osu_bw"][0]
    assert pt.skip_reason(osu, found) == "OSU micro-benchmarks built without CUDA"
    assert pt.skip_reason(osu, dict(found, mpirun=None)) == "no MPI (mpirun not found)"


def test_run_all_skips_without_running_anything():
    rows, found = pt.run_all(topology(), settings(), skip="simulated node")
    assert found is None and {r["verdict"] for r in rows} == {"SKIP"}
    rows, _ = pt.run_all(topology(), settings(), check_mode=True)
    assert {r["reason"] for r in rows} == {"check mode: nothing was run"}


@pytest.mark.parametrize("params, message", [
    ({"tests": ["ib_send_bw"]}, "tests: 'ib_send_bw' is not one of"),
    ({"tests": "ib_write_bw"}, "tests must be a list"),
    ({"memory": ["gpu"]}, "memory: 'gpu' is not one of host, cuda"),
    ({"bw_fraction": {400: 1.5}}, r"bw_fraction: 400: the fraction must be in \(0, 1\]"),
    ({"bw_fraction": {"fast": 0.9}}, "bw_fraction: 'fast'"),
    ({"min_gbps": "lots"}, "min_gbps must be a number"),
    ({"timeout": 0}, "timeout must be > 0"),
    ({"affinity_gain": [1.2, 0.1, None, "x"]}, "lower must be <= 0"),
    ({"extra_args": "-x 3"}, "extra_args must be a list"),
    ({"osu_nic_args": ["-x", "UCX_NET_DEVICES={hca}"]},
     r"osu_nic_args: 'UCX_NET_DEVICES=\{hca\}': only \{nic\} and \{port\}"),
    ({"osu_nic_args": ["{0}"]}, r"osu_nic_args: '\{0\}'"),
    ({"osu_nic_args": ["{nic.x}"]}, r"osu_nic_args: '\{nic.x\}'"),
    ({"osu_nic_args": ["{nic"]}, r"osu_nic_args: '\{nic'"),
])
def test_settings_errors_name_the_key(params, message):
    with pytest.raises(pt.BenchError, match=message):
        pt.settings_from(params)


def test_affinity_gain_checks():
    s = settings(affinity_gain=[1.2, -0.1, None, "x"])
    rows = pt.plan(topology(), s)
    for row in rows:
        if row["nic"] == "mlx5_0" and row["memory"] == "cuda" and row["test"] == "ib_write_bw":
            row["gbps"] = 360.0 if row["affine"] else 200.0
        if row["nic"] == "mlx5_0" and row["memory"] == "cuda" and row["test"] == "ib_read_bw":
            row["gbps"] = 360.0 if row["affine"] else 350.0
    checks = {c["name"]: c for c in pt.affinity_checks(rows, s["affinity_gain"])}
    write = checks["rdma: bench mlx5_0 port 1 ib_write_bw affinity gain"]
    assert write["verdict"] == "PASS" and write["actual"] == 1.8
    assert "GPU0 (PIX) 360 Gb/s / GPU1 (SYS) 200 Gb/s" in write["detail"]
    assert checks["rdma: bench mlx5_0 port 1 ib_read_bw affinity gain"]["verdict"] == "FAIL"
    assert checks["rdma: bench mlx5_1 port 1 ib_write_bw affinity gain"]["verdict"] == "SKIP"
    assert pt.affinity_checks(rows, []) == []


def test_checks_names_and_public_rows():
    s = settings()
    rows = pt.plan(topology(), s)
    rows[0].update(gbps=380.0)
    pt.judge(rows[0], s)
    for row in rows[1:]:
        row.update(verdict="SKIP", reason="perftest built without CUDA")
    rows[1].update(reason="perftest not installed (ib_write_bw not found)")
    checks = pt.checks_for(rows, s)
    assert checks[0]["name"] == "rdma: bench mlx5_0 port 1 ib_write_bw host"
    assert (checks[0]["verdict"], checks[0]["expected"], checks[0]["actual"]) == ("PASS", ">= 360 Gb/s", "380 Gb/s")
    assert checks[1]["name"] == "rdma: bench mlx5_0 port 1 ib_write_bw cuda GPU0"
    # the rows skipped for one reason: one check, the reason once, every row named in covers
    folded = checks[2]
    assert folded["name"] == "rdma: bench (%d checks)" % (len(rows) - 2), folded
    assert (folded["verdict"], folded["detail"]) == ("SKIP", "perftest built without CUDA")
    assert "rdma: bench mlx5_0 port 1 ib_write_bw cuda GPU1 (far)" in folded["covers"]
    public = pt.public_rows(rows)
    assert set(public[0]) >= {"nic", "port", "test", "memory", "gpu", "affine", "gbps", "lat_us",
                              "threshold_gbps", "verdict", "reason"}
    assert "key" not in public[0] and "tcp_port" not in public[0]


def test_peer_rows_pair_by_position_not_name():
    s = settings()
    client = pt.plan(topology(), s)
    peer = topology()
    for nic in peer["nics"]:  # the peer names its devices differently
        nic["name"] = nic["name"].replace("mlx5_", "ibp")
    peer["matrix"] = {"GPU0": {"ibp0": "PIX", "ibp1": "SYS"}, "GPU1": {"ibp0": "SYS", "ibp1": "PIX"}}
    servers = pt.pair_with_peer(client, peer, s)
    assert len(servers) == len(client)
    assert [(r["nic"], r["tcp_port"]) for r in servers] == [("ibp" + c["nic"][-1], c["tcp_port"]) for c in client]
    client[0]["verdict"] = "SKIP"
    assert len(pt.pair_with_peer(client, peer, s)) == len(client) - 1


def test_nic_without_ports_in_the_facts_says_so():
    topo = topology()
    del topo["nics"][1]["ports"]
    rows = [r for r in pt.plan(topo, settings()) if r["nic"] == "mlx5_0"]
    assert [(r["test"], r["port"], r["verdict"]) for r in rows] == [
        ("ib_write_bw", None, "SKIP"), ("ib_read_bw", None, "SKIP"), ("ib_write_lat", None, "SKIP")]
    assert rows[0]["reason"] == "no port of mlx5_0 in the facts"
    assert pt.row_check(rows[0])["name"] == "rdma: bench mlx5_0 ib_write_bw host"


def test_far_gpu_row_is_the_penalty_reference_not_judged_alone():
    s = settings()
    far = [r for r in pt.plan(topology(), s) if not r["affine"]][0]
    far["gbps"] = 10.0
    assert pt.judge(far, s)["verdict"] == "PASS"
    assert far["reason"] == "non-affine reference (judged by the affinity gain)"
    assert pt.row_check(far)["verdict"] == "PASS"  # its floor is the gain's, not unknown


@pytest.mark.parametrize("rate", [None, "unknown", 0])
def test_a_row_without_a_floor_is_measured_not_passed(rate):
    # port rate unknown and no min_gbps: nothing to judge the figure against
    s = settings()
    row = pt.plan(topology(ports=[port(rate=rate)]), s)[0]
    assert (row["nic"], row["memory"], row["threshold_gbps"]) == ("mlx5_0", "host", None)
    row["gbps"] = 390.0
    assert pt.judge(row, s)["verdict"] == "WARN"
    assert row["reason"] == "no threshold: port rate unknown and no min_gbps"
    check = pt.row_check(row)
    assert check["verdict"] == "WARN" and check["actual"] == "390 Gb/s"
