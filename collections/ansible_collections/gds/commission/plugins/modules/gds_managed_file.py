#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_managed_file
short_description: Write the files a gds-commission role manages, and remove only its own
description:
  - The tuning roles write a few files on a node (a boot-time unit, GRUB drop-ins, module options)
    and remove them when they are no longer wanted. This module is the one way they do both, all of
    a role's files in one run (C(files)), or the removal of one (C(path)).
  - A file is removed only when it is a regular file whose first lines carry the marker
    C(Managed by gds-commission) that every such file starts with. A link is never followed; a
    file without the marker (an admin's own file of that name) is left as it is, with a warning.
  - A file is written atomically (a temporary file renamed over it), its directories made when
    missing; a link in its place is replaced, as the template module does.
  - In check mode nothing is touched; every file that differs is a C(drift) item, in both modes.
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
options:
  path:
    description: The one file to remove; absolute. Not with C(files).
    type: path
  state:
    description: C(absent) removes the file at C(path) when it is the product's.
    type: str
    choices: [absent]
    default: absent
  files:
    description: The role's files, each put in its state in order. Not with C(path).
    type: list
    elements: dict
    suboptions:
      path:
        description: The file; absolute.
        type: path
        required: true
      state:
        description: C(present) writes C(content); C(absent) removes the file when it is the product's.
        type: str
        choices: [present, absent]
        default: present
      content:
        description: The whole text of the file (C(state=present)); it starts with the marker.
        type: str
      mode:
        description: Its permissions, octal (C(state=present)).
        type: str
        default: "0644"
      owner:
        description: Its owner's name (C(state=present)); unset, whoever writes it.
        type: str
      group:
        description: Its group's name (C(state=present)); unset, whoever writes it.
        type: str
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.diff
"""

EXAMPLES = r"""
- name: Remove the boot-time unit that is no longer wanted
  gds.commission.gds_managed_file:
    path: /etc/systemd/system/gds-acs-disable.service
    state: absent

- name: Write the role's files
  gds.commission.gds_managed_file:
    files:
      - path: /etc/modules-load.d/nvidia_fs.conf
        content: "# Managed by gds-commission (role gds_driver)\nnvidia_fs\n"
      - path: /etc/modprobe.d/nvidia_fs.conf
        state: absent
"""

RETURN = r"""
present:
  description: Whether a file (of any kind) was at C(path) before the task (C(path) only).
  returned: with path
  type: bool
left:
  description: Why the file at C(path) was left in place (it is not the product's), else null (C(path) only).
  returned: with path
  type: str
files:
  description:
    - One entry per file of C(files), in order, keyed by its path, with C(state), C(present)
      (before the task), C(changed) and C(left) (why a file to remove was left in place, else null).
  returned: with files
  type: dict
drift:
  description:
    - Each file that differs from its entry (C(setting) the path, or the path and C(mode)),
      C(expected) and C(actual) its text (or C(absent)), in both modes.
  returned: with files
  type: list
  elements: dict
"""

import grp
import pwd

from ansible_collections.gds.commission.plugins.module_utils.core.files import (
    UnreadableFile, managed_file, remove_managed, sync_managed,
)
from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule  # results valid UTF-8


def _absolute(module, path, where):
    if not path.startswith("/"):
        module.fail_json(msg="%s: %r must be an absolute path" % (where, path))


def remove_one(module):
    path = module.params["path"]
    _absolute(module, path, "path")
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


def _entries(module):
    """The entries of ``files`` with modes as numbers and owners as ids; a bad one fails naming it."""
    entries = []
    for index, item in enumerate(module.params["files"]):
        where = "files[%d]" % index
        _absolute(module, item["path"], where + ".path")
        entry = {"path": item["path"], "state": item["state"]}
        if item["state"] == "present":
            if item["content"] is None:
                module.fail_json(msg="%s: %s is present but has no content" % (where, item["path"]))
            try:
                entry["mode"] = int(item["mode"], 8)
            except (TypeError, ValueError):
                module.fail_json(msg="%s.mode: %r is not an octal mode such as 0644" % (where, item["mode"]))
            entry["content"] = item["content"]
            for key, lookup, field in (("owner", pwd.getpwnam, "pw_uid"), ("group", grp.getgrnam, "gr_gid")):
                if item[key] is not None:
                    try:
                        entry["uid" if key == "owner" else "gid"] = getattr(lookup(item[key]), field)
                    except KeyError:
                        module.fail_json(msg="%s.%s: no %s %r on this node" % (where, key, key, item[key]))
        entries.append(entry)
    return entries


def _absent_or(text):
    return "absent" if text is None else text


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path"),
            state=dict(type="str", choices=["absent"], default="absent"),
            files=dict(type="list", elements="dict", options=dict(
                path=dict(type="path", required=True),
                state=dict(type="str", choices=["present", "absent"], default="present"),
                content=dict(type="str"),
                mode=dict(type="str", default="0644"),
                owner=dict(type="str"),
                group=dict(type="str"),
            ))),
        mutually_exclusive=[("path", "files")],
        required_one_of=[("path", "files")],
        supports_check_mode=True,
    )
    if module.params["path"] is not None:
        remove_one(module)
    entries = _entries(module)
    try:
        rows = sync_managed(entries, module.check_mode)
    except OSError as exc:
        module.fail_json(msg="cannot write %s: %s" % (exc.filename or "a managed file", exc.strerror or exc))
    except UnreadableFile as exc:  # what is there now cannot be read (a FIFO, too large): left alone
        module.fail_json(msg=str(exc))
    drift, diff = [], []
    for row in rows:
        if row["left"]:
            module.warn("%s left in place: %s" % (row["path"], row["left"]))
        if not row["changed"]:
            continue
        if row["before"] != row["after"] or row["state"] == "absent":
            drift.append({"setting": row["path"], "expected": _absent_or(row["after"]), "actual": _absent_or(row["before"])})
            diff.append({"before_header": row["path"], "after_header": row["path"],
                         "before": row["before"] or "", "after": row["after"] or ""})
        elif row.get("mode_before") != row.get("mode_after"):
            drift.append({"setting": "%s mode" % row["path"], "expected": "%04o" % row["mode_after"],
                          "actual": "%04o" % row["mode_before"]})
        else:
            drift.append({"setting": "%s owner" % row["path"], "expected": "as configured", "actual": "differs"})
    result = {"changed": any(row["changed"] for row in rows), "drift": drift,
              "files": {row["path"]: {k: row[k] for k in ("state", "present", "changed", "left")} for row in rows}}
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
