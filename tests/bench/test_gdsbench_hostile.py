"""Hostile input to gdsbench and the one option table of the command line and job files: control
characters, NUL bytes, byte order marks, directories, FIFOs and devices as job files; files of many
lines, many jobs or many bytes (memory bounded by the jobs, limits named); sizes whose sums or
products leave a file offset, refused before anything is created; the same bounds and reasons for
an option and its job-file key. CPU transfer types and --dry-run only: no GPU."""
import json
import os
import resource
import signal
import subprocess
import sys

import pytest

from conftest import COLLECTION, GDSBENCH_SRC, ROOT
from test_gdsbench import data_dir, gdsbench, gdsbench_nocuda, run  # noqa: F401

HEAD = "[global]\nxfer_type=1\nrw=write\nsize=1M\nbs=64k\n[job1]\n"


def jobfile(tmp_path, body, name="h.gdsio"):
    path = tmp_path / name
    with open(str(path), "w", encoding="utf-8", newline="") as f:
        f.write(body)
    return path


def capped():
    """A run writes at most 1 MiB (RLIMIT_FSIZE; EFBIG, not SIGXFSZ): a check that regresses
    fails fast instead of filling the disk."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def run_capped(binary, *args):
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True, preexec_fn=capped, timeout=60)


def refused(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert not p.stdout.strip() and "Try 'gdsbench -h'" in p.stderr
    for needle in needles:
        assert needle in p.stderr, p.stderr


# ---------------------------------------------------------------- control characters, NUL, BOM

CONTROLS = ["\x1b", "\r", "\x0b", "\x0c", "\x7f", "\t", "\x01", "\x08", "\u0085", "\u009b", "\u2028", "\u2029"]


@pytest.mark.parametrize("line", ["directory={d}/a{c}b", "name=job{c}x", "bs=64{c}k", "rw=wr{c}ite",
                                  "direc{c}tory={d}", "num_threads=1{c}2"])
@pytest.mark.parametrize("char", CONTROLS, ids=[repr(c) for c in CONTROLS])
def test_control_characters_in_a_job_file_are_named(gdsbench, tmp_path, line, char):
    """A control character inside a key or value (a forged or damaged file) is refused with
    FILE:LINE and its code; the raw character is never echoed to the terminal."""
    cfg = jobfile(tmp_path, HEAD + line.format(d=tmp_path, c=char) + "\ndirectory=%s\n" % tmp_path)
    p = run(gdsbench, "--dry-run", cfg)
    refused(p, "%s:7: control character " % cfg)
    assert char not in p.stderr


def test_control_characters_in_a_section_header_are_named(gdsbench, tmp_path):
    cfg = jobfile(tmp_path, "[global]\nxfer_type=1\n[job\x1b[31m1]\n")
    p = run(gdsbench, "--dry-run", cfg)
    refused(p, "%s:3: control character 0x1b" % cfg)
    assert "\x1b" not in p.stderr


def test_white_space_and_crlf_around_values_are_still_accepted(gdsbench_nocuda, tmp_path):
    """Tabs and spaces around keys and values, CRLF line ends and control characters inside
    comments are what editors and Windows tools write: accepted, as before."""
    body = "[global]\r\n xfer_type\t=\t1 \r\nrw = write\r\n# a comment with \x1b and \t\r\nsize=1M\r\n[job1]\r\n" \
           "directory=%s\r\n" % tmp_path
    p = run(gdsbench_nocuda, "--dry-run", jobfile(tmp_path, body))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["jobs"][0]["target"] == str(tmp_path)


def test_nul_byte_names_file_line_and_column(gdsbench, tmp_path):
    cfg = jobfile(tmp_path, HEAD + "directory=%s\x00/evil\n" % tmp_path)
    p = run(gdsbench, "--dry-run", cfg)
    refused(p, "%s:7: a NUL byte at column %d" % (cfg, len("directory=%s" % tmp_path) + 1))


def test_utf8_byte_order_mark_is_accepted_at_the_start_and_named_elsewhere(gdsbench_nocuda, tmp_path):
    cfg = jobfile(tmp_path, "\ufeff" + HEAD + "directory=%s\n" % tmp_path)
    p = run(gdsbench_nocuda, "--dry-run", cfg)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["jobs"][0]["line"] == 6
    cfg = jobfile(tmp_path, HEAD + "\ufeffdirectory=%s\n" % tmp_path)
    refused(run(gdsbench_nocuda, "--dry-run", cfg), "%s:7: a UTF-8 byte-order mark (EF BB BF) inside the file" % cfg)


def test_utf16_job_file_is_named(gdsbench, tmp_path):
    path = tmp_path / "u16.gdsio"
    path.write_bytes((HEAD + "directory=/tmp\n").encode("utf-16"))
    refused(run(gdsbench, "--dry-run", path), "%s:1: UTF-16 text" % path, "save the job file as UTF-8")


# ---------------------------------------------------------------- what is not a job file

def test_a_directory_is_not_a_job_file(gdsbench, tmp_path):
    refused(run(gdsbench, "--dry-run", tmp_path), "%s: a directory, not a job file" % tmp_path)


def test_a_fifo_is_named_and_never_waited_on(gdsbench, tmp_path):
    fifo = tmp_path / "jobs.gdsio"
    os.mkfifo(str(fifo))
    p = run(gdsbench, "--dry-run", fifo, timeout=20)    # opening it blocking would wait for a writer
    refused(p, "%s: a FIFO, not a job file" % fifo)


@pytest.mark.parametrize("dev", ["/dev/null", "/dev/zero"])
def test_a_device_is_not_a_job_file(gdsbench, dev):
    if not os.path.exists(dev):
        pytest.skip("no %s" % dev)
    refused(run(gdsbench, "--dry-run", dev, timeout=20), "%s: a character device, not a job file" % dev)


def test_a_missing_or_unreadable_job_file_is_named(gdsbench, tmp_path):
    refused(run(gdsbench, tmp_path / "none.gdsio"), "%s: no such job file" % (tmp_path / "none.gdsio"))
    if os.geteuid() != 0:
        cfg = jobfile(tmp_path, HEAD)
        os.chmod(str(cfg), 0)
        refused(run(gdsbench, cfg), "%s: Permission denied" % cfg)


# ---------------------------------------------------------------- size, lines and jobs

def peak_rss_kib(binary, *args):
    """The child's peak RSS (getrusage of the children of a fresh interpreter: nothing else)."""
    code = ("import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
            "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.stderr.write(p.stderr.decode())\n")
    p = subprocess.run([sys.executable, "-c", code, binary, *map(str, args)], capture_output=True, text=True,
                       timeout=120)
    rc, rss = p.stdout.split()
    return int(rc), int(rss), p.stderr


def test_memory_is_bounded_by_the_jobs_not_the_lines(gdsbench, tmp_path):
    """200 000 key=value lines in one job (2.8 MB): each line used to cost a 4 KiB record (800 MB
    peak RSS); now a section keeps the last value of each key."""
    body = HEAD + "directory=%s\n" % tmp_path + "num_threads=1\n" * 200000
    cfg = jobfile(tmp_path, body)
    rc, rss, err = peak_rss_kib(gdsbench, "--dry-run", cfg)
    assert rc == 0, err
    assert rss < 32 * 1024, "peak RSS %d KiB for a 200k-line job file" % rss
    # the same file with a bad value on its last line: still FILE:LINE, found in one pass
    cfg = jobfile(tmp_path, body + "num_threads=0\n")
    rc, rss, err = peak_rss_kib(gdsbench, "--dry-run", cfg)
    assert rc == 2 and "%s:200008: num_threads=0: expected a thread count of 1..4096" % cfg in err
    assert rss < 32 * 1024


def test_a_job_file_over_the_size_limit_names_file_and_limit(gdsbench, tmp_path):
    cfg = jobfile(tmp_path, HEAD + "directory=%s\n" % tmp_path + "#" * 99 + "\n" * 1 + ("#" * 99 + "\n") * 45000)
    size = os.path.getsize(str(cfg))
    refused(run(gdsbench, "--dry-run", cfg),
            "%s: %d bytes; a job file may have at most 4194304 bytes" % (cfg, size))


def test_more_jobs_than_the_limit_names_the_line_and_the_limit(gdsbench, tmp_path):
    body = "[global]\nxfer_type=1\nrw=write\nsize=1M\n" + "".join(
        "[job%d]\ndirectory=%s\n" % (i, tmp_path) for i in range(1, 66))
    cfg = jobfile(tmp_path, body)
    refused(run(gdsbench, "--dry-run", cfg),
            "%s:133: [job65] would be job 65: a job file may have at most 64 jobs" % cfg)


def test_a_long_line_is_named(gdsbench, tmp_path):
    cfg = jobfile(tmp_path, HEAD + "directory=/" + "a" * 5000 + "\n")
    refused(run(gdsbench, "--dry-run", cfg), "%s:7: line longer than" % cfg)


def test_repeated_keys_keep_the_last_value_and_its_line(gdsbench_nocuda, tmp_path):
    cfg = jobfile(tmp_path, HEAD + "directory=%s\nnum_threads=2\nnum_threads=3\n" % tmp_path)
    p = run(gdsbench_nocuda, "--dry-run", cfg)
    assert p.returncode == 0 and json.loads(p.stdout)["jobs"][0]["threads"] == 3
    cfg = jobfile(tmp_path, HEAD + "directory=%s\nnum_threads=2\nnum_threads=2\nnum_threads=9\nbs=3k\n" % tmp_path)
    refused(run(gdsbench_nocuda, "--dry-run", cfg), "%s:11: [job1] bs: 3072 bytes is not a multiple of 4 KiB" % cfg)


# ---------------------------------------------------------------- sizes that leave a file offset

MAX_U64 = str((1 << 64) - 1)
HUGE_SIZES = [
    (["-f", "{d}/f", "-I", 1, "-s", MAX_U64], "-s %s: more than 9223372036854775807 bytes" % MAX_U64),
    (["-f", "{d}/f", "-I", 3, "-s", MAX_U64], "-s %s: more than 9223372036854775807 bytes" % MAX_U64),
    (["-f", "{d}/f", "-I", 1, "-s", "8589934592G"], "-s 8589934592G: more than"),
    (["-f", "{d}/f", "-I", 1, "-s", "4K", "-o", MAX_U64], "-o %s: more than" % MAX_U64),
    (["-f", "{d}/f", "-I", 1, "-s", "4K", "-o", str((1 << 63) - 4096)], "-s: 4096 bytes from offset"),
    (["-D", "{d}", "-I", 1, "-w", 4096, "-s", "4096T"], "-s: 4096 files of 4503599627370496 bytes are more than"),
    (["-D", "{d}", "-I", 3, "-w", 2, "-s", str(1 << 62)], "-s: 2 files of 4611686018427387904 bytes are more"),
    (["-D", "{d}", "-I", 3, "-s", str(1 << 62)], "-s: 4611686018427387904 bytes to write do not fit in the"),
    (["-f", "{d}/f", "-I", 3, "-s", str((1 << 63) - 1), "-O", 1], "bytes to write do not fit in the file system"),
    (["-f", "{d}/f", "-I", 1, "-s", "1M", "-a", MAX_U64], "-a %s: more than" % MAX_U64),
]


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "run"])
@pytest.mark.parametrize("args,needle", HUGE_SIZES, ids=[" ".join(map(str, a)) for a, _ in HUGE_SIZES])
def test_sizes_past_a_file_offset_are_refused_before_anything_is_created(gdsbench, data_dir, args, needle, dry):
    target = os.path.join(str(data_dir), "t")
    os.mkdir(target)
    argv = [str(a).replace("{d}", target) for a in args] + ["-x", 1, "-i", "4K", "--json", target + "/r.json"]
    p = run_capped(gdsbench, *(["--dry-run"] if dry else []), *argv)
    refused(p, needle)
    assert os.listdir(target) == []


@pytest.mark.parametrize("lines,needle", [
    ("size=%s\n" % MAX_U64, ":4: size=%s: more than 9223372036854775807 bytes" % MAX_U64),
    ("size=4096T\nnum_threads=4096\n", ":4: [job1] size: 4096 files of 4503599627370496 bytes"),
    ("size=4K\nbs=4K\nstart_offset=%d\n" % ((1 << 63) - 4096), ":4: [job1] size: 4096 bytes from offset"),
    ("size=%d\n" % (1 << 62), ":4: [job1] size: 4611686018427387904 bytes to write do not fit"),
])
def test_job_file_sizes_past_a_file_offset_are_refused(gdsbench, data_dir, tmp_path, lines, needle):
    target = os.path.join(str(data_dir), "t")
    os.mkdir(target)
    cfg = jobfile(tmp_path, "[global]\nxfer_type=1\nrw=write\n" + lines + "[job1]\ndirectory=%s\n" % target)
    for extra in (["--dry-run"], []):
        refused(run_capped(gdsbench, *extra, cfg), str(cfg) + needle)
        assert os.listdir(target) == []


def test_a_run_that_cannot_size_its_new_file_leaves_none_behind(gdsbench, tmp_path):
    """A random write sizes a new file with ftruncate first; when that fails (here
    RLIMIT_FSIZE; on a node, a file system's largest file) the empty file is removed and
    the run fails (exit 1) without I/O."""
    target = tmp_path / "f"
    p = run_capped(gdsbench, "-f", target, "-x", 1, "-I", 3, "-s", "2M", "-i", "4K", "-O", 1, "-w", 2)
    assert p.returncode == 1 and "ftruncate %s" % target in p.stderr, p.stderr
    assert not target.exists()


def test_an_existing_file_is_kept_when_a_run_fails_to_start(gdsbench, tmp_path):
    target = tmp_path / "f"
    target.write_bytes(b"")
    p = run_capped(gdsbench, "-f", target, "-x", 1, "-I", 3, "-s", "2M", "-i", "4K", "-O", 1)
    assert p.returncode == 1 and target.exists()


# ---------------------------------------------------------------- one option table

# (option, job-file key, a bad value): the command line and a job file refuse it with the same reason
SAME_BOUNDS = [
    ("-w", "num_threads", "0"), ("-w", "num_threads", "4097"), ("-w", "num_threads", "many"),
    ("-d", "gpu_dev_id", "4096"), ("-n", "numa_node", "-1"), ("-B", "io_depth", "0"), ("-B", "iodepth", "1025"),
    ("-m", "mem_type", "5"), ("-O", "buffered", "2"), ("-a", "alignment_size", "0"), ("-a", "alignment_size", "x"),
    ("-s", "size", "0"), ("-s", "size", "12Q"), ("-s", "size", MAX_U64), ("-o", "start_offset", "-4096"),
    ("-o", "offset", str(1 << 63)), ("-T", "runtime", "-1"), ("-T", "runtime", "1e400"), ("-T", "runtime", "soon"),
    ("-k", "random_seed", str(1 << 64)), ("-k", "seed", "-1"), ("-I", "rw", "4"), ("-I", "rw", "sideways"),
    ("-x", "xfer_type", "101"), ("-i", "bs", "0"), ("-i", "bs", "4k:1M"), ("-i", "bs", "1M:4M:2M"),
]


@pytest.mark.parametrize("opt,key,value", SAME_BOUNDS, ids=["%s=%s" % (k, v) for _, k, v in SAME_BOUNDS])
def test_an_option_and_its_job_file_key_share_bounds_and_reason(gdsbench, tmp_path, opt, key, value):
    cli = run(gdsbench, "--dry-run", "-D", tmp_path, "-x", 1, "-I", 1, "-s", "1M", opt, value)
    prefix = "gdsbench: %s %s: " % (opt, value)
    cfg = jobfile(tmp_path, "[global]\nxfer_type=1\nrw=write\nsize=1M\n%s=%s\n[job1]\ndirectory=%s\n"
                  % (key, value, tmp_path))
    job = run(gdsbench, "--dry-run", cfg)
    assert cli.returncode == 2 and job.returncode == 2, (cli.stderr, job.stderr)
    cli_reason = cli.stderr.split(prefix, 1)[1].splitlines()[0]
    job_reason = job.stderr.split("%s:5: %s=%s: " % (cfg, key, value), 1)[1].splitlines()[0]
    assert cli_reason == job_reason


# (command line, job-file lines): the same job either way
SAME_JOB = [
    (["-x", 1, "-I", 3, "-w", 3, "-s", "1M", "-i", "4K:64K:4K", "-o", "8K", "-a", "16K", "-T", "2.5", "-k", 7, "-d", 2],
     "xfer_type=1\nrw=randwrite\nnum_threads=3\nsize=1M\nbs=4K:64K:4K\nstart_offset=8K\nalignment_size=16K\n"
     "runtime=2.5\nrandom_seed=7\ngpu_dev_id=2\n"),
    (["-x", 1, "-I", 3, "-s", "1M", "-i", "4K", "-U", "-R", "-b", "-p", "-O", 1],
     "xfer_type=1\nrw=randwrite\nsize=1M\nbs=4K\nunaligned_random=1\nfill_random=1\nskip_bufregister=1\n"
     "enable_nvlinks=1\nbuffered=1\n"),
    (["-x", 1, "-I", 1, "-s", "1M", "-F"], "xfer_type=1\nrw=write\nsize=1M\nrefill_buffer=1\n"),
    (["-x", 1, "-I", 1, "-s", "1M", "-V"], "xfer_type=1\nrw=write\nsize=1M\ndo_verify=1\n"),
    (["-x", 5, "-I", 1, "-s", "1M", "-B", 16, "-m", 2], "xfer_type=5\nrw=write\nsize=1M\nio_depth=16\nmem_type=2\n"),
]


@pytest.mark.parametrize("args,lines", SAME_JOB, ids=[" ".join(map(str, a)) for a, _ in SAME_JOB])
def test_the_command_line_and_a_job_file_make_the_same_job(gdsbench_nocuda, tmp_path, args, lines):
    cli = run(gdsbench_nocuda, "--dry-run", "-D", tmp_path, *args)
    cfg = jobfile(tmp_path, "[global]\n" + lines + "[job1]\ndirectory=%s\n" % tmp_path)
    job = run(gdsbench_nocuda, "--dry-run", cfg)
    assert cli.returncode == 0 and job.returncode == 0, (cli.stderr, job.stderr)
    a, b = json.loads(cli.stdout)["jobs"][0], json.loads(job.stdout)["jobs"][0]
    for k in ("name", "line"):
        a.pop(k, None)
        b.pop(k, None)
    assert a == b


def test_help_lists_every_command_line_option_of_the_table(gdsbench):
    out = run(gdsbench, "-h").stdout
    for opt in "-f -D -x -I -w -s -i -o -a -U -R -F -O -m -b -p -T -d -n -k -V -B".split() + \
            ["-P, --procs", "--json", "--dry-run", "--cufile-stats", "--cufile-param", "-h, --help", "--version"]:
        assert "\n  %s" % opt in out, opt


def test_main_is_short(gdsbench):
    """main() reads as the run's outline: option parsing is the table's."""
    lines = open(os.path.join(GDSBENCH_SRC, "main.c")).read().splitlines()
    start = lines.index("int main(int argc, char **argv)")
    end = start + lines[start:].index("}")
    assert end - start + 1 < 100


# ---------------------------------------------------------------- the role's job files

def jobfile_filter():
    """gds_gdsio_jobfile, from plugins/filter (or a collection's copy of it)."""
    import glob
    import importlib.util
    paths = [os.path.join(COLLECTION, "plugins", "filter", "gds_bench_plan.py")] + sorted(glob.glob(
        os.path.join(ROOT, "collections", "ansible_collections", "*", "*", "plugins", "filter", "*bench_plan.py")))
    path = next(p for p in paths if os.path.exists(p))
    spec = importlib.util.spec_from_file_location("gds_bench_plan_for_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.gds_gdsio_jobfile


@pytest.mark.parametrize("leaf", ["[job2]", "k=v", "a#1", "a;b", "x y", "=", "#", ";x", "ünï"])
def test_paths_the_filter_writes_are_the_paths_gdsbench_reads(gdsbench_nocuda, tmp_path, leaf):
    """Job-file injection end to end: what gds_gdsio_jobfile lets through (characters that are data after
    `directory=`) reaches gdsbench unchanged, and the job stays a read."""
    target = tmp_path / leaf
    target.mkdir()
    job = {"gpu": 0, "numa": None, "threads": 1, "xfer_type": 1, "io_type": "write", "io_size": "64K",
           "size": "1M", "duration": 0, "target": str(target)}
    cfg = jobfile(tmp_path, jobfile_filter()([job], name="netfs_seq_write"))
    p = run(gdsbench_nocuda, "--dry-run", cfg)
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)["jobs"]
    assert [(j["target"], j["io_type"]) for j in plan] == [(str(target), "write")]
