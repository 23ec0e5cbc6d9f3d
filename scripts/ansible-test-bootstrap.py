#!/usr/bin/env python3
"""Make `ansible-test sanity --requirements` work where only the package index is reachable.

ansible-test builds each sanity test's virtual environment with a pip bootstrap script that it
downloads from ci-files.testing.ansible.com into ~/.ansible/test/cache/get_pip_<version>.py
(ansible_test/_util/target/setup/requirements.py). Where that host cannot be reached, ansible-test
asks for the file to be saved there by hand (ansible/ansible#77304). This writes a stand-in that
does the same job from what is reachable, only when the cache has no script yet and the host does
not answer: pip from the interpreter's own ensurepip, then the requested pip from the index.

    python3 scripts/ansible-test-bootstrap.py        # prints what it did
"""
import os
import sys
import urllib.request


class _AnyPython:  # get_venv_packages reads only .version (for per-version overrides)
    version = "%d.%d" % sys.version_info[:2]


STANDIN = '''"""Stand-in for ansible-test's get-pip.py (written by gds-commission's
scripts/ansible-test-bootstrap.py): ensurepip, then the requested packages from the index."""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
subprocess.check_call([sys.executable, "-m", "pip", "install", "-q"] + args)
'''


def main():
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, before anything is read or written
        print(__doc__)
        return 0
    from ansible_test._internal.python_requirements import get_venv_packages  # the pip it wants
    version = get_venv_packages(_AnyPython())["pip"]
    cache = os.path.expanduser("~/.ansible/test/cache/get_pip_%s.py" % version.replace(".", "_"))
    if os.path.exists(cache):
        print("ansible-test pip bootstrap: %s is there" % cache)
        return 0
    url = "https://ci-files.testing.ansible.com/ansible-test/get-pip-%s.py" % version
    try:
        urllib.request.urlopen(url, timeout=10).close()
        print("ansible-test pip bootstrap: %s answers; ansible-test downloads it itself" % url)
        return 0
    except OSError as exc:
        reason = getattr(exc, "reason", exc)
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    with open(cache + ".tmp", "w") as handle:
        handle.write(STANDIN)
    os.replace(cache + ".tmp", cache)
    print("ansible-test pip bootstrap: %s unreachable (%s); wrote the stand-in %s" % (url, reason, cache))
    return 0


if __name__ == "__main__":
    sys.exit(main())
