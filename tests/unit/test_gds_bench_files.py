"""gds_bench's data files in a directory that others may write (docs/benchmark.md#data-files): a
target directory or data file that is a link, not a regular file or another user's makes the job
an ERROR naming it, before gdsbench runs; the cleanup after the run removes only the files and
directories this run made, through the descriptors it held, never through a link swapped in."""
import hashlib
import json
import os
import stat

import pytest

from conftest import GDSBENCH_SRC, run_module
from test_gds_bench import RECORD, fake_bench

BENCH = os.path.join(GDSBENCH_SRC, "gdsbench")
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
# a fake gdsbench that records that it ran, makes its files and then runs AFTER (a shell line)
MAKER = ('d=""; f=""; while [ $# -gt 0 ]; do case $1 in -D) d=$2;; -f) f=$2;; esac; shift; done; '
         'touch RAN; [ -n "$d" ] && touch "$d/gdsbench.0" "$d/gdsbench.1"; [ -n "$f" ] && touch "$f"; '
         'AFTER; echo \'%s\'' % json.dumps(RECORD))


def snapshot(path):
    st = os.stat(path)
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest(), st.st_size, st.st_mtime_ns


def maker(tmp_path, after=":"):
    return fake_bench(tmp_path, MAKER.replace("RAN", str(tmp_path / "ran")).replace("AFTER", after))


def job(target, **extra):
    base = {"name": "w", "target": str(target), "io_type": "write", "xfer_type": 1, "threads": 2,
            "size": "1M", "io_size": "64K", "duration": 0}
    base.update(extra)
    return base


@pytest.fixture
def outside(tmp_path):
    path = tmp_path / "outside.bin"
    path.write_bytes(b"precious " * 1000)
    return path


def refused(result, needle):
    """The job is an ERROR naming the refusal, nothing else of it PASSes."""
    run = result["checks"][0]
    assert run["verdict"] == "ERROR" and needle in run["detail"], run
    assert "PASS" not in [c["verdict"] for c in result["checks"] if c["name"].startswith("bench: w: ")]


# ---------------------------------------------------------------- refused before gdsbench runs

def test_a_link_planted_as_a_data_file_is_refused_before_the_run(tmp_path, outside):
    data = tmp_path / "data"
    data.mkdir()
    os.symlink(str(outside), str(data / "gdsbench.1"))
    before = snapshot(outside)
    rc, result = run_module("gds_bench", {"binary": maker(tmp_path), "udev_root": "", "jobs": [job(data)]})
    assert rc != 0
    refused(result, "refusing %s: a symbolic link, not followed" % (data / "gdsbench.1"))
    assert not (tmp_path / "ran").exists() and snapshot(outside) == before
    assert os.path.islink(str(data / "gdsbench.1")) and result["removed"] == []


@pytest.mark.skipif(not os.access(BENCH, os.X_OK), reason="gdsbench not built (make -C bench)")
@pytest.mark.parametrize("io_type", ["write", "read"])
def test_a_planted_link_with_the_real_benchmark(tmp_path, outside, io_type):
    data = tmp_path / "data"
    data.mkdir()
    os.symlink(str(outside), str(data / "gdsbench.0"))
    before = snapshot(outside)
    rc, result = run_module("gds_bench", {"binary": BENCH, "udev_root": "", "jobs": [job(data, io_type=io_type)]})
    assert rc != 0
    refused(result, "a symbolic link, not followed")
    assert snapshot(outside) == before and sorted(os.listdir(str(data))) == ["gdsbench.0"]


def test_a_link_to_a_fifo_is_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    os.mkfifo(str(tmp_path / "fifo"))
    os.symlink(str(tmp_path / "fifo"), str(data / "gdsbench.0"))
    rc, result = run_module("gds_bench", {"binary": maker(tmp_path), "udev_root": "", "jobs": [job(data)]})
    refused(result, "refusing %s: a symbolic link, not followed" % (data / "gdsbench.0"))
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("kind,make", [("a FIFO", os.mkfifo), ("a directory", os.mkdir)], ids=["fifo", "dir"])
def test_a_fifo_or_directory_in_place_of_a_data_file_is_refused(tmp_path, kind, make):
    data = tmp_path / "data"
    data.mkdir()
    make(str(data / "gdsbench.1"))
    rc, result = run_module("gds_bench", {"binary": maker(tmp_path), "udev_root": "", "jobs": [job(data)]})
    refused(result, "refusing %s: not a regular file (%s)" % (data / "gdsbench.1", kind))
    assert not (tmp_path / "ran").exists()


@ROOT_ONLY
@pytest.mark.parametrize("as_file", [False, True], ids=["target", "file"])
def test_a_data_file_of_another_user_is_refused(tmp_path, as_file):
    data = tmp_path / "data"
    data.mkdir()
    theirs = data / "gdsbench.0"
    theirs.write_bytes(b"theirs")
    os.chown(str(theirs), 65534, 65534)
    before = snapshot(theirs)
    spec = dict(job(data), target=None, file=str(theirs)) if as_file else job(data)
    rc, result = run_module("gds_bench", {"binary": maker(tmp_path), "udev_root": "", "jobs": [spec]})
    refused(result, "refusing %s: owned by uid 65534, not by the running user (uid 0)" % theirs)
    assert not (tmp_path / "ran").exists() and snapshot(theirs) == before


def test_a_link_in_place_of_the_target_directory_is_refused(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine")
    os.symlink(str(victim), str(tmp_path / "data"))
    rc, result = run_module("gds_bench", {"binary": maker(tmp_path), "udev_root": "", "jobs": [job(tmp_path / "data")]})
    refused(result, "refusing %s: a symbolic link, not followed (give the directory it points to)"
            % (tmp_path / "data"))
    assert not (tmp_path / "ran").exists() and os.listdir(str(victim)) == ["keep"]


def test_a_link_given_as_the_file_is_refused(tmp_path, outside):
    os.symlink(str(outside), str(tmp_path / "f.dat"))
    before = snapshot(outside)
    spec = dict(job(tmp_path), target=None, file=str(tmp_path / "f.dat"))
    rc, result = run_module("gds_bench", {"binary": maker(tmp_path), "udev_root": "", "jobs": [spec]})
    refused(result, "refusing %s: a symbolic link, not followed" % (tmp_path / "f.dat"))
    assert snapshot(outside) == before and os.path.islink(str(tmp_path / "f.dat"))


def test_links_above_the_target_are_followed(tmp_path):
    """/data -> /mnt/data: a link in a directory above the target is the user's choice; the
    directories made below it are made and removed through it."""
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(str(real), str(tmp_path / "above"))
    rc, result = run_module("gds_bench", {"binary": maker(tmp_path), "udev_root": "",
                                          "jobs": [job(tmp_path / "above" / "a" / "b")]})
    assert rc == 0 and result["checks"][0]["verdict"] == "PASS", result
    assert os.listdir(str(real)) == [] and sorted(result["removed"]) == sorted(
        [str(tmp_path / "above" / "a"), str(tmp_path / "above" / "a" / "b"),
         str(tmp_path / "above" / "a" / "b" / "gdsbench.0"), str(tmp_path / "above" / "a" / "b" / "gdsbench.1")])


# ---------------------------------------------------------------- cleanup after a link was swapped in

def test_a_data_file_swapped_for_a_link_after_the_run_is_left_alone(tmp_path, outside):
    data = tmp_path / "data"
    before = snapshot(outside)
    binary = maker(tmp_path, after='rm "$d/gdsbench.1"; ln -s %s "$d/gdsbench.1"' % outside)
    rc, result = run_module("gds_bench", {"binary": binary, "udev_root": "", "jobs": [job(data)]})
    assert rc == 0, result
    assert result["removed"] == [str(data / "gdsbench.0")]  # nor the directory: the link is still in it
    assert os.path.islink(str(data / "gdsbench.1")) and snapshot(outside) == before


def test_a_new_file_swapped_for_a_link_after_the_run_is_left_alone(tmp_path, outside):
    before = snapshot(outside)
    binary = maker(tmp_path, after='rm "$f"; ln -s %s "$f"' % outside)
    spec = dict(job(tmp_path), target=None, file=str(tmp_path / "new.dat"))
    rc, result = run_module("gds_bench", {"binary": binary, "udev_root": "", "jobs": [spec]})
    assert rc == 0 and result["removed"] == [], result
    assert os.path.islink(str(tmp_path / "new.dat")) and snapshot(outside) == before


def test_a_target_swapped_for_a_link_after_the_run_is_cleaned_where_the_run_wrote(tmp_path):
    """The directory was renamed and a link to another directory put in its place: the cleanup
    removes the files in the directory the run wrote (held open), nothing where the link points."""
    data, victim = tmp_path / "data", tmp_path / "victim"
    data.mkdir()
    victim.mkdir()
    (victim / "gdsbench.0").write_text("not this run's")
    (victim / "gdsbench.7").write_text("not this run's")
    binary = maker(tmp_path, after='mv "$d" %s; ln -s %s "$d"' % (tmp_path / "moved", victim))
    rc, result = run_module("gds_bench", {"binary": binary, "udev_root": "", "jobs": [job(data)]})
    assert rc == 0, result
    assert sorted(os.listdir(str(victim))) == ["gdsbench.0", "gdsbench.7"]
    assert os.listdir(str(tmp_path / "moved")) == []  # the run's own files went


def test_a_made_directory_swapped_for_a_link_after_the_run_is_left_alone(tmp_path):
    """a/b made by the run; then a is renamed and a link to a directory holding an empty b put in its
    place: rmdir goes through the descriptors of what the run made, never through the link."""
    victim = tmp_path / "victim"
    (victim / "b").mkdir(parents=True)
    binary = maker(tmp_path, after='mv %s %s; ln -s %s %s' % (tmp_path / "a", tmp_path / "a.moved", victim,
                                                            tmp_path / "a"))
    rc, result = run_module("gds_bench", {"binary": binary, "udev_root": "", "jobs": [job(tmp_path / "a" / "b")]})
    assert rc == 0, result
    assert os.path.isdir(str(victim / "b")) and os.path.islink(str(tmp_path / "a"))
    assert os.listdir(str(tmp_path / "a.moved")) == []  # b and its files were the run's: removed
    assert str(tmp_path / "a") not in result["removed"]


def test_a_file_put_in_place_of_a_made_one_after_its_job_is_left_alone(tmp_path):
    """Only the regular file the job made is removed: another file under its name, put there by
    the time the run ends (here during a later job), stays."""
    data = tmp_path / "data"
    other = tmp_path / "other"
    binary = maker(tmp_path, after='[ -n "$f" ] && echo other > %s && mv %s %s' % (other, other, data / "gdsbench.1"))
    jobs = [job(data), dict(job(data), name="later", target=None, file=str(tmp_path / "later.dat"))]
    rc, result = run_module("gds_bench", {"binary": binary, "udev_root": "", "jobs": jobs})
    assert rc == 0, result
    assert sorted(result["removed"]) == [str(data / "gdsbench.0"), str(tmp_path / "later.dat")]
    assert (data / "gdsbench.1").read_text() == "other\n"
