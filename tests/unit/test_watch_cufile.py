"""cuFile's own placement (plugins/module_utils/measure/cufile_stats.py): the per-GPU sections of
`gds_stats -p PID -l 3`, copied from the GDS guide (tests/fixtures/gds_stats/), read beside a
running job, and the bounce check that names the buffer GPU without NVML."""
import json
import os


from ansible_collections.gds.commission.plugins.module_utils.measure.cufile_stats import (
    GdsStatsWatcher, group_pids, parse_gds_stats, placement, stats_level_note,
)
from ansible_collections.gds.commission.plugins.module_utils.measure.pcie_traffic import bounce_check
from ansible_collections.gds.commission.plugins.module_utils.measure.watch import JobWatch, gds_stats_tool, watch_thresholds
from conftest import ROOT, run_module

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "gds_stats")
GPU2 = open(os.path.join(FIXTURES, "dgx2-gpu2-seqread.txt")).read()     # gdsio -d 2, -D /nvme23, 1 MiB reads
GPU10 = open(os.path.join(FIXTURES, "dgx2-gpu10-randread.txt")).read()  # gdsio -d 10, 4 KiB random reads
TOPOLOGY = {"gpus": [{"index": 0, "bdf": "0000:34:00.0"}, {"index": 10, "bdf": "0000:bc:00.0"}],
            "matrix": {"GPU0": {"nvme2n1": "PXB", "nvme3n1": "PXB"}, "GPU10": {"nvme2n1": "SYS", "nvme3n1": "SYS"}}}


def test_guide_gpu2_listing():
    stats = parse_gds_stats(GPU2)
    assert stats["version"] == "3" and sorted(stats["gpus"]) == [0, 1, 2, 3, 15]  # the guide elides 4-14
    gpu2 = stats["gpus"][2]
    assert (gpu2["read_mib"], gpu2["read_ops"], gpu2["read_posix"], gpu2["bufreg_n"], gpu2["bufreg_mib"]) == (
        78193, 78193, 0, 8, 8)
    assert stats["pool"] == {} and stats["posix_pool"][2] == {4: [0, 0], 1024: [0, 0], 16384: [0, 0]}
    view = placement([stats], "fixture")
    assert view["io_gpus"] == [2] and view["buffer_gpus"] == []
    assert next(r for r in view["gpus"] if r["index"] == 2)["read_bytes"] == 78193 << 20


def test_guide_gpu10_listing_names_gpu0_as_the_buffer_gpu():
    stats = parse_gds_stats(GPU10)
    assert stats["gpus"][10]["read_ops"] == 1279109 and stats["gpus"][10]["read_mib"] == 4996
    assert stats["pool"] == {0: {"pool_size_mib": 64, "used": 63, "total": 64, "used_mib": 63}}
    view = placement([stats], "fixture")
    assert view["io_gpus"] == [10] and view["buffer_gpus"] == [0]


def test_bounce_named_from_cufile_when_nvml_has_nothing():
    th = watch_thresholds({})
    cufile = placement([parse_gds_stats(GPU10)], "gds_stats -p PID -l 3 on 1 process(es)")
    check = bounce_check("bench: j: ", 10, 5238685696, "randread", [], TOPOLOGY, ["nvme2n1", "nvme3n1"], th,
                         "nvmlInit failed: Driver Not Loaded", cufile)
    assert check["verdict"] == "WARN"
    assert check["actual"] == ("GPU0 (0000:34:00.0, PXB to nvme2n1, nvme3n1) held cuFile's bounce buffers "
                               "(63 of 64 pool buffers in use)")
    assert "NVML: nvmlInit failed" in check["detail"]
    affine = placement([parse_gds_stats(GPU2)], "x")
    check = bounce_check("bench: j: ", 2, 1, "read", [], TOPOLOGY, ["nvme2n1"], th, "no NVML", affine)
    assert check["verdict"] == "PASS" and "cuFile I/O on GPU 2" in check["detail"]
    check = bounce_check("bench: j: ", 2, 1, "read", [], TOPOLOGY, ["nvme2n1"], th, "no NVML", {"unknown": "x"})
    assert check["verdict"] == "SKIP"


def test_bounce_from_cufile_never_passes_without_both_lists():
    """cuFile's view PASSes only with both lists read: ``buffer_gpus`` missing or no list of GPU
    indices might hide another GPU's bounce buffers (SKIP naming it, never PASS)."""
    th = watch_thresholds({})
    good = placement([parse_gds_stats(GPU2)], "x")
    assert bounce_check("bench: j: ", 2, 1, "read", [], TOPOLOGY, ["nvme2n1"], th, "no NVML", good)["verdict"] == "PASS"
    for key in ("buffer_gpus", "io_gpus"):
        for bad in (None, float("nan"), "unknown", [float("nan")], [-1]):
            cufile = dict(good, **{key: bad})
            check = bounce_check("bench: j: ", 2, 1, "read", [], TOPOLOGY, ["nvme2n1"], th, "no NVML", cufile)
            assert check["verdict"] == "SKIP" and key in check["detail"], (key, bad, check)
        cufile = {k: v for k, v in good.items() if k != key}
        check = bounce_check("bench: j: ", 2, 1, "read", [], TOPOLOGY, ["nvme2n1"], th, "no NVML", cufile)
        assert check["verdict"] == "SKIP" and key in check["detail"]
    # another GPU's buffers in use is a finding whatever the I/O list holds
    held = dict(placement([parse_gds_stats(GPU10)], "x"), io_gpus="unknown")
    assert bounce_check("bench: j: ", 10, 1, "read", [], TOPOLOGY, [], th, "no NVML", held)["verdict"] == "WARN"


def test_processes_sum_into_one_view():
    """-P 2: each worker process has its own cuFile; the job's view is their sum."""
    stats = parse_gds_stats(GPU10)
    view = placement([stats, stats], "x")
    row = next(r for r in view["gpus"] if r["index"] == 0)
    assert (row["pool_used"], row["pool_total"]) == (126, 128)
    assert next(r for r in view["gpus"] if r["index"] == 10)["ops"] == 2 * 1279109


def fake_procfs(root, pid, pgid, cufile=True):
    proc = root / str(pid)
    proc.mkdir(parents=True)
    (proc / "stat").write_text("%d (gds bench) S 1 %d %d 0 -1 4194304\n" % (pid, pgid, pgid))
    (proc / "maps").write_text("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n" +
                               ("7f02-7f03 r-xp 0 08:01 2 /usr/local/cuda/lib64/libcufile.so.0\n" if cufile else ""))


def fake_tool(tmp_path, body):
    tool = tmp_path / "gds_stats"
    tool.write_text("#!/bin/sh\n" + body + "\n")
    tool.chmod(0o755)
    return str(tool)


def test_watcher_reads_each_cufile_process_of_the_group(tmp_path):
    procfs = tmp_path / "proc"
    fake_procfs(procfs, 4242, 4242)
    fake_procfs(procfs, 4243, 4242)
    fake_procfs(procfs, 4244, 4242, cufile=False)  # no libcufile: nothing for gds_stats to read
    fake_procfs(procfs, 5000, 5000)                # another process group
    assert group_pids(str(procfs), 4242) == [4242, 4243]
    (tmp_path / "stats.txt").write_text(GPU10)
    tool = fake_tool(tmp_path, 'echo "$@" >> %s/calls; cat %s/stats.txt' % (tmp_path, tmp_path))
    watcher = GdsStatsWatcher(tool, str(procfs), interval=3600)
    watcher.start(4242)
    watcher.poll()
    view = watcher.stop()
    assert (tmp_path / "calls").read_text().split("\n")[:2] == ["-p 4242 -l 3", "-p 4243 -l 3"]
    assert view["buffer_gpus"] == [0] and "on 2 process(es)" in view["source"]


def test_unknown_says_why(tmp_path):
    procfs = tmp_path / "proc"
    fake_procfs(procfs, 4242, 4242)
    tool = fake_tool(tmp_path, 'echo "gds_stats: stats not enabled for pid $2" >&2; exit 1')
    watcher = GdsStatsWatcher(tool, str(procfs), interval=3600)
    watcher.start(4242)
    assert "ended before gds_stats could read it" in watcher.stop()["unknown"]
    watcher = GdsStatsWatcher(tool, str(procfs), interval=3600)
    watcher.start(4242)
    watcher.poll()
    why = watcher.stop("/etc/cufile.json has profile.cufile_stats 0: gds_stats -l 3 needs 3")["unknown"]
    assert "pid 4242: exit 1: gds_stats: stats not enabled for pid 4242" in why and "cufile_stats 0" in why
    assert gds_stats_tool("") == (None, "gds_stats not given")
    assert gds_stats_tool(str(tmp_path / "none"))[1].startswith("gds_stats not found")


def test_stats_level_from_cufile_json(tmp_path):
    path = tmp_path / "cufile.json"
    path.write_text('{ // comments, as NVIDIA ships it\n "profile": { "cufile_stats": 0 } }')
    assert stats_level_note(str(path)) == "%s has profile.cufile_stats 0: gds_stats -l 3 needs 3" % path
    path.write_text('{"profile": {"cufile_stats": 3}}')
    assert stats_level_note(str(path)) is None
    assert "unreadable" in stats_level_note(str(tmp_path / "missing.json"))


def test_job_watch_starts_gds_stats_beside_a_cufile_job_only(tmp_path):
    procfs = tmp_path / "proc"
    fake_procfs(procfs, 4242, 4242)
    tool = fake_tool(tmp_path, "cat %s" % os.path.join(FIXTURES, "dgx2-gpu10-randread.txt"))
    watch = JobWatch({}, str(procfs), str(tmp_path / "sys"), TOPOLOGY, None, tool, None, gds_stats_interval=3600)
    job = {"name": "j", "gpu": 10, "xfer_type": 0, "io_type": "randread", "members": ["nvme2n1", "nvme3n1"]}
    watch.begin(job)
    watch.started(4242)
    watch.stats.poll()
    entry, checks = watch.end(job, {"bytes": 10 ** 9})
    assert entry["cufile"]["buffer_gpus"] == [0]
    assert {c["name"]: c for c in checks}["bench: j: bounce"]["verdict"] == "WARN"
    cpu_gpu = dict(job, xfer_type=2)  # through host memory: no libcufile, no gds_stats
    watch.begin(cpu_gpu)
    watch.started(4242)
    entry, _ = watch.end(cpu_gpu, {"bytes": 10 ** 9})
    assert watch.stats is None and entry["cufile"] == {"unknown": "not a cuFile transfer type"}


def test_module_reads_gds_stats_while_the_benchmark_runs(tmp_path):
    """The benchmark is a process group whose leader maps libcufile (its procfs entry written by
    the fake itself); it runs until gds_stats has read it."""
    procfs = tmp_path / "proc"
    procfs.mkdir()
    record = {"io_type": "randread", "bytes": 4996 << 20, "elapsed_s": 1.0, "throughput_gib_s": 0.126,
              "ops": 1279109, "errors": 0, "verify_errors": 0, "path": {"mode": "nvfs"}}
    bench = tmp_path / "gdsbench"
    bench.write_text(
        "#!/bin/sh\nmkdir -p %(p)s/$$\necho \"$$ (gdsbench) S 1 $$ $$ 0\" > %(p)s/$$/stat\n"
        "echo '7f00 r-xp 0 0 0 /usr/local/cuda/lib64/libcufile.so.0' > %(p)s/$$/maps\n"
        "for i in $(seq 200); do [ -e %(t)s/read ] && break; sleep 0.05; done\necho '%(r)s'\n"
        % {"p": procfs, "t": tmp_path, "r": json.dumps(record)})
    bench.chmod(0o755)
    tool = fake_tool(tmp_path, "touch %s/read; cat %s" % (tmp_path, os.path.join(FIXTURES, "dgx2-gpu10-randread.txt")))
    job = {"name": "r", "target": str(tmp_path / "data"), "gpu": 10, "io_type": "randread", "duration": 1,
           "members": ["nvme2n1", "nvme3n1"]}
    rc, result = run_module("gds_bench", {"binary": str(bench), "jobs": [job], "udev_root": "", "gds_stats": tool,
                                          "procfs_root": str(procfs), "topology": TOPOLOGY})
    assert rc == 0, result
    watch = result["results"][0]["watch"]
    assert watch["cufile"]["buffer_gpus"] == [0] and watch["cufile"]["io_gpus"] == [10]
    bounce = next(c for c in result["checks"] if c["name"] == "bench: r: bounce")
    assert bounce["verdict"] == "WARN" and "held cuFile's bounce buffers (63 of 64" in bounce["actual"]
