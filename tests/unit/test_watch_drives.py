"""Per-drive load around a job (plugins/module_utils/measure/diskload.py): /proc/diskstats before and after,
computed as iostat computes it, from the GDS guide's iostat listings turned into diskstats pairs."""
import copy
import json
import os

import pytest
import yaml

from ansible_collections.gds.commission.plugins.module_utils.measure.diskload import (
    CounterWentBack, io_load, job_drives, parse_diskstats,
)
from ansible_collections.gds.commission.plugins.module_utils.measure.watch import JobWatch, WatchConfigError, watch_thresholds
from conftest import ROOT, run_module

ZEROS = {"reads": 0, "sectors_read": 0, "read_ms": 0, "writes": 0, "sectors_written": 0, "write_ms": 0, "io_ms": 0}


def line(major, minor, name, reads=0, sectors_read=0, read_ms=0, writes=0, sectors_written=0, write_ms=0, io_ms=0):
    """One /proc/diskstats line (17 fields after the name, Documentation/admin-guide/iostats.rst)."""
    fields = [reads, 0, sectors_read, read_ms, writes, 0, sectors_written, write_ms, 0, io_ms, read_ms + write_ms,
              0, 0, 0, 0, 0, 0]
    return "%4d %7d %s %s" % (major, minor, name, " ".join(str(f) for f in fields))


def from_iostat(r_s=0.0, rkb_s=0.0, r_await=0.0, w_s=0.0, wkb_s=0.0, w_await=0.0, util=0.0, seconds=1.0):
    """The counters' growth behind one iostat -x line over ``seconds``."""
    return {"reads": round(r_s * seconds), "sectors_read": round(rkb_s * 2 * seconds),
            "read_ms": round(r_await * r_s * seconds), "writes": round(w_s * seconds),
            "sectors_written": round(wkb_s * 2 * seconds), "write_ms": round(w_await * w_s * seconds),
            "io_ms": round(util * 10 * seconds)}


def grown(base, delta):
    return {k: base[k] + delta.get(k, 0) for k in base}


# The guide, 4.1: 4 KiB random reads, GPU 0, 128 threads, iostat -cxzk 1 (r/s, rkB/s, r_await, %util)
GUIDE_RANDREAD = {"nvme2n1": from_iostat(425054, 1700216, 0.13, util=100.80),
                  "nvme3n1": from_iostat(431769, 1727080, 0.13, util=100.00),
                  "md127": from_iostat(856792, 3427172)}
# the guide, 4.1: 1 MiB sequential reads, GPU 2 (both drives ~3.4 GB/s, ~1 ms, 100 % busy)
GUIDE_SEQREAD = {"nvme2n1": from_iostat(27173, 3478144, 1.03, util=100.0),
                 "nvme3n1": from_iostat(27179, 3478912, 0.95, util=100.0),
                 "md127": from_iostat(54360, 6958080)}
# the guide, 4.2: 1 MiB writes to /raid4 (md4 = nvme8n1 + nvme9n1), iostat -cxzm 1 (MB/s)
GUIDE_WRITE = {"nvme8n1": from_iostat(w_s=30171, wkb_s=3771.14 * 1024, w_await=0.72, util=100.0),
               "nvme9n1": from_iostat(w_s=30160, wkb_s=3770.00 * 1024, w_await=0.77, util=100.0),
               "md4": from_iostat(w_s=60325, wkb_s=7540.01 * 1024)}
START = {"reads": 1000, "sectors_read": 80000, "read_ms": 900, "writes": 500, "sectors_written": 40000,
         "write_ms": 700, "io_ms": 5000}
NUMBERS = {"nvme2n1": (259, 2), "nvme3n1": (259, 3), "nvme8n1": (259, 8), "nvme9n1": (259, 9),
           "md127": (9, 127), "md4": (9, 4)}


def pair(deltas):
    before = "\n".join(line(*NUMBERS[n], name=n, **START) for n in deltas) + "\n"
    after = "\n".join(line(*NUMBERS[n], name=n, **grown(START, d)) for n, d in deltas.items()) + "\n"
    return before, after


def test_diskstats_pair_gives_back_the_guides_iostat_figures():
    before, after = pair(GUIDE_RANDREAD)
    b, a = parse_diskstats(before), parse_diskstats(after)
    nvme2 = io_load(b["nvme2n1"], a["nvme2n1"], 1.0)
    assert (nvme2["r_s"], nvme2["rkB_s"], nvme2["r_await_ms"], nvme2["util_pct"]) == (425054, 1700216, 0.13, 100.8)
    assert nvme2["read_bytes"] == 1700216 * 1024  # 512-byte sectors, whatever the drive's block size
    md = io_load(b["md127"], a["md127"], 1.0)
    assert md["r_s"] == 856792 and md["util_pct"] == 0.0  # md keeps no busy time
    before, after = pair(GUIDE_WRITE)
    b, a = parse_diskstats(before), parse_diskstats(after)
    nvme8 = io_load(b["nvme8n1"], a["nvme8n1"], 1.0)
    assert (nvme8["w_s"], nvme8["w_await_ms"], nvme8["util_pct"]) == (30171, 0.72, 100.0)
    assert round(nvme8["wkB_s"] / 1024, 2) == 3771.14 and nvme8["r_await_ms"] is None  # no reads: no await


def test_counter_that_went_back_is_unknown_and_short_lines():
    """The counters are 64-bit unsigned longs on the kernels that run GPUs: one that is lower after
    the job restarted (the device was re-added), and is no wrap to add 2**32 or 2**64 to."""
    old = parse_diskstats(line(259, 0, "nvme0n1", reads=2 ** 32 - 10, sectors_read=100, io_ms=10))
    new = parse_diskstats(line(259, 0, "nvme0n1", reads=5, sectors_read=200, io_ms=20) + "\nbogus line\n")
    assert list(new) == ["nvme0n1"]  # a line that is not a device's is skipped
    with pytest.raises(CounterWentBack, match="counter reads went back"):
        io_load(old["nvme0n1"], new["nvme0n1"], 1.0)
    # kernels before 4.18 print 11 fields after the name
    assert parse_diskstats("   8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n")["sda"]["io_ms"] == 10


def test_a_device_named_on_two_lines_is_garbled_never_a_figure():
    """A duplicated line (the same device twice, the later one stale) made a member read nothing,
    a false FAIL "took no reads": which line is the device's is unknown."""
    garbled = {}
    text = line(259, 0, "nvme0n1", reads=500) + "\n" + line(259, 1, "nvme1n1", reads=7) + "\n" + line(259, 0, "nvme0n1")
    stats = parse_diskstats(text, garbled)
    assert list(stats) == ["nvme1n1"] and garbled == {"nvme0n1": "lines 1 and 3 of diskstats both name nvme0n1"}


def thresholds(**given):
    return watch_thresholds(given)


def judged(deltas, io_type="randread", members=("nvme2n1", "nvme3n1"), md="md127", th=None, tmp=None, xfer_type=0):
    """The drive load check of one job over a diskstats pair written to a procfs tree."""
    before, after = pair(deltas)
    proc = tmp / "proc"
    proc.mkdir(exist_ok=True)
    (proc / "diskstats").write_text(before)
    watch = JobWatch(th or {}, str(proc), str(tmp / "nosys"), {"nvme": [
        {"name": "nvme2n1", "bdf": "0000:2e:00.0"}, {"name": "nvme3n1", "bdf": "0000:2f:00.0"},
        {"name": "nvme8n1", "bdf": "0000:c8:00.0"}, {"name": "nvme9n1", "bdf": "0000:c9:00.0"}]})
    job = {"name": "j", "io_type": io_type, "members": list(members), "md": md, "xfer_type": xfer_type}
    watch.begin(job)
    (proc / "diskstats").write_text(after)
    entry, checks = watch.end(job, {})
    return entry, {c["name"]: c for c in checks}["bench: j: drive load"]


def test_guide_listings_pass_balanced(tmp_path):
    for deltas, io_type in ((GUIDE_RANDREAD, "randread"), (GUIDE_SEQREAD, "read")):
        entry, check = judged(deltas, io_type, tmp=tmp_path)
        assert check["verdict"] == "PASS", check
        assert [d["name"] for d in entry["drives"]] == ["nvme2n1", "nvme3n1"]
        assert entry["drives"][0]["bdf"] == "0000:2e:00.0" and entry["array"]["name"] == "md127"
        assert "nvme2n1 (0000:2e:00.0): " in check["detail"]
    entry, check = judged(GUIDE_WRITE, "write", members=("nvme8n1", "nvme9n1"), md="md4", tmp=tmp_path)
    assert check["verdict"] == "PASS" and entry["drives"][1]["write_bytes"] == round(3770.00 * 1024 * 2) * 512


def test_member_without_io_fails_naming_drive_and_pci_address(tmp_path):
    idle = dict(GUIDE_RANDREAD, nvme3n1=dict(ZEROS))
    _, check = judged(idle, tmp=tmp_path)
    assert check["verdict"] == "FAIL" and "nvme3n1 (0000:2f:00.0) took no reads" in check["actual"]
    # a write job judges writes: reads alone (the write job's read-back) are not its load
    reads_only = {"nvme8n1": GUIDE_WRITE["nvme8n1"], "nvme9n1": from_iostat(100, 400, 0.1, util=1.0)}
    _, check = judged(reads_only, "write", members=("nvme8n1", "nvme9n1"), md=None, tmp=tmp_path)
    assert check["verdict"] == "FAIL" and "nvme9n1 (0000:c9:00.0) took no writes" in check["actual"]


def test_buffered_job_served_by_the_page_cache_is_no_failure(tmp_path):
    """-x 4 (CPU_CACHED_GPU) reads through the page cache: on the H200 a warm 8 GiB set read at
    23 GiB/s left the disk idle. No drive I/O is what the page cache does, not a dead member; a
    member that did take I/O is still compared with its peers."""
    _, check = judged({"nvme2n1": dict(ZEROS), "nvme3n1": dict(ZEROS)}, "read", tmp=tmp_path, xfer_type=4)
    assert check["verdict"] == "PASS" and check["actual"] == "no drive I/O: the page cache served the job"
    assert "buffered job" in check["expected"]
    _, check = judged(dict(GUIDE_SEQREAD, nvme3n1=dict(ZEROS)), "read", tmp=tmp_path, xfer_type=4)
    assert check["verdict"] == "PASS" and check["actual"] == "1 drive moved data"
    assert "the page cache served the job without nvme3n1 (0000:2f:00.0)" in check["detail"]
    slow = dict(GUIDE_RANDREAD, nvme3n1=from_iostat(431769, 1727080, 0.45, util=100.0))
    _, check = judged(slow, tmp=tmp_path, xfer_type=4)
    assert check["verdict"] == "WARN" and "nvme3n1 (0000:2f:00.0) took 246% longer" in check["actual"]
    # the same idle pair on a direct (O_DIRECT) job is a failure
    _, check = judged({"nvme2n1": dict(ZEROS), "nvme3n1": dict(ZEROS)}, "read", tmp=tmp_path, xfer_type=2)
    assert check["verdict"] == "FAIL"


def test_slow_or_uneven_member_is_judged_per_profile(tmp_path):
    # one member three times slower per request than its peer: a slow drive
    slow = dict(GUIDE_RANDREAD, nvme3n1=from_iostat(431769, 1727080, 0.45, util=100.0))
    _, check = judged(slow, tmp=tmp_path)
    assert check["verdict"] == "WARN" and "nvme3n1 (0000:2f:00.0) took 246% longer per request" in check["actual"]
    _, check = judged(slow, tmp=tmp_path, th={"drive_skew_verdict": "FAIL"})
    assert check["verdict"] == "FAIL"
    _, check = judged(slow, tmp=tmp_path, th={"drive_await_tolerance": 3.0})
    assert check["verdict"] == "PASS"
    # a member that moved half its peer's bytes: the array's stripes do not reach it evenly
    uneven = dict(GUIDE_SEQREAD, nvme3n1=from_iostat(13589, 1739456, 0.95, util=50.0))
    _, check = judged(uneven, "read", tmp=tmp_path)
    assert check["verdict"] == "WARN" and "nvme3n1 (0000:2f:00.0) moved 50% fewer bytes" in check["actual"]


def _load(**second):
    drive = {"read_bytes": 4 << 30, "write_bytes": 0, "r_s": 9000.0, "w_s": 0.0, "r_await_ms": 0.2,
             "w_await_ms": None, "util_pct": 90.0}
    return {"drives": [dict(drive, name="nvme2n1"), dict(drive, name="nvme3n1", **second)], "seconds": 10.0,
            "source": "/proc/diskstats"}


@pytest.mark.parametrize("second", [
    {"r_await_ms": None}, {"r_await_ms": float("nan")}, {"read_bytes": float("nan")},
    {"read_bytes": float("inf")}, {"read_bytes": -1}, {"read_bytes": "unknown"},
])
def test_member_figure_that_is_no_number_is_never_pass(second):
    """A member whose bytes, or service time while it moved data, are no figure is unknown: it
    might be the idle or slow one. WARN naming it, never PASS, never a traceback."""
    from ansible_collections.gds.commission.plugins.module_utils.measure.diskload import drive_load_check
    th = thresholds()
    assert drive_load_check("bench: j: ", _load(), "read", {}, th)["verdict"] == "PASS"
    check = drive_load_check("bench: j: ", _load(**second), "read", {}, th)
    assert check["verdict"] == "WARN" and "1 of 2 members unknown: nvme3n1 (PCI address unknown) unknown" in check["actual"], check
    # an idle member has no service time: that is no unknown
    idle = drive_load_check("bench: j: ", _load(read_bytes=0, r_await_ms=None), "read", {}, th)
    assert idle["verdict"] == "FAIL" and "nvme3n1 (PCI address unknown) took no reads" in idle["actual"]


def test_member_slower_than_peers_at_zero_ms_is_named_not_a_traceback():
    from ansible_collections.gds.commission.plugins.module_utils.measure.diskload import drive_load_check
    check = drive_load_check("bench: j: ", _load(r_await_ms=0.0), "read", {}, thresholds())
    assert check["verdict"] == "WARN" and "nvme2n1 (PCI address unknown) took far longer" in check["actual"]


def test_every_gpu_at_once_over_two_arrays_compares_each_array_with_itself(tmp_path):
    """All GPUs at once, each on its own array: md127 serves three GPUs, md4 one, so md127's
    members move three times md4's bytes. Each array's members are compared with their own
    (bench: <job>: <array> drive load), never across arrays; a skew inside an array still shows."""
    def run(deltas):
        before, after = pair(deltas)
        (tmp_path / "diskstats").write_text(before)
        watch = JobWatch({}, str(tmp_path), str(tmp_path / "nosys"))
        job = {"name": "all", "io_type": "read", "members": sorted(deltas),
               "drive_groups": {"nvme23": ["nvme2n1", "nvme3n1"], "nvme89": ["nvme8n1", "nvme9n1"]}}
        watch.begin(job)
        (tmp_path / "diskstats").write_text(after)
        return {c["name"]: c for c in watch.end(job, {})[1]}
    three = from_iostat(27173 * 3, 3478144 * 3, 1.0, util=100.0)
    one = from_iostat(27173, 3478144, 1.0, util=100.0)
    checks = run({"nvme2n1": three, "nvme3n1": three, "nvme8n1": one, "nvme9n1": one})
    assert {n: c["verdict"] for n, c in checks.items()} == {"bench: all: nvme23 drive load": "PASS",
                                                            "bench: all: nvme89 drive load": "PASS"}
    checks = run({"nvme2n1": three, "nvme3n1": three, "nvme8n1": one, "nvme9n1": dict(ZEROS)})
    assert checks["bench: all: nvme89 drive load"]["verdict"] == "FAIL"
    assert checks["bench: all: nvme23 drive load"]["verdict"] == "PASS"


def test_every_gpu_at_once_over_two_arrays_judges_the_bytes_all_its_drives_read(tmp_path):
    """The record's bytes are the whole job's (every GPU at once over two arrays): each array's
    drive load cannot judge them, so the drives of all its arrays together are held against them,
    as one array's are (bench/RESULTS.md 14.4: a batch-mode read served from the page cache)."""
    three = from_iostat(27173 * 3, 3478144 * 3, 1.0, util=100.0)
    one = from_iostat(27173, 3478144, 1.0, util=100.0)
    read = (3478144 * 3 * 2 + 3478144 * 2) * 1024  # every member's kB/s over one second

    def run(record, io_type="read", xfer_type=0, deltas=None):
        before, after = pair(deltas or {"nvme2n1": three, "nvme3n1": three, "nvme8n1": one, "nvme9n1": one})
        (tmp_path / "diskstats").write_text(before)
        watch = JobWatch({}, str(tmp_path), str(tmp_path / "nosys"))
        job = {"name": "all", "io_type": io_type, "xfer_type": xfer_type, "members": ["nvme2n1", "nvme3n1", "nvme8n1", "nvme9n1"],
               "drive_groups": {"nvme23": ["nvme2n1", "nvme3n1"], "nvme89": ["nvme8n1", "nvme9n1"]}}
        watch.begin(job)
        (tmp_path / "diskstats").write_text(after)
        return {c["name"]: c for c in watch.end(job, record)[1]}
    checks = run({"bytes": read})
    assert checks["bench: all: drives served"]["verdict"] == "PASS", checks
    assert checks["bench: all: drives served"]["actual"] == "the drives read %.1f MB of the %.1f MB the job reported (100%%)" % (
        read / 1e6, read / 1e6)
    served = run({"bytes": 3 * read})["bench: all: drives served"]
    assert served["verdict"] == "FAIL" and "the rest came from memory (the page cache)" in served["actual"], served
    # each array's own check still passes: only the job's bytes show that memory served it
    assert run({"bytes": 3 * read})["bench: all: nvme23 drive load"]["verdict"] == "PASS"
    # a member whose counters are gone: the others' short sum is not judged, and never PASS
    unread = run({"bytes": 3 * read}, deltas={"nvme2n1": three, "nvme3n1": three, "nvme8n1": one})
    assert unread["bench: all: drives served"]["verdict"] == "WARN", unread
    assert unread["bench: all: drives served"]["actual"].startswith("1 of 4 drives unknown: nvme9n1")
    # a reported figure that is no number is no PASS
    assert run({"bytes": "9458155520"})["bench: all: drives served"]["verdict"] in ("WARN", "SKIP")
    # not judged: no bytes in the record, a write, a buffered read (the page cache may serve it)
    for record, io_type, xfer_type in (({}, "read", 0), ({"bytes": 3 * read}, "write", 0), ({"bytes": 3 * read}, "read", 4)):
        assert "bench: all: drives served" not in run(record, io_type, xfer_type), (record, io_type, xfer_type)


def test_unknown_is_a_skip_with_the_reason(tmp_path):
    watch = JobWatch({}, str(tmp_path / "noproc"), str(tmp_path / "nosys"))
    job = {"name": "j", "io_type": "read", "members": ["nvme2n1"]}
    watch.begin(job)
    _, checks = watch.end(job, {})
    assert checks[0]["verdict"] == "SKIP" and "diskstats" in checks[0]["detail"]
    job = {"name": "j", "io_type": "read"}
    watch.begin(job)
    entry, checks = watch.end(job, {})
    assert checks[0]["verdict"] == "SKIP" and "no drive known" in entry["drives_unknown"]


def test_md_members_come_from_sysfs_slaves(sim_node):
    """md127 of the simulated DGX-2 over nvme2n1 and nvme3n1: /sys/block/md127/slaves names them,
    whatever the facts' member list says."""
    fixture = yaml.safe_load(open(os.path.join(ROOT, "tests", "fixtures", "dgx2.yml")))
    fixture = copy.deepcopy(fixture)
    fixture.setdefault("proc", {})["mdstat"] = (
        "Personalities : [raid0]\nmd127 : active raid0 nvme3n1[1] nvme2n1[0]\n"
        "      7501209600 blocks super 1.2 512k chunks\n\nunused devices: <none>\n")
    root = sim_node(fixture)
    drives, source = job_drives(os.path.join(root, "sys"), md="md127", members=["nvme9n1"])
    assert drives == ["nvme2n1", "nvme3n1"] and source.endswith("/block/md127/slaves")
    # no such array in sysfs: the facts' members
    assert job_drives(os.path.join(root, "sys"), md="md9", members=["nvme9n1"])[0] == ["nvme9n1"]
    # the target's own disk is followed on a live root only, never into a simulated tree
    assert job_drives(os.path.join(root, "sys"), target=root) == ([], None)


def test_target_directory_disk_on_the_live_root(tmp_path):
    """A target directory without an array, on this machine: the disk under it (its diskstats
    line exists), found through /sys/dev/block/MAJ:MIN."""
    dev = os.stat(str(tmp_path)).st_dev
    if os.major(dev) == 0 or not os.path.exists("/sys/dev/block/%d:%d" % (os.major(dev), os.minor(dev))):
        pytest.skip("the test directory is on no block device here")
    drives, source = job_drives("/sys", target=str(tmp_path / "not-yet"))
    assert drives and source.startswith("the block device under")
    assert all(name in parse_diskstats(open("/proc/diskstats").read()) for name in drives)


@pytest.mark.parametrize("given,word", [
    ({"drive_skew_tolerance": -1}, "non-negative"), ({"drive_skew_verdict": "PASS"}, "WARN, FAIL"),
    ({"nope": 1}, "unknown"), ("x", "must be a dict")])
def test_bad_watch_thresholds_name_the_key(given, word):
    with pytest.raises(WatchConfigError, match=word):
        watch_thresholds(given)


def test_module_records_drive_load_per_job(tmp_path):
    """gds_bench reads diskstats right before and after each job: a benchmark that grows the
    counters of one member only FAILs the drive load check, naming the idle member."""
    before, after = pair(GUIDE_RANDREAD)
    _, after_one = pair(dict(GUIDE_RANDREAD, nvme3n1=dict(ZEROS)))
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "diskstats").write_text(before)
    (tmp_path / "after").write_text(after_one)
    record = {"io_type": "randread", "bytes": 4096 * 850000, "elapsed_s": 1.0, "throughput_gib_s": 3.24,
              "ops": 850000, "errors": 0, "verify_errors": 0, "path": {"mode": "nvfs"}}
    bench = tmp_path / "gdsbench"
    bench.write_text("#!/bin/sh\ncp %s %s\necho '%s'\n" % (tmp_path / "after", proc / "diskstats", json.dumps(record)))
    bench.chmod(0o755)
    job = {"name": "g1 rand_read", "target": str(tmp_path / "data"), "io_type": "randread", "xfer_type": 1,
           "members": ["nvme2n1", "nvme3n1"], "md": "md127"}
    rc, result = run_module("gds_bench", {"binary": str(bench), "jobs": [job], "udev_root": "",
                                          "procfs_root": str(proc), "sysfs_root": str(tmp_path / "sys"),
                                          "topology": {"nvme": [{"name": "nvme3n1", "bdf": "0000:2f:00.0"}]}})
    assert rc == 0, result
    check = next(c for c in result["checks"] if c["name"] == "bench: g1 rand_read: drive load")
    assert check["verdict"] == "FAIL" and "nvme3n1 (0000:2f:00.0) took no reads" in check["actual"]
    watch = result["results"][0]["watch"]
    assert [d["name"] for d in watch["drives"]] == ["nvme2n1", "nvme3n1"] and watch["drives"][0]["reads"] == 425054
    rc, result = run_module("gds_bench", {"binary": str(bench), "jobs": [job], "watch_thresholds": {"x": 1}})
    assert rc != 0 and "watch_thresholds" in result["msg"] and "'x' is unknown" in result["msg"]


def test_a_simulated_nodes_job_is_watched_on_the_disk_that_ran_it(tmp_path, sim_node):
    """A simulated node's jobs run on the controller, in a directory of its tree: the watch reads
    the disk under that directory in this machine's /sys and /proc/diskstats, says so, and says
    why the node's path limit does not apply (the demo's report showed 'cannot read
    .../build/sim/<host>/proc/diskstats' and 'no PCIe links in the topology facts')."""
    import simtree  # noqa: F401  (sim_node builds with it)
    from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
    from ansible_collections.gds.commission.plugins.module_utils.measure.diskload import job_drives
    target = tmp_path / "scratch"
    target.mkdir()
    disks, _ = job_drives("/sys", target=str(target))
    if not disks or not os.path.exists("/proc/diskstats"):
        pytest.skip("the temporary directory is on no block device here (tmpfs)")
    root = sim_node("dgx-a100")
    topology, _ = discover(root + "/sys", root + "/proc")
    watch = JobWatch({}, root + "/proc", root + "/sys", topology)
    job = {"name": "raid seq_read", "xfer_type": 1, "io_type": "read", "target": str(target), "drives_from_target": True}
    watch.begin(job)
    entry, checks = watch.end(job, {"throughput_gib_s": 1.0, "bytes": 1 << 30})
    assert [d["name"] for d in entry["drives"]] == disks, entry
    assert "on the machine that ran the job" in entry["drives_source"]
    assert "drives_unknown" not in entry
    assert entry["limit"]["unknown"].startswith("a simulated node: the job ran on this machine's disk")


def test_a_direct_read_the_drives_did_not_serve_measured_memory():
    """cuFile's compat batch path reads through the page cache (bench/RESULTS.md 14.4: 2-4 GB of
    the file cached after one -x 6 run, a later run served from memory): a direct read whose
    reported bytes the drives did not read is FAIL, naming both figures."""
    from ansible_collections.gds.commission.plugins.module_utils.measure.diskload import drive_load_check
    th = thresholds()
    read = 2 * (4 << 30)  # both members, 4 GiB each
    for job_bytes in (read, int(read / 0.9), None):  # as much as they read, at the share, not judged
        check = drive_load_check("bench: j: ", _load(), "read", {}, th, job_bytes=job_bytes)
        assert check["verdict"] == "PASS", (job_bytes, check)
    check = drive_load_check("bench: j: ", _load(), "read", {}, th, job_bytes=3 * read)
    assert check["verdict"] == "FAIL"
    assert check["actual"] == ("the drives read 8589.9 MB of the 25769.8 MB the job reported (33%): the rest came "
                               "from memory (the page cache), so the figure is not the drives'"), check
    assert "at least 90% of the bytes the job read come from them" in check["expected"]
    # a buffered job may be served from memory, and a write's bytes are not judged so
    assert drive_load_check("bench: j: ", _load(), "read", {}, th, buffered=True, job_bytes=3 * read)["verdict"] == "PASS"
    write = dict(_load(), drives=[dict(d, write_bytes=d["read_bytes"], w_await_ms=0.2) for d in _load()["drives"]])
    assert drive_load_check("bench: j: ", write, "write", {}, th, job_bytes=3 * read)["verdict"] == "PASS"
    # drives that read ten times what the job reported carried other I/O: never the job's figures
    check = drive_load_check("bench: j: ", _load(), "read", {}, th, job_bytes=read // 10)
    assert check["verdict"] == "WARN" and "other I/O read these drives" in check["actual"], check
    assert drive_load_check("bench: j: ", _load(), "read", {}, th, job_bytes=read // 2)["verdict"] == "PASS"
    # the disk under a target directory is the machine's, shared with everything: said, not WARN
    check = drive_load_check("bench: j: ", _load(), "read", {}, th, job_bytes=read // 10, shared_disk=True)
    assert check["verdict"] == "PASS" and "the disk under the target directory is shared" in check["detail"], check


@pytest.mark.parametrize("job_bytes", [float("nan"), -1, "9458155520"])
def test_reported_bytes_that_are_no_figure_are_never_pass(job_bytes):
    from ansible_collections.gds.commission.plugins.module_utils.measure.diskload import drive_load_check
    check = drive_load_check("bench: j: ", _load(), "read", {}, thresholds(), job_bytes=job_bytes)
    assert check["verdict"] in ("SKIP", "WARN") and "the bytes the job reported" in str(check), check


def test_the_watch_judges_the_bytes_the_benchmark_reported(tmp_path):
    """JobWatch hands the record's bytes to the check: the guide's sequential read against a job
    that claims three times what its drives read."""
    before, after = pair(GUIDE_SEQREAD)
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "diskstats").write_text(before)
    watch = JobWatch({}, str(proc), str(tmp_path / "nosys"), {"nvme": [
        {"name": "nvme2n1", "bdf": "0000:2e:00.0"}, {"name": "nvme3n1", "bdf": "0000:2f:00.0"}]})
    job = {"name": "j", "io_type": "read", "members": ["nvme2n1", "nvme3n1"], "md": "md127", "xfer_type": 6}
    watch.begin(job)
    (proc / "diskstats").write_text(after)
    entry, checks = watch.end(job, {"bytes": 1})
    # one byte reported, gigabytes read: the drives' figures are not this job's alone
    assert {c["name"]: c for c in checks}["bench: j: drive load"]["verdict"] == "WARN"
    drives_read = sum(d["read_bytes"] for d in entry["drives"])
    (proc / "diskstats").write_text(before)
    watch.begin(job)
    (proc / "diskstats").write_text(after)
    _, checks = watch.end(job, {"bytes": drives_read})
    assert {c["name"]: c for c in checks}["bench: j: drive load"]["verdict"] == "PASS"
    (proc / "diskstats").write_text(before)
    watch.begin(job)
    (proc / "diskstats").write_text(after)
    _, checks = watch.end(job, {"bytes": 3 * drives_read})
    check = {c["name"]: c for c in checks}["bench: j: drive load"]
    assert check["verdict"] == "FAIL" and "the rest came from memory (the page cache)" in check["actual"]


def test_rates_over_the_benchmarks_timed_window_with_the_rest_named(tmp_path, monkeypatch):
    """Every GPU at once on four H200s: 32 worker processes spent ~43 s of the job's window
    starting and stopping; the drives' utilisation over the whole window read 10.7 %. Over the
    benchmark's own timed window (its record's elapsed_s) it is the drives' load while it ran."""
    from ansible_collections.gds.commission.plugins.module_utils.measure import diskload
    now = [1000.0]
    monkeypatch.setattr(diskload.time, "monotonic", lambda: now[0])
    before, after = pair({"nvme2n1": from_iostat(r_s=100, rkb_s=400000, util=90.0, seconds=10.0),
                          "nvme3n1": from_iostat(r_s=100, rkb_s=400000, util=90.0, seconds=10.0)})
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "diskstats").write_text(before)
    watch = JobWatch({}, str(proc), str(tmp_path / "nosys"), {})
    job = {"name": "j", "io_type": "read", "members": ["nvme2n1", "nvme3n1"], "xfer_type": 0}
    watch.begin(job)
    (proc / "diskstats").write_text(after)
    now[0] += 53.0  # the window: 10 s of I/O, 43 s of start-up and wind-down
    entry, dummy = watch.end(job, {"elapsed_s": 10.0})
    assert (entry["seconds"], entry["window_seconds"], entry["outside_io_seconds"]) == (10.0, 53.0, 43.0)
    assert [d["util_pct"] for d in entry["drives"]] == [90.0, 90.0] and entry["drives"][0]["rkB_s"] == 400000.0
    # no timed window in the record (or one longer than the watch's): the whole window, nothing named
    (proc / "diskstats").write_text(before)
    watch.begin(job)
    (proc / "diskstats").write_text(after)
    now[0] += 53.0
    entry, dummy = watch.end(job, {"elapsed_s": "x"})
    assert entry["seconds"] == 53.0 and "window_seconds" not in entry and entry["drives"][0]["util_pct"] == round(900 / 53.0, 2)
    # drives busy longer than the timed window (they served I/O outside it: the lab's H200 read was
    # busy 21.9 s in its 20 s window): the whole window, never a utilisation over 100 %
    (proc / "diskstats").write_text(before)
    watch.begin(job)
    (proc / "diskstats").write_text(after)
    now[0] += 53.0
    entry, dummy = watch.end(job, {"elapsed_s": 8.0})
    assert entry["seconds"] == 53.0 and "window_seconds" not in entry and entry["drives"][0]["util_pct"] <= 100
