"""Process handling of the RDMA benchmark: a fake perftest on a temporary PATH directory (server
listens on -p, client connects and prints a result table); timeouts, killed servers, JSON."""
import json
import os
import socket
import stat
import sys
import textwrap

import pytest

from ansible_collections.gds.commission.plugins.module_utils.measure import perftest as pt

FAKE = textwrap.dedent('''\
    #!%(python)s
    import json, os, re, socket, sys, time
    args = sys.argv[1:]
    behaviour = os.environ.get("FAKE_PERFTEST", "")
    log = os.environ.get("FAKE_LOG")
    if log:
        with open(log, "a") as handle:
            handle.write(json.dumps({"pid": os.getpid(), "argv": args}) + "\\n")
    if "--help" in args:
        print("  -d, --ib-dev=<dev>  Use IB device <dev>")
        print("      --report_gbits  Report Max/Average BW of test in Gbit/sec")
        if "json" in behaviour:
            print("      --out_json  Save the report in a json file")
            print("      --out_json_file=<file>  Name of the report json file.")
        if "cuda" in behaviour:
            print("      --use_cuda=<cuda device id> Use CUDA specific device")
        sys.exit(1)
    port = int(args[args.index("-p") + 1])
    client = re.match(r"^[0-9.]+$", args[-1]) is not None
    if not client:
        if "server-silent" in behaviour:
            time.sleep(600)
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", port))
        srv.listen(1)
        conn, _ = srv.accept()
        conn.recv(16)
        if "server-hang" in behaviour:
            time.sleep(600)
        sys.exit(0)
    try:
        sock = socket.create_connection((args[-1], port), timeout=5)
    except OSError:
        print(" Couldn't connect to %%s:%%d" %% (args[-1], port))
        sys.exit(1)
    sock.sendall(b"x")
    if "client-hang" in behaviour:
        time.sleep(600)
    gbps = float(os.environ.get("FAKE_GBPS", "380.5"))
    for arg in args:
        if arg.startswith("--out_json_file="):
            with open(arg.split("=", 1)[1], "w") as handle:
                handle.write(json.dumps({"test_info": {}, "results": {"MsgSize": 65536, "BW_average": gbps + 1}}))
    print("-" * 87)
    unit = "Gbps" if "read-gbps-column" in behaviour and "ib_read_bw" in sys.argv[0] else "Gb/sec"
    print(" #bytes     #iterations    BW peak[Gb/sec]    BW average[%%s]   MsgRate[Mpps]" %% unit)
    print(" 65536      5000             0.00               %%-7.2f\\t\\t     0.725000" %% gbps)
    print("-" * 87)
    if "two-tables" in behaviour:  # a second run's table after the first
        print(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]")
        print(" 65536      5000             0.00               12.00\\t\\t     0.725000")
''') % {"python": sys.executable}


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A directory holding fake ib_write_bw / ib_read_bw; returns (dir, log path)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("ib_write_bw", "ib_read_bw"):
        path = bindir / name
        path.write_text(FAKE)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("FAKE_PERFTEST", "")
    return str(bindir), log


def free_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def topology(ports=({"port": 1, "state": "ACTIVE", "phys_state": "LinkUp", "rate_gbps": 400},)):
    return {"nics": [{"name": "mlx5_0", "bdf": "0000:19:00.0", "numa_node": 0, "software": False,
                      "ports": list(ports)}],
            "gpus": [{"index": 0, "bdf": "0000:1b:00.0", "numa_node": 0, "nics": ["mlx5_0"], "nic_link": "PIX"}],
            "matrix": {"GPU0": {"mlx5_0": "PIX"}}}


def settings(bindir, **kw):
    return pt.settings_from(dict({"tests": ["ib_write_bw"], "perftest_dir": bindir, "numactl": "",
                                  "port_base": free_port(), "timeout": 20, "start_timeout": 10,
                                  "duration": 1}, **kw))


def calls(log):
    return [json.loads(line) for line in log.read_text().splitlines()]


def pids(log):
    return [call["pid"] for call in calls(log)]


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def test_loopback_server_then_client(fake):
    bindir, log = fake
    rows, found = pt.run_all(topology(), settings(bindir))
    host = rows[0]
    assert (host["memory"], host["verdict"], host["gbps"], host["source"]) == ("host", "PASS", 380.5, "text")
    assert host["server_cmd"][0].endswith("ib_write_bw") and host["cmd"][-1] == "127.0.0.1"
    assert host["server_cmd"][host["server_cmd"].index("-p") + 1] == str(host["tcp_port"])
    assert (rows[1]["memory"], rows[1]["verdict"], rows[1]["reason"]) == ("cuda", "SKIP", "perftest built without CUDA")
    assert found["features"]["ib_write_bw"]["report_gbits"] is True
    assert not [p for p in pids(log) if alive(p)]


def test_low_bandwidth_fails(fake, monkeypatch):
    monkeypatch.setenv("FAKE_GBPS", "120")
    rows, _ = pt.run_all(topology(), settings(fake[0], memory=["host"]))
    assert (rows[0]["verdict"], rows[0]["threshold_gbps"]) == ("FAIL", 360.0)
    assert rows[0]["reason"] == "120.00 Gb/s is below 360.00 Gb/s"


def test_json_report_used_when_supported_and_gpu_row_runs(fake, monkeypatch):
    monkeypatch.setenv("FAKE_PERFTEST", "json cuda")
    rows, _ = pt.run_all(topology(), settings(fake[0]))
    assert [(r["memory"], r["source"], r["gbps"]) for r in rows] == [("host", "json", 381.5), ("cuda", "json", 381.5)]
    assert "--use_cuda=0" in rows[1]["cmd"] and "--use_cuda=0" in rows[1]["server_cmd"]


def test_unexpected_column_is_an_error_of_its_row_only(fake, monkeypatch):
    monkeypatch.setenv("FAKE_PERFTEST", "read-gbps-column")
    rows, _ = pt.run_all(topology(), settings(fake[0], tests=["ib_read_bw", "ib_write_bw"], memory=["host"]))
    assert [(r["test"], r["verdict"]) for r in rows] == [("ib_read_bw", "ERROR"), ("ib_write_bw", "PASS")]
    assert rows[0]["reason"] == "unreadable result: perftest column 'BW average[Gbps]': unknown bandwidth unit"
    assert rows[1]["gbps"] == 380.5


def test_two_result_tables_are_an_error_of_the_row_never_a_choice(fake, monkeypatch):
    monkeypatch.setenv("FAKE_PERFTEST", "two-tables")
    rows, _ = pt.run_all(topology(), settings(fake[0], memory=["host"]))
    assert rows[0]["verdict"] == "ERROR" and rows[0]["gbps"] is None, rows[0]
    assert rows[0]["reason"].startswith("unreadable result: perftest printed 2 result tables: which one is "
                                        "this run's is ambiguous")


@pytest.mark.parametrize("behaviour", ["", "json"])
@pytest.mark.parametrize("gbps", ["nan", "inf", "1e400", "-5"])
def test_figure_that_is_not_a_finite_number_is_an_error_of_its_row(fake, monkeypatch, behaviour, gbps):
    # json: the --out_json report (NaN, Infinity); "": the text table (nan, inf)
    monkeypatch.setenv("FAKE_PERFTEST", behaviour)
    monkeypatch.setenv("FAKE_GBPS", gbps)
    rows, _ = pt.run_all(topology(), settings(fake[0], memory=["host"]))
    assert rows[0]["verdict"] == "ERROR" and rows[0]["gbps"] is None, rows[0]
    where = "perftest JSON report: results.BW_average" if behaviour else "perftest column 'BW average[Gb/sec]'"
    assert rows[0]["reason"].startswith("unreadable result: %s: " % where)
    check = pt.checks_for(rows, settings(fake[0]))[0]
    assert check["verdict"] == "ERROR" and check["actual"] is None


def test_hung_client_times_out_and_server_is_killed(fake, monkeypatch):
    bindir, log = fake
    monkeypatch.setenv("FAKE_PERFTEST", "client-hang")
    rows, _ = pt.run_all(topology(), settings(bindir, memory=["host"], timeout=2))
    assert rows[0]["verdict"] == "ERROR"
    assert rows[0]["reason"].startswith("timed out after 2 s and was killed")
    assert len([c for c in calls(log) if "--help" not in c["argv"]]) == 2  # one server, one client
    assert not [p for p in pids(log) if alive(p)]


def test_hung_server_is_killed_after_its_client(fake, monkeypatch):
    bindir, log = fake
    monkeypatch.setenv("FAKE_PERFTEST", "server-hang")
    rows, _ = pt.run_all(topology(), settings(bindir, memory=["host"]))
    assert rows[0]["verdict"] == "PASS"  # the client measured; the server outlived it and was killed
    assert not [p for p in pids(log) if alive(p)]


def test_server_that_never_listens_is_an_error(fake, monkeypatch):
    bindir, log = fake
    monkeypatch.setenv("FAKE_PERFTEST", "server-silent")
    rows, _ = pt.run_all(topology(), settings(bindir, memory=["host"], start_timeout=1))
    assert rows[0]["verdict"] == "ERROR"
    assert "did not listen on TCP port %d within 1 s" % rows[0]["tcp_port"] in rows[0]["reason"]
    assert not [p for p in pids(log) if alive(p)]


def test_missing_perftest_skips(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # neither the directory nor PATH has perftest
    rows, found = pt.run_all(topology(), settings(str(tmp_path), memory=["host"]))
    assert (rows[0]["verdict"], rows[0]["reason"]) == ("SKIP", "perftest not installed (ib_write_bw not found)")
    assert found["perftest"] == {}


def test_two_node_servers_then_clients(fake):
    bindir, log = fake
    s = settings(bindir, tests=["ib_write_bw", "ib_read_bw"], memory=["host"], peer_address="127.0.0.1")
    client_plan = pt.plan(topology(), s)
    servers = pt.pair_with_peer(client_plan, topology(), s)
    found = pt.probe(s)
    import threading
    done = {}
    thread = threading.Thread(target=lambda: done.update(rows=pt.run_servers(servers, s, found)))
    thread.start()
    rows, _ = pt.run_all(topology(), s, mode="client", runs=client_plan)
    thread.join(60)
    assert [(r["test"], r["verdict"], r["gbps"]) for r in rows] == [("ib_write_bw", "PASS", 380.5),
                                                                     ("ib_read_bw", "PASS", 380.5)]
    assert [r["verdict"] for r in done["rows"]] == ["PASS", "PASS"]
    assert not [p for p in pids(log) if alive(p)]


def test_two_node_servers_killed_at_their_deadline(fake):
    bindir, log = fake
    s = settings(bindir, memory=["host"], timeout=1, start_timeout=1)
    servers = pt.pair_with_peer(pt.plan(topology(), s), topology(), s)
    rows = pt.run_servers(servers, s, pt.probe(s))  # no client ever comes
    assert rows[0]["verdict"] == "ERROR" and rows[0]["reason"].startswith("killed at the deadline")
    assert not [p for p in pids(log) if alive(p)]
