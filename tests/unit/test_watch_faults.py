"""Fault injection for the watch of each job (plugins/module_utils/measure/watch.py and its parts):
the real gds_bench module runs the real gdsbench (on tests/bench/mock_cuda.c for the GPU transfer
types) while NVML (tests/fault/pynvml, chosen by PYTHONPATH, faults by GDS_FAKE_NVML_*),
/proc/diskstats and gds_stats misbehave. Each case asserts: no traceback, the benchmark's results
kept, the watch's figure unknown with a reason, no PASS built from it. The module's time is
bounded by construction (a hung NVML is given up after nvml_timeout), never timed here."""
import json
import os
import re
import sys

import pytest

from conftest import GDSBENCH_SRC as BENCH_DIR, ROOT, run_module
from test_watch_drives import START, grown, line

sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
from test_procs_default import _make, gds  # noqa: E402,F401  gdsbench and the mock CUDA libraries

FAULT = os.path.join(ROOT, "tests", "fault")


@pytest.fixture(scope="module")
def gdsbench():
    _make("gdsbench")
    return os.path.join(BENCH_DIR, "gdsbench")


@pytest.fixture(scope="module")
def mock_libs(gds):
    """The directory of tests/bench/mock_cuda.c built as libcudart.so and libcufile.so.0."""
    return gds[1]["GDSBENCH_CUDA_LIBDIR"]


@pytest.fixture
def gpu_node(monkeypatch, mock_libs, tmp_path):
    """The module's environment: the mock CUDA libraries, the pynvml stand-in first on the path."""
    monkeypatch.setenv("GDSBENCH_CUDA_LIBDIR", mock_libs)
    monkeypatch.setenv("GDSBENCH_CUFILE_LIBDIR", mock_libs)
    monkeypatch.syspath_prepend(FAULT)  # run_module passes sys.path on as PYTHONPATH
    for name in [n for n in os.environ if n.startswith("GDS_FAKE_NVML_")]:
        monkeypatch.delenv(name)
    (tmp_path / "data").mkdir()
    return tmp_path


def by_name(result):
    return {c["name"]: c for c in result["checks"]}


def kept_and_unknown(rc, result, check, reason, watch_text):
    """The case's common proof: the module ended normally with the benchmark's record, the watch's
    check is no PASS and gives ``reason``, which the watch entry also carries."""
    text = json.dumps(result)
    assert rc == 0 and "Traceback" not in text, result
    res = result["results"][0]
    assert res["record"]["bytes"] > 0 and res["checks"][0]["verdict"] == "PASS", res["checks"][0]
    got = by_name(result)[check]
    assert got["verdict"] != "PASS", got
    assert reason in "%s %s" % (got["actual"], got.get("detail")), got
    assert reason in watch_text, watch_text
    return got


# --------------------------------------------------------------------------------------------
# NVML: raise, NaN, inf, negative, backwards, hang
# --------------------------------------------------------------------------------------------
def gpu_job(tmp_path, **extra):
    job = {"name": "w", "target": str(tmp_path / "data"), "gpu": 0, "xfer_type": 0, "io_type": "write",
           "size": "1M", "io_size": "64K", "threads": 1, "duration": 0, "thresholds": {}}
    job.update(extra)
    return job


def run_gpu(tmp_path, monkeypatch, env, **args):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    base = {"binary": os.path.join(BENCH_DIR, "gdsbench"), "jobs": [gpu_job(tmp_path)], "udev_root": "",
            "gds_stats": "", "nvml_interval": 0.05, "nvml_timeout": 1.0}
    base.update(args)
    return run_module("gds_bench", base)


def gpus_text(watch):
    return json.dumps({k: watch.get(k) for k in ("gpus", "gpus_unknown")})


def test_clean_fake_nvml_passes_the_bounce_check(gpu_node, monkeypatch):
    """The control: the stand-in's figures are judged (GPU 0 moved the data, GPU 1 nothing)."""
    for source in ("gpm", "counters", "throughput"):
        rc, result = run_gpu(gpu_node, monkeypatch, {"GDS_FAKE_NVML_SOURCE": source})
        assert rc == 0, result
        bounce = by_name(result)["bench: w: bounce"]
        assert bounce["verdict"] == "PASS" and bounce["actual"] == "no other GPU carried the data", bounce
        assert [g["index"] for g in result["results"][0]["watch"]["gpus"]] == [0, 1]


@pytest.mark.parametrize("env,reason", [
    ({"GDS_FAKE_NVML_FAULT": "raise:nvmlInit"}, "nvmlInit failed: Unknown Error"),
    ({"GDS_FAKE_NVML_FAULT": "raise:nvmlDeviceGetCount"}, "only GPU 0 followed"),
    ({"GDS_FAKE_NVML_FAULT": "huge:nvmlDeviceGetCount"}, "is above 1024"),
    ({"GDS_FAKE_NVML_FAULT": "nan:nvmlDeviceGetCount"}, "is not finite"),
    ({"GDS_FAKE_NVML_FAULT": "raise:nvmlDeviceGetHandleByIndex:1"}, "GPU 1: nvmlDeviceGetHandleByIndex"),
    ({"GDS_FAKE_NVML_FAULT": "nan"}, "is not finite"),
    ({"GDS_FAKE_NVML_FAULT": "inf"}, "is not finite"),
    ({"GDS_FAKE_NVML_FAULT": "negative"}, "is below 0"),
    # another GPU's figures unknown: it may have carried the data
    ({"GDS_FAKE_NVML_FAULT": "nan:nvmlGpmMetricsGet:1"}, "1 interval(s) of the job not counted"),
    ({"GDS_FAKE_NVML_FAULT": "raise:nvmlGpmMetricsGet:1", "GDS_FAKE_NVML_FAULT_AFTER": "1"},
     "GPM: nvmlGpmMetricsGet: Unknown Error"),
    ({"GDS_FAKE_NVML_SOURCE": "counters", "GDS_FAKE_NVML_FAULT": "backwards"}, "went back or jumped"),
    ({"GDS_FAKE_NVML_SOURCE": "counters", "GDS_FAKE_NVML_FAULT": "nan"}, "is not finite"),
    ({"GDS_FAKE_NVML_SOURCE": "counters", "GDS_FAKE_NVML_FAULT": "huge"}, "is above"),
    ({"GDS_FAKE_NVML_SOURCE": "throughput", "GDS_FAKE_NVML_FAULT": "negative"}, "is below 0"),
    ({"GDS_FAKE_NVML_SOURCE": "throughput", "GDS_FAKE_NVML_FAULT": "inf"}, "is not finite"),
], ids=lambda v: v if isinstance(v, str) else ",".join("%s=%s" % i for i in sorted(v.items())))
def test_nvml_faults_make_the_traffic_unknown(gpu_node, monkeypatch, env, reason):
    rc, result = run_gpu(gpu_node, monkeypatch, env)
    watch = result["results"][0].get("watch") or {}
    kept_and_unknown(rc, result, "bench: w: bounce", reason, gpus_text(watch))


def test_jobs_gpu_missing_the_jobs_bytes_is_no_pass(gpu_node, monkeypatch):
    """NVML sees GPU 0 move 1 kB a second while the job wrote 1 MiB from it: the figures are wrong."""
    rc, result = run_gpu(gpu_node, monkeypatch, {"GDS_FAKE_NVML_RATE": "1000"})
    bounce = by_name(result)["bench: w: bounce"]
    assert rc == 0 and bounce["verdict"] == "WARN" and "do not account for the job's data" in bounce["actual"]


@pytest.mark.parametrize("env,reason", [
    ({"GDS_FAKE_NVML_FAULT": "hang:nvmlInit"}, "NVML hung: nvmlInit did not return within 1 s"),
    ({"GDS_FAKE_NVML_FAULT": "hang:nvmlGpmMetricsGet"}, "NVML hung: nvmlGpmMetricsGet did not return within"),
    ({"GDS_FAKE_NVML_SOURCE": "counters", "GDS_FAKE_NVML_FAULT": "hang", "GDS_FAKE_NVML_FAULT_AFTER": "3"},
     "NVML hung: nvmlDeviceGetFieldValues did not return within"),
    # 3 s a call, the case: the first call outlasts the timeout
    ({"GDS_FAKE_NVML_FAULT": "slow:*", "GDS_FAKE_NVML_SLOW": "3"}, "NVML hung: nvmlInit did not return within 1 s"),
    # each call in time, together too slow: the start's budget runs out
    ({"GDS_FAKE_NVML_FAULT": "slow:*", "GDS_FAKE_NVML_SLOW": "0.4"}, "NVML too slow"),
], ids=["init", "gpm", "counters", "slow-3s", "slow-0.4s"])
def test_hung_nvml_is_given_up_and_named(gpu_node, monkeypatch, env, reason):
    """A hung NVML call is waited on for nvml_timeout (1 s here) once; then NVML is hung for the
    run: nothing waits on it again, and the traffic is unknown saying which call hung."""
    rc, result = run_gpu(gpu_node, monkeypatch, env, jobs=[gpu_job(gpu_node), gpu_job(gpu_node, name="w2")])
    for job in ("w", "w2"):
        watch = next(r for r in result["results"] if r["name"] == job).get("watch") or {}
        assert "NVML" in gpus_text(watch)
    watch = result["results"][0].get("watch") or {}
    kept_and_unknown(rc, result, "bench: w: bounce", reason, gpus_text(watch))
    assert by_name(result)["bench: w2: bounce"]["verdict"] == "SKIP"


# --------------------------------------------------------------------------------------------
# /proc/diskstats: huge, Unicode digits, truncated, not UTF-8, vanished members, counters back
# --------------------------------------------------------------------------------------------
MEMBERS = ["nvme%dn1" % i for i in range(8)]
GROWTH = {"reads": 1000, "sectors_read": 0, "writes": 1000, "sectors_written": 2048 * 100, "write_ms": 500,
          "io_ms": 900}


def diskstats(grow):
    return "".join(line(259, i, name, **(grown(START, GROWTH) if grow else START)) + "\n"
                   for i, name in enumerate(MEMBERS)).encode()


def _replace_field(text, name, index, value):
    out = []
    for row in text.split(b"\n"):
        parts = row.split()
        if len(parts) > 3 and parts[2] == name.encode():
            parts[3 + index] = value
            row = b" ".join(parts)
        out.append(row)
    return b"\n".join(out)


MUTATIONS = {
    "vanished": (lambda t: b"\n".join(r for r in t.split(b"\n") if b" nvme7n1 " not in r), "not in"),
    "four vanished": (lambda t: b"\n".join(r for r in t.split(b"\n") if not re.search(rb" nvme[4-7]n1 ", r)),
                      "not in"),
    "garbled": (lambda t: t.replace(b" nvme5n1 ", b" nvme5n1 x y "), "line 6 of diskstats is garbled"),
    "truncated": (lambda t: t[:t.index(b" nvme7n1 ") + 14], "1 counters, iostats.rst has at least 11"),
    "unicode digit": (lambda t: _replace_field(t, "nvme2n1", 6, "12²".encode()), "is not a whole number of ASCII"),
    "400 digits": (lambda t: _replace_field(t, "nvme2n1", 6, b"9" * 400), "is not a whole number of ASCII"),
    "above 64 bits": (lambda t: _replace_field(t, "nvme2n1", 6, b"18446744073709551616"), "above a 64-bit counter"),
    "not UTF-8": (lambda t: _replace_field(t, "nvme2n1", 6, b"12\xff"), "is not a whole number of ASCII"),
}


def run_disk(tmp_path, gdsbench, before, after):
    """gds_bench on a procfs tree whose diskstats is ``before`` at the job's start and ``after`` at
    its end: a wrapper puts ``after`` in place and runs the real gdsbench (CPU transfer type)."""
    proc = tmp_path / "proc"
    proc.mkdir(exist_ok=True)
    (proc / "diskstats").write_bytes(before)
    (tmp_path / "after").write_bytes(after)
    wrapper = tmp_path / "bench.sh"
    wrapper.write_text("#!/bin/sh\ncp %s %s\nexec %s \"$@\"\n" % (tmp_path / "after", proc / "diskstats", gdsbench))
    wrapper.chmod(0o755)
    job = {"name": "w", "target": str(tmp_path / "data"), "xfer_type": 1, "io_type": "write", "size": "1M",
           "threads": 1, "duration": 0, "members": MEMBERS, "thresholds": {}}
    return run_module("gds_bench", {"binary": str(wrapper), "jobs": [job], "udev_root": "",
                                    "procfs_root": str(proc), "sysfs_root": str(tmp_path / "sys")})


def drives_text(watch):
    return json.dumps({k: watch.get(k) for k in ("drives", "drives_unknown")}, ensure_ascii=False)


def test_clean_diskstats_pass_balanced(tmp_path, gdsbench):
    rc, result = run_disk(tmp_path, gdsbench, diskstats(False), diskstats(True))
    load = by_name(result)["bench: w: drive load"]
    assert rc == 0 and (load["verdict"], load["actual"]) == ("PASS", "8 drives balanced"), load


@pytest.mark.parametrize("where", ["after", "before"])
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_diskstats_mutation_is_unknown_never_dropped(tmp_path, gdsbench, mutation, where):
    mutate, reason = MUTATIONS[mutation]
    before, after = diskstats(False), diskstats(True)
    if where == "after":
        after = mutate(after)
    else:
        before = mutate(before)
    rc, result = run_disk(tmp_path, gdsbench, before, after)
    watch = result["results"][0].get("watch") or {}
    load = kept_and_unknown(rc, result, "bench: w: drive load", reason, drives_text(watch))
    # every unread member named, before what the others did
    unread = [d["name"] for d in watch["drives"] if "missing" in d]
    assert load["verdict"] == "WARN" and load["actual"].startswith("%d of 8 members unknown: " % len(unread))
    assert all("%s (PCI address unknown) unknown: " % name in load["actual"] for name in unread)


def test_counter_that_went_back_is_unknown_not_a_wrap(tmp_path, gdsbench):
    """nvme3n1 removed and added again during the job: its counters restarted near zero. Taken for
    a 2**64 wrap it read 9.4e15 MB at 1.3e9 % util; it is unknown."""
    after = diskstats(True).replace(line(259, 3, "nvme3n1", **grown(START, GROWTH)).encode(),
                                    line(259, 3, "nvme3n1", reads=12, sectors_written=96, io_ms=4).encode())
    rc, result = run_disk(tmp_path, gdsbench, diskstats(False), after)
    watch = result["results"][0]["watch"]
    load = kept_and_unknown(rc, result, "bench: w: drive load", "went back", drives_text(watch))
    assert "nvme3n1 (PCI address unknown) unknown: counter" in load["actual"] and load["verdict"] == "WARN"
    assert all("write_bytes" not in d for d in watch["drives"] if d["name"] == "nvme3n1")
    assert max(d.get("util_pct") or 0 for d in watch["drives"]) < 1e6


# --------------------------------------------------------------------------------------------
# gds_stats: huge numbers, Unicode digits, truncated, not UTF-8, I/O on another GPU, a huge index
# --------------------------------------------------------------------------------------------
GUIDE_GPU2 = open(os.path.join(ROOT, "tests", "fixtures", "gds_stats", "dgx2-gpu2-seqread.txt")).read()
# the guide's GPU 2 listing with its figures on GPU 0, the job's
GPU0 = GUIDE_GPU2.replace("GPU 0 Read:", "GPU X Read:").replace("GPU 2 Read:", "GPU 0 Read:").replace(
    "GPU X Read:", "GPU 2 Read:")
STATS_MUTATIONS = {
    "I/O on GPU 2 only": (GUIDE_GPU2.encode(), "cuFile's statistics show I/O on GPU2, not on GPU0 alone"),
    "400 digits": (GPU0.replace("MiB=78193", "MiB=" + "9" * 400).encode(), "is not a decimal number"),
    "unicode digit": (GPU0.replace("n=78193", "n=7819³").encode(), "is not a decimal number"),
    "nan": (GPU0.replace("bw=6.32129", "bw=nan").encode(), "'nan' is not a decimal number"),
    "not UTF-8": (GPU0.replace("n=78193", "n=78\udcff193").encode("utf-8", "surrogateescape"),
                  "is not a decimal number"),
    "truncated line": (GPU0[:GPU0.index("GPU 0 Read:") + 40].encode(), "line cut short or garbled"),
    "truncated before the GPUs": (GPU0[:GPU0.index("PER_GPU STATS")].encode(), "printed no per-GPU stats"),
    "huge GPU index": (GPU0.replace("GPU 0 Read:", "GPU 99999999999 Read:").encode(), "above a 32-bit counter"),
    "GPU index above any node's": (GPU0.replace("GPU 0 Read:", "GPU 4096 Read:").encode(), "is above 1023"),
    "no I/O on any GPU": (re.sub(r"GPU 0 Read: .*", GUIDE_GPU2.split("\n")[[l.startswith("GPU 1 Read") for l in
                                                                           GUIDE_GPU2.split("\n")].index(True)]
                                 .replace("GPU 1", "GPU 0"), GPU0).encode(), "show I/O on no GPU"),
}


def fake_gds_stats(tmp_path, output):
    (tmp_path / "stats.out").write_bytes(output)
    tool = tmp_path / "gds_stats"
    tool.write_text("#!/bin/sh\ncat %s\n" % (tmp_path / "stats.out"))
    tool.chmod(0o755)
    return str(tool)


@pytest.mark.parametrize("mutation", sorted(STATS_MUTATIONS))
def test_gds_stats_mutation_is_no_pass(tmp_path, mutation):
    """JobWatch with gds_stats read beside a job of GPU 0 (a procfs entry of a cuFile process)."""
    from ansible_collections.gds.commission.plugins.module_utils.measure.watch import JobWatch
    from test_watch_cufile import fake_procfs
    output, reason = STATS_MUTATIONS[mutation]
    fake_procfs(tmp_path / "proc", 4242, 4242)
    watch = JobWatch({}, str(tmp_path / "proc"), str(tmp_path / "sys"), {}, None,
                     fake_gds_stats(tmp_path, output), None, gds_stats_interval=3600)
    job = {"name": "j", "gpu": 0, "xfer_type": 0, "io_type": "read"}
    watch.begin(job)
    watch.started(4242)
    watch.stats.poll()
    entry, checks = watch.end(job, {"bytes": 78193 << 20})
    bounce = {c["name"]: c for c in checks}["bench: j: bounce"]
    assert bounce["verdict"] == "SKIP" and reason in json.dumps(entry["cufile"], ensure_ascii=False) + bounce["detail"]


@pytest.mark.parametrize("mutation", ["clean", "I/O on GPU 2 only", "400 digits", "truncated line"])
def test_gds_stats_end_to_end(gpu_node, monkeypatch, mutation):
    """The real module, the real gdsbench (3 s, so that gds_stats reads it every 2 s), NVML absent."""
    output, reason = STATS_MUTATIONS.get(mutation, (GPU0.encode(), "cuFile I/O on GPU 0"))
    rc, result = run_gpu(gpu_node, monkeypatch, {"GDS_FAKE_NVML_FAULT": "raise:nvmlInit"},
                         gds_stats=fake_gds_stats(gpu_node, output),
                         jobs=[gpu_job(gpu_node, duration=3, io_size="4K")])
    assert rc == 0, result
    bounce = by_name(result)["bench: w: bounce"]
    cufile = result["results"][0]["watch"]["cufile"]
    if mutation == "clean":
        assert bounce["verdict"] == "PASS" and cufile["io_gpus"] == [0], (bounce, cufile)
    else:
        kept_and_unknown(rc, result, "bench: w: bounce", reason, json.dumps(cufile) + bounce["detail"])


# --------------------------------------------------------------------------------------------
# The path model: links that loop
# --------------------------------------------------------------------------------------------
def _link(bdf, kind, upstream, port=None):
    return {"bdf": bdf, "kind": kind, "port": port, "upstream": upstream, "current_speed_gts": 8.0,
            "current_width": 4, "expected_speed_gts": 8.0, "expected_width": 4}


CYCLES = {
    # the upstream entries of two switch ports point at each other, above one drive each: the
    # drives' chains cross (each above the other), which recursed without end
    "crossed": [_link("0000:01:00.0", "nvme", "0000:10:00.0"), _link("0000:02:00.0", "nvme", "0000:11:00.0"),
                _link("0000:10:00.0", "bridge", "0000:11:00.0", "upstream"),
                _link("0000:11:00.0", "bridge", "0000:10:00.0", "upstream"),
                _link("0000:20:00.0", "gpu", None)],
    "self": [_link("0000:01:00.0", "nvme", "0000:01:00.0"), _link("0000:02:00.0", "nvme", None),
             _link("0000:20:00.0", "gpu", None)],
}


@pytest.mark.parametrize("cycle", sorted(CYCLES))
def test_path_model_cycles_are_unknown(tmp_path, gdsbench, cycle):
    topology = {"pcie_links": CYCLES[cycle], "gpus": [{"index": 0, "bdf": "0000:20:00.0"}],
                "nvme": [{"name": "nvme0n1", "bdf": "0000:01:00.0"}, {"name": "nvme1n1", "bdf": "0000:02:00.0"}]}
    job = {"name": "w", "target": str(tmp_path / "data"), "xfer_type": 1, "io_type": "write", "size": "1M",
           "threads": 1, "duration": 0, "members": ["nvme0n1", "nvme1n1"], "thresholds": {}}
    rc, result = run_module("gds_bench", {"binary": gdsbench, "jobs": [job], "udev_root": "", "topology": topology,
                                          "watch_thresholds": {"path_fraction_min": 0.5}})
    watch = result["results"][0].get("watch") or {}
    got = kept_and_unknown(rc, result, "bench: w: path_fraction", "the PCIe links loop", json.dumps(watch["limit"]))
    assert got["verdict"] == "SKIP" and watch["fraction"] is None


# --------------------------------------------------------------------------------------------
# The same families without the module: the rules each part follows
# --------------------------------------------------------------------------------------------
def test_strict_numbers():
    from ansible_collections.gds.commission.plugins.module_utils.core.numbers import BadNumber, counter, decimal, finite, whole
    assert counter("18446744073709551615") == 2 ** 64 - 1 and decimal("0.124332") == 0.124332
    for bad in ("²", "1²", "9" * 400, "18446744073709551616", "-1", "1.5", "", "\udcff", "１"):
        with pytest.raises(BadNumber):
            counter(bad)
    for bad in ("nan", "inf", "1e999", "1.", ".5", "-1", "9" * 400, "٣"):
        with pytest.raises(BadNumber):
            decimal(bad)
    for bad in (float("nan"), float("inf"), -1, True, "3", None):
        with pytest.raises(BadNumber):
            finite(bad)
    assert whole(3.0) == 3 and finite(2.5) == 2.5
    for bad in (2.5, 10 ** 400, -1):
        with pytest.raises(BadNumber):
            whole(bad)


def test_bounded_nvml_gives_up_a_hung_call_once():
    """The worker thread of a hung call is left behind; later calls do not wait again."""
    import threading
    from ansible_collections.gds.commission.plugins.module_utils.hw.nvml import BoundedNvml, NvmlHung, nvml_value
    release = threading.Event()
    calls = []

    class Stuck(object):
        NVML_CONSTANT = 7

        def nvmlDeviceGetCount(self):
            calls.append("count")
            return 2

        def nvmlDeviceGetHandleByIndex(self, index):
            calls.append("handle")
            release.wait()  # the driver never answers (until the test ends)

    nvml = BoundedNvml(Stuck(), timeout=0.2)
    try:
        assert nvml.NVML_CONSTANT == 7 and nvml.nvmlDeviceGetCount() == 2
        value, why = nvml_value(nvml, ("nvmlDeviceGetHandleByIndex",), 0)
        assert value is None and why == "nvmlDeviceGetHandleByIndex: NVML hung: nvmlDeviceGetHandleByIndex did " \
                                        "not return within 0.2 s"
        with pytest.raises(NvmlHung, match="nvmlDeviceGetHandleByIndex did not return"):
            nvml.nvmlDeviceGetCount()
        assert calls == ["count", "handle"]  # the count after the hang never reached NVML
    finally:
        release.set()
        nvml.close()


def test_sampler_after_a_hang_marks_unknown_and_shuts_nothing_down():
    import threading
    from ansible_collections.gds.commission.plugins.module_utils.measure.devhealth import HealthRun
    release = threading.Event()
    shut = []

    class HangsOnTraffic(object):
        def nvmlInit(self):
            pass

        def nvmlShutdown(self):
            shut.append(True)

        def nvmlDeviceGetCount(self):
            return 1

        def nvmlDeviceGetHandleByIndex(self, index):
            return index

        def nvmlDeviceGetPcieThroughput(self, handle, counter):
            release.wait()

    health = HealthRun([], gpu_indices=[0], interval=3600, pynvml=HangsOnTraffic(), traffic=True, nvml_timeout=0.2)
    try:
        health.begin()
        marks, problem = health.traffic_mark()
        assert marks is None or all(m["totals"] is None for m in marks.values())
        assert "NVML hung: nvmlDeviceGetPcieThroughput did not return within 0.2 s" in json.dumps([marks, problem])
        health.end()
        assert shut == [] and "NVML hung" in json.dumps(health.facts())
    finally:
        release.set()


TH = {"bounce_share": 0.5, "bounce_verdict": "WARN"}


def _gpus(*figures):
    return [dict({"index": i, "bdf": None, "source": "test"}, **f) for i, f in enumerate(figures)]


@pytest.mark.parametrize("gpus,unknown,topology,reason", [
    (_gpus({"rx_bytes": 10 ** 9, "tx_bytes": 0}, {"unknown": "GPM: nvmlGpmMetricsGet: Unknown Error"}), None, {},
     "GPU1 GPM: nvmlGpmMetricsGet: Unknown Error"),
    (_gpus({"rx_bytes": 10 ** 9, "tx_bytes": 0}), "nvmlDeviceGetCount: Unknown Error: only GPU 0 followed", {},
     "only GPU 0 followed"),
    (_gpus({"rx_bytes": 10 ** 9, "tx_bytes": 0}), None, {"gpus": [{"index": 0}, {"index": 1}, {"index": 2}]},
     "GPU1, GPU2 of the topology not followed by NVML"),
    (_gpus({"rx_bytes": 10 ** 9, "tx_bytes": 0}, {"rx_bytes": -13088 * 10 ** 7, "tx_bytes": 0}), None, {},
     "GPU1 figures are no byte counts"),
    (_gpus({"rx_bytes": float("nan"), "tx_bytes": 0}, {"rx_bytes": 0, "tx_bytes": 0}), None, {},
     "GPU0 figures are no byte counts"),
    (_gpus({"rx_bytes": 0, "tx_bytes": 0}, {"rx_bytes": 0, "tx_bytes": 0})[1:], None, {},
     "GPU0 (the job's) not followed by NVML"),
    (_gpus({"rx_bytes": 10 ** 9, "tx_bytes": 0}, {"rx_bytes": "unknown", "tx_bytes": 0}), None, {},
     "GPU1 figures are no byte counts"),
    (_gpus({"rx_bytes": 10 ** 9, "tx_bytes": 0}) + [None], None, {}, "GPU record 1 of NVML's figures is no GPU's"),
    (_gpus({"rx_bytes": 10 ** 9, "tx_bytes": 0}) + [{"index": float("nan"), "rx_bytes": 0, "tx_bytes": 0}], None, {},
     "GPU record 1 of NVML's figures is no GPU's"),
    (float("nan"), None, {}, "NVML's figures are no list of GPUs"),
])
def test_bounce_never_passes_on_incomplete_figures(gpus, unknown, topology, reason):
    from ansible_collections.gds.commission.plugins.module_utils.measure.pcie_traffic import bounce_check
    got = bounce_check("bench: j: ", 0, 10 ** 9, "read", gpus, topology, [], TH, unknown)
    assert got["verdict"] == "SKIP" and reason in got["detail"], got


def test_bounce_warns_when_the_jobs_gpu_misses_the_jobs_bytes():
    from ansible_collections.gds.commission.plugins.module_utils.measure.pcie_traffic import bounce_check
    gpus = _gpus({"rx_bytes": 10 ** 8, "tx_bytes": 0}, {"rx_bytes": 0, "tx_bytes": 0})
    got = bounce_check("bench: j: ", 0, 4 * 10 ** 9, "read", gpus, {}, [], TH)
    assert got["verdict"] == "WARN" and got["actual"].startswith("GPU0 received 0.10 GB, 2% of the 4.00 GB")
    assert bounce_check("bench: j: ", 0, -5, "read", gpus, {}, [], TH)["verdict"] == "SKIP"
    # a carrier found is a finding whatever else is unknown
    gpus = _gpus({"unknown": "x"}, {"rx_bytes": 4 * 10 ** 9, "tx_bytes": 0})
    assert bounce_check("bench: j: ", 0, 4 * 10 ** 9, "read", gpus, {}, [], TH)["verdict"] == "WARN"


def test_path_fraction_above_one_warns_with_both_figures(tmp_path):
    from ansible_collections.gds.commission.plugins.module_utils.measure.watch import JobWatch
    watch = JobWatch({"path_fraction_min": 0.8}, str(tmp_path), str(tmp_path))
    limit = {"bytes_per_s": 7877000000, "gb_s": 7.877, "bound": "the drives' links"}
    got = watch.fraction_check("bench: j: ", limit, 1.3)
    assert got["verdict"] == "WARN" and "measured 10.240 GB/s, above the path's limit 7.877 GB/s" in got["detail"]
    assert watch.fraction_check("bench: j: ", limit, 0.9)["verdict"] == "PASS"


@pytest.mark.parametrize("fraction", [float("nan"), "NaN", "unknown", -0.5, float("inf")])
def test_path_fraction_that_is_no_figure_is_skip(tmp_path, fraction):
    from ansible_collections.gds.commission.plugins.module_utils.measure.watch import JobWatch
    watch = JobWatch({"path_fraction_min": 0.8}, str(tmp_path), str(tmp_path))
    got = watch.fraction_check("bench: j: ", {"bytes_per_s": 7877000000, "gb_s": 7.877, "bound": "x"}, fraction)
    assert got["verdict"] == "SKIP" and "no figure to judge" in got["detail"], got
    # a limit record without its figures names them unknown, never a traceback
    got = watch.fraction_check("bench: j: ", {"bytes_per_s": 7877000000}, 1.3)
    assert got["verdict"] == "WARN" and "limit unknown GB/s" in got["detail"]


def test_a_part_of_the_watch_that_breaks_is_unknown_with_the_error(tmp_path, monkeypatch):
    from ansible_collections.gds.commission.plugins.module_utils.measure import watch as watch_mod
    watch = watch_mod.JobWatch({"path_fraction_min": 0.5}, str(tmp_path), str(tmp_path))

    def boom(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(watch.drives, "begin", boom)
    monkeypatch.setattr(watch_mod, "path_limit", boom)
    job = {"name": "j", "gpu": 0, "xfer_type": 0, "members": ["nvme0n1"]}
    watch.begin(job)  # does not raise: the job runs whatever the watch does
    entry, checks = watch.end(job, {"bytes": 10 ** 9, "throughput_gib_s": 1.0})
    got = {c["name"]: c for c in checks}
    why = "the watch failed: RecursionError: maximum recursion depth exceeded"
    assert entry["drives_unknown"] == why and entry["limit"] == {"unknown": why}
    assert (got["bench: j: drive load"]["verdict"], got["bench: j: path_fraction"]["verdict"]) == ("SKIP", "SKIP")
    assert got["bench: j: bounce"]["verdict"] == "SKIP"  # NVML was not started
    job = dict(job, gpu="zero")  # even a job the watch cannot read leaves a result
    watch.begin(job)
    entry, checks = watch.end(job, {})
    assert "ValueError" in entry["gpus_unknown"] and {c["verdict"] for c in checks} == {"SKIP"}


def test_gds_stats_poll_that_breaks_gives_its_reason(tmp_path, monkeypatch):
    from ansible_collections.gds.commission.plugins.module_utils.measure import cufile_stats
    watcher = cufile_stats.GdsStatsWatcher("/bin/true", str(tmp_path), interval=3600)
    monkeypatch.setattr(cufile_stats, "group_pids", lambda *a: 1 // 0)
    watcher.start(4242)
    watcher.poll()
    assert watcher.stop()["unknown"] == "gds_stats poll failed: ZeroDivisionError: integer division or modulo by zero"
