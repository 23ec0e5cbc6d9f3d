# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's public interface as data, written once beside the rules of its area: each variable's
name, type, default, choices and meaning. ``make roles`` (scripts/gen-roles.py) writes from it the
role's ``defaults/main.yml``, ``meta/argument_specs.yml`` and its table in docs/variables.md;
``module_utils/roles.py`` lists every role's spec (the variable-name patterns of the validators,
the report's check variables)."""
from __future__ import annotations

import copy
import os


class _Unset(object):
    """A variable without a default (set by a profile, a host or the role itself)."""

    def __repr__(self):
        return "UNSET"


UNSET = _Unset()

# The node's root, derived once: every path a role reads or writes on the node is below it (empty
# on a real node, build/sim/<host> on a simulated one).
NODE_ROOT = "{{ gds_root | default('') }}"

# The controller's directory of run directories, derived once: GDS_REPORTS_DIR, else reports/ beside
# the ansible.cfg in use, else beside the working directory. REPORTS_DIR is the rule for the roles'
# defaults (Jinja), reports_root the same rule for the callback.
_CONTROLLER_DIR = "((ansible_config_file or lookup('ansible.builtin.env', 'PWD') ~ '/.') | dirname)"


def reports_dir(below=""):
    """The default of a variable naming the reports directory (or ``below`` it), as Jinja."""
    return "{{ lookup('ansible.builtin.env', 'GDS_REPORTS_DIR', default=%s ~ '/reports') }}%s" % (_CONTROLLER_DIR, below)


REPORTS_DIR = reports_dir()


def reports_root(environ, config_file, cwd):
    """REPORTS_DIR's rule in Python: ``environ``'s GDS_REPORTS_DIR, else reports/ beside
    ``config_file`` (Ansible's C.CONFIG_FILE), else beside ``cwd``."""
    configured = environ.get("GDS_REPORTS_DIR")
    if configured:
        return os.path.abspath(configured)
    return os.path.join(os.path.dirname(config_file) if config_file else cwd, "reports")


def on_node(path):
    """The default of a variable that names a path on the node: ``path`` below the node's root."""
    if not path.startswith("/"):
        raise ValueError("on_node(%r): a path on the node is absolute" % (path,))
    return NODE_ROOT + path


class Var(object):
    """One public variable: ``doc`` is its one meaning (the comment in defaults/main.yml, the
    argument spec's description and the row in docs/variables.md)."""

    def __init__(self, name, type, doc, default=UNSET, choices=None, elements=None, required=False, options=None):
        self.name, self.type, self.doc, self.default = name, type, doc, default
        self.choices, self.elements, self.required, self.options = choices, elements, required, options

    def argument_spec(self):
        spec = {"type": self.type}
        if self.required:
            spec["required"] = True
        if self.elements:
            spec["elements"] = self.elements
        if self.choices is not None:
            spec["choices"] = list(self.choices)
        if self.default is not UNSET and self.default is not None:  # null: no default, as Ansible reads it
            spec["default"] = copy.deepcopy(self.default)
        spec["description"] = self.doc
        if self.options:
            spec["options"] = self.options
        return spec


class EntryPoint(object):
    """An entry point other than main: ``variables`` names the ones it takes (None: main's)."""

    def __init__(self, short_description, description=(), variables=None):
        self.short_description, self.variables = short_description, variables
        self.description = (description,) if isinstance(description, str) else tuple(description)


# Variables several roles read and none owns (docs/variables.md, "Shared variables").
SHARED = {
    "gds_root": Var("gds_root", "str", "Prefix of every path on the node (a simulated node's tree); empty on a real node.", ""),
    "gds_live": Var("gds_live", "bool", "False on simulated nodes: what acts on the running kernel or services (modprobe, "
                    "update-grub, update-initramfs, systemctl, setpci, mdadm, reboot) is skipped there; files are "
                    "still written.", True),
    "gds_mode": Var("gds_mode", "str", "The node's GDS data path (nvfs, p2pdma or compat), set by the profile; the default "
                    "of gds_driver_mode and gds_cufile_mode.", choices=("nvfs", "p2pdma", "compat")),
    "gds_platform_profile": Var("gds_platform_profile", "str", "Name of the platform profile that applied (set by the "
                                "collection's profiles/); unset gives a WARN check."),
}


class RoleSpec(object):
    """A role's interface: ``variables`` its own (named ``prefix``...), ``shared`` the names of
    others' it reads (SHARED, or another role's variable), ``entry_points`` the ones beside main
    (``"main"`` for an entry point with main's interface)."""

    def __init__(self, name, prefix, short_description, description, variables, shared=("gds_root", "gds_live"),
                 entry_points=None, main_variables=None, renamed_from=None):
        self.name, self.prefix = name, prefix
        self.short_description = short_description
        self.description = (description,) if isinstance(description, str) else tuple(description)
        self.variables, self.shared = list(variables), tuple(shared)
        self.entry_points = dict(entry_points or {})
        self.main_variables = main_variables
        # the role's name before it was named for its variables: a role of that name stays for the
        # deprecation period, each entry point an import of this one (make roles writes it)
        self.renamed_from = renamed_from

    def variable(self, name):
        for var in self.variables:
            if var.name == name:
                return var
        return None

    def defaults(self):
        """{name: default} of the role's own variables that have one (defaults/main.yml)."""
        return dict((var.name, var.default) for var in self.variables if var.default is not UNSET)
