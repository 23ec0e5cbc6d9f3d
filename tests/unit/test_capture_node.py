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
