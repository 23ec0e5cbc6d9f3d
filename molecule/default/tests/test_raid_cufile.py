"""Verify nvme_raid and cufile on the simulated nodes after converge (testinfra).

The simulated nodes live on the controller under gds_root (build/sim/<host>/ unless GDS_SIM_ROOT
says otherwise): the cufile.json that cuFile reads (through the alternatives link where the node
has the toolkit's) must be valid JSON (NVIDIA's comments allowed) whose flags follow gds_mode, and every array of the
RAID plan must have its scratch directory (the mount stand-in the benchmark uses).
"""
import os
import sys

PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
if os.path.join(PROJECT, "collections") not in sys.path:  # the collection's code, as ansible_collections.*
    sys.path.insert(0, os.path.join(PROJECT, "collections"))
sys.path.insert(0, os.path.join(PROJECT, "tests", "fixtures"))

from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover  # noqa: E402
from ansible_collections.gds.commission.plugins.module_utils.tune.cufile import NodePaths, loads, validate  # noqa: E402
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import (  # noqa: E402
    mounted_disks, read_mdstat, read_mounts, system_disks,
)
from ansible_collections.gds.commission.plugins.module_utils.tune.raid import desired_arrays, existing_arrays, plan  # noqa: E402

TABLE_5 = [["nvme0n1", "nvme1n1"], ["nvme4n1", "nvme5n1"], ["nvme6n1", "nvme7n1"],
           ["nvme8n1", "nvme9n1"]]


def _vars(host):
    return host.ansible.get_variables()


def _flag(value, default=False):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and "{{" not in value:
        return value.strip().lower() in ("true", "yes", "1", "on")
    return default


def _root(host):
    name = _vars(host)["inventory_hostname"]
    base = os.environ.get("GDS_SIM_ROOT") or os.path.join(PROJECT, "build", "sim")
    return os.path.join(base, name)


def _mode(host):
    mode = _vars(host).get("gds_mode", "nvfs")
    return mode if mode in ("nvfs", "p2pdma", "compat") else "nvfs"


def _cufile(host):
    """The file cuFile reads on the simulated node: its cufile.json, links followed below the root."""
    return NodePaths(_root(host)).resolve(os.path.join(_root(host), "etc", "cufile.json"))


def test_cufile_json_is_valid(host):
    cufile = host.file(_cufile(host))
    assert cufile.exists and cufile.is_file
    assert cufile.mode == 0o644
    config = loads(cufile.content_string, _cufile(host))  # cuFile's parser takes // comments too
    assert validate(config) == []
    assert set(config) >= {"logging", "profile", "execution", "properties", "fs", "denylist"}


def test_cufile_flags_follow_gds_mode(host):
    with open(_cufile(host)) as handle:
        props = loads(handle.read())["properties"]
    mode = _mode(host)
    overrides = _vars(host).get("gds_cufile_overrides") or {}
    if "allow_compat_mode" not in (overrides.get("properties") or {}):
        # commissioning: a silent POSIX fallback must show; compat mode only where it is the plan
        assert props["allow_compat_mode"] is (mode == "compat")
    assert props["use_pci_p2pdma"] is (mode == "p2pdma")


def test_every_planned_array_has_its_scratch_directory(host):
    root = _root(host)
    proc, sys_ = os.path.join(root, "proc"), os.path.join(root, "sys")
    facts, _ = discover(sys_, proc)
    host_vars = _vars(host)
    group_by = host_vars.get("gds_raid_group_by", "affinity")
    group_by = group_by if group_by in ("affinity", "switch") else "affinity"
    prefixes = {key: host_vars["gds_raid_" + key] for key in ("mount_prefix", "name_prefix")
                if isinstance(host_vars.get("gds_raid_" + key), str) and "{{" not in host_vars["gds_raid_" + key]}
    mdstat, mounts = read_mdstat(proc), read_mounts(proc)
    disk_mounts = mounted_disks(proc, sys_)
    # as the module does: the OS's drives from procfs and from the facts
    system = system_disks(proc, sys_) | {d["name"] for d in facts["nvme"] if d.get("system")}
    the_plan = plan(desired_arrays(facts, group_by, **prefixes),
                    existing_arrays(mdstat, mounts, disk_mounts=disk_mounts),
                    system=system, disk_mounts=disk_mounts, mounts=mounts,
                    allow_destroy=_flag(host_vars.get("gds_raid_allow_destroy")),
                    allow_unmount=_flag(host_vars.get("gds_raid_allow_unmount")), topology=facts)
    assert the_plan["result"], "the plan leaves no data array at all"
    for array in the_plan["result"]:
        if array["mount"]:
            scratch = host.file(root + array["mount"])
            assert scratch.is_directory, "%s: no scratch directory for %s" % (root, array["mount"])
    if host_vars.get("gds_sim_fixture") == "dgx-a100":
        members = [a["members"] for a in the_plan["result"]]
        # either the guide's Table 5, or (destroy not allowed) the DGX default md1 left alone
        assert members == TABLE_5 or the_plan["refused"]
