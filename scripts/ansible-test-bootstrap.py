#!/usr/bin/env python3
"""Run an ansible-test command where only the package index is reachable.

ansible-test builds each sanity test's virtual environment with a pip bootstrap script that it
downloads from ci-files.testing.ansible.com. Where that host cannot be reached it stops, saying
"The bootstrap script can be manually downloaded and saved to: PATH" (ansible/ansible#77304).
This runs the command; when it stops so, it writes a stand-in at that PATH that does the same job
from what is reachable (pip from the interpreter's own ensurepip, then the requested packages from
the index) and runs the command once more. It asks nothing of ansible-test but its output, and
writes only that one file, only under ~/.ansible/test/cache/, only when it is not there.

    scripts/ansible-test-bootstrap.py -- ansible-test sanity --venv --requirements ...
"""
import collections
import os
import re
import subprocess
import sys

STANDIN = '''"""Stand-in for ansible-test's get-pip.py (written by gds-commission's
scripts/ansible-test-bootstrap.py): ensurepip, then the requested packages from the index."""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
subprocess.check_call([sys.executable, "-m", "pip", "install", "-q"] + args)
'''
ASKED = re.compile(r"saved to: (\S+)")
CACHE = os.path.expanduser("~/.ansible/test/cache")


def run(cmd):
    """(exit status, the last lines of its output), its output passed on as it comes."""
    tail = collections.deque(maxlen=200)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    for line in proc.stdout:
        sys.stdout.write(line)
        tail.append(line)
    return proc.wait(), "".join(tail)


def standin_path(output):
    """The path ansible-test asked for its pip bootstrap script, when it is one of its cache."""
    match = ASKED.search(output)
    if not match:
        return None
    path = os.path.abspath(match.group(1))
    name = os.path.basename(path)
    if os.path.dirname(path) != CACHE or not re.match(r"^get_pip_[0-9_]+\.py$", name) or os.path.lexists(path):
        return None
    return path


def main(argv):
    if list(argv[:1]) in (["-h"], ["--help"]):  # the usage, before anything is run or written
        print(__doc__)
        return 0
    if len(argv) < 2 or argv[0] != "--":
        print("usage: ansible-test-bootstrap.py -- COMMAND...", file=sys.stderr)
        return 2
    rc, output = run(argv[1:])
    path = None if rc == 0 else standin_path(output)
    if path is None:
        return rc
    os.makedirs(CACHE, exist_ok=True)  # ansible-test makes it before it downloads; made here too
    with open(path + ".tmp", "w") as handle:
        handle.write(STANDIN)
    os.replace(path + ".tmp", path)
    print("ansible-test-bootstrap: ci-files.testing.ansible.com unreachable; wrote the stand-in %s, running again"
          % path, flush=True)
    return run(argv[1:])[0]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
