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


# --------------------------------------------------------------------------------------------
# The one bounded reader
# --------------------------------------------------------------------------------------------
import ast  # noqa: E402
import errno  # noqa: E402
import threading  # noqa: E402

import pytest  # noqa: E402

from ansible_collections.gds.commission.plugins.module_utils.core import files  # noqa: E402
from conftest import COLLECTION  # noqa: E402


def bare_opens(source, where):
    """Calls of the builtin open() (or io.open) in ``source``: every read goes through read_bounded."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Name) and func.id == "open") or (
                    isinstance(func, ast.Attribute) and func.attr == "open" and isinstance(func.value, ast.Name)
                    and func.value.id in ("io", "codecs")):
                found.append("%s:%d" % (where, node.lineno))
    return found


def test_no_bare_open_in_module_utils():
    base = os.path.join(COLLECTION, "plugins", "module_utils")
    found = []
    for folder, dummy, names in os.walk(base):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path) as handle:
                    found += bare_opens(handle.read(), os.path.relpath(path, base))
    assert found == [], "read through core/files.read_bounded: %s" % found


def test_the_scan_finds_a_bare_open():
    assert sorted(bare_opens("with open(p) as h:\n    h.read()\nio.open(p)\nos.open(p, 0)\n", "x.py")) == ["x.py:1", "x.py:3"]


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    fifo = str(tmp_path / "cufile.json")
    os.mkfifo(fifo)
    done = []
    reader = threading.Thread(target=lambda: done.append(pytest.raises(files.UnreadableFile, files.read_bounded, fifo)))
    reader.daemon = True
    reader.start()
    reader.join(10)
    assert done, "read_bounded blocked on a FIFO"
    assert "FIFO" in str(done[0].value) and "not a regular file" in str(done[0].value)


def test_a_device_a_large_file_and_a_link_are_refused_naming_why(tmp_path):
    with pytest.raises(files.UnreadableFile, match="character device"):
        files.read_bounded("/dev/zero")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 5000)
    with pytest.raises(files.UnreadableFile, match=r"larger than 4096 bytes") as info:
        files.read_bounded(str(big), 4096)
    assert info.value.path == str(big)
    assert files.read_bounded(str(big), 4096, truncate=True) == b"x" * 4096
    link = tmp_path / "link"
    link.symlink_to(big)
    with pytest.raises(files.UnreadableFile, match="symbolic link, not followed"):
        files.read_bounded(str(link), follow=False)
    assert len(files.read_bounded(str(link))) == 5000
    with pytest.raises(files.UnreadableFile) as info:
        files.read_bounded(str(tmp_path / "missing"))
    assert info.value.errno == errno.ENOENT
    assert files.read_bytes("/dev/zero") is None and files.read_text(str(tmp_path / "missing")) is None


def test_read_utf8_names_the_first_byte_that_is_not(tmp_path):
    path = tmp_path / "cufile.json"
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(files.UnreadableFile, match=r"not UTF-8 \(byte 0xff at offset 7\)"):
        files.read_utf8(str(path))
