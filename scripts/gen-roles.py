#!/usr/bin/env python3
"""make roles: each role's defaults/main.yml, meta/argument_specs.yml and its table in
docs/variables.md, written from its spec (ROLE_SPEC of its area in plugins/module_utils, listed in
module_utils/roles.py). --check writes nothing and exits 1 naming each file that differs."""
import argparse
import copy
import json
import os
import re
import sys
import textwrap

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission")
VARIABLES_MD = os.path.join(ROOT, "docs", "variables.md")
sys.path.insert(0, os.path.join(ROOT, "collections"))

from ansible_collections.gds.commission.plugins.module_utils import roles  # noqa: E402
from ansible_collections.gds.commission.plugins.module_utils.core.spec import SHARED, UNSET  # noqa: E402

GENERATED = "# Written by make roles from %s (ROLE_SPEC); edit it there.\n"
TABLE_HEAD = "| variable | default | type | meaning |\n| --- | --- | --- | --- |\n"


class _Dumper(yaml.SafeDumper):
    """Block YAML as the project writes it: Jinja and quotes in double quotes, long strings folded,
    the one anchor an entry point that is main's."""
    main_entry = None

    def ignore_aliases(self, data):
        return data is not self.main_entry

    def generate_anchor(self, node):
        return "main"

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def _str(dumper, value):
    style = None
    if len(value) > 120:
        style = ">"
    elif "{{" in value or "'" in value:
        style = '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _dict(dumper, value):
    return dumper.represent_mapping("tag:yaml.org,2002:map", value, flow_style=not value)


def _list(dumper, value):
    flat = all(isinstance(item, (str, int, float, bool)) for item in value) and len(repr(value)) < 80
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flat)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(dict, _dict)
_Dumper.add_representer(list, _list)


def dump(data, main_entry=None):
    _Dumper.main_entry = main_entry
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=110, allow_unicode=True)


def shared_var(name):
    if name in SHARED:
        return SHARED[name]
    for spec in roles.SPECS:
        if spec.variable(name):
            return spec.variable(name)
    raise SystemExit("gen-roles: no role and no SHARED entry defines %s" % name)


def area_file(spec):
    for area in roles.AREAS:
        if area.ROLE_SPEC is spec:
            return "plugins/module_utils/" + area.__name__.split(".module_utils.")[1].replace(".", "/") + ".py"
    return "plugins/module_utils/roles.py"


def defaults_text(spec):
    out = ["---\n", GENERATED % area_file(spec)]
    for var in spec.variables:
        if var.default is UNSET:
            continue
        out.extend("# %s\n" % line for line in textwrap.wrap(var.doc, 98, break_on_hyphens=False))
        out.append(dump({var.name: copy.deepcopy(var.default)}))
    return "".join(out)


def options(names):
    return dict((name, var.argument_spec()) for name, var in names)


def argument_specs_text(spec):
    own = spec.variables if spec.main_variables is None else [spec.variable(n) for n in spec.main_variables]
    main = {"short_description": spec.short_description}
    if spec.description:
        main["description"] = list(spec.description)
    main["options"] = options([(v.name, v) for v in own] + [(n, shared_var(n)) for n in spec.shared])
    entries = {"main": main}
    for name, entry in spec.entry_points.items():
        if entry == "main":
            entries[name] = main
            continue
        point = {"short_description": entry.short_description}
        if entry.description:
            point["description"] = list(entry.description)
        names = [v.name for v in own] + list(spec.shared) if entry.variables is None else entry.variables
        point["options"] = options([(n, spec.variable(n) or shared_var(n)) for n in names])
        entries[name] = point
    return "---\n" + GENERATED % area_file(spec) + dump({"argument_specs": entries}, main_entry=main)


DEPRECATED = "Deprecated: renamed gds.commission.%s (removed in 2.0.0)"
SHIM_META = """---
# Written by make roles: the old name of gds.commission.%(new)s, kept for the deprecation period.
galaxy_info:
  author: gds-commission contributors
  description: "%(deprecated)s"
  license: GPL-3.0-or-later
  min_ansible_version: "2.19"
  platforms:
    - name: Ubuntu
      versions: [jammy, noble]
    - name: Debian
      versions: [bookworm]
  galaxy_tags: [gpudirect, storage]
dependencies: []
"""
SHIM_TASKS = """---
# Written by make roles: gds.commission.%(old)s is the old name of gds.commission.%(new)s; this entry
# point is that role's %(entry)s (its argument specs, copied here, checked the variables already).
- name: Say that the role was renamed
  ansible.builtin.debug:
    msg: "gds.commission.%(old)s is deprecated: use gds.commission.%(new)s, the same role (removed in 2.0.0)"
  run_once: true

- name: Run gds.commission.%(new)s
  ansible.builtin.import_role:
    name: gds.commission.%(new)s
%(tasks_from)s    rolespec_validate: false
"""
SHIM_README = """# %(old)s (deprecated)

Written by `make roles`. The role was renamed **`gds.commission.%(new)s`**, after its variables
(`%(prefix)s*`); this name keeps working, with a note on the console, until 2.0.0. Each entry
point (%(entries)s) runs the same entry point of
[`%(new)s`](../%(new)s/README.md), with the same variables.
"""


def shim_files(spec):
    """The role of ``spec``'s old name: its meta, argument specs (main's marked deprecated), one
    task file per entry point importing the new role's, and a README."""
    base = os.path.join(COLLECTION, "roles", spec.renamed_from)
    names = dict(old=spec.renamed_from, new=spec.name, prefix=spec.prefix, deprecated=DEPRECATED % spec.name)
    specs = yaml.safe_load(argument_specs_text(spec))["argument_specs"]
    for entry in {id(entry): entry for entry in specs.values()}.values():  # main's aliases once
        entry["short_description"] = "%s. %s" % (DEPRECATED % spec.name, entry["short_description"])
    files = {os.path.join(base, "meta", "main.yml"): SHIM_META % names,
             os.path.join(base, "meta", "argument_specs.yml"): "---\n" + GENERATED % area_file(spec)
             + dump({"argument_specs": specs}, main_entry=specs["main"]),
             os.path.join(base, "README.md"): SHIM_README % dict(names, entries=", ".join("`%s`" % e for e in specs))}
    for entry in specs:
        files[os.path.join(base, "tasks", entry + ".yml")] = SHIM_TASKS % dict(
            names, entry="`%s` entry point" % entry if entry != "main" else "main",
            tasks_from="" if entry == "main" else "    tasks_from: %s\n" % entry)
    return files


TUNE_HEAD = """---
# Written by make roles from plugins/module_utils/roles.py (TUNE_STEPS); edit it there.
# The tuning procedure: each step compares the node with what GPUDirect Storage needs, changes what
# differs (nothing in check mode, where it reports the difference) and records its checks.

# Each step runs its role's `steps` entry point: main without the gds_common preamble, which
# checks the variables (validate.yml's play, the first of tune.yml and drift.yml, tagged always,
# checked them on every host against the same argument specs) and that gds_facts read the facts
# (its first step, below, in this play). Neither again here, per host and step.
"""
TUNE_STEP = """
%(why)s- name: %(name)s
  ansible.builtin.import_role:
    name: gds.commission.%(role)s
    tasks_from: steps
    rolespec_validate: false
  tags: [%(tags)s]
"""
TUNE_VARS = """---
# Written by make roles from plugins/module_utils/roles.py (CHECKED_ROLES); edit it there.
# the roles whose variables tune.yml and drift.yml check before anything runs (each has a
# `validate` entry point): the steps of tasks/main.yml, and gds_reboot, which tune.yml runs last
__gds_tune_roles: [%s]
"""


def tune_files():
    """gds_tune's procedure (tasks/main.yml) and the roles its validate play checks (vars/main.yml)."""
    base = os.path.join(COLLECTION, "roles", "gds_tune")
    steps = "".join(TUNE_STEP % dict(role=step.role, name=step.name, tags=", ".join(step.tags),
                                     why="".join("# %s\n" % line for line in textwrap.wrap(step.why, 98, break_on_hyphens=False)))
                    for step in roles.TUNE_STEPS)
    return {os.path.join(base, "tasks", "main.yml"): TUNE_HEAD + steps,
            os.path.join(base, "vars", "main.yml"): TUNE_VARS % ", ".join(roles.CHECKED_ROLES)}


def cell(text):
    return text.replace("|", "\\|")


def table_text(spec):
    rows = []
    for var in spec.variables:
        if var.default is UNSET:
            default = "unset"
        elif isinstance(var.default, str):
            default = "`%s`" % var.default if var.default else '`""`'
        else:
            default = "`%s`" % json.dumps(var.default, separators=(", ", ": ")).replace('"', "")
        kind = var.type + (" of %s" % var.elements if var.elements else "")
        if var.choices is not None:
            kind += ": " + ", ".join("`%s`" % c for c in var.choices)
        rows.append("| `%s` | %s | %s | %s |\n" % (var.name, cell(default), cell(kind), cell(var.doc)))
    return TABLE_HEAD + "".join(rows)


def variables_md(text):
    """docs/variables.md with each role's table (the first table after its heading) written anew."""
    for spec in roles.SPECS:
        if not spec.variables:
            continue
        heading = re.search(r"^## %s\n" % re.escape(spec.name), text, re.M)
        if not heading:
            raise SystemExit("gen-roles: docs/variables.md has no section '## %s'" % spec.name)
        table = re.compile(r"^\| variable \| default \| type \| meaning \|\n(?:\|.*\|\n)*", re.M).search(text, heading.end())
        if not table or re.search(r"^## ", text[heading.end():table.start()], re.M):
            raise SystemExit("gen-roles: docs/variables.md section '## %s' has no variable table" % spec.name)
        text = text[:table.start()] + table_text(spec) + text[table.end():]
    return text


def wanted():
    files = {}
    for spec in roles.SPECS:
        base = os.path.join(COLLECTION, "roles", spec.name)
        if spec.variables:
            files[os.path.join(base, "defaults", "main.yml")] = defaults_text(spec)
        files[os.path.join(base, "meta", "argument_specs.yml")] = argument_specs_text(spec)
        if spec.renamed_from:
            files.update(shim_files(spec))
    files.update(tune_files())
    with open(VARIABLES_MD) as handle:
        files[VARIABLES_MD] = variables_md(handle.read())
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each file that differs")
    args = parser.parse_args()
    stale = []
    for path, text in wanted().items():
        current = open(path).read() if os.path.exists(path) else None
        if current == text:
            continue
        stale.append(os.path.relpath(path, ROOT))
        if not args.check:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = path + ".tmp"
            with open(tmp, "w") as handle:
                handle.write(text)
            os.replace(tmp, path)
    for path in stale:
        print("%s %s" % ("differs from its spec:" if args.check else "wrote", path))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
