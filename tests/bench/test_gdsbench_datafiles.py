"""gdsbench's data files in a directory that others may write (docs/benchmark.md#data-files): a link
planted as a data file, the target directory or the --json file is never followed; a FIFO,
directory or device in a data file's place is refused before it is opened (never waited on); a
file of another user is refused; each refusal fails the run (exit 1) with the path and the reason
in the JSON record's `error`, and whatever the planted name pointed at is left byte for byte.
CPU transfer types only: no GPU."""
import hashlib
import json
import os

import pytest

from test_gdsbench import check_record, data_dir, gdsbench, run  # noqa: F401

WRITE = ["-x", 1, "-I", 1, "-s", "1M", "-i", "64K"]
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


def snapshot(path):
    """What must not change: the bytes, size and modification time of a file."""
    st = os.stat(path)
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest(), st.st_size, st.st_mtime_ns


@pytest.fixture
def place(data_dir):
    """(target directory, a file outside it that a planted link points at)."""
    target = os.path.join(str(data_dir), "target")
    os.mkdir(target)
    outside = os.path.join(str(data_dir), "outside.bin")
    with open(outside, "wb") as f:
        f.write(b"precious " * 1000)
    return target, outside


def failed(binary, tmp_path, *args, timeout=30):
    """A run that must fail with a JSON record: (record, process)."""
    out = os.path.join(str(tmp_path), "r.json")
    if os.path.exists(out):
        os.unlink(out)
    p = run(binary, *args, "--json", out, timeout=timeout)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    with open(out) as f:
        j = json.load(f)
    check_record(j)
    assert j["exit_code"] == 1 and j["errors"] >= 1 and j["ops"] == 0 and j["bytes"] == 0
    return j, p


# ---------------------------------------------------------------- links planted as data files

@pytest.mark.parametrize("extra", [
    ["-I", 1, "-s", "1M"], ["-I", 3, "-s", "1M", "-T", "0.2"], ["-I", 1], ["-I", 1, "-s", "1M", "-V"],
    ["-I", 1, "-s", "1M", "-O", 1], ["-I", 1, "-s", "1M", "-w", 2, "-P", 2], ["-I", 0], ["-I", 2, "-T", "0.2"],
], ids=["write", "randwrite", "rewrite without -s", "verify", "buffered", "procs", "read", "randread"])
def test_a_link_planted_as_a_data_file_is_refused_and_its_target_untouched(gdsbench, tmp_path, place, extra):
    target, outside = place
    link = os.path.join(target, "gdsbench.0")
    os.symlink(outside, link)
    before = snapshot(outside)
    j, p = failed(gdsbench, tmp_path, "-D", target, "-x", 1, "-i", "64K", *extra)
    assert j["error"] == "refusing %s: a symbolic link, not followed" % link
    assert link in p.stderr
    assert snapshot(outside) == before
    assert os.path.islink(link) and sorted(os.listdir(target)) == ["gdsbench.0"]  # nothing else made


def test_a_dangling_link_creates_nothing_where_it_points(gdsbench, tmp_path, place):
    target, _ = place
    nowhere = os.path.join(os.path.dirname(target), "created-through-the-link")
    os.symlink(nowhere, os.path.join(target, "gdsbench.1"))
    j, _ = failed(gdsbench, tmp_path, "-D", target, *WRITE, "-w", 2)
    assert j["error"] == "refusing %s/gdsbench.1: a symbolic link, not followed" % target
    assert not os.path.lexists(nowhere) and sorted(os.listdir(target)) == ["gdsbench.1"]


@pytest.mark.parametrize("io", [["-I", 1, "-s", "1M"], ["-I", 0]], ids=["write", "read"])
def test_a_link_given_as_the_file_is_refused(gdsbench, tmp_path, place, io):
    _, outside = place
    link = os.path.join(str(tmp_path), "f.link")
    os.symlink(outside, link)
    before = snapshot(outside)
    j, _ = failed(gdsbench, tmp_path, "-f", link, "-x", 1, "-i", "64K", *io)
    assert j["error"] == "refusing %s: a symbolic link, not followed" % link and j["target_kind"] == "file"
    assert snapshot(outside) == before


@pytest.mark.parametrize("io", [["-I", 1, "-s", "1M"], ["-I", 0, "-s", "1M"], ["-I", 1, "-s", "1M", "-O", 1]],
                         ids=["write", "read", "buffered write"])
def test_a_link_to_a_fifo_is_refused_not_waited_on(gdsbench, tmp_path, place, io):
    target, _ = place
    fifo = os.path.join(str(tmp_path), "fifo")
    os.mkfifo(fifo)
    os.symlink(fifo, os.path.join(target, "gdsbench.0"))
    j, _ = failed(gdsbench, tmp_path, "-D", target, "-x", 1, "-i", "64K", *io, timeout=20)
    assert j["error"] == "refusing %s/gdsbench.0: a symbolic link, not followed" % target


def test_a_link_to_a_device_is_refused(gdsbench, tmp_path, place):
    target, _ = place
    os.symlink("/dev/null", os.path.join(target, "gdsbench.0"))
    j, _ = failed(gdsbench, tmp_path, "-D", target, *WRITE, "-O", 1)
    assert "gdsbench.0: a symbolic link, not followed" in j["error"]


# ---------------------------------------------------------------- what is not a regular file

@pytest.mark.parametrize("kind,make", [("a FIFO", os.mkfifo), ("a directory", os.mkdir)], ids=["fifo", "dir"])
@pytest.mark.parametrize("io", [["-I", 1, "-s", "1M"], ["-I", 0], ["-I", 1, "-s", "1M", "-O", 1],
                                ["-I", 0, "-s", "1M", "-O", 1]],
                         ids=["write", "read", "buffered write", "buffered read"])
def test_a_fifo_or_directory_in_place_of_a_data_file_is_refused(gdsbench, tmp_path, place, kind, make, io):
    target, _ = place
    make(os.path.join(target, "gdsbench.0"))
    j, _ = failed(gdsbench, tmp_path, "-D", target, "-x", 1, "-i", "64K", *io, timeout=20)
    assert j["error"] == "refusing %s/gdsbench.0: not a regular file (%s)" % (target, kind)


def test_a_fifo_given_as_the_file_is_refused_with_a_record(gdsbench, tmp_path):
    fifo = os.path.join(str(tmp_path), "f")
    os.mkfifo(fifo)
    j, _ = failed(gdsbench, tmp_path, "-f", fifo, "-x", 1, "-I", 0, "-s", "1M", "-i", "64K", timeout=20)
    assert j["error"] == "refusing %s: not a regular file (a FIFO)" % fifo


# ---------------------------------------------------------------- files of another user

@ROOT_ONLY
@pytest.mark.parametrize("io", [["-I", 1, "-s", "1M"], ["-I", 1], ["-I", 0]], ids=["write", "rewrite", "read"])
def test_a_data_file_of_another_user_is_refused(gdsbench, tmp_path, place, io):
    target, _ = place
    theirs = os.path.join(target, "gdsbench.0")
    with open(theirs, "wb") as f:
        f.write(b"theirs " * 200000)
    os.chown(theirs, 65534, 65534)
    before = snapshot(theirs)
    j, _ = failed(gdsbench, tmp_path, "-D", target, "-x", 1, "-i", "64K", *io)
    assert j["error"] == "refusing %s: owned by uid 65534, not by the running user (uid 0)" % theirs
    assert snapshot(theirs) == before


@ROOT_ONLY
def test_a_file_of_another_user_given_as_the_file_is_refused(gdsbench, tmp_path, place):
    _, outside = place
    os.chown(outside, 65534, 65534)
    before = snapshot(outside)
    j, _ = failed(gdsbench, tmp_path, "-f", outside, *WRITE)
    assert j["error"] == "refusing %s: owned by uid 65534, not by the running user (uid 0)" % outside
    assert snapshot(outside) == before


@ROOT_ONLY
def test_a_target_directory_of_another_user_is_used(gdsbench, tmp_path, place):
    """Only the files are the user's own: a mount point or shared scratch directory belongs to
    someone else, and every file in it is opened through the directory's descriptor."""
    target, _ = place
    os.chown(target, 65534, 65534)
    p = run(gdsbench, "-D", target, *WRITE, "-w", 2)
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(target)) == ["gdsbench.0", "gdsbench.1"]


# ---------------------------------------------------------------- the target directory

@pytest.mark.parametrize("suffix", ["", "/", "/."], ids=["link", "link/", "link/."])
@pytest.mark.parametrize("io", [["-I", 1, "-s", "1M"], ["-I", 0]], ids=["write", "read"])
def test_a_link_in_place_of_the_target_directory_is_refused(gdsbench, tmp_path, place, suffix, io):
    target, _ = place
    if io[1] == 0:  # something to read where the link points
        assert run(gdsbench, "-D", target, *WRITE).returncode == 0
    link = os.path.join(str(tmp_path), "dir.link")
    os.symlink(target, link)
    before = {n: snapshot(os.path.join(target, n)) for n in os.listdir(target)}
    j, _ = failed(gdsbench, tmp_path, "-D", link + suffix, "-x", 1, "-i", "64K", *io)
    assert j["error"] == "refusing %s: a symbolic link, not followed (give the directory it points to)" % (
        link + suffix)
    assert {n: snapshot(os.path.join(target, n)) for n in os.listdir(target)} == before


def test_links_above_the_target_are_followed(gdsbench, tmp_path, place):
    """/data -> /mnt/data: a link in a directory above the target is the user's choice."""
    target, _ = place
    os.mkdir(os.path.join(target, "sub"))
    link = os.path.join(str(tmp_path), "above")
    os.symlink(target, link)
    assert run(gdsbench, "-D", os.path.join(link, "sub"), *WRITE).returncode == 0
    assert run(gdsbench, "-f", os.path.join(link, "f"), *WRITE).returncode == 0
    assert os.listdir(os.path.join(target, "sub")) == ["gdsbench.0"] and os.path.isfile(os.path.join(target, "f"))


def test_a_job_file_directory_that_is_a_link_is_refused_with_the_jobs_name(gdsbench, tmp_path, place):
    target, _ = place
    link = os.path.join(str(tmp_path), "dir.link")
    os.symlink(target, link)
    own = os.path.join(str(tmp_path), "own")
    os.mkdir(own)
    cfg = tmp_path / "j.gdsio"
    cfg.write_text("[global]\nxfer_type=1\nrw=write\nsize=1M\nbs=64k\n[job1]\ndirectory=%s\n"
                   "[job2]\nname=planted\ndirectory=%s\n" % (own, link))
    j, _ = failed(gdsbench, tmp_path, cfg)
    assert j["error"] == "planted: refusing %s: a symbolic link, not followed (give the directory it points to)" % link
    assert os.listdir(target) == [] and os.listdir(own) == []  # nothing ran, nothing was left


def test_dry_run_fails_on_a_refused_target(gdsbench, tmp_path, place):
    target, outside = place
    os.symlink(outside, os.path.join(target, "gdsbench.0"))
    p = run(gdsbench, "--dry-run", "-D", target, *WRITE)
    assert p.returncode == 1 and not p.stdout.strip()
    assert "refusing %s/gdsbench.0: a symbolic link, not followed" % target in p.stderr


# ---------------------------------------------------------------- the --json file

def test_a_link_given_as_the_json_file_is_refused_and_its_target_untouched(gdsbench, tmp_path, place):
    target, outside = place
    link = os.path.join(str(tmp_path), "r.json")
    os.symlink(outside, link)
    before = snapshot(outside)
    p = run(gdsbench, "-D", target, *WRITE, "--json", link)
    assert p.returncode == 2 and "--json refusing %s: a symbolic link, not followed" % link in p.stderr
    assert snapshot(outside) == before and os.listdir(target) == []


@ROOT_ONLY
def test_a_json_file_of_another_user_is_refused(gdsbench, tmp_path, place):
    target, outside = place
    os.chown(outside, 65534, 65534)
    before = snapshot(outside)
    p = run(gdsbench, "-D", target, *WRITE, "--json", outside)
    assert p.returncode == 2 and "owned by uid 65534, not by the running user" in p.stderr
    assert snapshot(outside) == before


def test_an_existing_json_file_of_ours_is_rewritten(gdsbench, tmp_path, place):
    target, _ = place
    out = os.path.join(str(tmp_path), "r.json")
    with open(out, "w") as f:
        f.write("x" * 100000)  # longer than the record: emptied first
    assert run(gdsbench, "-D", target, *WRITE, "--json", out).returncode == 0
    with open(out) as f:
        assert json.load(f)["exit_code"] == 0
