#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_managed_file
short_description: Remove a file a gds-commission role wrote, and nothing else
description:
  - The tuning roles write a few files on a node (a boot-time unit, GRUB drop-ins, module options)
    and remove them when they are no longer wanted. This module is the one way they remove one.
  - The file is removed only when it is a regular file whose first lines carry the marker
    C(Managed by gds-commission) that every such file starts with. A link is never followed; a
    file without the marker (an admin's own file of that name) is left as it is, with a warning.
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
options:
  path:
    description: The file; absolute.
    type: path
    required: true
  state:
    description: C(absent) removes the file when it is the product's.
    type: str
    choices: [absent]
    default: absent
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
"""

EXAMPLES = r"""
- name: Remove the boot-time unit that is no longer wanted
  gds.commission.gds_managed_file:
    path: /etc/systemd/system/gds-acs-disable.service
    state: absent
"""

RETURN = r"""
present:
  description: Whether a file (of any kind) was at C(path) before the task.
  returned: always
  type: bool
left:
  description: Why a file at C(path) was left in place (it is not the product's), else null.
  returned: always
  type: str
"""

from ansible_collections.gds.commission.plugins.module_utils.core.files import managed_file, remove_managed
from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule  # results valid UTF-8


def main():
    module = AnsibleModule(
        argument_spec=dict(path=dict(type="path", required=True), state=dict(type="str", choices=["absent"], default="absent")),
        supports_check_mode=True,
    )
    path = module.params["path"]
    if not path.startswith("/"):
        module.fail_json(msg="path: %r must be an absolute path" % path)
    present, left = managed_file(path)
    removed = False
    if present and not left and not module.check_mode:
        try:
            removed, left = remove_managed(path)
        except OSError as exc:
            module.fail_json(msg="cannot remove %s: %s" % (path, exc.strerror or exc))
    if left:
        module.warn("%s left in place: %s" % (path, left))
    module.exit_json(changed=removed or (module.check_mode and present and not left),
                     present=present, left=left)


if __name__ == "__main__":
    main()
