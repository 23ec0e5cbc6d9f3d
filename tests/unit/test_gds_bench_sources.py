"""gds_bench's source archive on the controller, which every run of the repository shares at once
(node-local runs under Slurm pack it on each node, the repository on a shared file system;
docs/benchmark.md#the-source-archive): runs packing at the same moment each put a whole archive in
place by a rename, so a reader never finds a half-written one, every node unpacks the sources and
no packing file is left behind; a run that finds the archive packs nothing and changes nothing."""
import base64
import glob
import json
import os
import random
import subprocess
import sys
import tarfile
import threading
import zlib

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


class Reader(threading.Thread):
    """Reads every archive of the build directory whole, over and over, while the runs pack."""

    def __init__(self, build, names):
        super().__init__(daemon=True)
        self.build, self.names, self.stop = build, names, threading.Event()
        self.whole, self.broken = 0, []

    def run(self):
        while not self.stop.is_set():
            for path in glob.glob(os.path.join(self.build, "gdsbench-src-*.tar.gz")):
                try:
                    with tarfile.open(path, "r:gz") as archive:
                        members = {m.name: archive.extractfile(m).read() for m in archive.getmembers()}
                except FileNotFoundError:
                    continue
                except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
                    self.broken.append("%s: %s" % (path, e))
                    continue
                if sorted(os.path.basename(name) for name in members) == self.names:
                    self.whole += 1
                else:
                    self.broken.append("%s: members %s" % (path, sorted(members)))


def test_runs_packing_at_once_each_find_a_whole_archive(tmp_path):
    files = sources(tmp_path / "src")
    repo = repository(tmp_path)
    build = repo / "build"
    reader = Reader(str(build), sorted(files))
    reader.start()
    procs = []
    try:
        procs = [start(tmp_path, repo, "node-%d" % n, tmp_path / "src") for n in range(RUNS)]
        runs = [finish(proc) for proc in procs]
    finally:
        reader.stop.set()
        reader.join(timeout=60)
        for proc in procs:  # a run left behind by a failure above
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=60)
    assert reader.broken == [], reader.broken[:5]
    assert reader.whole > 0
    # one archive, whole, and nothing of any run's packing left beside it
    archives = sorted(os.listdir(str(build)))
    assert len(archives) == 1 and archives[0].startswith("gdsbench-src-") and archives[0].endswith(".tar.gz"), archives
    packed = [task["hosts"] for data in runs for play in data["plays"] for task in play["tasks"]
              if task["task"]["name"].endswith(" : Pack the benchmark sources")]
    assert packed, "no run packed the sources"
    for n in range(RUNS):
        unpacked = glob.glob(str(tmp_path / ("node-%d" % n) / "*"))
        assert len(unpacked) == 1, unpacked
        for name, text in files.items():
            with open(os.path.join(unpacked[0], name)) as f:
                assert f.read() == text, (n, name)

    # a run that finds the archive and the node's sources packs nothing and changes nothing
    before = os.stat(str(build / archives[0]))
    again = finish(start(tmp_path, repo, "node-0", tmp_path / "src"))
    after = os.stat(str(build / archives[0]))
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert again["stats"]["node-0"]["changed"] == 0, again["stats"]
    assert sorted(os.listdir(str(build))) == archives


def test_a_new_node_unpacks_the_archive_another_run_packed(tmp_path):
    files = sources(tmp_path / "src")
    repo = repository(tmp_path)
    finish(start(tmp_path, repo, "node-0", tmp_path / "src"))
    data = finish(start(tmp_path, repo, "node-1", tmp_path / "src"))
    ran = {task["task"]["name"].split(" : ")[-1]: res for play in data["plays"] for task in play["tasks"]
           for res in task["hosts"].values()}
    assert ran["Pack the benchmark sources"].get("skipped"), ran["Pack the benchmark sources"]
    assert ran["Unpack the benchmark sources on the node"]["changed"]
    (unpacked,) = glob.glob(str(tmp_path / "node-1" / "*"))
    assert sorted(os.listdir(unpacked)) == sorted(files)
