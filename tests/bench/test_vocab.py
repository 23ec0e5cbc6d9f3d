"""The benchmark is the one source of its vocabulary (docs/benchmark.md, Vocabulary): gdsbench's
tables (transfer types with their capability flags, I/O types, size units, the job-file keys'
bounds) say what it knows through `gdsbench --capabilities`; the collection's copy
(plugins/module_utils/measure/gdsbench_vocab.py) is generated from that output and checked here
by generating it again; gdsbench decides by the flags it declares, and no Python file of the
collection spells a transfer-type number list or an I/O type key of its own."""
import glob
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import COLLECTION, ROOT
from test_gdsbench import data_dir, gdsbench, gdsbench_nocuda, run  # noqa: F401

GENERATOR = os.path.join(ROOT, "scripts", "gdsbench-vocab.py")
GENERATED = os.path.join(COLLECTION, "plugins", "module_utils", "measure", "gdsbench_vocab.py")


def capabilities(binary):
    p = run(binary, "--capabilities")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_the_collections_copy_is_what_gdsbench_generates(gdsbench_nocuda):
    proc = subprocess.run([sys.executable, GENERATOR, "--check", gdsbench_nocuda, GENERATED], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_check_names_the_first_line_that_differs(gdsbench_nocuda, tmp_path):
    stale = tmp_path / "gdsbench_vocab.py"
    stale.write_text(open(GENERATED).read().replace("'GPU_BATCH'", "'GPU_BATCHES'"))
    proc = subprocess.run([sys.executable, GENERATOR, "--check", gdsbench_nocuda, str(stale)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and "gdsbench_vocab.py:" in proc.stderr and "GPU_BATCHES" in proc.stderr
    assert "make capabilities" in proc.stderr


def test_a_broken_gdsbench_is_named_not_a_traceback(tmp_path):
    fake = tmp_path / "gdsbench"
    fake.write_text("#!/bin/sh\necho '{\"tool\": \"gdsbench\"}'\n")
    fake.chmod(0o755)
    proc = subprocess.run([sys.executable, GENERATOR, str(fake), str(tmp_path / "out.py")], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "key 'version' is missing" in proc.stderr and not (tmp_path / "out.py").exists()


def test_the_vocabulary_does_not_depend_on_the_build(gdsbench, gdsbench_nocuda):
    assert capabilities(gdsbench) == capabilities(gdsbench_nocuda)


def test_gdsbench_decides_by_the_flags_it_declares(gdsbench_nocuda, data_dir):
    """-B only for the queued types, -m only for the cuFile ones, O_DIRECT's 4 KiB rule only for the
    odirect ones, the refused types refused with their reason: each type's behaviour follows its flags
    (--dry-run: checks only, a CPU-only build knows every type)."""
    caps = capabilities(gdsbench_nocuda)
    (data_dir / "f").write_bytes(b"\0" * 65536)
    base = ["--dry-run", "-f", data_dir / "f", "-I", 0, "-s", "64K"]
    for t in caps["xfer_types"]:
        x, flags = t["number"], t["flags"]
        if t.get("refused"):
            p = run(gdsbench_nocuda, *base, "-x", x, "-i", "4K")
            assert p.returncode == 2 and t["refused"] in p.stderr, (x, p.stderr)
            continue
        assert run(gdsbench_nocuda, *base, "-x", x, "-i", "4K").returncode == 0, x
        assert (run(gdsbench_nocuda, *base, "-x", x, "-i", "4K", "-B", 2).returncode == 0) == ("queued" in flags), x
        assert (run(gdsbench_nocuda, *base, "-x", x, "-i", "4K", "-m", 2).returncode == 0) == ("cufile" in flags), x
        assert (run(gdsbench_nocuda, *base, "-x", x, "-i", "6K").returncode == 2) == ("odirect" in flags), x
        plan = json.loads(run(gdsbench_nocuda, *base, "-x", x, "-i", "4K").stdout)
        assert plan["jobs"][0]["xfer_name"] == t["name"]


def test_io_types_and_sizes_are_read_as_declared(gdsbench_nocuda, data_dir):
    caps = capabilities(gdsbench_nocuda)
    (data_dir / "f").write_bytes(b"\0" * 65536)
    for t in caps["io_types"]:
        for spelled in (t["key"], t["number"]):
            p = run(gdsbench_nocuda, "--dry-run", "-f", data_dir / "f", "-x", 1, "-I", spelled, "-i", "4K", "-s", "64K")
            assert p.returncode == 0, p.stderr
            assert json.loads(p.stdout)["jobs"][0]["io_type"] == t["key"]
    for letter, mult in caps["sizes"]["units"].items():
        for word in ("1" + letter, "1" + letter.lower() + "iB", "1" + letter + "b"):
            p = run(gdsbench_nocuda, "--dry-run", "-D", data_dir, "-x", 1, "-O", 1, "-I", 1, "-i", "1K", "-s", word)
            want = 0 if mult <= 1 << 30 else 2    # past 1 GiB: more than this file system holds, or not
            assert p.returncode == 0 or (want == 2 and "do not fit" in p.stderr), (word, p.stderr)
            if p.returncode == 0:
                assert json.loads(p.stdout)["jobs"][0]["file_size"] == mult


# the collection spells no transfer-type number list and no I/O type key of its own
OWN_VOCABULARY = [
    (re.compile(r"XFER\w*\s*=\s*\(\s*\d"), "a list of transfer-type numbers"),
    (re.compile(r"xfer\w*[\"')\]]*\)?\s+(not\s+)?in\s+\(\s*\d"), "a test against transfer-type numbers"),
    # a job's value (a role's default job templates, ``'io_type': 'randread'``) is data, not a copy
    (re.compile(r"(?<!io_type[\"']: )[\"'](randread|randwrite)[\"']"), "an I/O type key"),
]


@pytest.mark.parametrize("path", sorted(
    p for p in glob.glob(os.path.join(COLLECTION, "plugins", "**", "*.py"), recursive=True)
    if not p.endswith("gdsbench_vocab.py")) + [os.path.join(ROOT, "bench", "watch_overhead.py")],
    ids=lambda p: os.path.relpath(p, ROOT))
def test_no_copy_of_the_vocabulary(path):
    code = [line for line in open(path, encoding="utf-8").read().splitlines() if not line.lstrip().startswith("#")]
    found = ["%s: %s" % (why, line.strip()) for line in code for rx, why in OWN_VOCABULARY if rx.search(line)]
    assert not found, "%s spells gdsbench's vocabulary itself (read measure/vocab.py):\n  %s" % (
        os.path.relpath(path, ROOT), "\n  ".join(found))
