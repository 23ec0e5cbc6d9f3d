"""gdsio job files in gdsbench (gdsbench's jobfile.c, docs/benchmark.md): the guide's format
([global] then [jobN] sections), every job run at once with its own threads, NUMA node and
GPU, results per job and in total (JSON and gdsio's result lines), and errors that name the
file and the line. CPU transfer types only, so the tests need no GPU."""
import json
import os

import pytest

from test_gdsbench import LINE_RE, check_record, data_dir, gdsbench, gdsbench_nocuda, run, run_json  # noqa: F401

# The guide's NFS random-read job file (GDS benchmarking guide, "gdsio config files"), with
# its comments; {dN} are replaced by test directories and the load made small.
GUIDE_RR = """[global]
name=nfs_random_read
#0,1,2,3,4,5
xfer_type={xfer}
#IO type, rw=read, rw=write, rw=randread, rw=randwrite
rw={rw}
#block size, for variable block size can specify range e.g. bs=1M:4M:1M, (1M : start block size, 4M : end block size, 1M :steps in which size is varied)
bs={bs}
#file-size
size=256K
#secs
runtime={runtime}

[job1]
#numa node
numa_node=0
#gpu device index (check nvidia-smi)
gpu_dev_id=0
num_threads=2
directory={d1}

[job2]
numa_node=0
gpu_dev_id=2
num_threads=1
directory={d2}
"""


def dirs(base, n):
    out = []
    for i in range(n):
        d = os.path.join(str(base), "ib%d" % i)
        os.makedirs(d, exist_ok=True)
        out.append(d)
    return out


def guide_file(tmp_path, base, **kw):
    d1, d2 = dirs(base, 2)
    vals = dict(xfer=1, rw="write", bs="64k", runtime=0, d1=d1, d2=d2)
    vals.update(kw)
    text = GUIDE_RR.format(**vals)
    if not os.path.isdir("/sys/devices/system/node/node0"):
        text = text.replace("numa_node=0\n", "")
    cfg = tmp_path / "nfs_rr.gdsio"
    cfg.write_text(text)
    return cfg


def test_guide_job_file_runs_per_job_and_total(gdsbench, data_dir, tmp_path):
    cfg = guide_file(tmp_path, data_dir)
    j, p = run_json(gdsbench, tmp_path, cfg)
    check_record(j)
    jobs = j["jobs"]
    assert [x["name"] for x in jobs] == ["job1", "job2"] and [x["threads"] for x in jobs] == [2, 1]
    assert [x["gpu"] for x in jobs] == [0, 2]                   # CPU type: the GPU is recorded, not used
    assert [x["ops"] for x in jobs] == [8, 4] and j["ops"] == 12 and j["threads"] == 3
    assert sum(x["bytes"] for x in jobs) == j["bytes"] == 12 * 65536
    assert [x["line"] for x in jobs] == [14, 22]
    for x in jobs:
        check_record(x)
    # gdsio's line for the run first (what gdsio prints for a job file), then one per job
    lines = p.stdout.splitlines()
    assert len(lines) == 3
    total = LINE_RE.match(lines[0])
    assert total and total.group(3) == "3" and int(total.group(9)) == 12 and int(total.group(4)) == 768
    for line, x in zip(lines[1:], jobs):
        name, _, rest = line.partition(": ")
        m = LINE_RE.match(rest)
        assert name == x["name"] and m, line
        assert (m.group(1), m.group(2), int(m.group(3)), int(m.group(9))) == ("WRITE", "CPUONLY", x["threads"], x["ops"])
        assert int(m.group(4)) == x["bytes"] // 1024 and int(m.group(5)) == x["dataset_bytes"] // 1024
    # then the guide's random read over the files just written, for a while
    cfg = guide_file(tmp_path, data_dir, rw="randread", bs="4k", runtime="0.2")
    j, p = run_json(gdsbench, tmp_path, cfg)
    assert j["io_type"] == "randread" and j["errors"] == 0 and all(x["ops"] > 0 for x in j["jobs"])
    assert p.stdout.startswith("IoType: RANDREAD XferType: CPUONLY Threads: 3 ")


def test_job_file_without_cuda_build(gdsbench_nocuda, data_dir, tmp_path):
    j, _ = run_json(gdsbench_nocuda, tmp_path, guide_file(tmp_path, data_dir))
    assert j["ops"] == 12 and j["exit_code"] == 0


def test_job_file_options_and_time_based(gdsbench, data_dir, tmp_path):
    d1, d2 = dirs(data_dir, 2)
    cfg = tmp_path / "o.gdsio"
    cfg.write_text("[global]\nxfer_type=1\nrw=write\nbs=8k:32k:8k\nsize=256k\nruntime=5\ntime_based=0\n"
                   "skip_bufregister=1\nenable_nvlinks=1\nrandom_seed=9\n"
                   "[job1]\ndirectory=%s\nfill_random=1\n"
                   "[job2]\nfilename=%s/f\nbuffered=1\nbs=1000\nstart_offset=4096\n" % (d1, d2))
    j, _ = run_json(gdsbench, tmp_path, cfg)
    j1, j2 = j["jobs"]
    # time_based=0: one pass although runtime is set (no wrap-around for 5 s)
    assert j1["bytes"] == 256 << 10 and j1["duration_s"] == 5 and j["elapsed_s"] < 5
    assert (j1["io_size_min"], j1["io_size_bytes"], j1["io_size_step"]) == (8192, 32768, 8192)
    assert j1["fill_random"] is True and j1["seed"] == 9 and j1["skip_bufregister"] is True and j1["nvlinks"]
    assert j2["buffered"] is True and j2["io_size_bytes"] == 1000 and j2["offset"] == 4096
    assert j2["ops"] == 262 and os.path.getsize(os.path.join(d2, "f")) == 4096 + 262000
    cfg.write_text("[global]\nxfer_type=1\nrw=randwrite\nbs=4k\nsize=256k\n"
                   "[job1]\ndirectory=%s\nunaligned_random=1\n[job2]\ndirectory=%s\nalignment_size=64k\n" % (d1, d2))
    j, _ = run_json(gdsbench, tmp_path, cfg)
    assert j["jobs"][0]["unaligned"] is True and j["jobs"][1]["align"] == 65536 and j["errors"] == 0


def test_jobs_pin_to_their_numa_node(gdsbench, data_dir, tmp_path):
    nodes = sorted(int(n[4:]) for n in os.listdir("/sys/devices/system/node") if n[4:].isdigit()) \
        if os.path.isdir("/sys/devices/system/node") else []
    if not nodes:
        pytest.skip("no NUMA nodes in sysfs")
    d1, d2 = dirs(data_dir, 2)
    cfg = tmp_path / "n.gdsio"
    cfg.write_text("[global]\nxfer_type=1\nrw=write\nbs=64k\nsize=256k\n[job1]\nnuma_node=%d\ndirectory=%s\n"
                   "[job2]\nnuma_node=%d\ndirectory=%s\n" % (nodes[0], d1, nodes[-1], d2))
    j, _ = run_json(gdsbench, tmp_path, cfg)
    assert [x["numa_node"] for x in j["jobs"]] == [nodes[0], nodes[-1]] and j["errors"] == 0
    cfg.write_text(cfg.read_text().replace("numa_node=%d\ndirectory=%s\n" % (nodes[-1], d2),
                                           "numa_node=4000\ndirectory=%s\n" % d2))
    p = run(gdsbench, cfg)
    assert p.returncode == 2 and "n.gdsio:10: [job2] numa_node: NUMA node 4000 does not exist" in p.stderr


def test_dry_run_checks_a_job_file_without_running_it(gdsbench_nocuda, data_dir, tmp_path):
    """--dry-run: the one parser and the run's checks, for a generated job file; GPU types too
    (a CPU-only build has no engine for them, but their name is the vocabulary's), nothing opened
    or written."""
    cfg = guide_file(tmp_path, data_dir, xfer=0, bs="64k:256k:64k")
    before = sorted(os.listdir(str(data_dir)))
    p = run(gdsbench_nocuda, "--dry-run", cfg)
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)
    assert plan["dry_run"] is True and [x["name"] for x in plan["jobs"]] == ["job1", "job2"]
    assert [(x["xfer_type"], x["gpu"], x["threads"], x["line"]) for x in plan["jobs"]] == [(0, 0, 2, 14), (0, 2, 1, 22)]
    assert plan["jobs"][0]["io_size_min"] == 65536 and plan["jobs"][0]["io_size_bytes"] == 262144
    assert plan["jobs"][0]["xfer_name"] == "GPUD"
    assert sorted(os.listdir(str(data_dir))) == before and not os.listdir(plan["jobs"][0]["target"])
    cfg.write_text(cfg.read_text().replace("num_threads=1", "num_threads=0"))
    p = run(gdsbench_nocuda, "--dry-run", cfg)
    assert p.returncode == 2 and "nfs_rr.gdsio:25: num_threads=0" in p.stderr and not p.stdout


BAD_FILES = [
    ("[global]\nxfer_type=1\nrw=read\n[jobs]\ndirectory={d}\n[nfs]\n", 6, "unknown section [nfs]"),
    ("[global]\nxfer_type=1\n[job1]\ndirectory={d}\n[global]\nrw=read\n", 5, "a second [global] section"),
    ("[global]\nxfer_type=1\nrw=read\n[job1]\ndirectory={d}\n[job1]\n", 6, "a second [job1] section"),
    ("# jobs\nxfer_type=1\n[job1]\n", 2, "before any section"),
    ("[global]\nxfer_type=1\nrw=read\n", 3, "no [jobN] section"),
    ("[global]\nxfer_type=1\nrw=read\n[job1\n", 4, "malformed section header"),
    ("[global]\nxfer_type=1\nrw=read\n[job1]\nnum_threads=1\nbogus=1\ndirectory={d}\n", 6, "unknown key 'bogus'"),
    ("[global]\nxfer_type=1\nrw=read\nsize=12Q\n[job1]\ndirectory={d}\n", 4, "size=12Q: expected a size"),
    ("[global]\nxfer_type=1\nrw=read\nbs=4k:1M\n[job1]\ndirectory={d}\n", 4, "bs=4k:1M: expected MIN:MAX:STEP"),
    ("[global]\nxfer_type=1\nrw=read\n[job1]\nnum_threads=many\ndirectory={d}\n", 5, "num_threads=many"),
    ("[global]\nxfer_type=1\nrw=read\ndo_verify=yes\n[job1]\ndirectory={d}\n", 4, "do_verify=yes: expected 0 or 1"),
    ("[global]\nxfer_type=1\nrw=read\nruntime=soon\n[job1]\ndirectory={d}\n", 4, "runtime=soon"),
    ("[global]\nxfer_type=1\nrw=sideways\n[job1]\ndirectory={d}\n", 3, "rw=sideways"),
    ("[global]\nxfer_type=1\nrw=write\nsize=1M\n\n[job1]\nnum_threads=2\n", 6, "[job1] has neither directory nor filename"),
    ("[global]\nxfer_type=1\nrw=write\nsize=1M\n[job1]\ndirectory={d}\nfilename={d}/f\n", 5, "has both directory (line 6) and filename (line 7)"),
    ("[global]\nrw=write\n[job1]\ndirectory={d}\n", 3, "[job1] has no xfer_type"),
    ("[global]\nxfer_type=1\n[job1]\ndirectory={d}\n", 3, "[job1] has no rw"),
    # values that only the checks against the job refuse still point at their line
    ("[global]\nxfer_type=1\nrw=write\nbs=6k\nsize=1M\n[job1]\ndirectory={d}\n", 4, "[job1] bs: 6144 bytes is not a multiple of 4 KiB"),
    ("[global]\nxfer_type=1\nrw=write\nsize=1M\n[job1]\ndirectory={d}/missing\n", 6, "[job1] directory: {d}/missing"),
    ("[global]\nxfer_type=9\nrw=write\nsize=1M\n[job1]\ndirectory={d}\n", 2, "[job1] xfer_type: 9 is not a transfer type"),
    ("[global]\nxfer_type=1\nrw=write\n[job1]\ndirectory={d}\n", 4, "[job1] size: writes need a file size"),
    ("[global]\nxfer_type=1\nrw=write\nsize=1M\nfill_random=1\ndo_verify=1\n[job1]\ndirectory={d}\n", 5, "[job1] fill_random: random buffer contents cannot be verified; drop fill_random or do_verify"),
    ("[global]\nxfer_type=1\nrw=write\nsize=1M\n[job1]\ndirectory={d}\nunaligned_random=1\n", 7, "[job1] unaligned_random: unaligned offsets apply to random"),
]


@pytest.mark.parametrize("body,line,needle", BAD_FILES, ids=[n for _, _, n in BAD_FILES])
def test_bad_job_file_names_file_and_line(gdsbench, data_dir, tmp_path, body, line, needle):
    cfg = tmp_path / "bad.gdsio"
    cfg.write_text(body.replace("{d}", str(data_dir)))
    p = run(gdsbench, cfg)
    assert p.returncode == 2, p.stderr
    assert "gdsbench: %s:%d: " % (cfg, line) in p.stderr, p.stderr
    assert needle.replace("{d}", str(data_dir)) in p.stderr, p.stderr
    assert not p.stdout.strip() and "Traceback" not in p.stderr
