"""gds_bench's sources onto the nodes (docs/benchmark.md#the-source-archive): each run that finds a
node without them packs an archive of its own on the controller and removes it after, so runs of
one repository at once (node-local runs under Slurm, a shared file system) never read one another's
half-written archive, and nothing at a shared name (a truncated archive, a link to another one) is
ever unpacked; every node gets the sources whole; a run that finds them packs nothing and changes
nothing."""
import base64
import glob
import json
import os
import random
import subprocess
import sys

import yaml

from conftest import ROOT

BIN = os.path.dirname(sys.executable)
RUNS = 3
PLAY = """
- name: Put the benchmark sources on the node
  hosts: all
  gather_facts: false
  tasks:
    - name: The sources, as gds_bench puts them there
      ansible.builtin.import_role: {name: gds.commission.gds_bench, tasks_from: sources}
"""


def sources(path):
    """Sources large enough that packing them takes a while: a half-written archive would be seen."""
    path.mkdir()
    noise = random.Random(7)
    files = {"big.c": "/* %s */\n" % base64.b64encode(noise.randbytes(12 << 20)).decode(),
             "gdsbench.h": "#define GDSBENCH 1\n", "Makefile": "all:\n\ttrue\n"}
    for name, text in files.items():
        (path / name).write_text(text)
    return files


def repository(tmp_path):
    """A copy of the repository's ansible.cfg: the archive goes to build/ beside it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    with open(os.path.join(ROOT, "ansible.cfg")) as f:
        text = f.read().replace("./collections", os.path.join(ROOT, "collections"))
    (repo / "ansible.cfg").write_text("\n".join(line for line in text.splitlines() if not line.startswith("inventory")))
    (repo / "play.yml").write_text(PLAY)
    return repo


def start(tmp_path, repo, node, src):
    inventory = {"all": {"hosts": {node: {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "gds_bench_source": str(src), "gds_bench_build_root": str(tmp_path / node)}}}}
    (repo / ("%s.yml" % node)).write_text(yaml.safe_dump(inventory))
    env = dict(os.environ, ANSIBLE_CONFIG=str(repo / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_DEPRECATION_WARNINGS="false", GDS_REPORTS_DIR=str(tmp_path / "reports"),
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    return subprocess.Popen([os.path.join(BIN, "ansible-playbook"), "-i", str(repo / ("%s.yml" % node)),
                             str(repo / "play.yml")], cwd=str(repo), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc):
    out, err = proc.communicate(timeout=600)
    try:
        data = json.loads(out[out.index("{"):])
    except ValueError:
        raise AssertionError("no JSON (rc=%d)\n%s\n%s" % (proc.returncode, out[-3000:], err[-3000:]))
    assert proc.returncode == 0, json.dumps(data["stats"]) + out[-3000:] + err[-3000:]
    return data


def test_runs_at_once_each_unpack_their_own_whole_sources_and_leave_nothing(tmp_path):
    files = sources(tmp_path / "src")
    repo = repository(tmp_path)
    build = repo / "build"
    build.mkdir()
    # what an earlier version shared, broken: a truncated archive and a link to another archive
    stale = build / "gdsbench-src-0123456789ab.tar.gz"
    stale.write_bytes(b"\x1f\x8b\x08\x00truncated")
    os.symlink(str(stale), str(build / "gdsbench-src-link.tar.gz"))
    procs = []
    try:
        procs = [start(tmp_path, repo, "node-%d" % n, tmp_path / "src") for n in range(RUNS)]
        runs = [finish(proc) for proc in procs]
    finally:
        for proc in procs:  # a run left behind by a failure above
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=60)
    packed = [task["hosts"] for data in runs for play in data["plays"] for task in play["tasks"]
              if task["task"]["name"].endswith(" : Pack the benchmark sources")]
    assert len(packed) == RUNS, "every run packs its own"
    # nothing of any run left beside what was there
    assert sorted(os.listdir(str(build))) == ["gdsbench-src-0123456789ab.tar.gz", "gdsbench-src-link.tar.gz"]
    for n in range(RUNS):
        unpacked = glob.glob(str(tmp_path / ("node-%d" % n) / "*"))
        assert len(unpacked) == 1, unpacked
        for name, text in files.items():
            with open(os.path.join(unpacked[0], name)) as f:
                assert f.read() == text, (n, name)

    # a run that finds the node's sources packs nothing and changes nothing
    again = finish(start(tmp_path, repo, "node-0", tmp_path / "src"))
    assert again["stats"]["node-0"]["changed"] == 0, again["stats"]
    skipped = [task["hosts"]["node-0"].get("skipped") for play in again["plays"] for task in play["tasks"]
               if task["task"]["name"].endswith(" : Pack the benchmark sources")]
    assert skipped == [True], skipped
