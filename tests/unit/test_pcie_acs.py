"""pcie_acs: ACS control read, cleared, restored and verified through the fixture trees' config files,
check mode that changes nothing, and the refusals (vfio-pci, lockdown, a write the kernel refuses)."""
import copy
import errno
import io
import json
import os
import struct
import sys

import pytest
import simtree

from ansible_collections.gds.commission.plugins.module_utils.tune.acs import (
    KERNEL_DEFAULT_CTRL, AcsError, AcsPlan, bridges_in_scope, decode, desired_ctrl,
    read_bridge, refusal_reason, write_ctrl,
)
from ansible_collections.gds.commission.plugins.module_utils.hw.platform import lockdown_state, vfio_devices
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission")
ACS_CTRL_AT = 0x148 + 6  # simtree puts ACS at 0x148, as QEMU's pcie-root-port does


def fixture(name, **changes):
    data = copy.deepcopy(simtree.load_fixture(name))
    for key, value in changes.items():
        data[key] = value
    return data


def ctrl_in_file(root, bdf):
    with open(os.path.join(root, "sys", "bus", "pci", "devices", bdf, "config"), "rb") as handle:
        handle.seek(ACS_CTRL_AT)
        return struct.unpack("<H", handle.read(2))[0]


def acs_bridges(root):
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    return [b["bdf"] for b in facts["bridges"] if b["acs_cap"] is not None]


def args_for(root, **extra):
    args = {"sysfs_root": os.path.join(root, "sys"), "procfs_root": os.path.join(root, "proc")}
    args.update(extra)
    return args


# --------------------------------------------------------------------------------------------
# module_utils
# --------------------------------------------------------------------------------------------
def test_read_bridge_uses_the_shared_walker(sim_node):
    root = sim_node("dgx-a100")
    entry = read_bridge(os.path.join(root, "sys"), "0000:04:10.0")
    assert entry["acs_offset"] == 0x148 and entry["acs_ctrl"] == 0x001D and entry["acs_cap"] == 0x005F
    assert entry["port_type"] == "downstream"
    upstream = read_bridge(os.path.join(root, "sys"), "0000:03:00.0")
    assert upstream["acs_offset"] is None and upstream["acs_ctrl"] is None


def test_desired_values_and_decoding():
    assert desired_ctrl("disabled", 0x5F, 0x1D) == 0
    assert desired_ctrl("enabled", 0x5F, 0x0) == KERNEL_DEFAULT_CTRL == 0x1D
    assert desired_ctrl("enabled", 0x5F, 0x40) == 0x5D  # keeps DT already set
    assert desired_ctrl("enabled", 0x05, 0x0) == 0x05   # only the bits the port has
    assert desired_ctrl("query", 0x5F, 0x1D) == 0x1D
    assert desired_ctrl("disabled", None, None) is None
    assert decode(0x1D) == "SV RR CR UF" and decode(0) == "off" and decode(None) == "no ACS capability"


def test_lockdown_and_vfio_readers(tmp_path):
    sysfs = tmp_path / "sys"
    assert lockdown_state(str(sysfs)) is None and vfio_devices(str(sysfs)) == []
    (sysfs / "kernel" / "security").mkdir(parents=True)
    (sysfs / "kernel" / "security" / "lockdown").write_text("none [integrity] confidentiality\n")
    assert lockdown_state(str(sysfs)) == "integrity"
    drv = sysfs / "bus" / "pci" / "drivers" / "vfio-pci"
    drv.mkdir(parents=True)
    for name in ("0000:3b:00.0", "bind", "new_id", "module"):
        (drv / name).write_text("")
    assert vfio_devices(str(sysfs)) == ["0000:3b:00.0"]


def test_write_reads_back(tmp_path):
    path = tmp_path / "config"
    path.write_bytes(bytes(4096))
    assert write_ctrl(str(path), 0x148, 0x1D) == 0x1D
    assert struct.unpack_from("<H", path.read_bytes(), ACS_CTRL_AT)[0] == 0x1D


class _Refusing(object):
    """A config file the kernel refuses to write (lockdown: EPERM; a dead link: EIO)."""

    def __init__(self, err):
        self.err = err

    def __call__(self, path, mode, buffering=-1):
        raise OSError(self.err, os.strerror(self.err), path)


class _Ignoring(io.BytesIO):
    """A device that accepts the write and keeps its old value (hardware-locked ACS)."""

    def __init__(self, path, mode, buffering=-1):
        with open(path, "rb") as handle:
            super(_Ignoring, self).__init__(handle.read())

    def write(self, data):
        return len(data)


def test_refused_write_names_bridge_and_lockdown(sim_node):
    root = sim_node("dgx-a100")
    plan = AcsPlan(os.path.join(root, "sys"), ["0000:04:10.0", "0000:04:14.0"], "disabled")
    with pytest.raises(AcsError) as err:
        plan.apply(lockdown="integrity", opener=_Refusing(errno.EPERM))
    text = str(err.value)
    assert "0000:04:10.0" in text and "lockdown is 'integrity'" in text and "Operation not permitted" in text
    assert plan.written == []
    assert ctrl_in_file(root, "0000:04:10.0") == 0x1D
    with pytest.raises(AcsError) as err:
        plan.apply(lockdown="none", opener=_Refusing(errno.EIO))
    assert "0000:04:10.0" in str(err.value) and "Input/output error" in str(err.value)


def test_ignored_write_is_detected(sim_node):
    root = sim_node("dgx-a100")
    plan = AcsPlan(os.path.join(root, "sys"), ["0000:04:10.0"], "disabled")
    with pytest.raises(AcsError, match="wrote ACS control 0x0000, read back 0x001d"):
        plan.apply(opener=_Ignoring)


def test_refusal_reasons():
    assert "read-only" in refusal_reason(OSError(errno.EROFS, "Read-only file system"), "none")
    assert "not root" in refusal_reason(OSError(errno.EACCES, "Permission denied"), "none")


# --------------------------------------------------------------------------------------------
# The module
# --------------------------------------------------------------------------------------------
def test_check_mode_changes_nothing_and_reports_every_bridge(sim_node, module_runner):
    root = sim_node("dgx-a100")
    before = simtree.file_hashes(root)
    rc, result = module_runner("pcie_acs", args_for(root), check_mode=True)
    assert rc == 0, result
    assert simtree.file_hashes(root) == before
    scope = acs_bridges(root)
    assert result["changed"] is True and len(scope) >= 20
    assert [b["bdf"] for b in result["bridges"]] == scope
    assert all(b["before"] == "0x001d" and b["after"] == "0x0000" for b in result["bridges"])
    assert {d["setting"] for d in result["drift"]} == {"acs: %s ACS control" % bdf for bdf in scope}
    assert result["written"] == []
    assert "0000:04:10.0 ACS control 0x001d (SV RR CR UF)" in result["diff"]["before"]
    assert "0000:04:10.0 ACS control 0x0000 (off)" in result["diff"]["after"]


def test_disable_writes_config_files_and_is_idempotent(sim_node, module_runner):
    root = sim_node("dgx-a100")
    scope = acs_bridges(root)
    before = simtree.file_hashes(root)
    rc, result = module_runner("pcie_acs", args_for(root))
    assert rc == 0 and result["changed"] is True, result
    assert result["written"] == scope
    assert all(ctrl_in_file(root, bdf) == 0 for bdf in scope)
    changed_files = {k for k, v in simtree.file_hashes(root).items() if before.get(k) != v}
    assert changed_files == {os.path.relpath(os.path.realpath(os.path.join(
        root, "sys", "bus", "pci", "devices", bdf, "config")), root) for bdf in scope}
    rc, again = module_runner("pcie_acs", args_for(root))
    assert rc == 0 and again["changed"] is False and again["drift"] == [] and again["written"] == []
    # and back to what the kernel enables at boot
    rc, enabled = module_runner("pcie_acs", args_for(root, state="enabled"))
    assert rc == 0 and enabled["changed"] is True
    assert all(ctrl_in_file(root, bdf) == 0x1D for bdf in scope)


def test_only_the_drifted_bridge_on_the_h100(sim_node, module_runner):
    root = sim_node("hgx-h100")
    rc, result = module_runner("pcie_acs", args_for(root), check_mode=True)
    assert rc == 0
    assert result["drift"] == [{"setting": "acs: 0000:39:02.0 ACS control", "expected": "0x0000",
                                "actual": "0x001d"}]
    assert "0000:39:02.0" in [b["bdf"] for b in result["bridges"]]


def test_query_reports_without_drift(sim_node, module_runner):
    root = sim_node("dgx-a100")
    before = simtree.file_hashes(root)
    rc, result = module_runner("pcie_acs", args_for(root, state="query"))
    assert rc == 0 and result["changed"] is False and result["drift"] == []
    assert simtree.file_hashes(root) == before
    assert all(b["before"] == b["after"] == "0x001d" for b in result["bridges"])


def test_explicit_bridges_bridge_without_acs_is_left_alone(sim_node, module_runner):
    root = sim_node("dgx-a100")
    rc, result = module_runner("pcie_acs", args_for(root, bridges=["04:10.0", "0000:03:00.0", "0000:04:10.0"]))
    assert rc == 0, result
    assert [b["bdf"] for b in result["bridges"]] == ["0000:04:10.0", "0000:03:00.0"]
    assert result["without_acs"] == ["0000:03:00.0"]
    assert result["bridges"][1]["before"] is None and result["written"] == ["0000:04:10.0"]
    assert any("0000:03:00.0" in w for w in result.get("warnings", []))
    assert ctrl_in_file(root, "0000:04:14.0") == 0x1D  # not in scope: untouched


def test_scope_is_the_bridges_named_else_the_topology_bridges_with_acs():
    topology = [{"bdf": "0000:03:00.0", "acs_cap": None, "acs_unknown": None},
                {"bdf": "0000:04:10.0", "acs_cap": 0x5F, "acs_unknown": None},
                {"bdf": "0000:04:14.0", "acs_cap": None, "acs_unknown": "config: 64 bytes"},
                {"bdf": "0000:05:00.0", "acs_cap": 0x1F, "acs_unknown": None}]
    # unreadable ACS stays in scope (reading it then fails naming the file), in topology order
    assert bridges_in_scope([], topology) == ["0000:04:10.0", "0000:04:14.0", "0000:05:00.0"]
    assert bridges_in_scope(["04:14.0", "0000:03:00.0", "0000:04:14.0"], topology) == ["0000:04:14.0", "0000:03:00.0"]
    assert bridges_in_scope([], None) == []
    with pytest.raises(AcsError, match="bridges: 'nope' is not a PCI address"):
        bridges_in_scope(["nope"], topology)


def test_module_takes_its_scope_from_the_topology_facts_it_is_given(sim_node, module_runner):
    """The role passes gds_topology's bridges: the module decides from them, without reading the
    topology again (here the facts name one bridge, and only that one is written)."""
    root = sim_node("dgx-a100")
    facts, _ = discover(os.path.join(root, "sys"), os.path.join(root, "proc"))
    one = [b for b in facts["bridges"] if b["bdf"] == "0000:04:10.0"]
    rc, result = module_runner("pcie_acs", args_for(root, topology_bridges=one + [
        dict(b, acs_cap=None) for b in facts["bridges"] if b["bdf"] != "0000:04:10.0"]))
    assert rc == 0, result
    assert [b["bdf"] for b in result["bridges"]] == result["written"] == ["0000:04:10.0"]
    assert ctrl_in_file(root, "0000:04:14.0") == 0x1D


def test_no_bridge_in_scope_changes_and_reads_nothing(sim_node, module_runner):
    data = fixture("dgx-a100")
    data["nics"] = [dict(n, driver="vfio-pci") if n["rdma"] == "mlx5_1" else n for n in data["nics"]]
    root = sim_node(data)
    rc, result = module_runner("pcie_acs", args_for(root, topology_bridges=[]))
    assert rc == 0 and result["changed"] is False and result["bridges"] == []
    # nothing is changed, so no vfio-pci binding stands in the way (and the role records no vfio check)
    assert result["vfio_devices"] == [] and result["lockdown"] is None


@pytest.mark.parametrize("bridges,needle", [
    (["0000:04:10.0", "not-a-bdf"], "bridges: 'not-a-bdf' is not a PCI address"),
    ("0000:04:10.0,04:99.9", "bridges: '04:99.9' is not a PCI address"),
    (["0000:7f:00.0"], "bridge 0000:7f:00.0: no such PCI device"),
])
def test_bad_bridge_lists_fail_naming_the_option(sim_node, module_runner, bridges, needle):
    root = sim_node("dgx-a100")
    rc, result = module_runner("pcie_acs", args_for(root, bridges=bridges))
    assert rc != 0 and result["failed"] and needle in result["msg"], result


@pytest.mark.parametrize("args,needle", [
    ({"state": "off"}, "value of state must be one of: disabled, enabled, query"),
    ({"allow_with_vfio": "sometimes"}, "allow_with_vfio"),
])
def test_bad_option_values(sim_node, module_runner, args, needle):
    root = sim_node("dgx-a100")
    rc, result = module_runner("pcie_acs", args_for(root, **args))
    assert rc != 0 and needle in result["msg"], result


def test_truncated_config_space_is_an_error_not_no_acs(sim_node, module_runner):
    data = fixture("dgx-a100")
    data["bridges"] = dict(data["bridges"])
    root = sim_node(data)
    path = os.path.join(root, "sys", "bus", "pci", "devices", "0000:04:10.0", "config")
    with open(path, "rb") as handle:
        head = handle.read(64)
    with open(path, "wb") as handle:
        handle.write(head)  # what a non-root reader gets
    rc, result = module_runner("pcie_acs", args_for(root, bridges=["0000:04:10.0"]))
    assert rc != 0 and "0000:04:10.0" in result["msg"] and "needs root" in result["msg"]


def test_vfio_bound_device_refuses_and_changes_nothing(sim_node, module_runner):
    data = fixture("dgx-a100")
    data["nics"] = [dict(n, driver="vfio-pci") if n["rdma"] == "mlx5_1" else n for n in data["nics"]]
    root = sim_node(data)
    before = simtree.file_hashes(root)
    for check_mode in (True, False):
        rc, result = module_runner("pcie_acs", args_for(root), check_mode=check_mode)
        assert rc != 0 and result["failed"]
        assert "vfio-pci (0000:12:00.0)" in result["msg"] and "allow_with_vfio" in result["msg"]
        assert result["changed"] is False and result["vfio_devices"] == ["0000:12:00.0"]
        assert result["drift"], "the refusal still says what differs"
    assert simtree.file_hashes(root) == before
    rc, result = module_runner("pcie_acs", args_for(root, allow_with_vfio=True))
    assert rc == 0 and result["changed"] is True


def test_vfio_is_no_reason_to_fail_when_nothing_changes(sim_node, module_runner):
    data = fixture("hgx-h100")
    data["acs"] = {"ctrl": 0}
    data["nics"] = [dict(n, driver="vfio-pci") if n["rdma"] == "mlx5_0" else n for n in data["nics"]]
    root = sim_node(data)
    rc, result = module_runner("pcie_acs", args_for(root))
    assert rc == 0 and result["changed"] is False and result["vfio_devices"] == ["0000:19:00.0"]


def test_lockdown_refuses_before_writing(sim_node, module_runner):
    data = fixture("dgx-a100")
    data["files"] = dict(data["files"], **{"sys/kernel/security/lockdown": "none [integrity] confidentiality\n"})
    root = sim_node(data)
    before = simtree.file_hashes(root)
    rc, result = module_runner("pcie_acs", args_for(root))
    assert rc != 0 and result["lockdown"] == "integrity"
    assert "kernel lockdown is 'integrity'" in result["msg"] and "0000:04:10.0" in result["msg"]
    assert "pci=config_acs=" in result["msg"]
    assert simtree.file_hashes(root) == before


def _run_in_process(module, args, monkeypatch, capsys):
    """Run plugins/modules/<module>.py in this process (to patch what it calls); returns the result dict."""
    from ansible.module_utils import basic
    from ansible.module_utils.common.text.converters import to_bytes
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    sys.path.insert(0, os.path.join(COLLECTION, "plugins", "modules"))
    try:
        mod = __import__(module)
        with pytest.raises(SystemExit):
            mod.main()
    finally:
        sys.path.pop(0)
        sys.modules.pop(module, None)
    return json.loads(capsys.readouterr().out)


def test_module_reports_a_write_the_kernel_refuses(sim_node, monkeypatch, capsys):
    """Lockdown off as far as the file says, but the kernel still answers EPERM (a distribution
    kernel that locks down config writes under Secure Boot without the LSM file, for one)."""
    from ansible_collections.gds.commission.plugins.module_utils.tune import acs as gds_acs
    root = sim_node("dgx-a100")
    real = gds_acs.write_ctrl
    calls = []

    def refuse_second(path, offset, value, opener=open):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.EPERM, "Operation not permitted", path)
        return real(path, offset, value, opener)

    monkeypatch.setattr(gds_acs, "write_ctrl", refuse_second)
    result = _run_in_process("pcie_acs", args_for(root), monkeypatch, capsys)
    scope = acs_bridges(root)
    assert result["failed"] is True
    assert "bridge %s: writing ACS control 0x0000" % scope[1] in result["msg"]
    assert "Operation not permitted" in result["msg"] and "lockdown none" in result["msg"]
    assert result["written"] == scope[:1] and result["changed"] is True
    assert ctrl_in_file(root, scope[0]) == 0 and ctrl_in_file(root, scope[1]) == 0x1D
