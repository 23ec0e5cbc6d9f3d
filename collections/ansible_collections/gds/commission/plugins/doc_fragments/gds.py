# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation shared by the project's modules: ``extends_documentation_fragment`` lists
``gds`` and one of ``gds.diff`` / ``gds.no_diff``, plus ``gds.facts`` for a facts module."""
from __future__ import annotations


class ModuleDocFragment(object):
    # Every module: check mode runs everything and changes nothing.
    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Can run in check mode and return the changed status prediction without modifying the node.
    support: full
"""

    DIFF = r"""
attributes:
  diff_mode:
    description: Returns details on what has changed (or would change in check mode), when in diff mode.
    support: full
"""

    NO_DIFF = r"""
attributes:
  diff_mode:
    description: Returns details on what has changed (or would change in check mode), when in diff mode.
    support: none
"""

    FACTS = r"""
attributes:
  facts:
    description: Returns facts under C(ansible_facts), cached like any other facts.
    support: full
"""
