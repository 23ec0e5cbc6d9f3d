#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_cufile
short_description: Validate and write the cuFile configuration (/etc/cufile.json)
description:
  - Validates a cuFile configuration against the keys NVIDIA documents (logging, profile,
    execution, properties, fs.*, block.*, denylist, miscellaneous) before anything is written;
    a failure lists every offending key by its dotted path, with the nearest known key for an
    unknown one, wrong types, values outside their choices, and C(*_kb) sizes that are not
    4K-aligned.
  - Reads the existing file even when it is NVIDIA's commented JSON (C(//) and C(/* */)
    comments, trailing commas) and compares by content, so a vendor file that already says the
    same thing is left alone.
  - Writes strict JSON atomically (temporary file in the same directory, then rename), keeping a
    timestamped backup of the previous file. Check mode and diff mode show what would change.
version_added: "1.0.0"
author: gds-commission contributors
options:
  path:
    description: The file to write, C(/etc/cufile.json) on a node (or what C(CUFILE_ENV_PATH_JSON) names).
    type: path
    required: true
  config:
    description: The complete configuration (NVIDIA's defaults merged with profile and host overrides).
    type: dict
    required: true
  backup:
    description: Keep a timestamped copy of the previous file when it changes.
    type: bool
    default: true
  extra_keys:
    description:
      - Dotted key paths to accept without checking (keys of a newer libcufile than this schema),
        for example C(properties.some_new_knob). A section path accepts everything below it.
    type: list
    elements: str
    default: []
  mode:
    description: Permissions of the written file.
    type: raw
    default: "0644"
notes:
  - Supports check mode and diff mode.
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Write the cuFile configuration
  gds_cufile:
    path: /etc/cufile.json
    config: "{{ lookup('ansible.builtin.template', 'cufile.json.j2') | from_json }}"

- name: Disable compat mode on top of the current file, see the diff first
  gds_cufile:
    path: /etc/cufile.json
    config: "{{ current | combine({'properties': {'allow_compat_mode': false}}, recursive=true) }}"
  check_mode: true
  diff: true
"""

RETURN = r"""
path:
  description: The file.
  returned: always
  type: str
backup_file:
  description: The backup of the previous file, when one was made.
  returned: changed and backup
  type: str
drift:
  description: One item per dotted key that differs between the file and the configuration
    (C(setting) the dotted path, C(expected) the configured value, C(actual) the file's value or
    C((absent))).
  returned: always
  type: list
  elements: dict
  sample: [{setting: properties.allow_compat_mode, expected: false, actual: true}]
previous_format:
  description: C(strict) (plain JSON), C(commented) (NVIDIA's JSON with comments), C(invalid) or C(absent).
  returned: always
  type: str
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gds_cufile import (
    CufileError, canonical, deprecations, differences, dumps, loads, validate,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            config=dict(type="dict", required=True),
            backup=dict(type="bool", default=True),
            extra_keys=dict(type="list", elements="str", default=[]),
            mode=dict(type="raw", default="0644"),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    config = module.params["config"]
    errors = validate(config, module.params["extra_keys"])
    if errors:
        module.fail_json(msg="invalid cuFile configuration for %s: %s" % (path, "; ".join(errors)),
                         errors=errors, path=path)
    for warning in deprecations(config):
        module.warn(warning)

    after = dumps(config)
    before, previous, fmt = "", None, "absent"
    if os.path.exists(path):
        try:
            with open(path, "r") as handle:
                before = handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            module.fail_json(msg="cannot read %s: %s" % (path, exc), path=path)
        try:
            previous = loads(before, path)
            fmt = "strict" if before.strip() and _is_strict(before) else "commented"
        except CufileError as exc:
            fmt = "invalid"
            module.warn("%s; it will be replaced (a backup is kept)" % exc)

    if previous is None:
        drift = [{"setting": path, "expected": "cuFile configuration",
                  "actual": "(absent)" if fmt == "absent" else "(not valid JSON)"}]
        changed = True
    else:
        # name the file too: an SRE reading drift.json sees which cufile.json and which key
        drift = [dict(item, setting="%s: %s" % (path, item["setting"])) for item in differences(previous, config)]
        changed = canonical(previous) != canonical(config)

    result = dict(changed=changed, path=path, drift=drift, previous_format=fmt)
    if changed:
        result["diff"] = {"before": before, "after": after, "before_header": path,
                          "after_header": path}
    if changed and not module.check_mode:
        directory = os.path.dirname(path) or "."
        try:
            if not os.path.isdir(directory):
                os.makedirs(directory, 0o755)
            if module.params["backup"] and fmt != "absent":
                result["backup_file"] = module.backup_local(path)
            fd, tmp = tempfile.mkstemp(prefix=".cufile.json.", dir=directory)
            with os.fdopen(fd, "w") as handle:
                handle.write(after)
        except OSError as exc:
            module.fail_json(msg="cannot write %s: %s" % (path, exc), path=path)
        module.atomic_move(tmp, path)
    if os.path.exists(path) and not module.check_mode:
        result["changed"] = module.set_mode_if_different(path, module.params["mode"],
                                                         result["changed"])
    module.exit_json(**result)


def _is_strict(text):
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


if __name__ == "__main__":
    main()
