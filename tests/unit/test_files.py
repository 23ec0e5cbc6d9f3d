"""core/files.py: what every writer of the collection relies on."""
import os
import subprocess
import sys

from conftest import ROOT


def test_write_atomic_writes_utf8_whatever_the_locale(tmp_path):
    """A report or cufile.json holding non-ASCII text (a mount point, a vendor comment) and bytes
    that were not UTF-8 is written as UTF-8 and those bytes, also under a POSIX (ASCII) locale."""
    target = tmp_path / "out.txt"
    code = ("import sys; sys.path.insert(0, %r); "
            "from ansible_collections.gds.commission.plugins.module_utils.core.files import decode, write_atomic; "
            "write_atomic(%r, 'caf\\u00e9 ' + decode(b'\\xff'))" % (os.path.join(ROOT, "collections"), str(target)))
    env = dict(os.environ, LC_ALL="POSIX", LANG="POSIX", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert target.read_bytes() == b"caf\xc3\xa9 \xff"
    assert not [n for n in os.listdir(tmp_path) if n != "out.txt"]  # no temporary file left
