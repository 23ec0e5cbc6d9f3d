"""Each role's interface has one source, its area's ROLE_SPEC: make roles (scripts/gen-roles.py)
writes the role's defaults, argument specs and docs/variables.md table from it, and a file that
differs from its spec fails here."""
import os
import re
import shutil
import subprocess
import sys
import warnings

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

from ansible_collections.gds.commission.plugins.module_utils import roles
from ansible_collections.gds.commission.plugins.module_utils.core.spec import NODE_ROOT, REPORTS_DIR, UNSET, on_node, reports_root

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission")
GEN = os.path.join(ROOT, "scripts", "gen-roles.py")
ROLE_DIRS = sorted(os.listdir(os.path.join(COLLECTION, "roles")))


def test_the_written_files_are_their_specs():
    out = subprocess.run([sys.executable, GEN, "--check"], capture_output=True, text=True)
    assert out.returncode == 0, "run make roles:\n" + out.stdout + out.stderr


def copy_of_the_tree(tmp_path):
    for part in ("scripts/gen-roles.py", "docs/variables.md"):
        os.makedirs(os.path.dirname(str(tmp_path / part)), exist_ok=True)
        shutil.copy(os.path.join(ROOT, part), str(tmp_path / part))
    shutil.copytree(COLLECTION, str(tmp_path / "collections/ansible_collections/gds/commission"),
                    ignore=shutil.ignore_patterns("tests", "__pycache__", "files"))
    return tmp_path


def test_a_hand_edit_is_named_and_make_roles_writes_it_back(tmp_path):
    tree = copy_of_the_tree(tmp_path)
    defaults = tree / "collections/ansible_collections/gds/commission/roles/gds_pcie_acs/defaults/main.yml"
    table = tree / "docs/variables.md"
    defaults.write_text(defaults.read_text().replace("gds_pcie_acs_persist: unit", "gds_pcie_acs_persist: cmdline"))
    table.write_text(table.read_text().replace("| `gds_raid_allow_destroy` | `false` |", "| `gds_raid_allow_destroy` | `true` |"))
    gen = str(tree / "scripts/gen-roles.py")
    out = subprocess.run([sys.executable, gen, "--check"], capture_output=True, text=True)
    assert out.returncode == 1
    assert out.stdout.split("\n")[:-1] == ["differs from its spec: collections/ansible_collections/gds/commission/roles/"
                                           "gds_pcie_acs/defaults/main.yml", "differs from its spec: docs/variables.md"]
    assert subprocess.run([sys.executable, gen], capture_output=True).returncode == 0
    assert "gds_pcie_acs_persist: unit\n" in defaults.read_text()
    assert subprocess.run([sys.executable, gen, "--check"], capture_output=True).returncode == 0


def test_a_section_missing_from_variables_md_is_named(tmp_path):
    tree = copy_of_the_tree(tmp_path)
    table = tree / "docs/variables.md"
    table.write_text(table.read_text().replace("## gds_merge\n", "## merging\n"))
    out = subprocess.run([sys.executable, str(tree / "scripts/gen-roles.py"), "--check"], capture_output=True, text=True)
    assert out.returncode != 0 and "no section '## gds_merge'" in out.stderr + out.stdout
    assert "Traceback" not in out.stderr


def test_every_role_has_a_spec_and_an_argument_spec():
    assert sorted(list(roles.BY_NAME) + list(roles.RENAMED)) == ROLE_DIRS
    for name in ROLE_DIRS:
        assert os.path.exists(os.path.join(COLLECTION, "roles", name, "meta", "argument_specs.yml")), name


@pytest.mark.parametrize("spec", roles.SPECS, ids=lambda spec: spec.name)
def test_a_role_names_its_variables_by_its_prefix_and_documents_them(spec):
    names = [var.name for var in spec.variables]
    assert len(names) == len(set(names)), names
    assert [n for n in names if not n.startswith(spec.prefix)] == []
    assert spec.prefix == spec.name + "_" or spec.name == "gds_common"  # a role is named for its variables
    assert all(var.doc and var.type for var in spec.variables)
    assert [var.name for var in spec.variables if var.choices and var.default not in (UNSET, None)
            and var.type == "str" and var.default not in var.choices and "{{" not in var.default] == []
    readme = open(os.path.join(COLLECTION, "roles", spec.name, "README.md")).read()
    assert [name for name in spec.defaults() if "`%s`" % name not in readme] == []
    for folder, _, files in os.walk(os.path.join(COLLECTION, "roles", spec.name)):
        for name in files:
            with open(os.path.join(folder, name), "rb") as handle:  # the role's files: build outputs too
                assert b"noqa" not in handle.read(), os.path.join(folder, name)


def test_a_path_on_the_node_is_below_its_root():
    assert on_node("/sys") == NODE_ROOT + "/sys"
    with pytest.raises(ValueError):
        on_node("sys")
    # the written defaults spell the node's root as NODE_ROOT does, and no other way
    for spec in roles.SPECS:
        for name, value in spec.defaults().items():
            if isinstance(value, str) and "gds_root" in value:
                assert value.startswith(NODE_ROOT + "/"), (spec.name, name, value)


def test_the_validators_patterns_keep_the_roles_apart():
    pattern = dict((role, re.compile(rule[0])) for role, rule in roles.ROLE_VARIABLES.items())
    assert pattern["gds_rdma"].match("gds_rdma_peermem") and not pattern["gds_rdma"].match("gds_rdma_bench_tests")
    assert pattern["gds_rdma_bench"].match("gds_rdma_bench_tests")
    assert pattern["gds_raid"].match("gds_raid_layout")
    # each validator is its area's, beside its spec
    for role, (_, validator) in roles.ROLE_VARIABLES.items():
        assert validator.__module__ == roles.AREAS[[a.ROLE_SPEC.name for a in roles.AREAS].index(role)].__name__, role


def test_the_report_reads_the_check_variable_of_every_role():
    from ansible_collections.gds.commission.plugins.module_utils.fleet.report_inputs import CHECK_VARS
    defaults = yaml.safe_load(open(os.path.join(COLLECTION, "roles", "gds_report", "defaults", "main.yml")))
    assert defaults["gds_report_check_vars"] == CHECK_VARS
    for spec in roles.SPECS:
        if spec.name not in ("gds_common", "gds_tune", "gds_report", "gds_merge", "gds_reboot"):
            assert re.match(CHECK_VARS, spec.prefix + "checks"), spec.name


@pytest.mark.parametrize("environ, config", [({}, "/site/ansible.cfg"), ({"GDS_REPORTS_DIR": "/data/reports"}, "/site/ansible.cfg"),
                                             ({}, None)])
def test_the_reports_directory_is_one_rule_for_the_roles_and_the_callback(monkeypatch, tmp_path, environ, config):
    monkeypatch.delenv("GDS_REPORTS_DIR", raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PWD", str(tmp_path))
    with warnings.catch_warnings():  # configured already by an earlier test: said, and harmless
        warnings.simplefilter("ignore")
        init_plugin_loader()
    rendered = Templar(loader=DataLoader(), variables={"ansible_config_file": config}).template(trust_as_template(REPORTS_DIR))
    assert rendered == reports_root(environ, config, str(tmp_path))
