"""The facts have a schema (plugins/module_utils/hw/facts_schema.py): the real gds_topology and
gds_platform output of every fixture node, with and without NVML, is valid against it; the
schema knows every key (no other is allowed) and the modules' RETURN names the same ones; the
report's input shape comes from it."""
import copy
import glob
import json
import os
import subprocess
import sys
import tarfile

import jsonschema
import pytest
import yaml

from ansible_collections.gds.commission.plugins.module_utils.fleet import report as gds_report
from ansible_collections.gds.commission.plugins.module_utils.hw.facts_schema import FACTS_SCHEMA, PLATFORM, TOPOLOGY
from conftest import COLLECTION, ROOT, run_module
from test_gds_platform import fake_pynvml  # noqa: F401  (a fixture: NVML answering like two A100s)

CAPTURED = os.path.join(ROOT, "tests", "fixtures", "captured")
FIXTURES = sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(ROOT, "tests", "fixtures", "*.yml")))
VALIDATOR = jsonschema.Draft202012Validator(FACTS_SCHEMA)


def problems(facts):
    """Every place where ``facts`` ({gds_topology, gds_platform}) is not what the schema says."""
    return ["%s: %s" % ("/".join(map(str, e.absolute_path)), e.message[:200]) for e in VALIDATOR.iter_errors(facts)]


def module_facts(root, **extra):
    """{gds_topology, gds_platform} as the modules return them for the node at ``root``."""
    paths = {"sysfs_root": os.path.join(root, "sys"), "procfs_root": os.path.join(root, "proc")}
    rc, topo = run_module("gds_topology", dict(paths, **extra.get("topology", {})))
    assert rc == 0, topo
    rc, plat = run_module("gds_platform", dict(paths, root=root, **extra.get("platform", {})))
    assert rc == 0, plat
    return {"gds_topology": topo["ansible_facts"]["gds_topology"], "gds_platform": plat["ansible_facts"]["gds_platform"]}


def test_the_schema_is_a_schema():
    jsonschema.Draft202012Validator.check_schema(FACTS_SCHEMA)
    assert len(FIXTURES) >= 5 and "dgx-a100" in FIXTURES


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_fixture_nodes_facts_are_valid(sim_node, fixture):
    facts = module_facts(sim_node(fixture, fixture))
    assert problems(facts) == [], fixture


@pytest.mark.parametrize("name", sorted(f[:-4] for f in os.listdir(CAPTURED) if f.endswith(".tgz"))
                         if os.path.isdir(CAPTURED) else [])
def test_every_captured_machines_facts_are_valid(tmp_path, name):
    """The machines scripts/capture-node.py captured (tests/fixtures/captured/NAME.tgz)."""
    with tarfile.open(os.path.join(CAPTURED, name + ".tgz")) as tar:
        tar.extractall(tmp_path, filter="tar")
    assert problems(module_facts(str(tmp_path / name))) == [], name


def test_facts_with_nvml_are_valid(sim_node, fake_pynvml):
    """What only NVML gives: GPU names in the topology, the platform's GPU list."""
    facts = module_facts(sim_node("dgx-a100"), topology={"gpu_index_source": "nvml"}, platform={"gpu_source": "nvml"})
    assert facts["gds_platform"]["gpus"] and facts["gds_platform"]["nvml"]["used"]
    assert facts["gds_topology"]["index_source"] == "nvml" and "name" in facts["gds_topology"]["gpus"][0]
    assert problems(facts) == []


def test_the_schema_refuses_what_the_modules_never_return(sim_node):
    """Not a schema that takes anything: an unknown key, a missing one, a wrong type, a bad
    address are each named."""
    good = module_facts(sim_node("hgx-h100"))
    cases = [
        (("gds_topology", "gpus", 0, "colour"), "blue", "Additional properties"),
        (("gds_topology", "nvme", 0, "system"), "no", "is not of type 'boolean'"),
        (("gds_topology", "pcie_links", 0, "bdf"), "07:00.0", "does not match"),
        (("gds_topology", "groups", 0, "link"), "FAR", "is not valid under any of the given schemas"),
        (("gds_platform", "iommu", "mode"), "maybe", "is not one of"),
        (("gds_platform", "udev", "devices"), {}, "is not of type 'array'"),
    ]
    for path, value, message in cases:
        bad = copy.deepcopy(good)
        place = bad
        for key in path[:-1]:
            place = place[key]
        place[path[-1]] = value
        found = problems(bad)
        assert len(found) == 1 and message in found[0], (path, found)
    bad = copy.deepcopy(good)
    del bad["gds_platform"]["p2pdma"]
    assert problems(bad) == ["gds_platform: 'p2pdma' is a required property"]


def returned_keys(module, fact):
    with open(os.path.join(COLLECTION, "plugins", "modules", module + ".py")) as handle:
        source = handle.read()
    text = source.split('RETURN = r"""', 1)[1].split('"""', 1)[0]
    return set(yaml.safe_load(text)["ansible_facts"]["contains"][fact]["contains"])


@pytest.mark.parametrize("module, part", [("gds_topology", TOPOLOGY), ("gds_platform", PLATFORM)])
def test_each_modules_return_documentation_names_the_schemas_keys(module, part):
    assert returned_keys(module, module) == set(part["properties"])


def test_the_schema_prints_as_json():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "collections"))
    proc = subprocess.run([sys.executable, "-m", "ansible_collections.gds.commission.plugins.module_utils.hw.facts_schema"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == FACTS_SCHEMA


def test_the_reports_input_shape_comes_from_the_schema(sim_node):
    """The report walked a shape of its own (a third description of the topology): a list the
    schema has but that shape did not (a drive's controllers, a NIC's netdevs) let a host with
    text there through; now the host is ERROR, naming the place."""
    topology = module_facts(sim_node("dgx-a100"))["gds_topology"]
    assert gds_report.input_problems({"topology": topology}) == []
    for path, value in ((("nvme", 0, "controllers"), "nvme0"), (("nics", 0, "netdevs"), {"ib0": 1}),
                        (("numa_nodes",), 0)):
        bad = copy.deepcopy(topology)
        place = bad
        for key in path[:-1]:
            place = place[key]
        place[path[-1]] = value
        found = gds_report.input_problems({"topology": bad})
        where = "topology." + ".".join("%s" % k for k in path).replace(".0.", "[0].")
        assert found and found[0][0] == "topology" and found[0][1].startswith(where + " is "), (path, found)


def test_facts_entering_a_module_are_held_to_the_schema_naming_the_key(sim_node):
    """fact_error, where facts enter (gds_netfs, gds_raid): the real facts pass, and a value of the
    wrong kind is named by its key and value; a key the reader does not take is not looked at."""
    from ansible_collections.gds.commission.plugins.module_utils.hw.facts_schema import fact_error
    from ansible_collections.gds.commission.plugins.module_utils.tune.raid import RaidError, desired_arrays
    topology = module_facts(sim_node("dgx-a100"))["gds_topology"]
    assert fact_error(topology, TOPOLOGY, "topology") is None
    cases = [
        (("nvme", 0, "name"), 5, "topology.nvme[0].name is 5, expected a string"),
        (("gpus", 1, "nic_link"), "FAR", "topology.gpus[1].nic_link is 'FAR', expected one of PIX, PXB, PHB, NODE, SYS"),
        (("gpus", 0, "index"), True, "topology.gpus[0].index is True, expected a whole number"),
        (("gpus", 0, "index"), -1, "topology.gpus[0].index is -1, expected at least 0"),
        (("matrix", "GPU0"), "PIX", "topology.matrix.GPU0 is 'PIX', expected a mapping"),
        (("nvme", 0, "switch"), 7, "topology.nvme[0].switch is 7, expected a string or null"),
    ]
    for path, value, words in cases:
        bad = copy.deepcopy(topology)
        node = bad
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        assert fact_error(bad, TOPOLOGY, "topology") == words
        assert fact_error(bad, TOPOLOGY, "topology", keys=("disks",)) is None
    bad = copy.deepcopy(topology)
    bad["nvme"][0]["system"] = "no"
    with pytest.raises(RaidError, match=r"topology.nvme\[0\].system is 'no', expected true or false"):
        desired_arrays(bad)
