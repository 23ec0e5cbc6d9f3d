#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_cufile
short_description: Merge the managed keys into the cuFile configuration (/etc/cufile.json)
description:
  - Validates the managed keys against the keys NVIDIA documents (logging, profile, execution,
    properties, fs.*, block.*, denylist, miscellaneous) before anything is written; a failure
    lists every offending key by its dotted path, with the nearest known key for an unknown one,
    wrong types, values outside their choices, and C(*_kb) sizes that are not 4K-aligned.
  - Merges them into the file's existing content, read even when it is NVIDIA's commented JSON
    (C(//) and C(/* */) comments, trailing commas). Every key it does not manage keeps its value
    and its place; a new key goes to the end of its section. The text is edited, not re-dumped;
    comments, layout and untouched lines stay (strict JSON of the merged content is written only
    if an edit would not parse back to exactly the wanted content). A malformed file, or one
    nested deeper than 32 levels, is an error naming it with the line and column, and nothing
    changes. A key repeated in a file counts with its later value, as JSON parsers read it; the
    file written keeps only that one, and a warning names the file, the key and the lines.
  - Every path it reads or writes, and every link it creates, is below O(root); symlinks are
    followed as the node would (absolute targets are node paths, C(..) stops at its C(/)).
  - Where O(path) is the alternatives link that libcufile's packages install
    (C(/etc/cufile.json -> /etc/alternatives/cufile.json -> /usr/local/cuda-X.Y/gds/cufile.json)),
    the vendor's file is left alone; its text with the managed keys set is written to
    O(alternative_path), to be selected as the C(cufile.json) alternative at
    O(alternative_priority) in auto mode. With O(register_alternative) the module selects it
    itself (the link and the administrative file that C(update-alternatives --install) writes),
    for simulated roots; otherwise run M(community.general.alternatives) after it. A vendor
    alternative that does not exist (a dangling link) is an error naming it.
  - A plain file is edited in place, a symlink that is not an alternative has its target edited
    in place. Files are written atomically (temporary file in the same directory, then rename)
    with a timestamped backup of the previous version.
  - Returns the report checks (named C(cufile) colon ...) and one drift item per differing key.
version_added: "1.0.0"
author: gds-commission contributors (!UNKNOWN)
options:
  path:
    description:
      - The file cuFile reads, C(/etc/cufile.json) on a node (or what C(CUFILE_ENV_PATH_JSON)
        names); below O(root) on a simulated node (a node path is taken below O(root)).
    type: path
    required: true
  config:
    description: The managed keys (NVIDIA's documented defaults with profile and host overrides).
    type: dict
    required: true
  root:
    description:
      - Prefix of every node path (a simulated node's tree); empty on a real node. Absolute
        symlink targets are node paths below it, C(..) in a relative one stops at it,
        C(/etc/alternatives) and C(/var/lib/dpkg/alternatives) are looked up below it. Nothing
        outside it is read or written.
    type: str
    default: ""
  alternative_path:
    description: Where the merged configuration goes when O(path) is an alternatives link; below O(root), or a node path, then taken below O(root).
    type: path
    default: /etc/gds-commission/cufile.json
  alternative_priority:
    description: Priority of that alternative; above the toolkit's (CUDA 13.0 registers 130).
    type: int
    default: 1000
  register_alternative:
    description:
      - Select O(alternative_path) here, as C(update-alternatives --install) then C(--auto)
        would. For simulated roots, where update-alternatives cannot run.
    type: bool
    default: false
  backup:
    description: Keep a timestamped copy of the file it rewrites.
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
    description: Permissions of the file it writes.
    type: raw
    default: "0644"
  gds_mode:
    description: The node's GDS data path, for the checks (allow_compat_mode, use_pci_p2pdma).
    type: str
    choices: [nvfs, p2pdma, compat]
    default: nvfs
  raid_devices:
    description: md arrays holding GDS data (P2PDMA with md RAID is a FAIL check).
    type: list
    elements: str
    default: []
  rdma_storage:
    description: Storage is reached over RDMA; adds the C(rdma_dev_addr_list) check.
    type: bool
    default: false
  rdma_nics:
    description: The storage NICs, C({nic, address}) (address empty when unknown), for that check.
    type: list
    elements: dict
    default: []
  netfs_mounts:
    description:
      - The network mounts of the node (the C(mounts) of module gds_netfs). The client address of
        each RDMA mount's NIC goes into C(properties.rdma_dev_addr_list) and, per file system,
        into C(fs.<nfs|lustre|weka|gpfs|beegfs>.mount_table) (one entry per mount) where the
        installed GDS version's cufile.json has that key, else into the section's
        C(rdma_dev_addr_list). The key names are read from the toolkit's own cufile.json
        (C(/usr/local/cuda/gds/cufile.json)), where commented keys list what the version knows.
      - Keys of O(config) win; both address lists are kept in C(properties.rdma_dev_addr_list).
    type: list
    elements: dict
    default: []
notes:
  - Supports check mode and diff mode; check mode changes nothing and reports every difference.
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.diff
"""

EXAMPLES = r"""
- name: Merge the managed keys into cufile.json
  gds.commission.gds_cufile:
    path: /etc/cufile.json
    config: {properties: {allow_compat_mode: false, use_pci_p2pdma: false}}
  register: cufile

- name: Select our file where /etc/cufile.json is the toolkit's alternative
  community.general.alternatives:
    name: "{{ cufile.alternative.name }}"
    link: "{{ cufile.alternative.link }}"
    path: "{{ cufile.alternative.path }}"
    priority: "{{ cufile.alternative.priority }}"
    state: auto
  when: cufile.alternative is defined
"""

RETURN = r"""
path:
  description: The file cuFile reads (O(path)).
  returned: always
  type: str
gds_version:
  description: The installed GDS (libcufile) version from the library's file name (C(libcufile.so.1.15.1) is C(1.15.1)), null when none is found.
  returned: always
  type: str
remote_fs:
  description: C({schema, mounts, notes}) for O(netfs_mounts) - C(schema) C({version, library, source, keys}) is the key
    names used and where they were read, C(mounts) the mounts listed with their address, C(notes) why others were not.
  returned: netfs_mounts not empty
  type: dict
layout:
  description: C(file), C(absent), C(symlink) (its target edited) or C(alternatives).
  returned: always
  type: str
file:
  description: The file holding the merged configuration (written, or to be written in check mode).
  returned: always
  type: str
config:
  description: The merged configuration.
  returned: always
  type: dict
changed_keys:
  description: The dotted keys whose value differs from what cuFile read before.
  returned: always
  type: list
  elements: str
backup_file:
  description: The backup of the previous file, when one was made.
  returned: changed and backup
  type: str
alternative:
  description: C({name, link, path, priority, selected, vendor}) for the alternatives layout.
  returned: layout is alternatives
  type: dict
drift:
  description: One item per dotted key that differs between what cuFile reads and the merged
    configuration (C(setting) is the file and the dotted key, C(PATH) colon C(key), C(expected) the value wanted, C(actual) the file's
    value or C((absent))), one per key repeated in the file to be written (C(expected) C(one value)),
    and C(alternative) after the file when our file is not the selected alternative.
  returned: always
  type: list
  elements: dict
  sample: [{setting: "/etc/cufile.json: properties.allow_compat_mode", expected: false, actual: true}]
duplicates:
  description: Keys repeated in a file read, C({file, key, lines}) (node path, dotted key, the line of each occurrence);
    the later value counts and the file written keeps only it.
  returned: always
  type: list
  elements: dict
previous_format:
  description: C(strict) (plain JSON), C(commented) (NVIDIA's JSON with comments) or C(absent).
  returned: always
  type: str
checks:
  description: The report checks C({name, verdict, expected, actual, detail}), named C(cufile) colon ....
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.tune.cufile import CufileError, commission


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            config=dict(type="dict", required=True),
            root=dict(type="str", default=""),
            alternative_path=dict(type="path", default="/etc/gds-commission/cufile.json"),
            alternative_priority=dict(type="int", default=1000),
            register_alternative=dict(type="bool", default=False),
            backup=dict(type="bool", default=True),
            extra_keys=dict(type="list", elements="str", default=[], no_log=False),
            mode=dict(type="raw", default="0644"),
            gds_mode=dict(type="str", choices=["nvfs", "p2pdma", "compat"], default="nvfs"),
            raid_devices=dict(type="list", elements="str", default=[]),
            rdma_storage=dict(type="bool", default=False),
            rdma_nics=dict(type="list", elements="dict", default=[]),
            netfs_mounts=dict(type="list", elements="dict", default=[]),
        ),
        supports_check_mode=True,
    )
    try:
        result, warnings = commission(module.params, check_mode=module.check_mode)
    except (CufileError, OSError) as exc:
        module.fail_json(msg=str(exc), path=module.params["path"])
    for warning in warnings:
        module.warn(warning)
    # (a return key named keys cannot be read with Jinja's dot notation: result.keys is the method)
    result["changed_keys"] = result.pop("keys")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
