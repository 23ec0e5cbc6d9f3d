"""The lab and setup scripts (scripts/, bench/): each answers --help with its usage and does
nothing else; the lab's scratch is made with mktemp inside the data directory and only what a
script recorded making is removed (never a user's $DATA/parity, $DATA/sbs, /tmp/fio-build)."""
import os
import re
import stat
import subprocess
import sys

import pytest
from conftest import ROOT

# sourced by the others, not run
LIBRARIES = {"bench/gpu_lib.sh", "bench/collection_path.py"}
# what a script would run to change the machine: stubs on PATH record any call
CHANGERS = ("apt-get", "sudo", "dpkg", "pip", "make", "mount", "umount", "losetup", "mkfs.ext4", "nvidia-smi",
            "qemu-system-x86_64", "debootstrap", "ansible-playbook", "srun", "chromium", "gcc", "curl")


def scripts():
    found = []
    for folder in ("scripts", "scripts/vm", "bench"):
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            rel = "%s/%s" % (folder, name)
            path = os.path.join(ROOT, rel)
            if rel in LIBRARIES or not os.path.isfile(path):
                continue
            with open(path, "rb") as handle:
                head = handle.read(64)
            if head.startswith(b"#!") or name.endswith((".sh", ".py")):
                found.append(rel)
    return found


def test_the_list_is_not_empty():
    assert {"bench/parity.sh", "scripts/ensure-debs.sh", "scripts/gpu-commission.sh", "scripts/gdsbench-vocab.py",
            "scripts/ansible-test-bootstrap.py", "scripts/screenshot-report.sh"} <= set(scripts())


@pytest.mark.parametrize("script", scripts())
def test_help_prints_the_usage_and_does_nothing_else(tmp_path, script):
    stubs, calls, cwd = tmp_path / "bin", tmp_path / "calls.log", tmp_path / "cwd"
    stubs.mkdir()
    cwd.mkdir()
    for name in CHANGERS:
        stub = stubs / name
        stub.write_text("#!/bin/sh\necho \"%s $*\" >> %s\nexit 0\n" % (name, calls))
        stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    path = os.path.join(ROOT, script)
    # as a user runs it: by its shebang when executable, else by its kind (the venv's Python)
    runner = [] if os.access(path, os.X_OK) else [sys.executable] if script.endswith(".py") else ["bash"]
    before = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=ROOT, capture_output=True, text=True).stdout
    env = dict(os.environ, PATH="%s%s%s" % (stubs, os.pathsep, os.environ["PATH"]), HOME=str(tmp_path / "home"))
    proc = subprocess.run(runner + [path, "--help"], cwd=str(cwd), env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (proc.stdout[-1000:], proc.stderr[-1000:])
    assert len(proc.stdout.strip().splitlines()) >= 1 and "Traceback" not in proc.stderr
    assert not calls.exists(), calls.read_text()
    assert os.listdir(str(cwd)) == [] and not (tmp_path / "home").exists()
    after = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=ROOT, capture_output=True, text=True).stdout
    assert after == before


REMOVE = re.compile(r"\brm -r[f]?\s+(.*)")
OPERAND = re.compile(r'"\$\{?(\w+)\}?(/[^"]*)?"')


@pytest.mark.parametrize("script", [s for s in scripts() if s.startswith("bench/")] + ["bench/gpu_lib.sh"])
def test_the_lab_removes_only_what_it_made_with_mktemp(script):
    """Every directory a lab script removes is one it made with mktemp (in it, or gdsv_data_dir's
    $DATA, which is the run's own mktemp directory), named by the variable that recorded it."""
    with open(os.path.join(ROOT, script)) as handle:
        text = handle.read()
    with open(os.path.join(ROOT, "bench", "gpu_lib.sh")) as handle:
        library = handle.read()
    for line in text.splitlines():
        match = REMOVE.search(line.split("#")[0])
        if not match:
            continue
        operands = [o for o in match.group(1).replace("--", "").split() if o]
        for operand in operands:
            named = OPERAND.fullmatch(operand.rstrip(";"))
            assert named, "%s: rm -rf %s: not a variable this script recorded" % (script, operand)
            var = named.group(1)
            if var == "DATA" and "\tDATA=$DATA_MADE\n" in library:
                continue  # inside the run's own data directory
            made = re.compile(r"\b%s=\$\(mktemp -d\b" % var)
            assert made.search(text) or made.search(library), "%s: %s was not made with mktemp" % (script, var)


def test_ansible_test_bootstrap_writes_the_stand_in_ansible_test_asks_for_and_runs_again(tmp_path):
    """The fake ansible-test stops as the real one does where ci-files.testing.ansible.com is
    unreachable, naming the path to save its pip bootstrap script to; the wrapper writes the
    stand-in there (only there) and the second run passes. A path outside the cache is refused."""
    home = tmp_path / "home"
    cache = home / ".ansible" / "test" / "cache"
    fake = tmp_path / "ansible-test"
    fake.write_text("#!/bin/sh\n[ -e %s/get_pip_25_2.py ] && { echo ok; exit 0; }\n"
                    "echo 'Download failed: <urlopen error [Errno -3]>'\n"
                    "echo 'The bootstrap script can be manually downloaded and saved to: %s/get_pip_25_2.py'\n"
                    "exit 1\n" % (cache, cache))
    fake.chmod(0o755)
    env = dict(os.environ, HOME=str(home))
    script = os.path.join(ROOT, "scripts", "ansible-test-bootstrap.py")
    proc = subprocess.run([sys.executable, script, "--", str(fake)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.rstrip().endswith("ok"), proc.stdout + proc.stderr
    assert "ensurepip" in (cache / "get_pip_25_2.py").read_text()
    elsewhere = tmp_path / "other.sh"
    elsewhere.write_text("#!/bin/sh\necho 'saved to: /etc/get_pip_25_2.py'\nexit 1\n")
    elsewhere.chmod(0o755)
    proc = subprocess.run([sys.executable, script, "--", str(elsewhere)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and not os.path.exists("/etc/get_pip_25_2.py")
