"""gdsbench's default number of worker processes (-P not given): one process per thread for
large sequential I/O through libcufile (the cuFile flag: -x 0, 5 and 6), threads for everything
else. Runs the GPU engine against
tests/bench/mock_cuda.c; skips when the build found no CUDA headers."""
import json
import os
import re
import subprocess

import pytest

from conftest import GDSBENCH_SRC as BENCH
HERE = os.path.dirname(os.path.abspath(__file__))


def _make(*targets):
    env = dict(os.environ)
    if os.environ.get("GDSBENCH_TEST_CUDA_HOME"):
        env["CUDA_HOME"] = os.environ["GDSBENCH_TEST_CUDA_HOME"]
    proc = subprocess.run(["make", "-C", BENCH, "-s", *targets], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def gds(tmp_path_factory):
    """gdsbench and an environment that loads the mock CUDA runtime and libcufile."""
    _make("gdsbench")
    binary = os.path.join(BENCH, "gdsbench")
    incs = re.findall(r"^(?:cufile\.h|cuda_runtime_api\.h):\s+(/\S+)$", _make("info"), re.M)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    if len(incs) < 2 or "built with CUDA" not in version:
        pytest.skip("no CUDA headers at build time: GPU engines not built")
    d = tmp_path_factory.mktemp("mockcuda-procs")
    flags = []
    for h in incs:
        flags += ["-isystem", os.path.dirname(h)]
    for macro, name in (("MOCK_CUDART", "libcudart.so"), ("MOCK_CUFILE", "libcufile.so.0")):
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-D" + macro, *flags, os.path.join(HERE, "mock_cuda.c"),
                        "-o", str(d / name)], check=True)
    return binary, dict(os.environ, GDSBENCH_CUDA_LIBDIR=str(d), GDSBENCH_CUFILE_LIBDIR=str(d))


@pytest.fixture
def files(tmp_path):
    """Five 1 MiB files written by gdsbench in a directory that takes O_DIRECT."""
    d = tmp_path / "data"
    d.mkdir()
    try:
        os.close(os.open(str(d / "probe"), os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644))
        os.unlink(str(d / "probe"))
    except OSError:
        pytest.skip("no O_DIRECT on the temporary directory")
    return d


def procs_of(gds, tmp_path, *args):
    binary, env = gds
    out = tmp_path / ("r%d.json" % len(list(tmp_path.glob("r*.json"))))
    proc = subprocess.run([binary, *map(str, args), "--json", str(out)], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    j = json.loads(out.read_text())
    assert j["errors"] == 0 and j["verify_errors"] == 0
    return j["procs"]


def test_large_sequential_cufile_io_runs_one_process_per_thread(gds, files, tmp_path):
    cpus = os.sysconf("SC_NPROCESSORS_ONLN")
    d = ["-D", files, "-x", 0, "-s", "1M"]
    assert procs_of(gds, tmp_path, *d, "-w", 2, "-I", 1, "-i", "1M", "-V") == min(2, cpus)
    assert procs_of(gds, tmp_path, *d, "-w", 2, "-I", 0, "-i", "256K", "-V") == min(2, cpus)
    # never more processes than online CPUs
    assert procs_of(gds, tmp_path, *d, "-w", cpus + 1, "-I", 1, "-i", "512K") == cpus
    # the stream and batch APIs share the process's cuFile instance as cuFileRead does
    for xfer in (5, 6):
        assert procs_of(gds, tmp_path, "-D", files, "-x", xfer, "-s", "1M", "-w", 2, "-I", 0, "-i", "1M") == min(2, cpus)


def test_small_random_other_engines_and_explicit_p1_stay_threads(gds, files, tmp_path):
    d = ["-D", files, "-s", "1M", "-w", 2]
    assert procs_of(gds, tmp_path, *d, "-x", 1, "-I", 1, "-i", "1M") == 1
    assert procs_of(gds, tmp_path, *d, "-x", 0, "-I", 2, "-i", "4K", "-T", "0.2") == 1
    assert procs_of(gds, tmp_path, *d, "-x", 0, "-I", 3, "-i", "1M", "-T", "0.2") == 1
    assert procs_of(gds, tmp_path, *d, "-x", 0, "-I", 0, "-i", "128K") == 1
    assert procs_of(gds, tmp_path, *d, "-x", 2, "-I", 0, "-i", "1M") == 1
    assert procs_of(gds, tmp_path, *d, "-x", 6, "-I", 2, "-i", "4K", "-T", "0.2") == 1
    assert procs_of(gds, tmp_path, *d, "-x", 0, "-I", 0, "-i", "1M", "-P", 1) == 1
