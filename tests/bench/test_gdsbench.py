"""Tests of gdsbench (roles/gds_bench/files/bench, docs/benchmark.md): builds (with and without CUDA,
ASan/UBSan), every CPU transfer/I/O type, verify, the JSON contract, the gdsio
text line, config files, and bad arguments (exit 2, never a crash).

The GPU engines run against tests/bench/mock_cuda.c (host-memory stand-ins for
libcudart and libcufile) when CUDA headers are found at build time
(/usr/local/cuda, the pip wheels, or $GDSBENCH_TEST_CUDA_HOME); otherwise those
tests skip. Everything uses small files: the whole module takes well under a
minute on two cores."""
import glob
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import GDSBENCH_SRC as BENCH, LAB, ROOT
HERE = os.path.dirname(os.path.abspath(__file__))
SECTOR = 4096
CONTRACT_KEYS = {"io_type", "xfer_type", "threads", "io_size_bytes", "bytes", "ops", "elapsed_s",
                 "throughput_gib_s", "iops", "lat_us", "cpu_util_pct", "errors", "verify_errors", "path"}
LINE_RE = re.compile(
    r"^IoType: (READ|WRITE|RANDREAD|RANDWRITE|MIXED) XferType: (\S+) Threads: (\d+) "
    r"DataSetSize: (\d+)/(\d+)\(KiB\) IOSize: (\d+)\(KiB\) Throughput: (\d+\.\d{6}) GiB/sec, "
    r"Avg_Latency: (\d+\.\d{6}) usecs ops: (\d+) total_time (\d+\.\d{6}) secs$")

JSON_SCHEMA = {
    "type": "object",
    "required": sorted(CONTRACT_KEYS),
    "properties": {
        "io_type": {"enum": ["read", "write", "randread", "randwrite", "mixed"]},
        "xfer_type": {"anyOf": [{"type": "integer", "enum": [0, 1, 2, 4, 5, 6]}, {"const": "mixed"}]},
        "threads": {"type": "integer", "minimum": 1},
        "io_size_bytes": {"type": "integer", "minimum": 1},
        "bytes": {"type": "integer", "minimum": 0},
        "ops": {"type": "integer", "minimum": 0},
        "elapsed_s": {"type": "number", "minimum": 0},
        "throughput_gib_s": {"type": "number", "minimum": 0},
        "iops": {"type": "number", "minimum": 0},
        "lat_us": {"type": "object", "required": ["mean", "p50", "p90", "p99", "p999", "max"],
                   "additionalProperties": {"type": "number", "minimum": 0}},
        "cpu_util_pct": {"type": "number", "minimum": 0},
        "errors": {"type": "integer", "minimum": 0},
        "verify_errors": {"type": "integer", "minimum": 0},
        "path": {"type": "object", "required": ["mode", "evidence"],
                 "properties": {"mode": {"enum": ["nvfs", "p2pdma", "compat", "posix"]},
                                "evidence": {"type": "array", "minItems": 1, "items": {"type": "string"}}}},
    },
}


def make(*targets, env=None):
    proc = subprocess.run(["make", "-C", BENCH, "-s", *targets], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def cuda_env():
    env = dict(os.environ)
    if os.environ.get("GDSBENCH_TEST_CUDA_HOME"):
        env["CUDA_HOME"] = os.environ["GDSBENCH_TEST_CUDA_HOME"]
    return env


@pytest.fixture(scope="session")
def gdsbench():
    make("gdsbench", env=cuda_env())
    return os.path.join(BENCH, "gdsbench")


@pytest.fixture(scope="session")
def gdsbench_asan():
    make("asan", env=cuda_env())
    return os.path.join(BENCH, "gdsbench-asan")


@pytest.fixture(scope="session")
def gdsbench_nocuda():
    make("nocuda")
    return os.path.join(BENCH, "gdsbench-nocuda")


@pytest.fixture
def data_dir(tmp_path):
    """A directory that takes O_DIRECT (tmpfs does not): tmp_path, else one under the build's obj/."""
    probe = tmp_path / "probe"
    try:
        os.close(os.open(str(probe), os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644))
        os.unlink(str(probe))
        yield tmp_path
    except OSError:
        d = os.path.join(BENCH, "obj", "testdata", tmp_path.name)
        os.makedirs(d, exist_ok=True)
        yield d
        shutil.rmtree(d, ignore_errors=True)


def run(binary, *args, env=None, timeout=60):
    proc = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode >= 0, "killed by signal %d\n%s" % (-proc.returncode, proc.stderr)
    assert "Sanitizer" not in proc.stderr and "runtime error:" not in proc.stderr, proc.stderr
    return proc


def run_json(binary, tmp, *args, env=None, expect=0):
    out = os.path.join(str(tmp), "r%d.json" % len(os.listdir(str(tmp))))
    proc = run(binary, *args, "--json", out, env=env)
    assert proc.returncode == expect, "rc=%d\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr)
    with open(out) as f:
        return json.load(f), proc


def check_record(j):
    try:
        import jsonschema
        jsonschema.validate(j, JSON_SCHEMA)
    except ImportError:  # the schema by hand
        assert CONTRACT_KEYS <= set(j)
        assert j["path"]["mode"] in ("nvfs", "p2pdma", "compat", "posix")
    lat = j["lat_us"]
    if j["ops"]:
        assert lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]
        assert lat["min"] <= lat["mean"] <= lat["max"]
        assert j["bytes"] == j["ops"] * j["io_size_bytes"] or j.get("jobs")


# ---------------------------------------------------------------- builds

def test_build_without_cuda_runs_cpu_and_refuses_gpu_types(gdsbench_nocuda, data_dir):
    v = run(gdsbench_nocuda, "--version")
    assert v.returncode == 0 and "without CUDA" in v.stdout
    p = run(gdsbench_nocuda, "-D", data_dir, "-x", 1, "-I", 1, "-s", "1M", "-i", "64K")
    assert p.returncode == 0, p.stderr
    for x in (0, 2, 4, 5, 6):
        p = run(gdsbench_nocuda, "-D", data_dir, "-x", x, "-I", 0, "-i", "64K")
        assert p.returncode == 1, (x, p.stderr)
        assert "built without" in p.stderr and "-x %d" % x in p.stderr


def test_help_and_version(gdsbench):
    assert run(gdsbench, "-h").returncode == 0
    assert "gdsbench" in run(gdsbench, "--version").stdout


# ---------------------------------------------------------------- CPU path

@pytest.mark.parametrize("io_type,name", [(0, "read"), (2, "randread"), (3, "randwrite")])
def test_cpu_io_types_per_thread_files(gdsbench, data_dir, tmp_path, io_type, name):
    w, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 1, "-w", 2, "-s", "2M", "-i", "64K")
    check_record(w)
    assert w["io_type"] == "write" and w["ops"] == 2 * 32 and w["path"]["mode"] == "posix"
    assert sorted(os.listdir(str(data_dir))) >= ["gdsbench.0", "gdsbench.1"]
    extra = ["-T", "0.2"] if io_type in (2, 3) else []
    j, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", io_type, "-w", 2, "-i", "64K", *extra)
    check_record(j)
    assert j["io_type"] == name and j["xfer_type"] == 1 and j["threads"] == 2
    assert j["errors"] == 0 and j["ops"] > 0
    if not extra:
        assert j["ops"] == 64 and j["bytes"] == 4 << 20  # one pass over 2 x 2 MiB


def test_cpu_shared_file_and_offset(gdsbench, data_dir, tmp_path):
    f = os.path.join(str(data_dir), "shared")
    j, _ = run_json(gdsbench, tmp_path, "-f", f, "-x", 1, "-I", 1, "-w", 4, "-s", "4M", "-i", "256K", "-o", "1M", "-V")
    assert j["ops"] == 16 and os.path.getsize(f) == 5 << 20 and j["target_kind"] == "file"
    j, _ = run_json(gdsbench, tmp_path, "-f", f, "-x", 1, "-I", 2, "-w", 4, "-i", "4K", "-o", "1M", "-V", "-T", "0.2")
    assert j["verify_errors"] == 0 and j["ops"] > 0 and j["file_size"] == 4 << 20


def test_numa_pinning(gdsbench, data_dir, tmp_path):
    if not os.path.isdir("/sys/devices/system/node/node0"):
        pytest.skip("no NUMA node 0 in sysfs")
    j, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 1, "-s", "1M", "-i", "64K", "-n", 0)
    assert j["numa_node"] == 0 and j["ops"] == 16


def test_gdsio_line_format(gdsbench, data_dir):
    p = run(gdsbench, "-D", data_dir, "-x", 1, "-I", 1, "-w", 2, "-s", "1M", "-i", "128K")
    assert p.returncode == 0
    m = LINE_RE.match(p.stdout.strip())
    assert m, p.stdout
    io, xfer, threads, done_kib, set_kib, io_kib, gib_s, lat, ops, secs = m.groups()
    assert (io, xfer, threads, io_kib) == ("WRITE", "CPUONLY", "2", "128")
    assert int(done_kib) == 2048 and int(set_kib) == 2048 and int(ops) == 16
    # --json - : stdout carries the JSON only, the line goes to stderr
    p = run(gdsbench, "-D", data_dir, "-x", 1, "-I", 0, "-w", 2, "-i", "128K", "--json", "-")
    check_record(json.loads(p.stdout))
    assert LINE_RE.match(p.stderr.strip().splitlines()[-1])


# ---------------------------------------------------------------- verify

def corrupt(path, offset, data=b"\xde\xad\xbe\xef"):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def test_verify_detects_corrupted_and_misplaced_blocks(gdsbench, data_dir, tmp_path):
    j, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 1, "-w", 2, "-s", "1M", "-i", "64K", "-V")
    assert j["verify_errors"] == 0 and j["verify"] is True
    j, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 0, "-w", 2, "-i", "64K", "-V")
    assert j["verify_errors"] == 0
    f1 = os.path.join(str(data_dir), "gdsbench.1")
    corrupt(f1, 5 * SECTOR + 1000)                       # flipped bytes in one sector
    j, p = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 0, "-w", 2, "-i", "64K", "-V", expect=1)
    assert j["verify_errors"] == 1 and j["exit_code"] == 1 and j["error"].startswith("verify FAILED: 1 bad")
    assert "gdsbench.1" in p.stderr and str(5 * SECTOR) in p.stderr
    assert LINE_RE.match(p.stdout.strip())               # the line is still printed
    # a whole, intact sector written at the wrong place: only the offset stamp betrays it
    with open(f1, "r+b") as f:
        f.seek(10 * SECTOR)
        good = f.read(SECTOR)
        f.seek(11 * SECTOR)
        f.write(good)
    j, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 0, "-w", 2, "-i", "64K", "-V", expect=1)
    assert j["verify_errors"] == 2


@pytest.mark.parametrize("extra", [["-I", 1], ["-I", 3, "-T", "0.2"], ["-I", 1, "-w", 2, "-P", 2]],
                         ids=["write", "randwrite", "procs"])
def test_open_failure_counts_as_an_error(gdsbench, data_dir, tmp_path, extra):
    """A target that cannot be opened (a FIFO: refused before it is opened) fails the run: the
    JSON counts it and says why, never errors 0 with exit code 1."""
    fifo = os.path.join(str(data_dir), "gdsbench.0")
    os.mkfifo(fifo)
    j, p = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-s", "1M", "-i", "64K", *extra, expect=1)
    check_record(j)
    assert j["exit_code"] == 1 and j["errors"] >= 1 and j["ops"] == 0
    assert j["error"] == "refusing %s: not a regular file (a FIFO)" % fifo
    assert fifo in p.stderr


def test_peer_memory_is_the_buffer_and_named_in_the_record(gdsbench, data_dir, tmp_path):
    """--peer-memory maps FILE shared as the I/O buffer (a p2pmem/allocate on a P2PDMA node; the
    QEMU guest's test moves data into real NVMe controller memory, tests/integration/
    test_guest_p2pdma.py). Here a plain file stands in: the data lands in it, verified."""
    buffer = tmp_path / "allocate"
    buffer.write_bytes(b"\0" * (1 << 20))
    run_json(gdsbench, tmp_path, "-f", data_dir / "p", "-x", 1, "-I", 1, "-s", "4M", "-i", "1M")
    j, _ = run_json(gdsbench, tmp_path, "-f", data_dir / "p", "-x", 1, "-I", 0, "-s", "4M", "-i", "1M", "-V",
                    "--peer-memory", buffer)
    assert j["peer_memory"] == str(buffer) and j["verify_errors"] == 0 and j["bytes"] == 4 << 20
    assert buffer.read_bytes() != b"\0" * (1 << 20)  # the last read's block is in the shared mapping
    j, _ = run_json(gdsbench, tmp_path, "-f", data_dir / "p", "-x", 1, "-I", 0, "-s", "4M", "-i", "1M")
    assert j["peer_memory"] is None


def test_successful_run_has_no_error_field(gdsbench, data_dir, tmp_path):
    j, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 1, "-s", "1M", "-i", "64K")
    assert j["exit_code"] == 0 and j["errors"] == 0 and "error" not in j


def test_verify_of_writes_reads_back(gdsbench, data_dir, tmp_path):
    j, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 3, "-w", 2, "-s", "1M", "-i", "4K",
                    "-V", "-T", "0.2", "-k", 7)
    assert j["verify_errors"] == 0 and j["ops"] > 0 and j["seed"] == 7


# ---------------------------------------------------------------- config files

def test_config_file_runs_jobs_and_aggregates(gdsbench, data_dir, tmp_path):
    d1, d2 = os.path.join(str(data_dir), "a"), os.path.join(str(data_dir), "b")
    os.makedirs(d1)
    os.makedirs(d2)
    cfg = tmp_path / "w.gdsio"
    cfg.write_text("[global]\nname=t\n# comment\nxfer_type=1\nrw=write\nbs=64k\nsize=1M\nruntime=0\n\n"
                   "[job1]\nnum_threads=2\ndirectory=%s\n\n[job2]\nnum_threads=1\ndirectory=%s\n" % (d1, d2))
    j, p = run_json(gdsbench, tmp_path, str(cfg))
    check_record(j)
    assert j["threads"] == 3 and len(j["jobs"]) == 2 and j["ops"] == 48
    assert [x["threads"] for x in j["jobs"]] == [2, 1] and [x["name"] for x in j["jobs"]] == ["job1", "job2"]
    assert sum(x["bytes"] for x in j["jobs"]) == j["bytes"]
    assert "Threads: 3 " in p.stdout
    for x in j["jobs"]:
        check_record(x)
    cfg.write_text(cfg.read_text().replace("rw=write", "rw=randread").replace("runtime=0", "runtime=0.2"))
    j, _ = run_json(gdsbench, tmp_path, str(cfg))
    assert j["io_type"] == "randread" and j["errors"] == 0 and j["ops"] > 0


def test_config_jobs_sharing_a_directory_use_distinct_files(gdsbench, data_dir, tmp_path):
    cfg = tmp_path / "s.gdsio"
    cfg.write_text("[global]\nxfer_type=1\nrw=write\nbs=64k\nsize=256k\n[job1]\nnum_threads=2\ndirectory=%s\n"
                   "[job2]\nnum_threads=2\ndirectory=%s\n" % (data_dir, data_dir))
    run_json(gdsbench, tmp_path, str(cfg))
    assert sorted(x for x in os.listdir(str(data_dir)) if x.startswith("gdsbench.")) == \
        ["gdsbench.0", "gdsbench.1", "gdsbench.2", "gdsbench.3"]


@pytest.mark.parametrize("body,needle", [
    ("[global]\nxfer_type=1\nrw=read\nbs=64k\n[job1]\nnum_threads=1\nbogus=1\ndirectory=/tmp\n", "unknown key 'bogus'"),
    ("[global]\nxfer_type=1\nrw=sideways\n[job1]\ndirectory=/tmp\n", "rw=sideways"),
    ("[global]\nxfer_type=1\nrw=read\nbs=1M:4M:2M\n[job1]\ndirectory=/tmp\n", "not a multiple of STEP"),
    ("xfer_type=1\n[job1]\n", "before any section"),
    ("[global]\nxfer_type=1\n", "no [jobN] section"),
    ("[global]\nxfer_type=1\nrw=write\nsize=1M\n[job1]\nnum_threads=0\ndirectory=/tmp\n", "num_threads"),
    ("[global]\nxfer_type=1\nrw=write\nsize=1M\n[job1]\ndirectory=/nonexistent/dir\n", "directory"),
])
def test_bad_config_is_a_usage_error(gdsbench, tmp_path, body, needle):
    cfg = tmp_path / "bad.gdsio"
    cfg.write_text(body)
    p = run(gdsbench, str(cfg))
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr


# ---------------------------------------------------------------- bad arguments

BAD_ARGS = [
    (["-Z"], "unknown option"),
    (["--bogus"], "unknown option"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-w", 0], "-w 0"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-w", "x"], "-w x"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-i", 1000], "-i"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-o", 100], "-o"),
    (["-D", "{d}/missing", "-x", 1, "-I", 1, "-s", "1M"], "-D"),
    (["-D", "{d}", "-x", 1, "-I", 0], "-D"),                      # reads need files of a write run
    (["-f", "{d}/none", "-x", 1, "-I", 0], "-f"),
    (["-D", "{d}", "-f", "{d}/x", "-x", 1, "-I", 1, "-s", "1M"], "cannot be used together"),
    (["-D", "{d}", "-x", 3, "-I", 1, "-s", "1M"], "-x"),
    (["-D", "{d}", "-x", 9, "-I", 1, "-s", "1M"], "-x"),
    (["-D", "{d}", "-x", 1, "-I", 4, "-s", "1M"], "-I"),
    (["-D", "{d}", "-I", 1, "-s", "1M"], "-x"),
    (["-D", "{d}", "-x", 1, "-s", "1M"], "-I"),
    (["-x", 1, "-I", 1, "-s", "1M"], "target"),
    (["-D", "{d}", "-x", 1, "-I", 1], "-s"),                      # writes need a size
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "12Q"], "-s 12Q"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-T", "-3"], "-T"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-B", 4], "-B"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-n", 4000], "-n"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "4K", "-i", "8K"], "-s"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s"], "needs a value"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "extra", "args"], "unexpected argument"),
    (["{d}/cfg.gdsio", "-x", 1], "cannot be combined"),
    (["{d}/nonexistent.gdsio"], "no such job file"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "--json", "{d}/no/such/dir/out.json"], "--json"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-w", 2, "-P", 0], "-P 0"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-w", 2, "--procs", "x"], "-P x"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-w", 2, "-P", 3], "more worker processes than threads"),
    # gdsio's options: refusals name the option and the value
    (["-D", "{d}", "-f", "{d}/x"], "-D and -f cannot be used together"),   # before anything else
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-i", "64K:8K:8K"], "-i 64K:8K:8K"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-i", "4K:64K:7K"], "not a multiple of STEP"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-i", "6K:10K:4K"], "-i: 10240 bytes is not a multiple of 4 KiB"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-i", "4K", "-U"], "-U: unaligned offsets apply to random"),
    (["-D", "{d}", "-x", 1, "-I", 3, "-s", "1M", "-i", "4K", "-U", "-V"], "-U: unaligned offsets cannot be verified"),
    (["-D", "{d}", "-x", 1, "-I", 3, "-s", "1M", "-i", "4K", "-U", "-a", "8K"], "-a: -a and -U"),
    (["-D", "{d}", "-x", 1, "-I", 3, "-s", "1M", "-i", "4K", "-a", 5000], "-a: 5000 is not a multiple of 4 KiB"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-a", "8K"], "-a: the alignment of random offsets applies"),
    (["-D", "{d}", "-x", 1, "-I", 3, "-s", "1M", "-a", "x"], "-a x"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-R", "-V"], "-R: random buffer contents cannot be verified"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-F", "-V"], "-F: random buffer contents cannot be verified"),
    (["-D", "{d}", "-x", 1, "-I", 0, "-F"], "-F: refilling the buffer before each write applies to writes"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-O", 2], "-O 2"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-i", 1000, "-O", 0], "-i: 1000 bytes is not a multiple of 4 KiB, which O_DIRECT"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-m", 5], "-m 5"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-m", 2], "-m: memory types apply to the cuFile transfer types"),
    (["-D", "{d}", "-x", 0, "-I", 1, "-s", "1M", "-m", 1], "-m: 1 (cuMem"),
    (["-D", "{d}", "-x", 2, "-I", 1, "-s", "1M", "--peer-memory", "{d}/cfg.gdsio"], "--peer-memory: peer memory is the buffer of xfer 1"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "-O", 1, "--peer-memory", "{d}/cfg.gdsio"], "--peer-memory: peer memory needs O_DIRECT"),
    (["-D", "{d}", "-x", 1, "-I", 1, "-s", "1M", "--peer-memory", "{d}/no/p2pmem/allocate"], "No such file or directory"),
]


@pytest.mark.parametrize("args,needle", BAD_ARGS, ids=[" ".join(map(str, a)) for a, _ in BAD_ARGS])
def test_bad_arguments_exit_2(gdsbench, data_dir, args, needle):
    with open(os.path.join(str(data_dir), "cfg.gdsio"), "w") as f:
        f.write("[global]\nxfer_type=1\nrw=read\n[job1]\ndirectory=/tmp\n")
    argv = [str(a).replace("{d}", str(data_dir)) for a in args]
    p = run(gdsbench, *argv)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert needle in p.stderr, p.stderr
    assert "Try 'gdsbench -h'" in p.stderr
    assert not p.stdout.strip()


def test_no_arguments_prints_usage(gdsbench):
    p = run(gdsbench)
    assert p.returncode == 2 and "usage:" in p.stderr


# ---------------------------------------------------------------- sanitizers

def test_sanitizer_build_runs_clean(gdsbench_asan, data_dir, tmp_path):
    """ASan + UBSan: the main paths, verify failure handling and argument errors."""
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="halt_on_error=1")
    j, _ = run_json(gdsbench_asan, tmp_path, "-D", data_dir, "-x", 1, "-I", 1, "-w", 3, "-s", "1M", "-i", "64K",
                    "-V", env=env)
    assert j["verify_errors"] == 0
    j, _ = run_json(gdsbench_asan, tmp_path, "-D", data_dir, "-x", 1, "-I", 2, "-w", 3, "-i", "4K", "-V",
                    "-T", "0.2", env=env)
    assert j["verify_errors"] == 0
    corrupt(os.path.join(str(data_dir), "gdsbench.2"), 3 * SECTOR)
    j, _ = run_json(gdsbench_asan, tmp_path, "-D", data_dir, "-x", 1, "-I", 0, "-w", 3, "-i", "64K", "-V",
                    env=env, expect=1)
    assert j["verify_errors"] == 1
    cfg = tmp_path / "c.gdsio"
    cfg.write_text("[global]\nxfer_type=1\nrw=randwrite\nbs=4k\nsize=512k\nruntime=0.1\n"
                   "[job1]\ndirectory=%s\nnum_threads=2\n[job2]\ndirectory=%s\n" % (data_dir, data_dir))
    run_json(gdsbench_asan, tmp_path, str(cfg), env=env)
    empty = tmp_path / "empty"
    empty.mkdir()
    for args, _ in BAD_ARGS[:9]:
        argv = [str(a).replace("{d}", str(empty)) for a in args]
        assert run(gdsbench_asan, *argv, env=env).returncode == 2, argv


# ---------------------------------------------------------------- GPU engines on the mock CUDA stack

@pytest.fixture(scope="session")
def mock_cuda(gdsbench, gdsbench_asan, tmp_path_factory):
    info = make("info", env=cuda_env())
    incs = re.findall(r"^(?:cufile\.h|cuda_runtime_api\.h):\s+(/\S+)$", info, re.M)
    if len(incs) < 2 or "built with CUDA" not in run(gdsbench, "--version").stdout:
        pytest.skip("no CUDA headers at build time: GPU engines not built")
    d = tmp_path_factory.mktemp("mockcuda")
    flags = []
    for h in incs:
        flags += ["-isystem", os.path.dirname(h)]
    for macro, name in (("MOCK_CUDART", "libcudart.so"), ("MOCK_CUFILE", "libcufile.so.0")):
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-g", "-D" + macro, *flags,
                        os.path.join(HERE, "mock_cuda.c"), "-o", str(d / name)], check=True)
    return dict(os.environ, GDSBENCH_CUDA_LIBDIR=str(d), GDSBENCH_CUFILE_LIBDIR=str(d),
                ASAN_OPTIONS="detect_leaks=0")


@pytest.mark.parametrize("xfer,mode", [(0, "compat"), (2, "posix"), (4, "posix"), (5, "compat"), (6, "compat")])
def test_gpu_engines_on_mock(gdsbench_asan, mock_cuda, data_dir, tmp_path, xfer, mode):
    common = ["-D", data_dir, "-x", xfer, "-w", 2, "-d", 0]
    j, _ = run_json(gdsbench_asan, tmp_path, *common, "-I", 1, "-s", "1M", "-i", "64K", "-V", env=mock_cuda)
    check_record(j)
    assert j["verify_errors"] == 0 and j["ops"] == 32 and j["path"]["mode"] == mode
    j, _ = run_json(gdsbench_asan, tmp_path, *common, "-I", 0, "-i", "64K", "-V", env=mock_cuda)
    assert j["verify_errors"] == 0 and j["ops"] == 32
    j, _ = run_json(gdsbench_asan, tmp_path, *common, "-I", 3, "-i", "4K", "-V", "-T", "0.2", env=mock_cuda)
    assert j["verify_errors"] == 0 and j["errors"] == 0
    corrupt(os.path.join(str(data_dir), "gdsbench.0"), 7 * SECTOR + 9)
    j, _ = run_json(gdsbench_asan, tmp_path, *common, "-I", 0, "-i", "64K", "-V", env=mock_cuda, expect=1)
    assert j["verify_errors"] == 1
    if mode == "compat":
        assert any("verdict" in e for e in j["path"]["evidence"])
        assert j["path"]["counters"]["posix"] > 0


@pytest.mark.parametrize("xfer", [5, 6])
def test_queued_engines_collect_what_is_done_before_waiting_on_the_oldest(gdsbench_asan, mock_cuda, data_dir,
                                                                         tmp_path, xfer):
    """An op slower than the ones after it (MOCK_HOLD: each thread's first op reports completion only
    after 3 more submissions) does not hold the thread up: the stream and batch engines collect
    every op that is done, from every stream or batch handle, before they wait on the oldest, and
    give its slot a new op at once (batch reads trailed while the batch engine waited until the
    oldest batch had completed entirely). The mock fails a wait on the oldest while later
    ops are done. Writes and reads, verified."""
    env = dict(mock_cuda, MOCK_HOLD="3")
    common = ["-D", data_dir, "-x", xfer, "-w", 2, "-d", 0, "-P", 1]
    for depth in (2, 4, 7):
        j, p = run_json(gdsbench_asan, tmp_path, *common, "-B", depth, "-I", 1, "-s", "1M", "-i", "64K", "-V",
                        env=env)
        assert (j["errors"], j["verify_errors"], j["ops"], j["iodepth"]) == (0, 0, 32, depth), p.stderr
        j, p = run_json(gdsbench_asan, tmp_path, *common, "-B", depth, "-I", 0, "-i", "64K", "-V", env=env)
        assert (j["errors"], j["verify_errors"], j["ops"]) == (0, 0, 32), p.stderr
        j, p = run_json(gdsbench_asan, tmp_path, *common, "-B", depth, "-I", 2, "-i", "4K", "-V", "-T", "0.2",
                        env=env)
        assert j["errors"] == 0 and j["verify_errors"] == 0 and j["ops"] > 32, p.stderr


def test_path_mode_follows_the_library_counters(gdsbench, mock_cuda, data_dir, tmp_path):
    env = dict(mock_cuda, MOCK_NVFS="1")
    j, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 0, "-I", 1, "-s", "1M", "-i", "64K", env=env)
    assert j["path"]["mode"] == "nvfs"
    j, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 0, "-I", 0, "-i", "64K", env=mock_cuda)
    assert j["path"]["mode"] == "compat"


def test_missing_gpu_or_registration_failure_is_a_clear_error(gdsbench, mock_cuda, data_dir):
    run(gdsbench, "-D", data_dir, "-x", 1, "-I", 1, "-s", "1M", "-i", "64K")
    p = run(gdsbench, "-D", data_dir, "-x", 0, "-I", 0, "-i", "64K", env=dict(mock_cuda, MOCK_NO_GPU="1"))
    assert p.returncode == 1 and "no usable GPU" in p.stderr
    p = run(gdsbench, "-D", data_dir, "-x", 0, "-I", 0, "-i", "64K", env=dict(mock_cuda, MOCK_REGISTER_FAIL="1"))
    assert p.returncode == 1 and "cuFileHandleRegister" in p.stderr
    p = run(gdsbench, "-D", data_dir, "-x", 0, "-I", 0, "-i", "64K", "-d", 3, env=mock_cuda)
    assert p.returncode == 1 and "-d 3" in p.stderr


def test_skip_bufregister_and_memory_types_on_mock(gdsbench_asan, mock_cuda, data_dir, tmp_path):
    """-b: no cuFileBufRegister (a library that refuses it still runs); -i ranges through the
    cuFile engines; -m 2/3/4: host memory buffers for the cuFile types, data intact both ways;
    -p: peer access asked for."""
    fail = dict(mock_cuda, MOCK_BUFREG_FAIL="1")
    for x in (0, 5, 6):
        common = ["-D", data_dir, "-x", x, "-w", 2, "-i", "64K"]
        p = run(gdsbench_asan, *common, "-I", 1, "-s", "512K", env=fail)
        assert p.returncode == 1 and "cuFileBufRegister" in p.stderr, (x, p.stderr)
        j, _ = run_json(gdsbench_asan, tmp_path, *common, "-I", 1, "-s", "512K", "-V", "-b", env=fail)
        assert j["skip_bufregister"] is True and j["verify_errors"] == 0 and j["ops"] == 16, x
        j, _ = run_json(gdsbench_asan, tmp_path, *common[:-1], "4K:64K:4K", "-I", 1, "-s", "512K", "-V",
                        env=mock_cuda)
        assert j["bytes"] == 1 << 20 and j["verify_errors"] == 0 and j["io_size_done"]["max"] <= 65536, x
        j, _ = run_json(gdsbench_asan, tmp_path, *common[:-1], "4K:64K:4K", "-I", 2, "-T", "0.1", "-V",
                        env=mock_cuda)
        assert j["verify_errors"] == 0 and j["errors"] == 0 and j["ops"] > 0, x
        for m in (2, 3, 4):
            j, _ = run_json(gdsbench_asan, tmp_path, *common, "-I", 1, "-s", "512K", "-V", "-m", m, env=mock_cuda)
            assert j["mem_type"] == m and j["verify_errors"] == 0 and j["ops"] == 16, (x, m)
            j, _ = run_json(gdsbench_asan, tmp_path, *common, "-I", 0, "-V", "-m", m, env=mock_cuda)
            assert j["verify_errors"] == 0 and j["ops"] == 16, (x, m)
    j, _ = run_json(gdsbench_asan, tmp_path, "-D", data_dir, "-x", 0, "-I", 0, "-i", "64K", "-p", env=mock_cuda)
    assert j["nvlinks"] is True and j["errors"] == 0


# ---------------------------------------------------------------- gdsio's data options

MAGIC = b"!GDSBNH1"


def sectors(path, size=SECTOR):
    with open(path, "rb") as f:
        data = f.read()
    return [data[i:i + size] for i in range(0, len(data), size)]


def magic_offsets(path):
    with open(path, "rb") as f:
        data = f.read()
    return [m.start() for m in re.finditer(re.escape(MAGIC), data)]


def test_offset_shows_in_the_data_read(gdsbench, data_dir, tmp_path):
    f = os.path.join(str(data_dir), "off")
    j, _ = run_json(gdsbench, tmp_path, "-f", f, "-x", 1, "-I", 1, "-s", "1M", "-i", "64K", "-o", "1M")
    assert j["offset"] == 1 << 20 and os.path.getsize(f) == 2 << 20
    secs = sectors(f)
    assert all(s == bytes(SECTOR) for s in secs[:256])          # nothing before the offset
    assert all(s[:8] == MAGIC and int.from_bytes(s[8:16], "little") == (256 + i) * SECTOR
               for i, s in enumerate(secs[256:]))               # stamped with their file offsets
    j, _ = run_json(gdsbench, tmp_path, "-f", f, "-x", 1, "-I", 0, "-i", "64K", "-o", "1M", "-V")
    assert j["verify_errors"] == 0 and j["bytes"] == 1 << 20
    j, _ = run_json(gdsbench, tmp_path, "-f", f, "-x", 1, "-I", 0, "-s", "1M", "-i", "64K", "-V", expect=1)
    assert j["verify_errors"] == 256                            # the hole before the offset


def test_io_size_range_each_op_within_bounds(gdsbench, data_dir, tmp_path):
    j, p = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 1, "-w", 2, "-s", "1M",
                    "-i", "8K:64K:8K", "-V")
    assert (j["io_size_min"], j["io_size_bytes"], j["io_size_step"]) == (8192, 65536, 8192)
    done = j["io_size_done"]
    assert 8192 <= done["min"] < done["max"] <= 65536 and done["min"] % 8192 == 0 == done["max"] % 8192
    assert j["bytes"] == 2 << 20 and j["verify_errors"] == 0   # one pass: every byte once, pattern intact
    assert 2 * 16 < j["ops"] < 2 * 128                          # neither all 64K nor all 8K
    m = LINE_RE.match(p.stdout.splitlines()[0])
    assert m and int(m.group(6)) == j["bytes"] // j["ops"] // 1024   # IOSize: the mean size done
    j, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 2, "-w", 2, "-i", "4K:12K:4K", "-V",
                    "-T", "0.2")
    assert j["verify_errors"] == 0 and j["ops"] > 0
    assert 4096 <= j["io_size_done"]["min"] < j["io_size_done"]["max"] <= 12288


def written_sectors(path):
    return [i for i, s in enumerate(sectors(path)) if s != bytes(SECTOR)]


def test_seed_makes_random_runs_reproducible(gdsbench, data_dir, tmp_path):
    def once(name, *extra):
        f = os.path.join(str(data_dir), name)
        run_json(gdsbench, tmp_path, "-f", f, "-x", 1, "-I", 3, "-s", "1M", "-i", "4K", *extra)
        with open(f, "rb") as fh:
            return written_sectors(f), fh.read()
    a, b, c = once("a", "-k", 5), once("b", "-k", 5), once("c", "-k", 6)
    assert a[0] == b[0] and a[0] != c[0]                        # same offsets for the same seed
    ra, rb, rc = once("ra", "-k", 5, "-F"), once("rb", "-k", 5, "-F"), once("rc", "-k", 6, "-F")
    assert ra[1] == rb[1] and ra[1] != rc[1]                    # and the same random data


def test_fill_random_and_refill(gdsbench, data_dir, tmp_path):
    f = os.path.join(str(data_dir), "r")
    j, _ = run_json(gdsbench, tmp_path, "-f", f, "-x", 1, "-I", 1, "-s", "256K", "-i", "64K", "-R")
    blocks = sectors(f, 64 << 10)
    assert j["fill_random"] is True and len(blocks) == 4
    assert len(set(blocks)) == 1 and MAGIC not in blocks[0]      # -R: one random buffer, written as is
    assert len(set(blocks[0])) > 200                            # random bytes, not a constant
    j, _ = run_json(gdsbench, tmp_path, "-f", f, "-x", 1, "-I", 0, "-i", "64K", "-V", expect=1)
    assert j["verify_errors"] == 64                             # not the verify pattern
    j, _ = run_json(gdsbench, tmp_path, "-f", f, "-x", 1, "-I", 1, "-s", "256K", "-i", "64K", "-F")
    blocks = sectors(f, 64 << 10)
    assert j["refill"] is True and len(set(blocks)) == 4 and not any(MAGIC in b for b in blocks)


def test_random_offsets_alignment_and_unaligned(gdsbench, data_dir, tmp_path):
    f = os.path.join(str(data_dir), "a")
    run_json(gdsbench, tmp_path, "-f", f, "-x", 1, "-I", 3, "-s", "1M", "-i", "4K", "-a", "64K")
    assert written_sectors(f) and all(i % 16 == 0 for i in written_sectors(f))
    os.unlink(f)
    run_json(gdsbench, tmp_path, "-f", f, "-x", 1, "-I", 3, "-s", "1M", "-i", "4K")
    assert any(i % 16 for i in written_sectors(f))              # default: any 4 KiB block
    os.unlink(f)
    j, _ = run_json(gdsbench, tmp_path, "-f", f, "-x", 1, "-I", 3, "-s", "1M", "-i", "4K", "-U")
    offs = magic_offsets(f)                                     # each write starts with the pattern
    assert j["unaligned"] is True and offs and all(o % 512 == 0 for o in offs)
    assert any(o % SECTOR for o in offs)                        # not on 4 KiB boundaries


def test_buffered_io_needs_no_o_direct(gdsbench, data_dir, tmp_path):
    f = os.path.join(str(data_dir), "b")
    j, _ = run_json(gdsbench, tmp_path, "-f", f, "-x", 1, "-I", 1, "-s", "1M", "-i", 1000, "-O", 1)
    assert j["buffered"] is True and j["ops"] == 1048 and os.path.getsize(f) == 1048000
    # 1000-byte writes at 1000-byte offsets: O_DIRECT would have refused every one (EINVAL)


def test_buffered_io_on_a_file_system_without_o_direct(gdsbench, tmp_path):
    shm = "/dev/shm"
    if not os.path.isdir(shm) or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm")
    d = tmp_path.name + "-gdsbench"
    target = os.path.join(shm, d)
    os.makedirs(target, exist_ok=True)
    try:
        p = run(gdsbench, "-D", target, "-x", 1, "-I", 1, "-s", "256K", "-i", "64K")
        if p.returncode == 0:
            pytest.skip("/dev/shm takes O_DIRECT here")
        assert p.returncode == 1 and "O_DIRECT" in p.stderr
        j, _ = run_json(gdsbench, tmp_path, "-D", target, "-x", 1, "-I", 1, "-s", "256K", "-i", "64K", "-O", 1,
                        "-V")
        assert j["errors"] == 0 and j["verify_errors"] == 0 and j["ops"] == 4
    finally:
        shutil.rmtree(target, ignore_errors=True)


# ---------------------------------------------------------------- -P: worker processes

def test_procs_merge_equals_threads(gdsbench, data_dir, tmp_path):
    """-P N runs the same workers (files, regions, seeds) in N processes: a one-pass
    run moves exactly what the threaded run moves, and the results are merged."""
    w, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 1, "-w", 6, "-s", "2M", "-i", "64K",
                    "-P", 3, "-V")
    check_record(w)
    assert w["procs"] == 3 and w["threads"] == 6 and w["ops"] == 6 * 32 and w["verify_errors"] == 0
    assert sorted(x for x in os.listdir(str(data_dir)) if x.startswith("gdsbench.")) == \
        ["gdsbench.%d" % i for i in range(6)]
    t, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 0, "-w", 6, "-i", "64K", "-V")
    for n in (2, 6):
        j, p = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 0, "-w", 6, "-i", "64K", "-V",
                        "--procs", n)
        check_record(j)
        assert (j["ops"], j["bytes"], j["threads"], j["procs"]) == (t["ops"], t["bytes"], 6, n)
        assert j["verify_errors"] == 0 and j["errors"] == 0 and j["path"]["mode"] == "posix"
        assert j["path"]["evidence"][0].startswith("-P %d:" % n)
        assert j["cpu_util_pct"] > 0 and j["elapsed_s"] > 0
        m = LINE_RE.match(p.stdout.strip())
        assert m and m.group(3) == "6" and int(m.group(9)) == t["ops"]
    assert t["procs"] == 1


def test_procs_timed_random_and_verify_errors_are_summed(gdsbench, data_dir, tmp_path):
    run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 1, "-w", 4, "-s", "1M", "-i", "64K")
    j, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 2, "-w", 4, "-i", "4K", "-V",
                    "-T", "0.3", "-P", 4)
    check_record(j)
    assert j["ops"] > 0 and j["verify_errors"] == 0 and 0.25 < j["elapsed_s"] < 2
    corrupt(os.path.join(str(data_dir), "gdsbench.1"), 2 * SECTOR + 5)
    corrupt(os.path.join(str(data_dir), "gdsbench.3"), 9 * SECTOR + 5)
    j, p = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 0, "-w", 4, "-i", "64K", "-V", "-P", 2,
                    expect=1)
    assert j["verify_errors"] == 2 and j["exit_code"] == 1 and j["ops"] == 64
    assert "gdsbench.1" in p.stderr and "gdsbench.3" in p.stderr


def test_procs_with_a_config_file(gdsbench, data_dir, tmp_path):
    cfg = tmp_path / "p.gdsio"
    cfg.write_text("[global]\nxfer_type=1\nrw=write\nbs=64k\nsize=512k\n"
                   "[job1]\nnum_threads=3\ndirectory=%s\n[job2]\nnum_threads=2\ndirectory=%s\n" % (data_dir, data_dir))
    j, _ = run_json(gdsbench, tmp_path, "--procs", 4, str(cfg))
    check_record(j)
    assert j["procs"] == 4 and j["threads"] == 5 and j["ops"] == 5 * 8
    assert [x["ops"] for x in j["jobs"]] == [24, 16]
    for x in j["jobs"]:
        check_record(x)


def test_procs_stop_on_sigterm(gdsbench, data_dir, tmp_path):
    """SIGTERM to gdsbench alone reaches the worker processes: ops in flight finish, the run reports."""
    import signal
    import time
    run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 1, "-I", 1, "-w", 2, "-s", "1M", "-i", "64K")
    out = tmp_path / "term.json"
    argv = [gdsbench, "-D", data_dir, "-x", 1, "-I", 2, "-w", 2, "-i", "4K", "-T", 60, "-P", 2, "--json", out]
    proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    j = json.loads(out.read_text())
    assert j["ops"] > 0 and j["elapsed_s"] < 30


def test_procs_gpu_engines_on_mock(gdsbench_asan, mock_cuda, data_dir, tmp_path):
    """Each worker process opens its own (mock) cuFile driver; its per-process op
    counters are summed, and the verdict is taken over the sum."""
    env = dict(mock_cuda, ASAN_OPTIONS="detect_leaks=1")
    for xfer, mode in ((0, "compat"), (5, "compat"), (6, "compat"), (2, "posix")):
        common = ["-D", data_dir, "-x", xfer, "-w", 4, "-P", 2]
        j, _ = run_json(gdsbench_asan, tmp_path, *common, "-I", 1, "-s", "1M", "-i", "64K", "-V", env=env)
        check_record(j)
        assert j["ops"] == 64 and j["verify_errors"] == 0 and j["path"]["mode"] == mode
        j, _ = run_json(gdsbench_asan, tmp_path, *common, "-I", 0, "-i", "64K", "-V", env=env)
        check_record(j)
        assert j["ops"] == 64 and j["verify_errors"] == 0 and j["path"]["mode"] == mode, j["path"]
        if mode == "compat":
            assert j["path"]["counters"] == {"ops": 64, "nvfs": 0, "p2p": 0, "posix": 64}
            assert any("summed over 2 worker processes" in e for e in j["path"]["evidence"])
            assert any(e.startswith("verdict: 64 of 64") for e in j["path"]["evidence"])


def test_procs_any_compat_process_makes_the_run_compat(gdsbench, mock_cuda, data_dir, tmp_path):
    run(gdsbench, "-D", data_dir, "-x", 1, "-I", 1, "-w", 3, "-s", "1M", "-i", "64K")
    j, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 0, "-I", 0, "-w", 3, "-i", "64K", "-P", 3,
                    env=dict(mock_cuda, MOCK_NVFS="1"))
    assert j["path"]["mode"] == "nvfs" and j["path"]["counters"]["nvfs"] == 48
    one = tmp_path / "first-process"
    j, _ = run_json(gdsbench, tmp_path, "-D", data_dir, "-x", 0, "-I", 0, "-w", 3, "-i", "64K", "-P", 3,
                    env=dict(mock_cuda, MOCK_NVFS_BUT_ONE=str(one)))
    c = j["path"]["counters"]
    assert j["path"]["mode"] == "compat" and c["posix"] == 16 and c["nvfs"] == 32 and c["ops"] == 48
    assert any(e.startswith("worker processes differ:") for e in j["path"]["evidence"])


def test_procs_missing_gpu_is_one_clear_error(gdsbench, mock_cuda, data_dir):
    run(gdsbench, "-D", data_dir, "-x", 1, "-I", 1, "-w", 4, "-s", "1M", "-i", "64K")
    p = run(gdsbench, "-D", data_dir, "-x", 0, "-I", 0, "-w", 4, "-i", "64K", "-P", 4,
            env=dict(mock_cuda, MOCK_NO_GPU="1"))
    assert p.returncode == 1 and p.stderr.count("no usable GPU") == 1, p.stderr
    assert not p.stdout.strip()
    p = run(gdsbench, "-D", data_dir, "-x", 0, "-I", 0, "-w", 4, "-i", "64K", "-P", 2,
            env=dict(mock_cuda, MOCK_REGISTER_FAIL="1"))
    assert p.returncode == 1 and "cuFileHandleRegister" in p.stderr


# ---------------------------------------------------------------- source layering

def object_symbols(objdir):
    """{object: (defined global symbols, undefined symbols)} of the objects of bench/*.c."""
    syms = {}
    for name in sorted(os.listdir(objdir)):
        if not name.endswith(".o") or not os.path.exists(os.path.join(BENCH, name[:-2] + ".c")):
            continue
        out = subprocess.run(["nm", os.path.join(objdir, name)], capture_output=True, text=True,
                             check=True).stdout
        defined, undefined = set(), set()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "U":
                undefined.add(parts[1])
            elif len(parts) == 3 and parts[1] in "TDBRCVW":
                defined.add(parts[2])
        syms[name[:-2]] = (defined, undefined)
    return syms


def test_bench_sources_have_no_dependency_cycle(gdsbench):
    """Each file of bench/ calls only into files below it: no two files call each other, directly
    or around a loop (the run does not call back into -P's process code, the GPU helpers do not
    call into the I/O loop)."""
    syms = object_symbols(os.path.join(BENCH, "obj", "rel"))
    owner = {s: f for f, (defined, _) in syms.items() for s in defined}
    edges = {f: sorted({owner[s] for s in undefined if s in owner} - {f}) for f, (_, undefined) in syms.items()}
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for nxt in edges[node]:
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [node, nxt]) if nxt in stack
                              else "%s -> %s" % (node, nxt))
            elif nxt not in state:
                visit(nxt, stack + [node])
        state[node] = "done"

    for f in sorted(edges):
        if f not in state:
            visit(f, [])
    assert "main" in edges and "worker" in edges
    assert not cycles, "dependency cycles between bench/ sources: %s\nedges: %s" % (cycles, edges)


def test_engine_files_export_only_their_table(gdsbench):
    """One file per I/O path behind the operations table: an engine's helpers are private to it."""
    syms = object_symbols(os.path.join(BENCH, "obj", "rel"))
    engines = {f: d for f, (d, _) in syms.items() if f.startswith("engine_")}
    assert "engine_posix" in engines
    for f, defined in engines.items():
        assert defined == {f}, "%s.c exports %s besides its operations table" % (f, sorted(defined - {f}))


# ---------------------------------------------------------------- function length

MAX_FUNCTION_LINES = 80


def c_functions(path):
    """(name, first line, lines) of every function defined in a C file written in the kernel's
    style: the header from the line after the previous blank line, comment or closing brace, the
    body from a "{" to a "}" in column 0."""
    lines = open(path).read().split("\n")
    out = []
    for i, line in enumerate(lines):
        if line != "{":
            continue
        start = i
        while start > 0 and lines[start - 1].strip() and not lines[start - 1].startswith(("}", "#", "/*", " *")) \
                and not lines[start - 1].rstrip().endswith((";", "*/")):
            start -= 1
        end = next(k for k in range(i, len(lines)) if lines[k] == "}")
        name = re.search(r"(\w+)\s*\(", " ".join(lines[start:i]))
        out.append((name.group(1) if name else "?", start + 1, end - start + 1))
    return out


def test_no_c_function_is_longer_than_80_lines():
    """Functions split by concern, each named for what it decides: gdsbench's sources and the lab's
    cuFile probe."""
    sources = sorted(glob.glob(os.path.join(BENCH, "*.c"))) + sorted(glob.glob(os.path.join(LAB, "probe", "*.c")))
    assert len(sources) > 10
    long = ["%s:%d %s() %d lines" % (os.path.relpath(p, ROOT), first, name, n)
            for p in sources for name, first, n in c_functions(p) if n > MAX_FUNCTION_LINES]
    assert not long, "functions over %d lines:\n  %s" % (MAX_FUNCTION_LINES, "\n  ".join(long))
