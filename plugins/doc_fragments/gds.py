# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation shared by the project's modules (``extends_documentation_fragment: [gds]``)."""
from __future__ import annotations


class ModuleDocFragment(object):
    # Every module: check mode runs everything and changes nothing.
    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Can run in check mode and return the changed status prediction without modifying the node.
    support: full
  diff_mode:
    description: Returns details on what has changed (or would change in check mode), when in diff mode.
    support: none
"""

    # A module that also shows the change as a diff: extends gds.diff instead of gds.
    DIFF = r"""
attributes:
  check_mode:
    description: Can run in check mode and return the changed status prediction without modifying the node.
    support: full
  diff_mode:
    description: Returns details on what has changed (or would change in check mode), when in diff mode.
    support: full
"""

    # A facts module (gds and gds.facts): returns ansible_facts and changes nothing.
    FACTS = r"""
attributes:
  facts:
    description: Returns facts under C(ansible_facts), cached like any other facts.
    support: full
"""
