"""scripts/capture-node.py: a real node's sysfs/procfs, captured for the tests, holds everything
discovery reads. Proven on every fixture tree: the facts read from the capture are the facts read
from the tree it was taken of."""
import json
import os
import subprocess
import sys
import tarfile

import pytest
import simtree
from conftest import ROOT

FIXTURES = sorted(f[:-4] for f in os.listdir(os.path.join(ROOT, "tests", "fixtures")) if f.endswith(".yml"))


def capture(src, out, name):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "capture-node.py"), str(out),
                           "--name", name, "--root", str(src)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(out / (name + ".tgz")) as tar:
        tar.extractall(out / "x", filter="tar")
    return out / "x" / name


def facts(module_runner, root):
    facts = {}
    for module, args in (("gds_topology", {}), ("gds_platform", {"root": str(root), "gpu_source": "none"})):
        rc, result = module_runner(module, dict(args, sysfs_root=str(root / "sys"), procfs_root=str(root / "proc")))
        assert rc == 0, result
        facts.update(result["ansible_facts"])
    facts = json.loads(json.dumps(facts).replace(str(root), "ROOT"))
    for nic in facts["gds_topology"].get("nics") or []:  # anonymised in the capture: only distinctness kept
        for port in nic.get("ports") or []:
            port["gid"] = port.get("gid") and port["gid"][:20]
    return facts


@pytest.mark.parametrize("fixture", FIXTURES)
def test_discovery_reads_the_same_facts_from_a_capture(tmp_path, module_runner, fixture):
    src = tmp_path / "tree"
    simtree.build(fixture, str(src))
    captured = capture(src, tmp_path / "out", fixture)
    assert facts(module_runner, captured) == facts(module_runner, src)


def test_serials_and_addresses_are_anonymised(tmp_path):
    src = tmp_path / "tree"
    simtree.build("dgx-a100", str(src))
    nvme = src / "sys" / "class" / "nvme" / "nvme0"
    serial = os.path.realpath(nvme) + "/serial"
    with open(serial, "w") as handle:
        handle.write("S6EWNE0R123456\n")
    captured = capture(src, tmp_path / "out", "a100")
    text = b"".join(open(os.path.join(d, f), "rb").read() for d, _, fs in os.walk(captured) for f in fs)
    assert b"S6EWNE0R123456" not in text


def test_procfs_links_are_read_through(tmp_path, module_runner):
    """On a real node /proc/mounts is a link to self/mounts and /proc/self a link to the pid: the
    capture holds their text (the first capture of the H100 machine lacked both)."""
    src = tmp_path / "tree"
    simtree.build("cloud-vm", str(src))
    proc = src / "proc"
    (proc / "4242").mkdir()
    os.rename(proc / "mounts", proc / "4242" / "mounts")
    if (proc / "self").exists():
        os.rename(proc / "self", proc / "4242.self")
        for name in os.listdir(proc / "4242.self"):
            os.rename(proc / "4242.self" / name, proc / "4242" / name)
        os.rmdir(proc / "4242.self")
    os.symlink("4242", proc / "self")
    os.symlink("self/mounts", proc / "mounts")
    captured = capture(src, tmp_path / "out", "vm")
    assert not os.path.islink(captured / "proc" / "mounts")
    assert (captured / "proc" / "mounts").read_text() == (proc / "4242" / "mounts").read_text()
    assert facts(module_runner, captured)["gds_topology"]["gpus"]


def test_a_byte_that_is_not_utf8_in_nvidia_smis_text_is_kept_not_a_traceback(tmp_path):
    """--expect on a node whose nvidia-smi prints a stray byte: the expected file is written with
    the byte escaped (the problem names NVML, absent here), never a UnicodeDecodeError."""
    src = tmp_path / "tree"
    simtree.build("hgx-h100", str(src))
    stubs = tmp_path / "bin"
    stubs.mkdir()
    smi = stubs / "nvidia-smi"
    smi.write_bytes(b"#!/bin/sh\nprintf '\\tGPU0\\nGPU0\\t X \\377\\n'\n")
    smi.chmod(0o755)
    env = dict(os.environ, PATH="%s%s%s" % (stubs, os.pathsep, os.environ.get("PATH", "")))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "capture-node.py"), str(tmp_path / "out"),
                           "--name", "n", "--root", str(src), "--expect"], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    view = json.loads((tmp_path / "out" / "n.expected.json").read_text())
    assert "\\xff" in view["nvidia-smi topo -m"]
