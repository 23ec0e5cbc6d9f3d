"""docs/architecture.md held against the tree: its code map names every module_utils file, its
module, plugin and role tables every module, plugin and role, its playbook list every playbook,
and each name the module table says a module calls is in that module's source."""
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission")
DOC = open(os.path.join(ROOT, "docs", "architecture.md")).read()


def section(heading):
    start = DOC.index(heading + "\n")
    level = heading.split(" ")[0]
    end = re.compile(r"^#{1,%d} " % len(level), re.M).search(DOC, start + len(heading) + 1)
    return DOC[start:end.start() if end else len(DOC)]


def first_column(text):
    return [m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", text, re.M)]


def files(folder, suffix):
    return sorted(name[:-len(suffix)] for name in os.listdir(os.path.join(COLLECTION, folder))
                  if name.endswith(suffix) and not name.startswith("__"))


def test_the_code_map_names_every_module_utils_file_and_no_other():
    listed = first_column(section("### module_utils, by layer"))
    tree = []
    for folder, _, names in os.walk(os.path.join(COLLECTION, "plugins", "module_utils")):
        tree += [os.path.relpath(os.path.join(folder, n), COLLECTION) for n in names
                 if n.endswith(".py") and n != "__init__.py"]
    assert sorted(set(listed)) == sorted(tree)


def test_the_plugin_table_names_every_plugin():
    listed = set(first_column(section("### Plugins")))
    for kind in ("action", "callback", "filter", "vars", "doc_fragments"):
        for name in files(os.path.join("plugins", kind), ".py"):
            assert "plugins/%s/%s.py" % (kind, name) in listed


def test_the_module_table_names_every_module_and_what_it_calls():
    table = section("### Modules")
    assert sorted(first_column(table)) == files(os.path.join("plugins", "modules"), ".py")
    for row in re.finditer(r"^\| `([a-z0-9_]+)` \| (.*?) \| (.*) \|$", table, re.M):
        module, calls = row.group(1), row.group(2)
        source = open(os.path.join(COLLECTION, "plugins", "modules", module + ".py")).read()
        for area, names in re.findall(r"`?((?:core|hw|tune|measure|fleet)/[a-z0-9_]+)`? \(([^)]*)\)", calls):
            assert os.path.exists(os.path.join(COLLECTION, "plugins", "module_utils", area + ".py")), (module, area)
            for name in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", names):
                assert re.search(r"\b%s\b" % name, source), "%s does not call %s" % (module, name)


def test_the_role_table_names_every_role():
    from ansible_collections.gds.commission.plugins.module_utils.roles import RENAMED
    listed = set(first_column(section("## Roles and their order")))
    assert sorted(listed) == sorted(set(os.listdir(os.path.join(COLLECTION, "roles"))) - set(RENAMED))


@pytest.mark.parametrize("playbook", files("playbooks", ".yml"))
def test_the_playbook_list_names_every_playbook(playbook):
    listing = section("## Roles and their order")
    assert re.search(r"^playbooks/%s\.yml" % playbook, listing, re.M), playbook
