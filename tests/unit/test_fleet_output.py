"""What the fleet layer writes and removes (plugins/module_utils/fleet/output.py): nothing it did
not make is replaced, removed or written through: latest, run directories and their files,
history/, .state/, node_exporter's textfile and the verdict files gds_slurm reads."""
import importlib.util
import json
import os

import pytest

from ansible_collections.gds.commission.plugins.module_utils.fleet import slurm as gds_slurm
from ansible_collections.gds.commission.plugins.module_utils.fleet.report import write_run
from conftest import COLLECTION, run_module

spec = importlib.util.spec_from_file_location(
    "gds_commission_callback_output", os.path.join(COLLECTION, "plugins", "callback", "gds_commission.py"))
callback = importlib.util.module_from_spec(spec)
spec.loader.exec_module(callback)

PASSING = {"checks": [{"name": "bench: j: throughput_gib_s", "verdict": "PASS", "expected": ">= 1", "actual": 2.0,
                       "low": 1.0, "unit": "GiB/s"}]}


def report(reports, run_id="r1"):
    return run_module("gds_report", {"reports_dir": str(reports), "run_id": run_id, "hosts": {"a": PASSING},
                                      "all_hosts": ["a"], "active_hosts": ["a"]})


def tree(path):
    """{relative path: file content, or '-> target' for a link, '/' for a directory}."""
    out = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, path)
            if os.path.islink(full):
                out[rel] = "-> " + os.readlink(full)
                dirs[:] = [d for d in dirs if d != name]
            elif os.path.isdir(full):
                out[rel] = "/"
            else:
                with open(full, "rb") as handle:
                    out[rel] = handle.read()
    return out


def someone_elses(tmp_path):
    """A directory of someone else's with a file in it: what no run may touch."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "keep.txt").write_text("mine")
    return theirs


def test_a_real_latest_directory_is_left_alone_and_named(tmp_path):
    """gds_report removed a latest/ it did not create, files and all (shutil.rmtree): it is now
    refused, naming it; the run's own directory and history are still written."""
    reports = tmp_path / "reports"
    (reports / "latest").mkdir(parents=True)
    (reports / "latest" / "notes.txt").write_text("a user's file")
    rc, result = report(reports)
    assert rc != 0 and "Traceback" not in result["msg"]
    assert "%s is a directory" % (reports / "latest") in result["msg"] and str(reports / "r1") in result["msg"]
    assert (reports / "latest" / "notes.txt").read_text() == "a user's file"
    assert (reports / "r1" / "summary.json").is_file() and (reports / "history" / "a.json").is_file()
    assert result["run_dir"] == str(reports / "r1")


@pytest.mark.parametrize("make", ["file", "link outside", "link up", "link to a file", "absolute link to a run"])
def test_a_latest_that_is_not_our_link_is_refused(tmp_path, make):
    reports = tmp_path / "reports"
    reports.mkdir()
    theirs = someone_elses(tmp_path)
    (reports / "r0").mkdir()
    (reports / "notes.txt").write_text("x")
    latest = reports / "latest"
    {"file": lambda: latest.write_text("a user's file"),
     "link outside": lambda: latest.symlink_to(theirs),
     "link up": lambda: latest.symlink_to("../theirs"),
     "link to a file": lambda: latest.symlink_to("notes.txt"),
     "absolute link to a run": lambda: latest.symlink_to(reports / "r0")}[make]()
    before = tree(tmp_path)
    with pytest.raises(OSError, match="%s is a (file|link)" % latest):
        write_run(str(reports), "r1", {"summary.json": "{}"})
    after = tree(tmp_path)
    assert after.pop(os.path.join("reports", "r1")) == "/" and after.pop(os.path.join("reports", "r1", "summary.json")) == b"{}"
    assert after == before  # latest and everything else as it was, no temporary name left


@pytest.mark.parametrize("target", ["r0", "gone"])
def test_our_own_latest_link_is_switched(tmp_path, target):
    """A link to a run directory beside it (or to one removed since) is ours: it moves on."""
    (tmp_path / "r0").mkdir()
    (tmp_path / "latest").symlink_to(target)
    write_run(str(tmp_path), "r1", {"summary.json": "{}"})
    assert os.readlink(tmp_path / "latest") == "r1"
    assert sorted(os.listdir(tmp_path)) == ["latest", "r0", "r1"]


def test_a_run_directory_or_run_file_that_is_a_link_is_not_written_through(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    theirs = someone_elses(tmp_path)
    (reports / "r1").symlink_to(theirs)
    with pytest.raises(OSError, match="%s is a link" % (reports / "r1")):
        write_run(str(reports), "r1", {"summary.json": "{}"})
    assert os.listdir(theirs) == ["keep.txt"] and not (reports / "latest").exists()
    (reports / "r2").mkdir()
    (reports / "r2" / "summary.json").symlink_to(theirs / "keep.txt")
    rc, result = report(reports, "r2")
    assert rc != 0 and "%s is a link" % (reports / "r2" / "summary.json") in result["msg"]
    assert (theirs / "keep.txt").read_text() == "mine" and os.path.islink(reports / "r2" / "summary.json")


def test_history_that_is_a_link_is_neither_read_nor_replaced(tmp_path):
    reports = tmp_path / "reports"
    assert report(reports)[0] == 0
    theirs = someone_elses(tmp_path)
    mine = reports / "history" / "a.json"
    (theirs / "a.json").write_text(mine.read_text())  # a valid history, elsewhere
    mine.unlink()
    mine.symlink_to(theirs / "a.json")
    before = tree(theirs)
    rc, result = report(reports, "r2")
    assert rc != 0 and "%s is a link" % mine in result["msg"] and "Traceback" not in result["msg"]
    summ = json.loads((reports / "r2" / "summary.json").read_text())
    checks = {c["name"]: c for c in summ["hosts"]["a"]["checks"]}
    assert checks["history: record"]["verdict"] == "WARN" and str(mine) in checks["history: record"]["detail"]
    assert "history: j: throughput_gib_s" not in checks  # never another file's figures
    assert tree(theirs) == before and os.path.islink(mine)
    assert os.readlink(reports / "latest") == "r2"  # the run's own files and latest are still written


def test_a_history_directory_that_is_a_link_is_refused(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    theirs = someone_elses(tmp_path)
    (reports / "history").symlink_to(theirs)
    rc, result = report(reports)
    assert rc != 0 and "%s is a link" % (reports / "history") in result["msg"]
    assert os.listdir(theirs) == ["keep.txt"] and (reports / "r1" / "summary.json").is_file()


def test_the_textfile_is_not_written_through_a_link(tmp_path):
    theirs = someone_elses(tmp_path)
    textdir = tmp_path / "textfiles"
    textdir.mkdir()
    (textdir / "gds_commission.prom").symlink_to(theirs / "keep.txt")
    rc, result = run_module("gds_metrics", {"dir": str(textdir), "content": "x 1\n"})
    assert rc != 0 and "%s is a link" % (textdir / "gds_commission.prom") in result["msg"]
    assert (theirs / "keep.txt").read_text() == "mine" and os.listdir(textdir) == ["gds_commission.prom"]


def test_slurm_reads_no_verdict_file_through_a_link(tmp_path):
    """A summary.json put in the run's place as a link is not the report gds_report wrote: nothing
    is drained or resumed from it."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "summary.json").write_text(json.dumps({"hosts": {"a": {"verdict": "FAIL", "checks": []}}}))
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").symlink_to(theirs / "summary.json")
    with pytest.raises(gds_slurm.SlurmError, match="cannot read %s: .* is a link" % (run / "summary.json")):
        gds_slurm.load_run(str(run))
    # the run directory itself may be latest, our link
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "summary.json").write_text(json.dumps({"hosts": {"a": {"verdict": "PASS", "checks": []}}}))
    (tmp_path / "latest").symlink_to("r1")
    assert gds_slurm.load_run(str(tmp_path / "latest"))["a"]["status"] == "good"


class Play(object):
    hosts = "all"

    def __init__(self, roles):
        self.roles, self.vars = roles, {}

    def get_roles(self):
        return [type("Role", (), {"get_name": lambda s, n=name: n})() for name in self.roles]

    def get_variable_manager(self):  # no host recorded anything: no variables
        return type("Manager", (), {"get_vars": lambda s, **kw: {}, "extra_vars": {}})()


class Playbook(object):
    def get_plays(self):
        return [Play(["gds_bench"]), Play(["gds_report"])]


def start(cb, playbook):
    """A playbook's start as Ansible sends it: the playbook, then its first play (the callback
    reads the run's settings there)."""
    cb.v2_playbook_on_start(playbook)
    cb.v2_playbook_on_play_start(playbook.get_plays()[0])


class Warnings(object):
    def __init__(self):
        self.warnings, self.lines = [], []

    def warning(self, text):
        self.warnings.append(text)

    def display(self, text, **kwargs):
        self.lines.append(text)


@pytest.fixture
def cb(tmp_path, monkeypatch):
    monkeypatch.setenv("GDS_REPORTS_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("GDS_RUN_ID", "run-1")
    monkeypatch.delenv("GDS_RUN_STATE", raising=False)
    module = callback.CallbackModule()
    module._display = Warnings()
    return module


def test_the_callback_writes_no_state_through_a_link(cb, tmp_path):
    """The state file was written to STATE.PID.tmp with open(): a link planted under that name
    was followed. Neither a link there nor a .state/ that is a link is written through."""
    theirs = someone_elses(tmp_path)
    state = tmp_path / "reports" / ".state"
    state.mkdir(parents=True)
    (state / ("run-1.json.%d.tmp" % os.getpid())).symlink_to(theirs / "keep.txt")
    start(cb, Playbook())
    assert json.loads((state / "run-1.json").read_text())["run_id"] == "run-1"
    assert (theirs / "keep.txt").read_text() == "mine"
    (state / "run-1.json").unlink()
    (state / "run-1.json").symlink_to(theirs / "keep.txt")
    cb._save()
    assert (theirs / "keep.txt").read_text() == "mine" and os.listdir(theirs) == ["keep.txt"]
    assert cb._display.warnings == ["gds_commission: cannot keep the run state: %s is a link, not a file this "
                                    "tool made; left as it is" % (state / "run-1.json")]


def test_the_callbacks_own_report_leaves_a_real_latest_alone(cb, tmp_path):
    reports = tmp_path / "reports"
    (reports / "latest").mkdir(parents=True)
    (reports / "latest" / "notes.txt").write_text("a user's file")
    start(cb, Playbook())
    result = type("Result", (), {"host": type("H", (), {"get_name": lambda s: "a"})(),
                                 "task": type("T", (), {"get_name": lambda s: "Compile", "action": "command"})(),
                                 "result": {"msg": "cc: not found"}})()
    cb.v2_runner_on_failed(result)
    stats = type("Stats", (), {"processed": {"a": 1}, "summarize": lambda s, h: {"failures": 1}})()
    cb.v2_playbook_on_stats(stats)
    assert (reports / "latest" / "notes.txt").read_text() == "a user's file"
    assert json.loads((reports / "run-1" / "summary.json").read_text())["hosts"]["a"]["verdict"] == "ERROR"
    assert len(cb._display.warnings) == 1 and "%s is a directory" % (reports / "latest") in cb._display.warnings[0]


def test_outdir_never_removes_what_it_did_not_make(tmp_path):
    """The rule itself: a fifo in a file's place is refused (never opened to hang the run), a
    directory where a file goes is refused, and a failed write leaves no temporary name."""
    from ansible_collections.gds.commission.plugins.module_utils.fleet.output import OutDir
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    with OutDir(str(tmp_path)) as folder:
        with pytest.raises(OSError, match="fifo is a special file"):
            folder.read("fifo")
        with pytest.raises(OSError, match="fifo is a special file"):
            folder.write("fifo", "x")
        with pytest.raises(OSError, match="dir is a directory"):
            folder.write("dir", "x")
        with pytest.raises(TypeError):
            folder.write("new", b"not text")
        with pytest.raises(OSError, match="dir is a directory, not the link"):
            folder.point("dir", "r1", bool)
    assert sorted(os.listdir(tmp_path)) == ["dir", "fifo"]
