# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gds_validate_roles``: the variables of several roles checked in one task per host, as each
role's ``validate`` entry point checks them when it is included (its argument specs, through
Ansible's own ``ArgumentSpecValidator``, then its rules, plugins/filter/gds_validate.py).

The tune playbook's first play checked each role by including it: two tasks per role and host,
plus the include, each a step of Ansible's one-threaded main process (docs/fleet.md). Outside the
role, its defaults are not among the task's variables, so they are read here from the role's
defaults/main.yml, beneath every variable the task sees: a role default has the lowest precedence
of all, and none of these roles has a public variable in vars/main.yml (tests/integration/test_common_role.py).
Runs on the controller; reads only the collection's own role files.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping

from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible.utils.vars import transform_to_native_types

from ansible_collections.gds.commission.plugins.filter.gds_validate import ROLE_VARIABLES, gds_validate

ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")
# the entry point whose argument specs the role's `validate` is included with
ENTRY_POINT = "validate"
ROLE_NAME = re.compile(r"[a-z][a-z0-9_]*")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("roles",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        roles = self._task.args.get("roles")
        if not isinstance(roles, list) or not roles or not all(isinstance(role, str) for role in roles):
            return dict(result, failed=True, msg="gds_validate_roles: roles must be a non-empty list of role names, got %r" % (roles,))
        problems = []
        for role in roles:
            problems += ["%s: %s" % (role, problem) for problem in self._problems(role, task_vars)]
        result["changed"] = False
        if problems:
            # no checked_roles: a role named there skips its own check later in the run
            result.update(failed=True, problems=problems, msg="; ".join(problems))
        else:
            result.update(checked_roles=list(roles), msg="the variables of %d roles are valid" % len(roles))
        return result

    def _load(self, role, *parts):
        path = os.path.join(ROLES_DIR, role, *parts)
        if not os.path.isfile(path):
            raise AnsibleError("gds_validate_roles: %s: no %s in this collection" % (role, os.path.join("roles", role, *parts)))
        return self._loader.load_from_file(path, trusted_as_template=parts[0] == "defaults")

    def _problems(self, role, task_vars):
        if not ROLE_NAME.fullmatch(role):  # a name, never a path out of the collection's roles/
            return ["not a role name of this collection (a short name such as gds_pcie_acs)"]
        specs = self._load(role, "meta", "argument_specs.yml")
        specs = specs.get("argument_specs") if isinstance(specs, Mapping) else None
        entry = specs.get(ENTRY_POINT) if isinstance(specs, Mapping) else None
        if not isinstance(entry, Mapping):
            return ["roles/%s/meta/argument_specs.yml has no entry point %r" % (role, ENTRY_POINT)]
        options = entry.get("options") or {}
        pattern = ROLE_VARIABLES.get(role, (None, None))[0]
        # the role's defaults beneath what the task sees, as inside the role
        variables = dict(self._load(role, "defaults", "main.yml") or {})
        variables.update(task_vars)
        names = [name for name in options if name in variables]
        if pattern:
            names += sorted(name for name in variables if re.search(pattern, name) and name not in options)
        templar = self._templar.copy_with_new_env(available_variables=variables)
        values, problems = {}, []
        for name in names:
            try:
                # plain Python values, as the filter receives them from a template (the messages name their types)
                values[name] = transform_to_native_types(templar.template(variables[name]), redact=False)
            except AnsibleError as exc:
                problems.append("%s: cannot be templated: %s" % (name, exc.message))
        if problems:
            return problems
        checked = ArgumentSpecValidator(options).validate({name: values[name] for name in options if name in values},
                                                          validate_role_argument_spec=True)
        if checked.error_messages or not pattern:
            return list(checked.error_messages)
        try:
            return gds_validate({name: value for name, value in values.items() if re.search(pattern, name)}, role,
                                task_vars.get("inventory_hostname"), (task_vars.get("groups") or {}).get("all", []))
        except AnsibleError as exc:
            return [exc.message]
