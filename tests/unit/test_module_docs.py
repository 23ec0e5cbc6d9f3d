"""Every module's DOCUMENTATION mirrors its argument spec, and DOCUMENTATION, EXAMPLES and RETURN
parse as YAML (ansible-doc and docs/modules.md read them)."""
import glob
import os
import sys

import pytest
import yaml
from ansible.module_utils import basic

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission")
# a module file that documents an action plugin of the same name (plugins/action/) has no main()
ACTIONS = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(COLLECTION, "plugins", "action", "*.py")))
MODULES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(COLLECTION, "plugins", "modules", "*.py"))
                 if os.path.basename(p)[:-3] not in ACTIONS)
# return keys the roles and the report rely on, per module
RETURNS = {
    "gds_cufile": {"checks", "drift", "alternative", "file", "layout"},
    "gds_raid": {"arrays", "plan", "mounts", "checks", "drift", "executed"},
    "gds_bench": {"results", "checks"},
    "pcie_acs": {"bridges"},
}


class _Stop(Exception):
    pass


def argument_spec(module, monkeypatch):
    """The argument spec main() hands to AnsibleModule, captured before anything runs."""
    seen = {}

    def capture(self, argument_spec, **kwargs):
        seen.update(argument_spec)
        raise _Stop()

    monkeypatch.setattr(basic.AnsibleModule, "__init__", capture)
    monkeypatch.syspath_prepend(os.path.join(COLLECTION, "plugins", "modules"))
    try:
        mod = __import__(module)
        with pytest.raises(_Stop):
            mod.main()
    finally:
        sys.modules.pop(module, None)
    return mod, seen


def fragment_options(fragments):
    """The options the collection's doc fragments named (``gds.commission.gds.sysfs``) add, as
    ansible-doc merges them."""
    from ansible_collections.gds.commission.plugins.doc_fragments.gds import ModuleDocFragment
    options = {}
    for name in fragments:
        if name.startswith("gds.commission.gds"):
            part = name[len("gds.commission.gds"):].lstrip(".") or "documentation"
            options.update(yaml.safe_load(getattr(ModuleDocFragment, part.upper())).get("options") or {})
    return options


@pytest.mark.parametrize("module", MODULES)
def test_documentation_matches_argument_spec(module, monkeypatch):
    mod, spec = argument_spec(module, monkeypatch)
    doc = yaml.safe_load(mod.DOCUMENTATION)
    options = dict(doc.get("options") or {})
    options.update(fragment_options(doc.get("extends_documentation_fragment") or []))
    assert set(options) == set(spec), module
    for name, want in spec.items():
        for field in ("type", "default", "choices", "elements"):
            assert options[name].get(field) == want.get(field), (module, name, field)
    assert doc.get("extends_documentation_fragment"), "%s: attributes come from the gds fragment" % module
    yaml.safe_load(mod.EXAMPLES)
    assert RETURNS.get(module, set()) <= set(yaml.safe_load(mod.RETURN) or {}), module


@pytest.mark.parametrize("action", ACTIONS)
def test_each_action_is_documented_by_its_module_file_option_for_option(action):
    """ansible-doc reads an action plugin's documentation from the module file of its name: every
    argument the action takes (_VALID_ARGS) is an option there, and nothing else."""
    import importlib
    path = os.path.join(COLLECTION, "plugins", "modules", action + ".py")
    assert os.path.exists(path), "%s: no plugins/modules/%s.py documents the action" % (action, action)
    namespace = {}
    with open(path) as handle:
        exec(compile(handle.read(), path, "exec"), namespace)
    assert "main" not in namespace, "%s: the action runs on the controller; its module file only documents it" % action
    doc = yaml.safe_load(namespace["DOCUMENTATION"])
    plugin = importlib.import_module("ansible_collections.gds.commission.plugins.action." + action)
    assert set(doc["options"]) == set(plugin.ActionModule._VALID_ARGS), action
    yaml.safe_load(namespace["EXAMPLES"])
    yaml.safe_load(namespace["RETURN"])


# --------------------------------------------------------------------------------------------
# Filters: ansible-doc documents each one (plugins/filter/<name>.yml), its options the function's
# --------------------------------------------------------------------------------------------
def _filters():
    """{name: (function, its module)} of every filter the collection's filter plugins export (the
    module's own function of that name, where FilterModule wraps it)."""
    import importlib
    out = {}
    for path in sorted(glob.glob(os.path.join(COLLECTION, "plugins", "filter", "*.py"))):
        module = importlib.import_module("ansible_collections.gds.commission.plugins.filter." + os.path.basename(path)[:-3])
        out.update((name, (getattr(module, name, function), module)) for name, function in module.FilterModule().filters().items())
    return out


def _parameters(name, function, module):
    """The options a filter takes beyond its input: its own parameters, or for a filter that
    hands its keywords on (**kwargs), those of the module_utils function it calls (the one of
    its name without gds_, in a module_utils module the filter imports)."""
    import inspect
    import types
    params = list(inspect.signature(function).parameters.values())[1:]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        [target] = [getattr(m, name[len("gds_"):]) for m in vars(module).values()
                    if isinstance(m, types.ModuleType) and hasattr(m, name[len("gds_"):])]
        params = list(inspect.signature(target).parameters.values())[1:]
    return {p.name for p in params}


def test_ansible_doc_documents_every_filter():
    import json
    import subprocess
    filters = _filters()
    assert len(filters) >= 10 and "gds_report_hosts" in filters
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    bin_dir = os.path.dirname(sys.executable)
    listed = subprocess.run([os.path.join(bin_dir, "ansible-doc"), "-t", "filter", "-l", "gds.commission"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert listed.returncode == 0 and "UNDOCUMENTED" not in listed.stdout, listed.stdout + listed.stderr
    names = ["gds.commission." + name for name in sorted(filters)]
    proc = subprocess.run([os.path.join(bin_dir, "ansible-doc"), "-t", "filter", "--json"] + names,
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    for name, (function, module) in sorted(filters.items()):
        doc = docs["gds.commission." + name]["doc"]
        assert doc["name"] == name, "%s shows the documentation of %s" % (name, doc["name"])
        assert set(doc["options"]) - {"_input"} == _parameters(name, function, module), name
        assert docs["gds.commission." + name]["examples"] and docs["gds.commission." + name]["return"], name
