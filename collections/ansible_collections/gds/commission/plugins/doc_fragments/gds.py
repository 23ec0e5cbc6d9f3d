# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation shared by the project's modules: ``extends_documentation_fragment`` lists
``gds`` and one of ``gds.diff`` / ``gds.no_diff``, plus ``gds.facts`` for a facts module and
``gds.sysfs`` / ``gds.procfs`` for a module that reads the node's kernel (their argument specs are
core/module.SYSFS_ROOT and PROCFS_ROOT; what each module reads there is in its notes)."""
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

    # Every module that reads sysfs: the one option and its meaning (the roles pass
    # "{{ gds_root }}/sys", so that a simulated node is read below its root, never the live /sys).
    SYSFS = r"""
options:
  sysfs_root:
    description:
      - Where the node's sysfs is mounted. A fixture tree or a simulated node's C(sys/) (below its
        C(gds_root)) also works; what the module reads there is in its notes.
    type: path
    default: /sys
"""

    PROCFS = r"""
options:
  procfs_root:
    description:
      - Where the node's procfs is mounted. A simulated node's C(proc/) (below its C(gds_root)) also
        works; what the module reads there is in its notes. Only the live C(/proc) lets a module ask
        the running kernel or NVML what a file cannot tell.
    type: path
    default: /proc
"""
