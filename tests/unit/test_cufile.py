"""cufile.json: schema validation, the commented-JSON reader, the module's write/diff/drift."""
import json
import os

import pytest
import yaml
from jinja2 import Environment

from ansible_collections.gds.commission.plugins.module_utils.tune.cufile import (
    CufileError, deprecations, differences, dumps, flatten, loads, merge, strip_comments, suggest, validate,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission")
TEMPLATE = os.path.join(COLLECTION, "roles", "gds_cufile", "templates", "cufile.json.j2")

# NVIDIA's shipped file style: // and /* */ comments, a commented-out key, a trailing comma.
VENDOR = """{
    // NOTE : Application can override custom configuration via export CUFILE_ENV_PATH_JSON=<filepath>
    // e.g : export CUFILE_ENV_PATH_JSON="/home/<xxx>/cufile.json"
    "logging": {
        // log directory, if not enabled will create log file under current working directory
        //"dir": "/home/<xxxx>",
        // NOTICE|ERROR|WARN|INFO|DEBUG|TRACE (in decreasing order of severity)
        "level": "ERROR"
    },
    "profile": { "nvtx": false, "cufile_stats": 0 },
    /* legacy uniform GPU bounce buffers */
    "properties": {
        "max_direct_io_size_kb" : 16384,
        "allow_compat_mode": true,
        "rdma_dev_addr_list": [ ],
        "url_like": "http://example//not-a-comment",
    },
    "blacklist": { "drivers": [ ], "devices": [ ], "mounts": [ ], "filesystems": [ ] }
}
"""


def render_defaults(mode="nvfs", rdma=()):
    """The role's template rendered the way Ansible does (to_json is json.dumps)."""
    env = Environment()
    env.filters["to_json"] = json.dumps
    env.filters["bool"] = bool
    with open(TEMPLATE) as handle:
        text = env.from_string(handle.read()).render(
            gds_cufile_use_pci_p2pdma=mode == "p2pdma", gds_cufile_allow_compat_mode=mode == "compat",
            __gds_cufile_rdma_dev_addr_list=list(rdma))
    return json.loads(text)


def test_vendor_file_with_comments_is_read():
    config = loads(VENDOR, "/etc/cufile.json")
    assert config["logging"] == {"level": "ERROR"}
    assert config["properties"]["url_like"] == "http://example//not-a-comment"
    assert config["properties"]["allow_compat_mode"] is True
    assert "//" not in strip_comments('{"a": 1} // tail').replace('"', "")


def test_malformed_file_names_line_and_column():
    with pytest.raises(CufileError, match=r"/etc/cufile.json is not valid JSON at line 3 column"):
        loads('{\n  "logging": {"level": "ERROR"}\n  "profile": {}\n}', "/etc/cufile.json")
    with pytest.raises(CufileError, match="top level must be an object"):
        loads("[1, 2]")


def test_template_defaults_are_valid_and_match_nvidia():
    config = render_defaults()
    assert validate(config) == []
    props = config["properties"]
    assert props["max_direct_io_size_kb"] == 16384
    assert props["max_device_cache_size_kb"] == 131072
    assert props["max_device_pinned_mem_size_kb"] == 33554432
    assert props["poll_mode_max_size_kb"] == 4 and props["use_poll_mode"] is False
    assert props["rdma_load_balancing_policy"] == "RoundRobin"
    assert config["execution"] == {"max_io_queue_depth": 128, "max_io_threads": 4, "parallel_io": True,
                                   "min_io_threshold_size_kb": 8192, "max_request_parallelism": 4}
    assert set(config) == {"logging", "profile", "execution", "properties", "fs", "denylist"}
    assert set(config["denylist"]) == {"drivers", "devices", "mounts", "filesystems"}


@pytest.mark.parametrize("mode,p2p,compat", [("nvfs", False, False), ("p2pdma", True, False),
                                             ("compat", False, True)])
def test_computed_values_follow_gds_mode(mode, p2p, compat):
    props = render_defaults(mode, rdma=["10.0.1.11", "10.0.2.11"])["properties"]
    assert props["use_pci_p2pdma"] is p2p and props["allow_compat_mode"] is compat
    assert props["rdma_dev_addr_list"] == ["10.0.1.11", "10.0.2.11"]


def test_role_defaults_derive_both_flags_from_gds_mode():
    with open(os.path.join(COLLECTION, "roles", "gds_cufile", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    assert defaults["gds_cufile_mode"] == "{{ gds_mode | default('nvfs') }}"
    assert defaults["gds_cufile_allow_compat_mode"] == "{{ gds_cufile_mode == 'compat' }}"
    assert defaults["gds_cufile_use_pci_p2pdma"] == "{{ gds_cufile_mode == 'p2pdma' }}"


def test_good_overrides_validate():
    config = render_defaults()
    config["properties"].update({"max_direct_io_size_kb": 8192, "use_poll_mode": True,
                                 "io_priority": "high",
                                 "gpu_bounce_buffer_slab_config": {"slab_size_kb": [1024, 8192],
                                                                   "slab_count": [64, 8]}})
    config["logging"]["level"] = "info"  # cuFile reads the level case-insensitively
    config["fs"]["nfs"] = {"mount_table": {"/mnt/nfs": {"rdma_dev_addr_list": ["192.168.0.12"]}}}
    config["profile"]["cufile_stats"] = 3
    assert validate(config) == []


def test_bad_overrides_name_every_key():
    config = render_defaults()
    config["properties"].update({"max_direct_io_size_kb": 16383, "use_poll_mode": "yes",
                                 "allow_compat_mod": True, "io_batchsize": True,
                                 "rdma_dev_addr_list": ["10.0.0.300", 7]})
    config["fs"]["lustre"]["posix_gds_mn_kb"] = 4
    config["profile"]["cufile_stats"] = 5
    config["logging"]["level"] = "LOUD"
    config["denylist"] = ["nvme"]
    config["allow_compat_mode"] = False
    errors = validate(config)
    text = "\n".join(errors)
    assert "properties.max_direct_io_size_kb: 16383 KB is not 4K-aligned (use a multiple of 4, e.g. 16384)" in text
    assert "properties.use_poll_mode: expected a boolean (true/false), got a string 'yes'" in text
    assert "properties.allow_compat_mod: unknown key, did you mean allow_compat_mode?" in text
    assert "properties.io_batchsize: expected an integer, got a boolean True" in text
    assert "properties.rdma_dev_addr_list[0]: '10.0.0.300' is not an IPv4 address" in text
    assert "properties.rdma_dev_addr_list[1]: expected a string, got an integer 7" in text
    assert "fs.lustre.posix_gds_mn_kb: unknown key, did you mean posix_gds_min_kb?" in text
    assert "profile.cufile_stats: 5 is above the maximum 3" in text
    assert "logging.level: 'LOUD' is not one of NOTICE, ERROR, WARN, INFO, DEBUG, TRACE" in text
    assert "denylist: expected an object, got a list ['nvme']" in text
    assert "allow_compat_mode: unknown key, did you mean properties.allow_compat_mode?" in text
    assert len(errors) == 11


def test_sizes_in_lists_and_negative_sizes():
    errors = validate({"properties": {"posix_pool_slab_size_kb": [4, 1026],
                                      "max_device_cache_size_kb": -4}})
    assert sorted(errors) == [
        "properties.max_device_cache_size_kb: -4 KB is negative",
        "properties.posix_pool_slab_size_kb[1]: 1026 KB is not 4K-aligned (use a multiple of 4, e.g. 1028)"]


def test_extra_keys_escape_hatch_and_deprecated_blacklist():
    config = {"properties": {"some_new_knob": 1}, "newsection": {"x": 1}}
    assert len(validate(config)) == 2
    assert validate(config, ["properties.some_new_knob", "newsection"]) == []
    assert deprecations(loads(VENDOR)) == ["blacklist is the old name of denylist"]
    assert validate(loads(VENDOR)) == ["properties.url_like: unknown key"]


def test_suggest_across_sections():
    assert suggest("profle", ["logging", "profile"]) == "profile"
    assert suggest("use_pci_p2pdma", ["logging"]) == "properties.use_pci_p2pdma"
    assert suggest("zzzz", ["logging"]) is None


def test_differences_and_dumps():
    old = {"properties": {"allow_compat_mode": True, "io_batchsize": 128}, "blacklist": {"drivers": []}}
    new = {"properties": {"allow_compat_mode": False, "io_batchsize": 128, "cufile_stats": 0},
           "denylist": {"drivers": []}}
    assert differences(old, new) == [
        {"setting": "blacklist.drivers", "expected": "(absent)", "actual": []},
        {"setting": "denylist.drivers", "expected": [], "actual": "(absent)"},
        {"setting": "properties.allow_compat_mode", "expected": False, "actual": True},
        {"setting": "properties.cufile_stats", "expected": 0, "actual": "(absent)"},
    ]
    assert differences({"a": {"b": 0}}, {"a": {"b": False}})  # 0 is not false
    assert flatten({"a": {"b": {}}}) == {"a.b": {}}
    assert dumps({"b": 1, "a": 2}) == '{\n    "b": 1,\n    "a": 2\n}\n'


# --------------------------------------------------------------------------------------------
# The module
# --------------------------------------------------------------------------------------------
def test_module_writes_strict_json_then_is_idempotent(module_runner, tmp_path):
    path = tmp_path / "etc" / "cufile.json"
    config = render_defaults()
    rc, result = module_runner("gds_cufile", {"path": str(path), "config": config})
    assert rc == 0 and result["changed"] is True and result["previous_format"] == "absent"
    assert json.loads(path.read_text()) == config
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    rc, again = module_runner("gds_cufile", {"path": str(path), "config": config})
    assert again["changed"] is False and again["drift"] == [] and again["previous_format"] == "strict"


def test_module_check_mode_diff_and_drift_on_vendor_file(module_runner, tmp_path):
    path = tmp_path / "cufile.json"
    path.write_text(VENDOR)
    config = render_defaults()
    rc, result = module_runner("gds_cufile", {"path": str(path), "config": config}, check_mode=True)
    assert rc == 0 and result["changed"] is True and result["previous_format"] == "commented"
    assert path.read_text() == VENDOR  # check mode changes nothing
    assert result["diff"]["before"] == VENDOR
    assert loads(result["diff"]["after"]) == merge(loads(VENDOR), config)
    # the file is edited as text: NVIDIA's comments and the untouched lines stay
    assert "// e.g : export CUFILE_ENV_PATH_JSON" in result["diff"]["after"]
    assert '"url_like": "http://example//not-a-comment",' in result["diff"]["after"]
    settings = {d["setting"].split(": ", 1)[1]: d for d in result["drift"]}
    assert all(d["setting"].startswith(str(path) + ": ") for d in result["drift"])
    assert settings["properties.allow_compat_mode"] == {
        "setting": "%s: properties.allow_compat_mode" % path, "expected": False, "actual": True}
    assert "blacklist.drivers" not in settings  # a key we do not manage is no difference
    assert "properties.url_like" not in settings


def test_module_keeps_a_backup_and_leaves_an_equal_vendor_file_alone(module_runner, tmp_path):
    path = tmp_path / "cufile.json"
    path.write_text(VENDOR)
    config = render_defaults()
    rc, result = module_runner("gds_cufile", {"path": str(path), "config": config})
    assert rc == 0 and result["changed"] and os.path.exists(result["backup_file"])
    with open(result["backup_file"]) as handle:
        assert handle.read() == VENDOR
    # a commented file that says the same thing is not rewritten
    same = "// site file\n" + json.dumps(config)
    path.write_text(same)
    rc, result = module_runner("gds_cufile", {"path": str(path), "config": config})
    assert result["changed"] is False and path.read_text() == same


def test_module_fails_before_writing_on_a_bad_key(module_runner, tmp_path):
    path = tmp_path / "cufile.json"
    path.write_text(VENDOR)
    config = render_defaults()
    config["properties"]["max_direct_io_size_kb"] = 1000.5
    rc, result = module_runner("gds_cufile", {"path": str(path), "config": config})
    assert rc != 0 and result["failed"]
    assert "properties.max_direct_io_size_kb: expected an integer (KB), got a number 1000.5" in result["msg"]
    assert path.read_text() == VENDOR


def test_module_refuses_a_malformed_file_naming_line_and_column(module_runner, tmp_path):
    path = tmp_path / "cufile.json"
    bad = '{\n    "logging": {"level": "ERROR"}\n    "profile": {}\n}\n'
    path.write_text(bad)
    for check_mode in (True, False):
        rc, result = module_runner("gds_cufile", {"path": str(path), "config": render_defaults()},
                                   check_mode=check_mode)
        assert rc != 0 and result["failed"]
        assert result["msg"].startswith("%s is not valid JSON at line 3 column 5" % path), result["msg"]
        assert path.read_text() == bad and os.listdir(tmp_path) == ["cufile.json"]
