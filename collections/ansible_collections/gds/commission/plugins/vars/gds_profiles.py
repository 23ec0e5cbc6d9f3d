# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's platform profiles (profiles/<name>.yml) as the variables of the inventory
group of that name, so that an installed collection brings its profiles with it."""
from __future__ import annotations

DOCUMENTATION = r"""
name: gds_profiles
short_description: The collection's platform profiles as the variables of their inventory groups
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
description:
  - A host in an inventory group named like a platform profile of the collection (C(dgx2),
    C(dgx_a100), C(dgx_h100), C(gh200), C(gpu_compat)) gets the variables of that profile,
    C(profiles/<group>.yml) of the collection as it is installed - the desired settings and the
    benchmark thresholds of its hardware (docs/profiles.md).
  - They are loaded with the inventory, as if the inventory file set them on the group, so a site's
    C(group_vars/all.yml), C(group_vars/<group>.yml) and C(host_vars/) win over them.
requirements:
  - Enabled in ansible.cfg, C(vars_plugins_enabled = host_group_vars,gds.commission.gds_profiles)
    (a vars plugin of a collection runs only where it is enabled).
options:
  stage:
    description:
      - When the plugin runs. C(inventory) (the default) loads the profiles with the inventory, at the
        precedence of group variables set in the inventory file; C(task) or C(all) would also load
        them beside each playbook, above a site's C(group_vars/).
    type: str
    choices: [all, task, inventory]
    default: inventory
    ini:
      - key: stage
        section: vars_gds_profiles
    env:
      - name: GDS_PROFILES_VARS_STAGE
"""

EXAMPLES = r"""
# ansible.cfg
#   [defaults]
#   vars_plugins_enabled = host_group_vars,gds.commission.gds_profiles
# inventory: hosts in the group of their platform
#   all:
#     children:
#       dgx_a100:
#         hosts:
#           dgx-a100-r01n01:
"""

import os
import re

from ansible.errors import AnsibleParserError
from ansible.inventory.group import InventoryObjectType
from ansible.plugins.vars import BaseVarsPlugin
from ansible.utils.vars import combine_vars

# plugins/vars/ -> the collection's profiles/
PROFILES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "profiles")
_NAME = re.compile(r"^[A-Za-z0-9_]+\.yml$")
# a group named like an NVIDIA platform (dgx_h200, hgx_b200, gh200, gb200, mgx...): a host in one
# without a profile has no thresholds; the report makes it ERROR (topology: platform profile)
PLATFORM_LIKE = re.compile(r"^(dgx|hgx|mgx|gh|gb)[0-9]*(_[a-z0-9_]+)?$", re.IGNORECASE)


def profile_files(directory=PROFILES):
    """{group name: profile file} of the profiles in ``directory``."""
    try:
        names = os.listdir(directory)
    except OSError as exc:
        raise AnsibleParserError("gds.commission.gds_profiles: cannot read the profiles in %s: %s" % (directory, exc))
    return {name[:-4]: os.path.join(directory, name) for name in sorted(names) if _NAME.match(name)}


class VarsModule(BaseVarsPlugin):

    def get_vars(self, loader, path, entities, cache=True):
        super(VarsModule, self).get_vars(loader, path, entities)
        profiles = profile_files()
        data = {}
        for entity in entities if isinstance(entities, list) else [entities]:
            if getattr(entity, "base_type", None) is not InventoryObjectType.GROUP:
                continue
            if entity.name not in profiles:
                if PLATFORM_LIKE.match(entity.name):
                    data = combine_vars(data, {"gds_platform_unknown": {"group": entity.name, "known": sorted(profiles)}})
                continue
            found = profiles[entity.name]
            loaded = loader.load_from_file(found, cache="all", unsafe=True, trusted_as_template=True)
            if not isinstance(loaded, dict):
                raise AnsibleParserError("gds.commission.gds_profiles: %s must be a mapping of variables, got %s"
                                         % (found, type(loaded).__name__))
            data = combine_vars(data, loaded)
        return data
