"""gds_cufile against hostile trees and files: nothing is written outside the simulated root
(whatever links the tree holds), deep nesting, repeated keys, and a dangling vendor alternative."""
import builtins
import json
import os
import shutil

import pytest

from ansible_collections.gds.commission.plugins.module_utils.tune import cufile as gds_cufile
from ansible_collections.gds.commission.plugins.module_utils.tune.cufile import CufileError, loads, merge
from test_cufile_vendor import (
    ADMIN_BOTH, ADMIN_VENDOR, MANAGED, OURS, TOOLKIT, VENDOR, VENDOR_TEXT, follow, vendor_node,
)


def params(root, **extra):
    """The module's parameters with its defaults: alternative_path is the node path
    /etc/gds-commission/cufile.json, as when the role leaves it out."""
    out = {"path": str(root / "etc" / "cufile.json"), "config": MANAGED, "root": str(root),
           "alternative_path": OURS, "alternative_priority": 1000, "register_alternative": True,
           "backup": True, "extra_keys": [], "mode": "0644", "gds_mode": "nvfs",
           "raid_devices": [], "rdma_storage": False, "rdma_nics": [], "netfs_mounts": []}
    out.update(extra)
    return out


@pytest.fixture
def jailed(monkeypatch, tmp_path):
    """jailed(fn, *args): run fn with every write below tmp_path/node let through and one
    elsewhere refused and recorded (so a failing run writes nothing on this machine); returns
    (fn's result, [refused (operation, path)])."""
    root = os.path.realpath(str(tmp_path / "node"))

    def inside(path, follow):
        path = os.fspath(path)
        real = os.path.realpath(path) if follow else os.path.join(
            os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        return real == root or real.startswith(root + "/")

    def run(fn, *args, **kwargs):
        refused = []

        def guarded(name, real, follow, *positions):
            def wrapper(*a, **kw):
                for pos in positions:
                    if pos < len(a) and not inside(a[pos], follow):
                        refused.append((name, os.fspath(a[pos])))
                        raise PermissionError("test jail: %s %s" % (name, a[pos]))
                return real(*a, **kw)
            return wrapper

        real_os_open, real_open = os.open, builtins.open

        def os_open(path, flags, *a, **kw):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and not inside(path, True):
                refused.append(("open", os.fspath(path)))
                raise PermissionError("test jail: open %s" % path)
            return real_os_open(path, flags, *a, **kw)

        def open_(file, mode="r", *a, **kw):
            if isinstance(file, (str, bytes, os.PathLike)) and set(mode) & set("wax+") and not inside(file, True):
                refused.append(("open", os.fspath(file)))
                raise PermissionError("test jail: open %s" % file)
            return real_open(file, mode, *a, **kw)

        with monkeypatch.context() as patch:
            for name, follow, positions in (
                    ("replace", False, (0, 1)), ("rename", False, (0, 1)), ("symlink", False, (1,)),
                    ("link", False, (1,)), ("mkdir", False, (0,)), ("unlink", False, (0,)),
                    ("remove", False, (0,)), ("chmod", True, (0,))):
                patch.setattr(os, name, guarded(name, getattr(os, name), follow, *positions))
            patch.setattr(shutil, "copy2", guarded("copy2", shutil.copy2, True, 1))
            patch.setattr(os, "open", os_open)
            patch.setattr(builtins, "open", open_)
            try:
                result = fn(*args, **kwargs)
            except PermissionError:
                result = None
        return result, refused
    return run


def node_path_chain(root, node_path):
    """The links from a node path, followed as the node would (absolute targets inside root)."""
    return gds_cufile.NodePaths(str(root)).node(gds_cufile.NodePaths(str(root)).resolve(str(root) + node_path))


# --------------------------------------------------------------------------------------------
# Every path written is below the root
# --------------------------------------------------------------------------------------------
def test_default_alternative_path_is_below_the_root(jailed, tmp_path):
    root = vendor_node(tmp_path)
    (result, _), refused = jailed(gds_cufile.commission, params(root))
    assert refused == []
    assert result["file"] == str(root) + OURS and result["alternative"]["path"] == OURS
    assert follow(root, "/etc/cufile.json") == ["/etc/cufile.json", "/etc/alternatives/cufile.json", OURS]
    assert loads((root / OURS.lstrip("/")).read_text()) == merge(VENDOR, MANAGED)
    again, _ = gds_cufile.commission(params(root))
    assert again["changed"] is False and again["drift"] == []


def test_the_module_with_its_defaults_writes_below_the_root(module_runner, tmp_path):
    root = vendor_node(tmp_path)
    args = {k: v for k, v in params(root).items() if k in ("path", "config", "root", "register_alternative")}
    rc, result = module_runner("gds_cufile", args)
    assert rc == 0, result
    assert result["file"] == str(root) + OURS and os.path.isfile(str(root) + OURS)
    assert node_path_chain(root, "/etc/cufile.json") == OURS


def _escape_by_relative_link(tmp_path, outside):
    # on this machine ../../ from <root>/etc climbs out of the root; on the node it stops at /
    root = tmp_path / "node"
    (root / "etc").mkdir(parents=True)
    os.symlink("../../outside/cufile.json", str(root / "etc" / "cufile.json"))
    (root / "outside").mkdir()
    (root / "outside" / "cufile.json").write_text(VENDOR_TEXT)
    return params(root)


def _escape_by_absolute_directory_link(tmp_path, outside):
    # an absolute link target is a node path: /etc/gds-commission -> /tmp/.../outside is
    # <root>/tmp/.../outside, not this machine's directory
    root = vendor_node(tmp_path)
    os.symlink(str(outside), str(root / "etc" / "gds-commission"))
    return params(root)


def _escape_by_node_path(tmp_path, outside):
    root = tmp_path / "node"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "cufile.json").write_text(VENDOR_TEXT)
    return params(root, path="/etc/cufile.json")  # a node path: below the root, not this machine's


@pytest.mark.parametrize("layout", [_escape_by_relative_link, _escape_by_absolute_directory_link,
                                    _escape_by_node_path])
def test_links_in_the_tree_do_not_lead_outside_the_root(jailed, tmp_path, layout):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "cufile.json").write_text(VENDOR_TEXT)  # what a climb out of the root would hit
    args = layout(tmp_path, outside)
    out, refused = jailed(gds_cufile.commission, args)
    assert refused == []
    result = out[0]
    assert result["changed"]
    assert (outside / "cufile.json").read_text() == VENDOR_TEXT and os.listdir(str(outside)) == ["cufile.json"]
    assert gds_cufile.NodePaths(args["root"]).inside(result["file"])
    with open(result["file"]) as handle:
        assert loads(handle.read())["properties"]["allow_compat_mode"] is False


def test_node_paths_follow_links_inside_the_root(tmp_path):
    root = tmp_path / "node"
    (root / "a").mkdir(parents=True)
    os.symlink("/b", str(root / "a" / "abs"))
    os.symlink("../../../../b", str(root / "a" / "rel"))
    os.symlink("loop", str(root / "a" / "loop"))
    paths = gds_cufile.NodePaths(str(root))
    assert paths.resolve(str(root / "a" / "abs" / "x")) == str(root) + "/b/x"
    assert paths.resolve(str(root / "a" / "rel")) == str(root) + "/b"
    assert paths.here("/etc/x") == str(root) + "/etc/x"
    assert paths.inside(paths.here(str(root) + "/../../etc/x"))
    with pytest.raises(CufileError, match="symlink loop"):
        paths.resolve(str(root / "a" / "loop"))


# --------------------------------------------------------------------------------------------
# Nesting is bounded
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [33, 1000, 200000])
@pytest.mark.parametrize("bracket", ["{\"k\": ", "["])
def test_deep_nesting_is_an_error_naming_the_file_line_and_column(depth, bracket):
    close = "}" if bracket.startswith("{") else "]"
    text = '{\n  "logging": ' + bracket * depth + "1" + close * depth + "\n}\n"
    with pytest.raises(CufileError) as info:
        loads(text, "/etc/cufile.json")
    # the opening brace is level 1: the 33rd level is the 32nd bracket after "logging":
    column = len('  "logging": ') + len(bracket) * 31 + 1
    assert str(info.value) == "/etc/cufile.json is nested deeper than 32 levels at line 2 column %d" % column


def test_brackets_in_strings_and_comments_are_no_nesting():
    text = '{\n  // [[[[ {{{{\n  "logging": {"dir": "%s"} /* [[[ */\n}\n' % ("[" * 100)
    assert loads(text)["logging"]["dir"] == "[" * 100


def test_the_module_refuses_a_deep_file_without_a_traceback(module_runner, tmp_path):
    path = tmp_path / "cufile.json"
    deep = '{"logging": ' + "[" * 50000 + "]" * 50000 + "}"
    path.write_text(deep)
    rc, result = module_runner("gds_cufile", {"path": str(path), "config": MANAGED})
    assert rc != 0 and result["failed"] and "Traceback" not in json.dumps(result)
    assert result["msg"] == "%s is nested deeper than 32 levels at line 1 column 44" % path
    assert path.read_text() == deep


@pytest.mark.parametrize("kind", ["fifo", "device", "large"])
def test_the_module_refuses_what_is_no_cufile_json_at_once_naming_it(module_runner, tmp_path, kind):
    """A FIFO at the path blocked gds_cufile in open() for ever, /dev/zero was a MemoryError, a
    150 MB file was accepted after minutes with a 150 MB backup: each is refused at once, named."""
    path = tmp_path / "cufile.json"
    if kind == "fifo":
        os.mkfifo(str(path))
    elif kind == "device":
        os.symlink("/dev/zero", str(path))
    else:
        path.write_text('{"logging": {"level": "ERROR"}, "x": "%s"}' % ("y" * (2 << 20)))
    rc, result = module_runner("gds_cufile", {"path": str(path), "config": MANAGED})
    assert rc != 0 and "Traceback" not in json.dumps(result), result
    named = "/dev/zero" if kind == "device" else str(path)  # a link is followed, as to the vendor's file
    assert named in result["msg"] and {"fifo": "FIFO", "device": "character device",
                                           "large": "larger than 1048576 bytes"}[kind] in result["msg"], result
    assert sorted(os.listdir(str(tmp_path))) == ["cufile.json"]  # no backup, nothing written beside it


def test_a_deep_config_is_an_error_naming_the_key(tmp_path):
    deep = {}
    for _ in range(5000):
        deep = {"k": deep}
    # netfs_mounts: the remote keys are merged before the config is validated
    with pytest.raises(CufileError, match=r"^config: logging(\.k){31} is nested deeper than 32 levels$"):
        gds_cufile.commission(params(tmp_path / "node", path=str(tmp_path / "node" / "cufile.json"),
                                     config={"logging": deep},
                                     netfs_mounts=[{"mountpoint": "/mnt/x", "fs": "ext4"}]))
    assert not (tmp_path / "node").exists()


# --------------------------------------------------------------------------------------------
# Repeated keys: the later value counts (as JSON parsers read it); the file written has one
# --------------------------------------------------------------------------------------------
def test_duplicate_keys_name_the_key_and_every_line():
    text = ('{\n  "properties": {\n    "allow_compat_mode": true,\n    "x": 1,\n'
            '    "allow_compat_mode": false\n  },\n  "fs": {"nfs": {"a": 1, "a": 2, "a": 3}},\n'
            '  "properties": {"allow_compat_mode": true}\n}\n')
    assert gds_cufile.duplicate_keys(text) == [
        {"key": "properties", "lines": [2, 8]},
        {"key": "properties.allow_compat_mode", "lines": [3, 5]},
        {"key": "fs.nfs.a", "lines": [7, 7, 7]}]
    config = loads(text)
    assert config == {"fs": {"nfs": {"a": 3}}, "properties": {"allow_compat_mode": True}}
    assert list(config) == ["fs", "properties"]  # the later one's place


def test_duplicate_key_in_a_plain_file_is_removed_keeping_the_later(module_runner, tmp_path):
    path = tmp_path / "cufile.json"
    text = VENDOR_TEXT.replace('"allow_compat_mode": true,',
                               '"allow_compat_mode": true,\n        "max_direct_io_size_kb": 1024,')
    lines = [n for n, line in enumerate(text.splitlines(), 1) if '"max_direct_io_size_kb"' in line]
    assert len(lines) == 2
    path.write_text(text)
    config = {"properties": {"allow_compat_mode": False}}
    rc, result = module_runner("gds_cufile", {"path": str(path), "config": config}, check_mode=True)
    assert rc == 0 and result["changed"] and path.read_text() == text
    assert result["duplicates"] == [{"key": "properties.max_direct_io_size_kb", "lines": lines, "file": str(path)}]
    assert {"setting": "%s: properties.max_direct_io_size_kb" % path, "expected": "one value",
            "actual": "2 values (lines %d, %d)" % tuple(lines)} in result["drift"]
    rc, result = module_runner("gds_cufile", {"path": str(path), "config": config})
    assert rc == 0 and result["changed"]
    warning = [w for w in result["warnings"] if "max_direct_io_size_kb" in w][0]
    assert warning.startswith("%s: key properties.max_direct_io_size_kb appears on lines %d, %d; the value on "
                              "line %d counts" % ((path,) + tuple(lines) + (lines[-1],)))
    written = path.read_text()
    assert written.count('"max_direct_io_size_kb"') == 1 and gds_cufile.duplicate_keys(written) == []
    assert loads(written)["properties"]["max_direct_io_size_kb"] == loads(text)["properties"]["max_direct_io_size_kb"]
    assert "// " in written  # still the vendor's text with its comments
    detail = result["checks"][0]["detail"]
    assert "repeated in %s (lines %d, %d): the later value kept" % ((path,) + tuple(lines)) in detail
    rc, again = module_runner("gds_cufile", {"path": str(path), "config": config})
    assert again["changed"] is False and again["drift"] == [] and again["duplicates"] == []


def test_duplicate_key_in_the_vendor_file_leaves_one_value_in_ours(module_runner, tmp_path):
    root = vendor_node(tmp_path)
    text = VENDOR_TEXT.replace('"allow_compat_mode": true,', '"allow_compat_mode": true,\n"allow_compat_mode": true,')
    (root / TOOLKIT.lstrip("/")).write_text(text)
    rc, result = module_runner("gds_cufile", params(root, alternative_path=str(root) + OURS))
    assert rc == 0 and result["changed"]
    assert [(d["file"], d["key"]) for d in result["duplicates"]] == [(TOOLKIT, "properties.allow_compat_mode")]
    assert any(w.startswith(TOOLKIT + ": key properties.allow_compat_mode appears on lines")
               for w in result["warnings"])
    ours = (root / OURS.lstrip("/")).read_text()
    assert gds_cufile.duplicate_keys(ours) == [] and loads(ours)["properties"]["allow_compat_mode"] is False
    assert (root / TOOLKIT.lstrip("/")).read_text() == text  # the vendor's file is left alone


# --------------------------------------------------------------------------------------------
# A dangling vendor alternative is an error naming it, never a file of our keys alone
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("admin", [ADMIN_VENDOR, ADMIN_BOTH, None])
def test_dangling_vendor_alternative_is_an_error_naming_it(module_runner, tmp_path, admin):
    root = vendor_node(tmp_path, admin=admin)
    os.unlink(str(root / TOOLKIT.lstrip("/")))
    if admin == ADMIN_BOTH:  # ours registered and selected, the vendor's file gone since
        os.makedirs(str(root / "etc" / "gds-commission"))
        (root / OURS.lstrip("/")).write_text(json.dumps(merge(VENDOR, MANAGED)))
        os.unlink(str(root / "etc" / "alternatives" / "cufile.json"))
        os.symlink(OURS, str(root / "etc" / "alternatives" / "cufile.json"))
    before = {p: open(p).read() for p in (str(root) + OURS,) if os.path.exists(p)}
    rc, result = module_runner("gds_cufile", params(root, alternative_path=str(root) + OURS))
    assert rc != 0 and result["failed"]
    assert TOOLKIT in result["msg"] and "does not exist" in result["msg"], result["msg"]
    assert "nothing was changed" in result["msg"]
    assert {p: open(p).read() for p in before} == before
    if admin != ADMIN_BOTH:
        assert not os.path.exists(str(root) + OURS)


def test_dangling_alternatives_link_without_admin_file_names_the_link(module_runner, tmp_path):
    root = vendor_node(tmp_path, admin=None)
    os.unlink(str(root / "etc" / "alternatives" / "cufile.json"))
    rc, result = module_runner("gds_cufile", params(root, alternative_path=str(root) + OURS))
    assert rc != 0 and "/etc/cufile.json -> /etc/alternatives/cufile.json" in result["msg"]
    assert "does not exist" in result["msg"] and not os.path.exists(str(root) + OURS)
