"""cufile.json as NVIDIA's packages install it: the managed keys are merged into the vendor's
content, the alternatives link keeps working, nothing is lost, a second run changes nothing.

The fixture tests/fixtures/cufile/cuda-13.0-gds-cufile.json has the keys, values, order and
layout of libcufile-13-0 1.15's gds/cufile.json (comments paraphrased)."""
import json
import os

import pytest

from ansible_collections.gds.commission.plugins.module_utils.tune.cufile import (
    edit_text, format_alternatives, key_order, loads, merge, read_alternatives, validate,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENDOR_FILE = os.path.join(ROOT, "tests", "fixtures", "cufile", "cuda-13.0-gds-cufile.json")
with open(VENDOR_FILE) as _handle:
    VENDOR_TEXT = _handle.read()
VENDOR = loads(VENDOR_TEXT)
TOOLKIT = "/usr/local/cuda-13.0/gds/cufile.json"
OURS = "/etc/gds-commission/cufile.json"
# what update-alternatives 1.22 writes (seen on an Ubuntu 24.04 node with libcufile-13-0)
ADMIN_VENDOR = "auto\n/etc/cufile.json\n\n%s\n130\n\n" % TOOLKIT
ADMIN_BOTH = "auto\n/etc/cufile.json\n\n%s\n1000\n%s\n130\n\n" % (OURS, TOOLKIT)
MANAGED = {"properties": {"allow_compat_mode": False, "use_pci_p2pdma": False,
                          "max_direct_io_size_kb": 16384, "rdma_dev_addr_list": []},
           "fs": {"lustre": {"posix_gds_min_kb": 0}},
           "block": {"nvme": {"use_pci_p2pdma": False}}}


def vendor_node(tmp_path, admin=ADMIN_VENDOR):
    """A simulated root laid out as libcufile's postinst leaves it (node-absolute link targets)."""
    root = tmp_path / "node"
    toolkit = root / TOOLKIT.lstrip("/")
    toolkit.parent.mkdir(parents=True)
    toolkit.write_text(VENDOR_TEXT)
    (root / "etc" / "alternatives").mkdir(parents=True)
    os.symlink(TOOLKIT, str(root / "etc" / "alternatives" / "cufile.json"))
    os.symlink("/etc/alternatives/cufile.json", str(root / "etc" / "cufile.json"))
    if admin is not None:
        (root / "var" / "lib" / "dpkg" / "alternatives").mkdir(parents=True)
        (root / "var" / "lib" / "dpkg" / "alternatives" / "cufile.json").write_text(admin)
    return root


def follow(root, node_path):
    """Resolve a node path through its symlinks inside the simulated root: [node paths]."""
    chain = [node_path]
    while os.path.islink(str(root) + chain[-1]):
        target = os.readlink(str(root) + chain[-1])
        assert target.startswith("/"), target  # update-alternatives writes absolute targets
        chain.append(target)
    return chain


def args(root, **extra):
    out = {"path": str(root / "etc" / "cufile.json"), "config": MANAGED, "root": str(root),
           "alternative_path": str(root) + OURS, "register_alternative": True}
    out.update(extra)
    return out


def comments(text):
    return [line.strip() for line in text.splitlines() if line.strip().startswith("//")]


def survivors(before, after):
    """The keys of ``before`` as they appear in ``after``, in ``after``'s order."""
    keys = set(key_order(before))
    return [k for k in key_order(after) if k in keys]


# --------------------------------------------------------------------------------------------
def test_merge_keeps_every_other_key_its_value_and_its_place():
    merged = merge(VENDOR, MANAGED)
    assert survivors(VENDOR, merged) == key_order(VENDOR)
    assert merged["properties"]["allow_compat_mode"] is False
    assert merged["properties"]["posix_pool_slab_size_kb"] == [4, 1024, 16384]
    assert merged["properties"]["per_buffer_cache_size_kb"] == 1024
    assert merged["fs"]["gpfs"] == {"gds_write_support": False, "gds_async_support": True}
    assert list(merged)[-1] == "block"  # a new section goes to the end
    assert VENDOR["properties"]["allow_compat_mode"] is True  # the input is not modified
    assert validate(VENDOR) == []


def test_alternatives_file_round_trip(tmp_path):
    (tmp_path / "cufile.json").write_text(ADMIN_BOTH)
    admin = read_alternatives(str(tmp_path / "cufile.json"))
    assert admin["mode"] == "auto" and admin["link"] == "/etc/cufile.json"
    assert [(c["path"], c["priority"]) for c in admin["choices"]] == [(OURS, 1000), (TOOLKIT, 130)]
    # update-alternatives sorts the choices by path
    admin["choices"].reverse()
    assert format_alternatives(admin) == ADMIN_BOTH


def test_vendor_alternatives_layout_keeps_the_vendor_file_and_the_link(module_runner, tmp_path):
    root = vendor_node(tmp_path)
    rc, result = module_runner("gds_cufile", args(root))
    assert rc == 0 and result["changed"] and result["layout"] == "alternatives", result

    # the toolkit's file is untouched, and the link chain is what update-alternatives makes
    assert (root / TOOLKIT.lstrip("/")).read_text() == VENDOR_TEXT
    assert follow(root, "/etc/cufile.json") == ["/etc/cufile.json", "/etc/alternatives/cufile.json", OURS]
    admin = root / "var" / "lib" / "dpkg" / "alternatives" / "cufile.json"
    assert admin.read_text() == ADMIN_BOTH
    # cuFile, following the link, reads every vendor key in its order, with our keys set
    config = loads((root / OURS.lstrip("/")).read_text())
    assert survivors(VENDOR, config) == key_order(VENDOR)
    assert config == merge(VENDOR, MANAGED)
    assert config["properties"]["allow_compat_mode"] is False
    # it is the vendor's text with our values: every comment is still there, in order
    assert comments((root / OURS.lstrip("/")).read_text()) == comments(VENDOR_TEXT)
    assert oct(os.stat(str(root / OURS.lstrip("/"))).st_mode & 0o777) == "0o644"

    check = result["checks"][0]
    assert check["name"] == "cufile: configuration" and check["actual"] == "written"
    assert check["detail"].count("/etc/cufile.json") == 1, check["detail"]  # named once
    assert str(root) not in check["detail"]  # node paths, as the admin sees them
    assert "properties.allow_compat_mode" in check["detail"] and TOOLKIT in check["detail"]

    rc, again = module_runner("gds_cufile", args(root))
    assert rc == 0 and again["changed"] is False and again["drift"] == [], again
    assert again["checks"][0]["actual"] == "in place"
    assert admin.read_text() == ADMIN_BOTH and (root / TOOLKIT.lstrip("/")).read_text() == VENDOR_TEXT


def test_vendor_alternatives_check_mode_reports_per_key_and_changes_nothing(module_runner, tmp_path):
    root = vendor_node(tmp_path)
    before = sorted(p for p, _, _ in os.walk(str(root)))
    rc, result = module_runner("gds_cufile", args(root), check_mode=True)
    assert rc == 0 and result["changed"] is True
    path = str(root / "etc" / "cufile.json")
    assert result["drift"] == [
        {"setting": "%s: block.nvme.use_pci_p2pdma" % path, "expected": False, "actual": "(absent)"},
        {"setting": "%s: properties.allow_compat_mode" % path, "expected": False, "actual": True},
        {"setting": "%s: alternative" % path, "expected": OURS, "actual": TOOLKIT}]
    assert result["checks"][0]["actual"] == "would change"
    assert sorted(p for p, _, _ in os.walk(str(root))) == before
    assert follow(root, "/etc/cufile.json")[-1] == TOOLKIT
    assert not os.path.exists(str(root) + OURS)


def test_a_newer_toolkit_reaches_our_file_on_the_next_run(module_runner, tmp_path):
    root = vendor_node(tmp_path)
    assert module_runner("gds_cufile", args(root))[0] == 0
    newer = dict(VENDOR, properties=dict(VENDOR["properties"], some_new_knob=7))
    (root / TOOLKIT.lstrip("/")).write_text(json.dumps(newer))
    rc, result = module_runner("gds_cufile", args(root))
    assert rc == 0 and result["changed"] and os.path.exists(result["backup_file"])
    config = loads((root / OURS.lstrip("/")).read_text())
    assert config["properties"]["some_new_knob"] == 7 and config["properties"]["allow_compat_mode"] is False


def test_live_node_leaves_the_link_to_update_alternatives(module_runner, tmp_path):
    root = vendor_node(tmp_path)
    rc, result = module_runner("gds_cufile", args(root, register_alternative=False))
    assert rc == 0 and result["changed"]
    assert result["alternative"] == {"name": "cufile.json", "link": "/etc/cufile.json", "path": OURS,
                                     "priority": 1000, "selected": False, "vendor": TOOLKIT}
    # our file is ready for `update-alternatives --install`; the link is not ours to move here
    assert loads((root / OURS.lstrip("/")).read_text()) == merge(VENDOR, MANAGED)
    assert follow(root, "/etc/cufile.json")[-1] == TOOLKIT
    # what update-alternatives then does: our file is selected, and the next run is clean
    os.unlink(str(root / "etc" / "alternatives" / "cufile.json"))
    os.symlink(OURS, str(root / "etc" / "alternatives" / "cufile.json"))
    (root / "var" / "lib" / "dpkg" / "alternatives" / "cufile.json").write_text(ADMIN_BOTH)
    rc, again = module_runner("gds_cufile", args(root, register_alternative=False))
    assert again["changed"] is False and again["drift"] == [] and again["alternative"]["selected"]


def test_plain_vendor_file_is_edited_in_place_with_a_backup(module_runner, tmp_path):
    path = tmp_path / "etc" / "cufile.json"
    path.parent.mkdir()
    path.write_text(VENDOR_TEXT)
    rc, result = module_runner("gds_cufile", {"path": str(path), "config": MANAGED})
    assert rc == 0 and result["changed"] and result["layout"] == "file"
    config = loads(path.read_text())
    assert survivors(VENDOR, config) == key_order(VENDOR)
    assert config == merge(VENDOR, MANAGED)
    with open(result["backup_file"]) as handle:
        assert handle.read() == VENDOR_TEXT
    # edited as text: comments kept, only the differing value changed, the new section appended
    text = path.read_text()
    assert comments(text) == comments(VENDOR_TEXT)
    assert text.startswith(VENDOR_TEXT[:VENDOR_TEXT.index('"allow_compat_mode": true')] + '"allow_compat_mode": false,')
    detail = result["checks"][0]["detail"]
    assert detail.count(str(path)) == 2 and "backup %s" % result["backup_file"] in detail, detail
    rc, again = module_runner("gds_cufile", {"path": str(path), "config": MANAGED})
    assert again["changed"] is False and again["drift"] == []


def test_malformed_vendor_file_behind_the_link_changes_nothing(module_runner, tmp_path):
    root = vendor_node(tmp_path)
    broken = VENDOR_TEXT.replace('"nvtx": false,', '"nvtx": false')
    (root / TOOLKIT.lstrip("/")).write_text(broken)
    rc, result = module_runner("gds_cufile", args(root))
    assert rc != 0
    line = broken[:broken.index('"cufile_stats"')].count("\n") + 1
    assert result["msg"].startswith("%s%s is not valid JSON at line %d column" % (root, TOOLKIT, line)), result["msg"]
    assert not os.path.exists(str(root) + OURS)
    assert follow(root, "/etc/cufile.json")[-1] == TOOLKIT


def test_a_higher_vendor_priority_is_an_error_naming_the_variable(module_runner, tmp_path):
    root = vendor_node(tmp_path, admin="auto\n/etc/cufile.json\n\n%s\n5000\n\n" % TOOLKIT)
    rc, result = module_runner("gds_cufile", args(root))
    assert rc != 0 and "gds_cufile_alternative_priority" in result["msg"]
    assert not os.path.exists(str(root) + OURS)


@pytest.mark.parametrize("mode,verdicts", [
    ("nvfs", {"cufile: allow_compat_mode": "PASS", "cufile: use_pci_p2pdma": "PASS"}),
    ("compat", {"cufile: allow_compat_mode": "WARN", "cufile: use_pci_p2pdma": "PASS"}),
    ("p2pdma", {"cufile: allow_compat_mode": "PASS", "cufile: use_pci_p2pdma": "FAIL"}),
])
def test_checks_follow_the_mode(module_runner, tmp_path, mode, verdicts):
    path = tmp_path / "cufile.json"
    rc, result = module_runner("gds_cufile", {"path": str(path), "config": MANAGED, "gds_mode": mode,
                                              "raid_devices": ["/dev/md1"]})
    got = {c["name"]: c["verdict"] for c in result["checks"]}
    assert {k: got[k] for k in verdicts} == verdicts
    assert "cufile: P2PDMA with md RAID" not in got  # use_pci_p2pdma is false in MANAGED


def test_p2pdma_with_md_raid_and_rdma_addresses_are_checked(module_runner, tmp_path):
    config = merge(MANAGED, {"properties": {"use_pci_p2pdma": True, "rdma_dev_addr_list": ["10.0.1.11"]}})
    rc, result = module_runner("gds_cufile", {
        "path": str(tmp_path / "cufile.json"), "config": config, "gds_mode": "p2pdma",
        "raid_devices": ["/dev/md1"], "rdma_storage": True,
        "rdma_nics": [{"nic": "mlx5_0", "address": "10.0.1.11"}, {"nic": "mlx5_1", "address": None}]})
    checks = {c["name"]: c for c in result["checks"]}
    assert checks["cufile: P2PDMA with md RAID"]["verdict"] == "FAIL"
    assert checks["cufile: rdma_dev_addr_list"]["verdict"] == "WARN"
    assert "mlx5_1" in checks["cufile: rdma_dev_addr_list"]["detail"]


def test_detail_of_a_new_alternative_that_changes_no_key(module_runner, tmp_path):
    root = vendor_node(tmp_path)
    same = {"properties": {"allow_compat_mode": True}}  # what the vendor file says already
    rc, result = module_runner("gds_cufile", args(root, config=same, gds_mode="compat"))
    assert rc == 0 and result["changed"] and result["changed_keys"] == []
    detail = result["checks"][0]["detail"]
    assert detail.startswith("wrote %s (no key differed from what cuFile read); selected for "
                             "/etc/cufile.json" % OURS), detail


@pytest.mark.parametrize("text,wanted,expected", [
    ('{}', {"a": {"b": 1}}, '{\n    "a": {\n        "b": 1\n    }\n}'),
    ('{"a": 1,}', {"a": 1, "b": [1, 2]}, '{"a": 1,\n"b": [1, 2]}'),
    ('{\n    "a": 1 // one\n}\n', {"a": 2, "c": True}, '{\n    "a": 2, // one\n    "c": true\n}\n'),
    ('{\n  "s": {\n    // only a comment\n  }\n}', {"s": {"k": "v"}},
     '{\n  "s": {\n    // only a comment\n      "k": "v"\n  }\n}'),
    # a repeated key: the later one counts, as for JSON parsers, and the earlier goes
    ('{"a": 1, "a": 2}', {"a": 3}, '{"a": 3}'),
    ('{"a": 1, "a": 2}', {"a": 2}, '{"a": 2}'),
    ('{\n    "a": 1, // old\n    "b": 0,\n    "a": 2\n}', {"b": 0, "a": 2},
     '{\n    // old\n    "b": 0,\n    "a": 2\n}'),
    ('{\n    "s": {"x": 1},\n    "s": {"y": 2, "y": 3}\n}', {"s": {"y": 4}},
     '{\n    "s": {"y": 4}\n}'),
])
def test_edit_text_keeps_comments_and_layout(text, wanted, expected):
    out = edit_text(text, loads(text), wanted)
    assert out == expected and loads(out) == wanted
