# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gds_validate``: a role's variables checked by the rules of its area's file, for the role's
``validate`` entry point (roles/gds_common/tasks/validate_vars.yml). Returns the list of problems,
each naming the variable and the bad value; empty when every variable is fine.

    {{ {'gds_netfs_mount_root': '/etc/nfs'} | gds.commission.gds_validate('gds_netfs', inventory_hostname, groups['all']) }}
"""
from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

# each role's variables (the names its pattern matches) and their validator, the file of its area
# beside the rules its module applies (module_utils/roles.py, from each area's ROLE_SPEC): the one
# table the role's validate entry point (roles/gds_common/tasks/validate_vars.yml) and the tune
# playbook's first play (plugins/action/gds_validate_roles.py) both read
from ansible_collections.gds.commission.plugins.module_utils.roles import ROLE_VARIABLES


def _known(role, caller):
    if role not in ROLE_VARIABLES:
        raise AnsibleFilterError("%s: no validator for role %r (known: %s)" % (caller, role, ", ".join(sorted(ROLE_VARIABLES))))
    return ROLE_VARIABLES[role]


def gds_validate_pattern(role):
    """The regular expression of ``role``'s variable names (for ``query('ansible.builtin.varnames')``)."""
    return _known(role, "gds_validate_pattern")[0]


def gds_validate(values, role, host=None, hosts=None):
    """[problem] of ``values`` ({variable: value}) for ``role``; ``host`` and ``hosts`` are this
    host's inventory name and every host's (a peer must be one of them)."""
    validator = _known(role, "gds_validate")[1]
    if not isinstance(values, Mapping):
        raise AnsibleFilterError("gds_validate(%s): the variables must be a mapping, got %r" % (role, values))
    try:
        return validator(dict(values), host=host, hosts=list(hosts or []))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("gds_validate(%s): a variable the checks could not read: %s: %s"
                                 % (role, exc.__class__.__name__, exc))


class FilterModule(object):
    def filters(self):
        return {"gds_validate": gds_validate, "gds_validate_pattern": gds_validate_pattern}
