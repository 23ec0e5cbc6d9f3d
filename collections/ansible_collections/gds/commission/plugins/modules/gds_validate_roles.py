#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_validate_roles
short_description: Check the variables of several of the collection's roles in one task
description:
  - For each role, what its C(validate) entry point checks when it is included - the role's
    argument specs (entry point C(validate) of its C(meta/argument_specs.yml), through Ansible's
    own C(ArgumentSpecValidator), as C(ansible.builtin.validate_argument_spec) does), then the
    rules of its area (C(ROLE_VARIABLES) in plugins/filter/gds_validate.py, the C(gds_validate)
    filter) - in one task per host instead of an include and two tasks per role.
  - The role's defaults (its C(defaults/main.yml)) are read beneath every variable the task sees, as
    inside the role, and templated with them.
  - Fails the host listing every problem, each naming the role, the variable and the value. A role
    the collection does not have, or one without that entry point, fails the task naming it.
  - The tune and drift playbooks' first play (roles/gds_tune/tasks/validate.yml) runs it.
  - This is an action plugin; it runs on the controller and never connects to the node.
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
options:
  roles:
    description: The collection's roles to check, by their short names (C(gds_pcie_acs), not C(gds.commission.gds_pcie_acs)).
    type: list
    elements: str
    required: true
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
"""

EXAMPLES = r"""
- name: Check the variables of the tuning steps
  gds.commission.gds_validate_roles:
    roles: [gds_facts, pcie_acs, iommu, gds_driver, gds_rdma, gds_netfs, nvme_raid, cufile, gds_reboot]
"""

RETURN = r"""
checked_roles:
  description:
    - The roles whose variables were checked, every one without a problem (the tune playbook
      registers the result as C(gds_tune_validated); a role named here skips its own check later in the run).
  returned: success
  type: list
  elements: str
problems:
  description: Every problem, after the name of its role, each naming the variable and the value.
  returned: failed
  type: list
  elements: str
"""
