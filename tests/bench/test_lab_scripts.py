"""Tests of the GPU lab scripts' logic that runs without a GPU: bench/gpu_lib.sh (udev record,
run verdicts, /proc/modules, the fio build), scripts/gpu-commission.sh (with stand-ins for
ansible, nvidia-smi and findmnt) and scripts/carry-wheels.sh (the carried wheels)."""
import json
import os
import re
import stat
import subprocess
import tarfile
import textwrap
import zipfile

import pytest

from conftest import GDSBENCH_SRC, ROOT
from test_procs_default import gds  # noqa: F401  gdsbench and the mock CUDA libraries
LIB = os.path.join(ROOT, "bench", "gpu_lib.sh")
CARRY = os.path.join(ROOT, "scripts", "carry-wheels.sh")
MANIFEST = os.path.join(ROOT, "scripts", "carried-wheels.txt")


def lib(script, env=None, cwd=None):
    """Run bash with bench/gpu_lib.sh sourced, then SCRIPT."""
    proc = subprocess.run(["bash", "-c", '. "$LIB"\n' + script], capture_output=True, text=True,
                          env=dict(os.environ, LIB=LIB, ROOT=ROOT, **(env or {})), cwd=cwd, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


def executable(path, body):
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# ---------------------------------------------------------------- udev record

UDEVD_RECORD = "S:disk/by-uuid/1234\nE:ID_FS_UUID=1234\nE:ID_FS_TYPE=ext4\nE:ID_FS_USAGE=filesystem\n"


def test_udev_record_is_created_only_when_missing(tmp_path):
    data = tmp_path / "udev" / "data"
    rc, out = lib("udev_record 254:0 ext4", env={"UDEV_DATA": str(data)})
    assert rc == 0 and "CREATED (it was missing)" in out
    assert (data / "b254:0").read_text() == "E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n"
    (data / "b259:1").write_text(UDEVD_RECORD)
    rc, out = lib("udev_record 259:1 xfs", env={"UDEV_DATA": str(data)})
    assert rc == 0 and "present, left as it is" in out and "CREATED" not in out
    assert (data / "b259:1").read_text() == UDEVD_RECORD


def fake_findmnt(bin_dir):
    """findmnt on PATH saying: an ext4 file system on /dev/vda (254:0), whatever the target."""
    executable(bin_dir / "findmnt", textwrap.dedent("""\
        #!/bin/sh
        case "$2" in MAJ:MIN) echo " 254:0" ;; FSTYPE) echo ext4 ;; SOURCE) echo /dev/vda ;; esac
        """))


@pytest.fixture
def commission_env(tmp_path):
    """Stand-ins on PATH for what scripts/gpu-commission.sh calls; each ansible-playbook call
    logs whether the udev record existed at that moment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    udev = tmp_path / "udev"
    calls = tmp_path / "playbook-calls.txt"
    fake_findmnt(bin_dir)
    # the driver's topo layout for two GPUs (FAKE_TOPO_CELL: what it prints between them)
    executable(bin_dir / "nvidia-smi", textwrap.dedent("""\
        #!/bin/sh
        if [ "$1" = topo ]; then
          printf '\\tGPU0\\tGPU1\\tCPU Affinity\\tNUMA Affinity\\tGPU NUMA ID\\n'
          printf 'GPU0\\t X \\t%s\\t0-31\\t0\\t\\tN/A\\n' "${FAKE_TOPO_CELL:-PHB}"
          printf 'GPU1\\t%s\\t X \\t0-31\\t0\\t\\tN/A\\n\\nLegend:\\n' "${FAKE_TOPO_CELL:-PHB}"
          exit 0
        fi
        echo 'index, pci.bus_id, name, driver_version'
        echo '0, 00000000:00:06.0, NVIDIA H100 80GB HBM3, 580.159.04'
        echo '1, 00000000:00:07.0, NVIDIA H100 80GB HBM3, 580.159.04'
        """))
    gpus = [{"index": 0, "bdf": "0000:00:06.0", "numa_node": -1}, {"index": 1, "bdf": "0000:00:07.0", "numa_node": -1}]
    facts = {"gds_topology": {"gpus": gpus, "groups": [], "nvme": [], "nvlink": {"GPU0": {}, "GPU1": {}},
                              "matrix": {"GPU0": {"GPU0": "X", "GPU1": "PHB"}, "GPU1": {"GPU0": "PHB", "GPU1": "X"}}},
             "gds_platform": {}}
    doc = {"plays": [{"tasks": [{"hosts": {"localhost": {"ansible_facts": facts}}}]}]}
    unresolved = {"plays": [{"tasks": [{"hosts": {"localhost": {"msg": "Cannot resolve module"}}}]}]}
    # as ansible does: a module name the collection layout does not resolve is an error
    executable(bin_dir / "ansible", textwrap.dedent("""\
        #!/bin/sh
        [ -n "$FAKE_ANSIBLE_FAILS" ] && { echo '%s'; exit 2; }
        case "$*" in *"-m gds.commission."*) echo '%s' ;; *) echo '%s'; exit 2 ;; esac
        """ % (json.dumps(unresolved), json.dumps(doc), json.dumps(unresolved))))
    # the outcomes a real node gives: no udev record -> not PASS naming it; nvfs expected in compat
    # mode -> the io path check FAILs; else PASS ($PLAYBOOK_RC forces another exit status)
    executable(bin_dir / "ansible-playbook", textwrap.dedent("""\
        #!/bin/sh
        [ "$1" = --version ] && { echo "ansible-playbook [core 2.19.14]"; exit 0; }
        mkdir -p "$GDS_REPORTS_DIR/latest"
        if [ -e "$UDEV_DATA/b254:0" ]; then echo present >>"$CALLS"; else echo missing >>"$CALLS"; fi
        if [ ! -e "$UDEV_DATA/b254:0" ]; then
          echo "driver: udev record of vda: missing"; echo '{"hosts": {}}' >"$GDS_REPORTS_DIR/latest/summary.json"; exit 2
        fi
        case "$*" in *tune.yml*)
          echo "PLAY RECAP"; echo "gpu-local                  : ok=40   changed=${TUNE_CHANGED:-0}    unreachable=0    failed=0"
          exit 0 ;;
        *drift.yml*)
          echo '{"hosts": {"gpu-local": {"drifted": false, "items": []}}}' >"$GDS_REPORTS_DIR/latest/drift.json"
          exit 0 ;;
        esac
        case "$*" in *expect_path=nvfs*)
          echo '{"hosts": {"gpu-local": {"verdict": "FAIL", "checks": [{"name": "bench: seq_read: io path",
            "verdict": "FAIL", "expected": "nvfs", "actual": "compat"}'"${FAKE_NVFS_ALSO:-}"']}}}' >"$GDS_REPORTS_DIR/latest/summary.json"
          exit 2 ;;
        esac
        echo '{"hosts": {"gpu-local": {"verdict": "PASS", "checks": []}}}' >"$GDS_REPORTS_DIR/latest/summary.json"
        exit "${PLAYBOOK_RC:-0}"
        """))
    env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]), UDEV_DATA=str(udev),
               CALLS=str(calls), OUT=str(tmp_path / "out"))
    data = tmp_path / "data"
    data.mkdir()

    def run(**extra):
        proc = subprocess.run([os.path.join(ROOT, "scripts", "gpu-commission.sh"), str(data)], capture_output=True,
                              text=True, env=dict(env, **extra), timeout=120)
        run.rc = proc.returncode
        return proc.stdout + proc.stderr, calls.read_text().split() if calls.exists() else []
    return udev, run


def test_gpu_commission_passes_when_every_step_comes_out_as_expected(commission_env):
    udev, run = commission_env
    out, _ = run()
    assert run.rc == 0, out
    assert "MATCH" in out and "every step came out as expected" in out


@pytest.mark.parametrize("env, step", [
    # what the script met once: Ansible could not resolve the module (a traceback, exit 0 then)
    ({"FAKE_ANSIBLE_FAILS": "1"}, "1. the gds_topology module"),
    ({"PLAYBOOK_RC": "2"}, "3. the compat commissioning did not PASS"),
    ({"TUNE_CHANGED": "3"}, "5. a second tune run changed something"),
    # the run that must FAIL on the io path also broke a job (four H200s: a short write broke the
    # reads): not the step's expected outcome
    ({"FAKE_NVFS_ALSO": ', {"name": "bench: raid gpu0 seq_read: completed", "verdict": "ERROR", "expected": 0, '
                        '"actual": 1}'}, "4. not exactly the io path checks FAILed"),
    # nvidia-smi says PIX where the facts say PHB, or NVLinks the facts do not have
    ({"FAKE_TOPO_CELL": "PIX"}, "1. GPU facts against nvidia-smi"),
    ({"FAKE_TOPO_CELL": "NV18"}, "1. GPU facts against nvidia-smi"),
])
def test_gpu_commission_fails_naming_the_step(commission_env, env, step):
    udev, run = commission_env
    out, _ = run(**env)
    assert run.rc == 1, out
    assert "STEP FAILED: " + step in out, out


def test_gpu_commission_never_deletes_a_live_udev_record(commission_env):
    udev, run = commission_env
    udev.mkdir()
    (udev / "b254:0").write_text(UDEVD_RECORD)
    out, calls = run()
    assert (udev / "b254:0").read_text() == UDEVD_RECORD, out
    assert "missing: SKIPPED" in out and "never deleted" in out and "present, left as it is" in out
    assert calls and set(calls) == {"present"}, calls


def test_gpu_commission_runs_without_the_record_only_when_it_is_absent(commission_env):
    udev, run = commission_env
    out, calls = run()
    assert calls[0] == "missing" and set(calls[1:]) == {"present"}, (calls, out)
    assert "CREATED (it was missing)" in out
    assert (udev / "b254:0").read_text().startswith("E:ID_FS_USAGE=filesystem")


# ---------------------------------------------------------------- run verdicts

FAKE_GDS = """#!/usr/bin/env python3
import json, sys
a = sys.argv[1:]
rc, verr = int(a[a.index("--rc") + 1]), int(a[a.index("--verr") + 1])
rec = {"xfer_type": 5, "throughput_gib_s": 1.0, "iops": 10, "lat_us": {"mean": 1, "p99": 2},
       "path": {"mode": "compat", "evidence": ["verdict: x"]}, "errors": 0, "verify_errors": verr,
       "exit_code": rc}
if verr:
    rec["error"] = "verify FAILED: %d bad 4KiB sector(s)" % verr
json.dump(rec, open(a[a.index("--json") + 1], "w"))
sys.exit(rc)
"""


@pytest.fixture
def gds_env(tmp_path):
    gds = executable(tmp_path / "fake-gdsbench", FAKE_GDS)
    jsondir = tmp_path / "json"
    jsondir.mkdir()
    return {"GDS": str(gds), "T": "1", "JSONDIR": str(jsondir), "ROWS": str(tmp_path / "rows.tsv"),
            "RECS": str(tmp_path / "recs.jsonl")}


def test_expected_diagnostic_failure_is_labelled_and_does_not_fail(gds_env):
    rc, out = lib("""
        gds verify-x5-read --rc 0 --verr 0
        gds_diag x5diag-region-read --rc 1 --verr 50560
        gds_must_fail verify-x0-corrupt --rc 1 --verr 1
        gdsv_verdict gpu_validate""", env=gds_env)
    assert rc == 0, out
    assert "DIAGNOSTIC (expected to fail): x5diag-region-read failed" in out and "verify_errors=50560" in out
    assert "ok: verify-x0-corrupt failed as it had to" in out
    assert out.strip().splitlines()[-1].startswith("gpu_validate: OK")
    rows = open(gds_env["ROWS"]).read()
    assert re.search(r"^x5diag-region-read\t.*DIAGNOSTIC \(expected to fail\) rc=1", rows, re.M), rows


def test_any_other_verify_failure_fails_the_script_and_names_the_run(gds_env):
    rc, out = lib("""
        gds x5diag-slot-read --rc 1 --verr 50560
        gds_diag x5diag-region-read --rc 1 --verr 7
        gds seq-x0 --rc 0 --verr 0
        gds_must_fail verify-x0-corrupt --rc 0 --verr 0
        gdsv_verdict gpu_validate""", env=gds_env)
    assert rc == 1, out
    assert "correctness OK" not in out and "gpu_validate: OK" not in out
    tail = out[out.index("gpu_validate: FAILED: 2 run(s)"):]
    assert "x5diag-slot-read (rc=1, errors=0, verify_errors=50560, error: verify FAILED" in tail
    assert "verify-x0-corrupt (passed but had to fail)" in tail
    assert "x5diag-region-read" not in tail and "seq-x0" not in tail


def test_gpu_scripts_end_with_the_verdict():
    for name in ("gpu_validate.sh", "gpu_procs.sh", "side_by_side.sh", "gpu_watch.sh"):
        text = open(os.path.join(ROOT, "bench", name)).read()
        assert text.rstrip().splitlines()[-1].startswith("gdsv_verdict "), name
        assert "correctness OK" not in text
    text = open(os.path.join(ROOT, "bench", "gpu_validate.sh")).read()
    assert 'GDSBENCH_ASYNC_BUF=$m gds_diag "$name"' in text  # region runs are the diagnostics


def test_bash_syntax_of_the_lab_scripts():
    for path in ("bench/gpu_lib.sh", "bench/gpu_validate.sh", "bench/gpu_procs.sh", "bench/side_by_side.sh",
                 "bench/gpu_watch.sh", "scripts/gpu-commission.sh", "scripts/carry-wheels.sh"):
        subprocess.run(["bash", "-n", os.path.join(ROOT, path)], check=True)


# ---------------------------------------------------------------- modules, fio build

def test_modules_come_from_proc_modules(tmp_path):
    mods = tmp_path / "modules"
    mods.write_text("nvme 61440 2 - Live 0x0\nnvidia 11370496 4 nvidia_uvm, Live 0x0\n")
    rc, out = lib('gdsv_modules "%s"' % mods, env={"PATH": "/usr/bin:/bin"})
    assert rc == 0 and "nvidia_fs: not loaded" in out and "also loaded: nvme nvidia" in out
    mods.write_text("nvidia_fs 270336 0 - Live 0x0\nnvme_core 200704 3 nvme, Live 0x0\n")
    rc, out = lib('gdsv_modules "%s"' % mods)
    assert "nvidia_fs: loaded" in out and "also loaded: nvme_core" in out


def fio_source(tmp_path, configure, make_rule):
    src = tmp_path / "src" / "fio-3.33"
    src.mkdir(parents=True)
    executable(src / "configure", configure)
    (src / "Makefile").write_text("all:\n\t%s\n" % make_rule)
    tgz = tmp_path / "fio_3.33.orig.tar.gz"
    with tarfile.open(str(tgz), "w:gz") as tar:
        tar.add(str(src), arcname="fio-3.33")
    return tgz


@pytest.mark.parametrize("configure,make_rule,step,line", [
    ("#!/bin/sh\necho 'ERROR: compiler check failed'\nexit 1\n", "true", "./configure --enable-libcufile",
     "ERROR: compiler check failed"),
    ("#!/bin/sh\necho 'libcufile                     no'\n: > config-host.h\n", "true",
     "./configure: libcufile not enabled", "libcufile                     no"),
    ("#!/bin/sh\necho '#define CONFIG_LIBCUFILE' > config-host.h\n", "echo 'engines/libcufile.c:12: error: boom'; exit 2",
     "make -j", "engines/libcufile.c:12: error: boom"),
])
def test_fio_build_failure_names_the_step_and_shows_the_log(tmp_path, configure, make_rule, step, line):
    tgz = fio_source(tmp_path, configure, make_rule)
    log = tmp_path / "fio-build.log"
    rc, out = lib('fio_build "%s" "%s" "%s"' % (tgz, tmp_path / "build", log), env={"CUDA_HOME": "/usr/local/cuda"})
    assert rc == 1, out
    assert "build FAILED at step: " + step in out, out
    assert "  | " + line in out and line in log.read_text()


def test_fio_build_success(tmp_path):
    tgz = fio_source(tmp_path, "#!/bin/sh\necho '#define CONFIG_LIBCUFILE' > config-host.h\n",
                     "printf '#!/bin/sh\\necho fio-3.33\\n' > fio && chmod +x fio")
    rc, out = lib('fio_build "%s" "%s" "%s"' % (tgz, tmp_path / "build", tmp_path / "log"),
                  env={"CUDA_HOME": "/usr/local/cuda"})
    assert rc == 0 and "FAILED" not in out and (tmp_path / "build" / "fio").exists()


# ---------------------------------------------------------------- carried wheels

def manifest(kind):
    with open(MANIFEST) as f:
        return [line.split()[1] for line in f if line.split() and line.split()[0] == kind]


def wheel_name(req):
    name, version = req.split("==")
    return "%s-%s-py3-none-any.whl" % (re.sub(r"[-_.]+", "_", name).lower(), version)


def carry(*args, env=None):
    proc = subprocess.run([CARRY, *args], capture_output=True, text=True, env=dict(os.environ, **(env or {})),
                          timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def test_manifest_lists_what_the_lab_needs_and_follows_requirements():
    names = {r.split("==")[0].lower() for r in manifest("ansible")}
    assert {"ansible-core", "resolvelib", "cryptography", "cffi", "pycparser", "pyyaml", "jinja2", "markupsafe",
            "packaging", "nvidia-ml-py"} <= names
    assert {"kvikio-cu13", "libkvikio-cu13", "rapids-logger"} <= {r.split("==")[0] for r in manifest("kvikio")}
    assert set(manifest("collection")) == {"community.general", "ansible.posix"}
    with open(os.path.join(ROOT, "requirements.txt")) as f:
        pins = dict(line.strip().split("==") for line in f if "==" in line and not line.startswith("#"))
    carried = dict(r.split("==") for r in manifest("ansible") + manifest("collections"))
    for name in ("ansible", "PyYAML", "nvidia-ml-py"):
        assert carried[name] == pins[name], name
    assert carried["ansible-core"].startswith("2.21.")


def test_a_missing_wheel_names_itself(tmp_path):
    wanted = manifest("ansible")
    for req in wanted[1:]:
        (tmp_path / wheel_name(req)).write_text("")
    (tmp_path / "ansible_core-2.18.0-py3-none-any.whl").write_text("")
    rc, out = carry("check", "ansible", env={"WHEEL_DIR": str(tmp_path)})
    assert rc == 1
    missing = re.findall(r"^missing wheel: (\S+)", out, re.M)
    assert missing == [wanted[0]], out
    assert "found only ansible_core-2.18.0" in out and "make wheels" in out
    rc, out = carry("install", "ansible", str(tmp_path / "site"), env={"WHEEL_DIR": str(tmp_path)})
    assert rc == 1 and "missing wheel: " + wanted[0] in out and not (tmp_path / "site").exists()
    (tmp_path / wheel_name(wanted[0])).write_text("")
    assert carry("check", "ansible", env={"WHEEL_DIR": str(tmp_path)})[0] == 0
    rc, out = carry("check", "collections", env={"WHEEL_DIR": str(tmp_path)})
    assert rc == 1 and "collections.tgz" in out


def fake_ansible_wheel(path, collections=("community/general", "ansible/posix", "amazon/aws")):
    with zipfile.ZipFile(str(path), "w") as z:
        for c in collections:
            z.writestr("ansible_collections/%s/MANIFEST.json" % c, '{"collection_info": {}}')
            z.writestr("ansible_collections/%s/plugins/modules/m.py" % c, "# module\n")
        z.writestr("ansible-12.3.0.dist-info/METADATA", "Name: ansible\n")


def test_collections_tarball_holds_the_listed_collections(tmp_path):
    whl = tmp_path / "ansible-12.3.0-py3-none-any.whl"
    fake_ansible_wheel(whl)
    env = {"WHEEL_DIR": str(tmp_path / "whl")}
    rc, out = carry("collections", str(whl), env=env)
    assert rc == 0, out
    with tarfile.open(str(tmp_path / "whl" / "collections.tgz")) as tar:
        names = tar.getnames()
    assert "ansible_collections/community/general/MANIFEST.json" in names
    assert "ansible_collections/ansible/posix/plugins/modules/m.py" in names
    assert not any("amazon" in n or "dist-info" in n for n in names)
    rc, out = carry("install", "collections", str(tmp_path / "colls"), env=env)
    assert rc == 0 and (tmp_path / "colls" / "ansible_collections" / "ansible" / "posix" / "MANIFEST.json").exists()
    fake_ansible_wheel(whl, collections=("community/general",))
    rc, out = carry("collections", str(whl), env=env)
    assert rc == 1 and "no collection ansible.posix" in out


FAKE_PIP = """#!/usr/bin/env python3
import os, sys, zipfile
a = sys.argv[1:]
if a[:2] != ["-m", "pip"]:  # the tarball step runs Python itself
    os.execvp("python3", ["python3"] + a)
assert a[2] == "download", a
open(os.environ["PIP_LOG"], "a").write(" ".join(a) + "\\n")
dest, req = a[a.index("-d") + 1], a[-1]
name, version = req.split("==")
path = os.path.join(dest, "%s-%s-py3-none-any.whl" % (name.replace("-", "_").lower(), version))
with zipfile.ZipFile(path, "w") as z:
    for c in ("community/general", "ansible/posix"):
        z.writestr("ansible_collections/%s/MANIFEST.json" % c, "{}")
"""


def test_download_fetches_every_listed_wheel_for_python_312(tmp_path):
    pip = executable(tmp_path / "python", FAKE_PIP)
    whl = tmp_path / "whl"
    whl.mkdir()
    (whl / "dask-2024.1.0-py3-none-any.whl").write_text("")   # an older version: replaced
    env = {"WHEEL_DIR": str(whl), "CACHE_DIR": str(tmp_path / "cache"), "PYTHON": str(pip),
           "PIP_LOG": str(tmp_path / "pip.log")}
    rc, out = carry("download", env=env)
    assert rc == 0, out
    assert carry("check", "ansible", "kvikio", "collections", env=env)[0] == 0
    assert not (whl / "dask-2024.1.0-py3-none-any.whl").exists()
    assert not any(n.startswith("ansible-") for n in os.listdir(str(whl)))  # the big wheel stays behind
    calls = open(env["PIP_LOG"]).read().splitlines()
    assert len(calls) == len(manifest("ansible")) + len(manifest("kvikio")) + 1
    for call in calls:
        assert "--no-deps" in call and "--only-binary=:all:" in call and "--python-version 3.12" in call
        assert "--platform manylinux2014_x86_64" in call and "--platform manylinux_2_28_x86_64" in call
    rc, out = carry("download", env=env)                        # a second run fetches nothing
    assert rc == 0 and len(open(env["PIP_LOG"]).read().splitlines()) == len(calls)


# ---------------------------------------------------------------- side-by-side table

SBS = os.path.join(ROOT, "bench", "side_by_side.py")
RECORDED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recorded")


def sbs(*args):
    proc = subprocess.run(["python3", SBS, *map(str, args)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def recorded_runs():
    with open(os.path.join(RECORDED, "side_by_side_h100_runs.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_table_ratios_are_to_the_best_peer_of_the_same_round(tmp_path):
    """On the runs recorded on the H100 node: every ratio is the tool's value over the largest
    peer value (fio, KvikIO) of that workload and round, and the spread is taken over them."""
    md = sbs("table", os.path.join(RECORDED, "side_by_side_h100_runs.jsonl"), tmp_path)
    got = json.loads((tmp_path / "side_by_side.json").read_text())["workloads"]
    assert md == (tmp_path / "side_by_side.md").read_text()
    runs = [r for r in recorded_runs() if r["kind"] != "probe"]
    assert set(got) == {r["workload"] for r in runs} == {"seqread", "seqwrite", "randread", "randwrite"}
    checked = 0
    for wl, t in got.items():
        metric = "gib_s" if wl.startswith("seq") else "iops"
        assert t["metric"] == metric
        mine = [r for r in runs if r["workload"] == wl]
        for rnd in {r["round"] for r in mine}:
            peers = [r for r in mine if r["round"] == rnd and r["tool"].startswith(("fio", "kvikio"))
                     and r.get(metric) is not None and r["rc"] == 0]
            best = max(peers, key=lambda r: r[metric])
            assert t["best_peer"][str(rnd)] == {"tool": best["tool"], "value": best[metric]}
            for r in mine:
                if r["round"] == rnd and r.get(metric) is not None and r["rc"] == 0:
                    ratio = t["tools"][r["tool"]]["ratio_to_best_peer"][str(rnd)]
                    assert ratio == pytest.approx(r[metric] / best[metric])
                    checked += 1
        for name, e in t["tools"].items():
            ratios = [v for v in e["ratio_to_best_peer"].values() if v is not None]
            assert e["ratio_spread"]["n"] == len(ratios)
            assert e["ratio_spread"]["min"] == min(ratios) and e["ratio_spread"]["max"] == max(ratios)
            row = [line for line in md.splitlines() if line.startswith("| %s |" % name)
                   or line.startswith("| %s (peer) |" % name)]
            assert row, name
    assert checked == len([r for r in runs if r["rc"] == 0 and r.get("gib_s" if r["workload"].startswith("seq")
                                                                       else "iops") is not None])


def test_a_round_without_a_result_is_a_dash_and_left_out_of_the_spread(tmp_path):
    runs = tmp_path / "runs.jsonl"
    base = {"workload": "randwrite", "kind": "fio", "cmd": "fio"}
    lines = [dict(base, round=1, tool="fio-psync", rc=0, iops=100.0),
             dict(base, round=2, tool="fio-psync", rc=0, iops=200.0),
             dict(base, round=1, tool="gdsbench-threads", kind="gdsbench", rc=0, iops=50.0),
             dict(base, round=2, tool="gdsbench-threads", kind="gdsbench", rc=1, iops=999.0, note="exit status 1"),
             dict(base, round=3, tool="gdsbench-threads", kind="gdsbench", rc=0, iops=None, note="no result: x")]
    runs.write_text("".join(json.dumps(r) + "\n" for r in lines))
    md = sbs("table", runs, tmp_path)
    t = json.loads((tmp_path / "side_by_side.json").read_text())["workloads"]["randwrite"]
    g = t["tools"]["gdsbench-threads"]
    assert g["values"] == {"1": 50.0, "2": None, "3": None}
    assert g["ratio_to_best_peer"] == {"1": 0.5, "2": None, "3": None}
    assert g["ratio_spread"] == {"min": 0.5, "median": 0.5, "max": 0.5, "n": 1}
    assert t["best_peer"]["3"] == {"tool": None, "value": None}
    assert "| gdsbench-threads | 50 | - | - | 50 | 0.50 - - | 0.50 / 0.50 / 0.50 |" in md
    assert "round 2: exit status 1" in md


def test_records_from_gdsbench_fio_kvikio_and_a_broken_result(tmp_path):
    runs = tmp_path / "runs.jsonl"
    sbs("record", runs, 1, "seqwrite", "gdsbench-threads", "gdsbench",
        os.path.join(RECORDED, "gdsbench_seqwrite_x0.json"), 0, "gdsbench", "-x", 0)
    fio = {"fio version": "fio-3.33", "jobs": [{"jobname": "seqread", "error": 0,
           "read": {"io_bytes": 3 << 30, "bw_bytes": 3 << 29, "iops": 1536.0, "lat_ns": {"mean": 5.2e6},
                    "clat_ns": {"percentile": {"99.000000": 9000000}}},
           "write": {"io_bytes": 0, "bw_bytes": 0, "iops": 0.0, "lat_ns": {"mean": 0.0}}}]}
    (tmp_path / "fio.json").write_text("note: a line fio printed first\n" + json.dumps(fio))
    sbs("record", runs, 1, "seqread", "fio-cufile-procs", "fio", tmp_path / "fio.json", 0, "fio")
    sbs("record", runs, 1, "seqread", "kvikio", "kvikio", os.path.join(RECORDED, "kvikio_single_node_io.txt"), 0, "kv")
    (tmp_path / "empty.json").write_text("")
    sbs("record", runs, 2, "seqread", "fio-psync", "fio", tmp_path / "empty.json", 1, "fio")
    recs = [json.loads(line) for line in runs.read_text().splitlines()]
    gds = json.loads(open(os.path.join(RECORDED, "gdsbench_seqwrite_x0.json")).read())
    assert recs[0]["gib_s"] == gds["throughput_gib_s"] and recs[0]["path"] == "compat" and recs[0]["procs"] == 1
    assert recs[1]["gib_s"] == 1.5 and recs[1]["lat_us"] == 5200.0 and recs[1]["p99_us"] == 9000.0
    kv = {r["workload"]: r["gib_s"] for r in recs[2:4]}
    assert kv == {"seqread": 1.31, "seqwrite": 1.90}
    assert recs[4]["gib_s"] is None and "no result" in recs[4]["note"] and recs[4]["rc"] == 1


def test_probe_table_compares_processes_with_threads(tmp_path):
    md = sbs("table", os.path.join(RECORDED, "side_by_side_h100_runs.jsonl"), tmp_path)
    probe = json.loads((tmp_path / "side_by_side.json").read_text())["probe"]
    thr, procs = probe["seqread"]["cufile-threads"], probe["seqread"]["cufile-procs"]
    ratios = " ".join("%.2f" % (procs[r] / thr[r]) for r in sorted(thr))
    assert "cufile-procs / threads: %s" % ratios in md
    assert "| cufile-threads-max_io_threads16 |" in md


# ---------------------------------------------------------------- fio peer rows

FIO_JSON = {"jobs": [{"job options": {"ioengine": "libcufile"}, "write": {"io_bytes": 0},
                      "read": {"io_bytes": 1, "bw_bytes": 2 << 30, "iops": 2048, "lat_ns": {"mean": 3000},
                               "clat_ns": {"percentile": {"99.000000": 5000}}}}]}


def test_fio_peer_helpers_live_in_gpu_lib_only():
    """gpu_validate.sh and gpu_procs.sh both ran fio the same way with a helper of their own
    (fio_run, fio_seq): one definition, in gpu_lib.sh."""
    defined = re.compile(r"^\s*(?:function\s+)?(fio_\w+)\s*\(\)", re.M)
    for name in ("gpu_validate.sh", "gpu_procs.sh", "gpu_options.sh", "side_by_side.sh"):
        with open(os.path.join(ROOT, "bench", name)) as f:
            assert not defined.findall(f.read()), name
    with open(LIB) as f:
        assert {"fio_seq", "fio_rand", "fio_row"} <= set(defined.findall(f.read()))


def test_fio_seq_runs_the_eight_file_read_and_writes_a_row(tmp_path):
    args = tmp_path / "args"
    fio = executable(tmp_path / "fio", "#!/bin/sh\necho \"$@\" >\"$ARGS\"\necho '%s'\necho warning >&2\n"
                     % json.dumps(FIO_JSON))
    (tmp_path / "json").mkdir()
    rc, out = lib('fio_seq seq-fio-cufile-r1 --ioengine=libcufile --thread; cat "$ROWS"',
                  env={"FIO": str(fio), "ARGS": str(args), "T": "5", "BIG": "1G", "DATA": "/data",
                       "JSONDIR": str(tmp_path / "json"), "ROWS": str(tmp_path / "rows"),
                       "RECS": str(tmp_path / "recs")})
    assert rc == 0, out
    assert "seq-fio-cufile-r1\tfio libcufile\t2.000\t2048\t3.0\t5.0\t-\trc=0" in out and "warning" in out
    argv = args.read_text().split()
    assert "--filename_format=/data/big/gdsbench.$jobnum" in argv and "--numjobs=8" in argv
    assert argv[-2:] == ["--ioengine=libcufile", "--thread"] and "--rw=read" in argv and "--bs=1M" in argv


# ---------------------------------------------------------------- the watch's overhead

GDSBENCH = os.path.join(GDSBENCH_SRC, "gdsbench")


@pytest.mark.skipif(not os.access(GDSBENCH, os.X_OK), reason="gdsbench not built (make -C bench)")
def test_watch_overhead_runs_bare_and_watched_on_this_disk(tmp_path):
    """bench/watch_overhead.py (bench/gpu_watch.sh's measurement) with the CPU transfer type, where
    no GPU is: two rounds bare and watched, the table and the ratio, the drive load of the disk
    under the data read back from the real /proc/diskstats, NVML unknown with its reason."""
    data = tmp_path / "data"
    data.mkdir()
    subprocess.run([GDSBENCH, "-D", str(data), "-x", "1", "-I", "1", "-w", "2", "-s", "16M", "-i", "1M"],
                   check=True, capture_output=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(["python3", os.path.join(ROOT, "bench", "watch_overhead.py"), "--gdsbench", GDSBENCH,
                           "--dir", str(data), "--xfer", "1", "--rounds", "2", "--seconds", "1", "--threads", "2",
                           "--size", "16M", "--gds-stats", "", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "round  bare GiB/s  watched GiB/s  watched/bare" in proc.stdout
    assert re.search(r"median: bare [\d.]+ GiB/s, watched [\d.]+ GiB/s, watched/bare [\d.]+ \(95 % interval "
                     r"[\d.]+-[\d.]+\): overhead", proc.stdout)
    assert re.search(r"CPU \(median of the watched runs\): the watch took [\d.]+ % of one core", proc.stdout)
    doc = json.load(open(tmp_path / "out" / "watch.json"))
    watched = [r for r in doc["runs"] if r["watched"]]
    assert len(watched) == 2 and len(doc["summary"]["ratios"]) == 2
    assert doc["summary"]["verdict"].startswith(("met", "NOT met", "not resolved"))
    assert all(r["record"]["cpu"]["wall_s"] > 0 for r in doc["runs"])
    for run in watched:
        names = [c["name"] for c in run["checks"]]
        assert names[0] == "bench: seq_read: drive load" and "bench: seq_read: bounce" not in names  # no GPU
        drives = run["watch"].get("drives") or []
        if drives:  # the disk under tmp_path: O_DIRECT reads reach it
            assert sum(d["read_bytes"] for d in drives) >= run["record"]["bytes"] * 0.9


# ---------------------------------------------------------------- read parity (bench/parity.sh, parity.py)

PARITY = os.path.join(ROOT, "bench", "parity.py")


def parity_table(runs, tmp_path, *extra):
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    proc = subprocess.run(["python3", PARITY, "table", str(path), str(tmp_path), *extra], capture_output=True,
                          text=True, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr, json.loads((tmp_path / "parity.json").read_text())


def parity_runs(rounds, values):
    """Records of side_by_side.py's format: values[tool] = (seqread GiB/s, randread IOPS) per round."""
    out = []
    for n in range(1, rounds + 1):
        for tool, per in values.items():
            seq, rand = per(n)
            kind = "gdsbench" if tool.startswith("gdsbench") else "fio"
            out += [{"round": n, "workload": "seqread", "tool": tool, "kind": kind, "rc": 0, "gib_s": seq},
                    {"round": n, "workload": "randread", "tool": tool, "kind": kind, "rc": 0, "iops": rand}]
    return out


def test_parity_ratios_are_to_the_better_gpu_peer_of_each_round_with_a_bootstrap_interval(tmp_path):
    """The peer is the better of fio libcufile's processes and --thread in that round, never plain
    O_DIRECT (fio psync, no GPU), which gives the second ratio; the interval is a percentile
    bootstrap of the mean over the rounds, the same for the same runs."""
    vals = {"fio-cufile-procs": lambda n: (2.0 if n % 2 else 1.0, 10000.0),
            "fio-cufile-threads": lambda n: (1.5, 80000.0 + n),
            "fio-psync": lambda n: (3.0, 100000.0),
            "gdsbench-x6": lambda n: (2.2 if n % 2 else 1.2, 88000.0 + 1000 * n),
            "gdsbench-default": lambda n: (1.9, 80000.0 + n)}
    rc, out, t = parity_table(parity_runs(5, vals), tmp_path, "--require")
    seq, rand = t["seqread"], t["randread"]
    assert [seq["best_peer"][str(n)]["tool"] for n in range(1, 6)] == ["fio-cufile-procs", "fio-cufile-threads"] * 2 \
        + ["fio-cufile-procs"]
    x6 = seq["tools"]["gdsbench-x6"]
    assert x6["ratio"] == {str(n): pytest.approx((2.2 / 2.0) if n % 2 else (1.2 / 1.5)) for n in range(1, 6)}
    assert x6["vs_posix"]["1"] == pytest.approx(2.2 / 3.0)
    assert x6["lowest"] == pytest.approx(0.8) and x6["every_round"] is False
    assert x6["mean"] == pytest.approx((3 * 1.1 + 2 * 0.8) / 5)
    assert min(x6["ratio"].values()) <= x6["ci"][0] <= x6["mean"] <= x6["ci"][1] <= max(x6["ratio"].values())
    assert rand["tools"]["gdsbench-x6"]["every_round"] is True
    assert rand["tools"]["gdsbench-default"]["ratio"] == {str(n): 1.0 for n in range(1, 6)}
    assert rand["tools"]["gdsbench-default"]["ci"] == [1.0, 1.0]
    assert parity_table(parity_runs(5, vals), tmp_path / ".." / tmp_path.name)[2] == t  # same runs, same interval
    assert "| gdsbench-x6 | 2.200 | 1.200 |" in out and "**no**" in out
    assert rc == 3 and "PARITY: missed: seqread gdsbench-default (lowest 0.95, below); seqread gdsbench-x6" in out


def test_parity_is_unknown_where_a_round_has_no_peer_or_a_run_failed(tmp_path):
    vals = {"fio-cufile-threads": lambda n: (1.0, 100.0), "gdsbench-x5": lambda n: (2.0, 200.0)}
    runs = parity_runs(5, vals)
    for r in runs:
        if r["round"] == 2 and r["tool"] == "fio-cufile-threads" and r["workload"] == "seqread":
            r.update(rc=1, note="exit status 1")
        if r["round"] == 4 and r["tool"] == "gdsbench-x5" and r["workload"] == "randread":
            r.update(errors=3)
    rc, out, t = parity_table(runs, tmp_path, "--require")
    seq, rand = t["seqread"]["tools"]["gdsbench-x5"], t["randread"]["tools"]["gdsbench-x5"]
    assert seq["ratio"]["2"] is None and seq["every_round"] is None and seq["ratio"]["1"] == 2.0
    assert rand["values"]["4"] is None and rand["every_round"] is None
    assert "unknown" in out and "round 2: exit status 1" in out
    assert rc == 4 and "rounds with a peer figure: 4" in out    # round 2 of seqread had none
    rc, out, _ = parity_table(runs, tmp_path)
    assert rc == 0 and "PARITY: missed" in out                  # without --require: reported, not failed


def test_parity_bootstrap_interval():
    sys_path = os.path.join(ROOT, "bench")
    proc = subprocess.run(["python3", "-c", "import sys; sys.path.insert(0, %r); import parity; "
                           "print(parity.bootstrap_ci([1.0, 2.0, 3.0, 4.0, 5.0])); print(parity.bootstrap_ci([0.9]));"
                           "print(parity.bootstrap_ci([]))" % sys_path], capture_output=True, text=True, timeout=60)
    lines = proc.stdout.splitlines()
    lo, hi = json.loads(lines[0])
    assert 1.0 < lo < 3.0 < hi < 5.0 and abs((3.0 - lo) - (hi - 3.0)) < 0.3, lines
    assert lines[1:] == ["[0.9, 0.9]", "None"]


FAKE_FIO = """#!/usr/bin/env python3
import json, sys
a = sys.argv[1:]
if "--enghelp=libcufile" in a:
    sys.exit(0 if "%(engine)s" == "yes" else 1)
if "--version" in a:
    print("fio-3.33"); sys.exit(0)
eng = next(x.split("=", 1)[1] for x in a if x.startswith("--ioengine="))
bw = {"libcufile": 2 << 30 if "--thread" in a else 1 << 30, "psync": 3 << 30}[eng]
with open("%(log)s", "a") as f:
    f.write(" ".join(a) + "\\n")
side = {"io_bytes": bw, "bw_bytes": bw, "iops": bw / 4096, "lat_ns": {"mean": 1000.0}, "clat_ns": {"percentile": {}}}
none = {"io_bytes": 0, "bw_bytes": 0, "iops": 0.0, "lat_ns": {"mean": 0.0}}
print(json.dumps({"jobs": [{"error": 0, "read": side, "write": none, "job options": {"ioengine": eng}}]}))
"""


@pytest.fixture
def parity_env(tmp_path, gds):
    """bench/parity.sh on the CPU: gdsbench on the mock CUDA libraries, a fio stand-in that
    answers in fio's JSON (and logs its command lines), findmnt saying ext4, udev records in tmp."""
    binary, env = gds
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_findmnt(bin_dir)
    log = tmp_path / "fio-calls.txt"
    data = tmp_path / "data"
    data.mkdir()
    env = dict(env, PATH="%s:%s" % (bin_dir, os.environ["PATH"]), UDEV_DATA=str(tmp_path / "udev"),
               OUT=str(tmp_path / "out"), PARITY_GDSBENCH=binary, PARITY_SIZE="1M", PARITY_T="0.1",
               DROP_CACHES_FILE=str(tmp_path / "drop_caches"),
               PARITY_SEQ_TOOLS="gdsbench-x6 fio-cufile-procs fio-cufile-threads fio-psync",
               PARITY_RAND_TOOLS="gdsbench-x5 fio-cufile-threads")

    def run(engine="yes", **extra):
        fio = executable(tmp_path / "fio", FAKE_FIO % {"engine": engine, "log": log})
        proc = subprocess.run([os.path.join(ROOT, "bench", "parity.sh"), str(data)], capture_output=True, text=True,
                              env=dict(env, PARITY_FIO=str(fio), **extra), timeout=300)
        runs = tmp_path / "out" / "runs.jsonl"
        recs = [json.loads(line) for line in runs.read_text().splitlines()] if runs.exists() else []
        return proc.returncode, proc.stdout + proc.stderr, recs, log.read_text().splitlines() if log.exists() else []
    return run


def test_parity_script_runs_rotated_rounds_and_prints_the_table(parity_env, tmp_path):
    rc, out, recs, fio_calls = parity_env()
    assert rc == 0, out
    seq_order = [[r["tool"] for r in recs if r["round"] == n and r["workload"] == "seqread"] for n in range(1, 6)]
    tools = ["gdsbench-x6", "fio-cufile-procs", "fio-cufile-threads", "fio-psync"]
    assert seq_order == [(tools[n:] + tools[:n])[:4] for n in (0, 1, 2, 3, 0)]    # each round one tool later
    assert {r["tool"] for r in recs if r["workload"] == "randread"} == {"gdsbench-x5", "fio-cufile-threads"}
    assert all(r["rc"] == 0 for r in recs) and len(recs) == 5 * 6
    assert {r["procs"] for r in recs if r["tool"] == "gdsbench-x6"} == {min(8, os.cpu_count())}   # the default
    assert any("--ioengine=libcufile" in c and "--thread" in c and "--numjobs=32" in c for c in fio_calls)
    assert "## 1 MiB sequential reads" in out and "## 4 KiB random reads" in out and "PARITY: " in out
    assert (tmp_path / "out" / "parity.md").exists() and (tmp_path / "udev" / "b254:0").exists()


def test_parity_script_fails_on_a_missing_step(parity_env):
    rc, out, recs, _ = parity_env(engine="no")
    assert rc == 1 and "has no libcufile engine" in out and not recs    # no device time spent on rounds
    rc, out, recs, _ = parity_env(PARITY_ROUNDS="2")
    assert rc == 1 and "rounds: 2 completed, at least 5 are needed" in out and len(recs) == 2 * 6
    rc, out, recs, _ = parity_env(MOCK_NO_GPU="1")    # every gdsbench run fails: round 1 is the last
    assert rc == 1 and "round 1: 2 run(s) failed" in out and {r["round"] for r in recs} == {1}
    assert "seqread-gdsbench-x6-r1 (rc=1" in out


def test_parity_drops_the_page_cache_before_every_run_and_runs_named_variants(parity_env, tmp_path):
    """Every run starts with the page cache dropped (cuFile's compat batch path reads through it);
    NAME-s0 is a mode with cuFile's statistics off; PARITY_VARIANTS names argument sets as tools."""
    rc, out, recs, _ = parity_env(PARITY_SEQ_TOOLS="gdsbench-default-s0 gdsbench-b2 fio-cufile-procs",
                                  PARITY_RAND_TOOLS="gdsbench-x6-s0 fio-cufile-threads",
                                  PARITY_VARIANTS="b2=-x 6 -B 2 --cufile-stats 0;other=-x 5")
    assert rc == 0, out
    assert (tmp_path / "drop_caches").read_text() == "3\n"
    cmds = {r["tool"]: r["cmd"] for r in recs if r["kind"] == "gdsbench"}
    assert cmds["gdsbench-default-s0"].endswith("--cufile-stats 0 -x 0"), cmds
    assert cmds["gdsbench-b2"].endswith("-x 6 -B 2 --cufile-stats 0"), cmds
    assert cmds["gdsbench-x6-s0"].endswith("--cufile-stats 0 -x 6"), cmds
    # where the page cache cannot be dropped, the step fails (named), unless told to run without
    rc, out, _, _ = parity_env(DROP_CACHES_FILE=str(tmp_path / "no" / "such" / "file"))
    assert rc == 1 and "cannot drop the page cache" in out
    rc, out, _, _ = parity_env(DROP_CACHES_FILE=str(tmp_path / "no" / "such" / "file"), PARITY_DROP_CACHES="0")
    assert rc == 0, out


def test_served_from_compares_the_reported_bytes_with_the_drives(gds, tmp_path):
    """bench/served_from.sh on the CPU (gdsbench on the mock CUDA libraries): every mode run after
    a drop of the page cache, its bytes against the drive's sectors (a stand-in stat file that
    does not move: the drive read nothing, ratio 0.00), a verified pass of each; a mode that fails
    is named and the script exits 1."""
    binary, env = gds
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_findmnt(bin_dir)
    stat = tmp_path / "stat"
    stat.write_text("    100 0 2048 10 0 0 0 0 0 10 10 0 0 0 0 0 0\n")
    data = tmp_path / "data"
    data.mkdir()
    env = dict(env, PATH="%s:%s" % (bin_dir, os.environ["PATH"]), UDEV_DATA=str(tmp_path / "udev"),
               OUT=str(tmp_path / "out"), SERVED_GDSBENCH=binary, SERVED_STAT=str(stat), SERVED_T="0.2",
               DROP_CACHES_FILE=str(tmp_path / "drop_caches"), SERVED_VARIANTS="host=-x 1;gpu=-x 0")
    proc = subprocess.run([os.path.join(ROOT, "bench", "served_from.sh"), str(data)], capture_output=True,
                          text=True, env=env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    table = (tmp_path / "out" / "served.txt").read_text().splitlines()
    rows = {line.split()[0]: line.split() for line in table[1:] if not line.startswith("verify")}
    assert set(rows) == {"host", "gpu"} and all(row[4] == "0.00" for row in rows.values()), table
    assert "verify host: the data read is the data written" in table and (tmp_path / "drop_caches").exists()
    proc = subprocess.run([os.path.join(ROOT, "bench", "served_from.sh"), str(data)], capture_output=True,
                          text=True, env=dict(env, MOCK_NO_GPU="1"), timeout=300)
    assert proc.returncode == 1 and "STEP FAILED: gpu: gdsbench exited" in proc.stdout + proc.stderr
