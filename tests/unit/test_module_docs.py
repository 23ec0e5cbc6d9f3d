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
MODULES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(COLLECTION, "plugins", "modules", "*.py")))
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


@pytest.mark.parametrize("module", MODULES)
def test_documentation_matches_argument_spec(module, monkeypatch):
    mod, spec = argument_spec(module, monkeypatch)
    doc = yaml.safe_load(mod.DOCUMENTATION)
    options = doc.get("options") or {}
    assert set(options) == set(spec), module
    for name, want in spec.items():
        for field in ("type", "default", "choices", "elements"):
            assert options[name].get(field) == want.get(field), (module, name, field)
    assert doc.get("extends_documentation_fragment"), "%s: attributes come from the gds fragment" % module
    yaml.safe_load(mod.EXAMPLES)
    assert RETURNS.get(module, set()) <= set(yaml.safe_load(mod.RETURN) or {}), module
