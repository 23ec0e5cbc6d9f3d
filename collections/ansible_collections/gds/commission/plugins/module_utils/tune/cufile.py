# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cufile.json commissioned: the managed keys merged into a node's file (as a text edit that keeps
its comments, or through the toolkit's alternatives link), the differences as drift, and the
`cufile: ` checks (``commission``, the gds_cufile module's work).

Its parts, one concern each, are beside this file: cufile_schema (which keys and values are
valid), cufile_text (reading, writing and editing the commented JSON), cufile_alternatives
(where cuFile reads its configuration), cufile_remote (the network mounts' sections). Their
public names are this module's too (__all__).
"""
from __future__ import annotations

import copy
import os
import re

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.files import backup_copy, write_atomic
from ansible_collections.gds.commission.plugins.module_utils.core.spec import RoleSpec, Var, on_node
from ansible_collections.gds.commission.plugins.module_utils.core.variables import errors, given_int, is_list, path_error
from ansible_collections.gds.commission.plugins.module_utils.tune.cufile_alternatives import (
    MAX_SYMLINKS, NodePaths, best_choice, format_alternatives, read_alternatives,
)
from ansible_collections.gds.commission.plugins.module_utils.tune.cufile_remote import (
    BUILTIN_REMOTE_KEYS, REMOTE_FS, gds_version, is_ipv4, remote_fs_check, remote_fs_keys, remote_schema, section_keys,
)
from ansible_collections.gds.commission.plugins.module_utils.tune.cufile_schema import (
    BOOL, INT, IPV4_LIST, KB, KNOWN_PATHS, SCHEMA, STR, deprecations, suggest, validate,
)
from ansible_collections.gds.commission.plugins.module_utils.tune.cufile_text import (
    MAX_DEPTH, CufileError, canonical, duplicate_keys, dumps, edit_text, loads, read_config, strip_comments, text_format,
    too_deep,
)

__all__ = [
    "BOOL", "BUILTIN_REMOTE_KEYS", "INT", "IPV4_LIST", "KB", "KNOWN_PATHS", "MAX_DEPTH", "MAX_SYMLINKS", "REMOTE_FS",
    "SCHEMA", "STR", "CufileError", "NodePaths", "best_choice", "canonical", "commission", "configure", "deprecations",
    "differences", "duplicate_keys", "dumps", "edit_text", "flatten", "format_alternatives", "gds_version", "key_order",
    "loads", "merge", "parse_mode", "read_alternatives", "read_config", "remote_fs_check", "remote_fs_keys",
    "remote_schema", "report_checks", "section_keys", "strip_comments", "suggest", "text_format", "too_deep", "validate",
    "validate_vars", "DOTTED_KEY", "is_ipv4",
]


# --------------------------------------------------------------------------------------------
# The gds_cufile role's variables
# --------------------------------------------------------------------------------------------
# a key the schema does not know yet, by its dotted path (properties.some_new_knob)
DOTTED_KEY = re.compile(r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$")


def validate_vars(values, host=None, hosts=()):
    """The gds_cufile role's variables (gds_cufile_*): [message naming the variable and the value]."""
    path, alternative = values.get("gds_cufile_path"), values.get("gds_cufile_alternative_path")
    priority = given_int(values.get("gds_cufile_alternative_priority"))
    keys, addresses = values.get("gds_cufile_extra_keys", []), values.get("gds_cufile_rdma_addresses", {})
    bad_keys = [key for key in keys if not isinstance(key, str) or not DOTTED_KEY.match(key)] if is_list(keys) else [keys]
    bad_addresses = {nic: address for nic, address in addresses.items() if not (isinstance(address, str) and is_ipv4(address))} \
        if isinstance(addresses, dict) else addresses
    return errors(
        path_error("gds_cufile_path", path), path_error("gds_cufile_alternative_path", alternative),
        "gds_cufile_path and gds_cufile_alternative_path must be two different paths, both are %s" % (path,)
        if path == alternative else None,
        None if priority is not None and priority > 0 else "gds_cufile_alternative_priority must be a positive "
        "integer, got %s" % (values.get("gds_cufile_alternative_priority"),),
        "gds_cufile_extra_keys: %s are not dotted cufile.json keys (e.g. properties.some_new_knob)" % (bad_keys,)
        if bad_keys else None,
        "gds_cufile_rdma_addresses: %s are not IPv4 addresses (a map of NIC to address)" % (bad_addresses,)
        if bad_addresses else None)


# --------------------------------------------------------------------------------------------
# Differences
# --------------------------------------------------------------------------------------------
def flatten(config, prefix=""):
    """{dotted.path: leaf value}; lists and empty objects are leaves."""
    flat = {}
    for key, value in (config or {}).items():
        path = prefix + key
        if isinstance(value, dict) and value:
            flat.update(flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def differences(actual, expected):
    """[{setting, expected, actual}] for every dotted key whose value differs (absent: None)."""
    left, right = flatten(actual), flatten(expected)
    items = []
    for path in sorted(set(left) | set(right)):
        if (path in left) != (path in right) or canonical(left[path]) != canonical(right[path]):
            items.append({"setting": path,
                          "expected": right[path] if path in right else "(absent)",
                          "actual": left[path] if path in left else "(absent)"})
    return items


# --------------------------------------------------------------------------------------------
# Merging the managed keys into the file's existing content
# --------------------------------------------------------------------------------------------
def merge(base, managed):
    """``base`` with the ``managed`` keys set. Every other key keeps its value and its place;
    a managed key that is new goes to the end of its section. Objects merge key by key, any
    other value (lists included) replaces the old one."""
    out = copy.deepcopy(base) if isinstance(base, dict) else {}
    for key, value in (managed or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def key_order(config, prefix=""):
    """Every dotted key path in document order (sections before their members)."""
    paths = []
    for key, value in (config or {}).items():
        paths.append(prefix + key)
        if isinstance(value, dict):
            paths.extend(key_order(value, prefix + key + "."))
    return paths


# --------------------------------------------------------------------------------------------
# Report checks
# --------------------------------------------------------------------------------------------
def report_checks(config, gds_mode, outcome, raid_devices=(), rdma_storage=False, rdma_nics=()):
    """The cufile checks for the report.

    ``outcome`` is ``{state, file, keys, backup, alternative, vendor}``: ``state`` one of
    ``in place``, ``written``, ``would change``; ``file`` the file that holds our keys;
    ``keys`` the dotted keys set; ``alternative`` a sentence about the alternatives link;
    ``duplicates`` the repeated keys found (duplicate_keys, with their ``file``)."""
    props = (config or {}).get("properties") or {}
    would = outcome["state"] == "would change"
    if outcome.get("keys"):
        parts = ["%s %s in %s" % ("would set" if would else "set", ", ".join(outcome["keys"]),
                                  outcome["file"])]
    elif outcome["state"] == "in place":
        parts = ["%s as configured" % outcome["file"]]
    else:  # e.g. our alternative created from a vendor file that already says the same
        parts = ["%s %s (no key differed from what cuFile read)" % (
            "would write" if would else "wrote", outcome["file"])]
    if outcome.get("alternative"):
        parts.append(outcome["alternative"])
    if outcome.get("vendor"):
        parts.append("vendor file %s left as it is" % outcome["vendor"])
    for dup in outcome.get("duplicates") or ():
        parts.append("key %s repeated in %s (lines %s): the later value %s" % (
            dup["key"], dup["file"], ", ".join(map(str, dup["lines"])),
            "would be kept" if would else "kept"))
    if outcome.get("backup"):
        parts.append("backup %s" % outcome["backup"])
    out = [check("cufile: configuration", "PASS", "valid cufile.json", outcome["state"],
                 "; ".join(parts))]

    compat_expected = gds_mode == "compat"
    compat = props.get("allow_compat_mode", False)
    out.append(check(
        "cufile: allow_compat_mode", "PASS" if compat == compat_expected else "WARN",
        compat_expected, compat,
        "gds_mode %s: %s" % (gds_mode, "compat mode is the plan here" if compat_expected
                             else "a POSIX fallback must fail loudly while commissioning")))
    p2p_expected = gds_mode == "p2pdma"
    p2p = props.get("use_pci_p2pdma", False)
    out.append(check("cufile: use_pci_p2pdma", "PASS" if p2p == p2p_expected else "FAIL",
                     p2p_expected, p2p, "gds_mode %s" % gds_mode))
    if p2p and raid_devices:
        out.append(check("cufile: P2PDMA with md RAID", "FAIL", "no md RAID", ",".join(raid_devices),
                         "NVIDIA does not support GDS P2PDMA on md RAID"))
    if rdma_storage:
        missing = [str(n.get("nic")) for n in rdma_nics if not n.get("address")]
        listed = props.get("rdma_dev_addr_list") or []
        listed = listed if isinstance(listed, list) else None
        out.append(check(
            "cufile: rdma_dev_addr_list", "WARN" if missing or not listed else "PASS",
            ",".join(str(n.get("nic")) for n in rdma_nics), ",".join(map(str, listed or [])),
            "no IPv4 address for %s (set gds_cufile_rdma_addresses)" % ",".join(missing)
            if missing else None if listed is not None else "rdma_dev_addr_list is not a list",
            inputs={"the NICs' addresses": [n.get("address") for n in rdma_nics], "rdma_dev_addr_list": listed}))
    return out


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------
def _atomic_symlink(path, target):
    tmp = "%s.gds-commission.%d" % (path, os.getpid())
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, path)


def _put(paths, result, path, text, mode, write, backup):
    """Write ``text`` to ``path`` (the old file backed up first when ``backup``), or, with the
    content unchanged, only put its mode right."""
    paths.guard(path)
    if write:
        if backup:
            result["backup_file"] = backup_copy(path)
        write_atomic(path, text, mode)
    elif _mode_differs(path, mode):
        os.chmod(path, mode)


def _mode_differs(path, mode):
    return os.path.exists(path) and (os.stat(path).st_mode & 0o7777) != mode


def parse_mode(value):
    """0644, '0644' or '644' as an integer file mode."""
    try:
        return value if isinstance(value, int) else int(str(value), 8)
    except ValueError:
        raise CufileError("mode %r is not an octal file mode such as 0644" % (value,))


def _duplicates(paths, files):
    """duplicate_keys() of each distinct (file, text), the file as the node sees it."""
    out, seen = [], set()
    for local, text in files:
        if local in seen or not text:
            continue
        seen.add(local)
        out.extend(dict(d, file=paths.node(local)) for d in duplicate_keys(text))
    return out


def _duplicate_drift(path, duplicates):
    return [{"setting": "%s: %s" % (path, d["key"]), "expected": "one value",
             "actual": "%d values (lines %s)" % (len(d["lines"]), ", ".join(map(str, d["lines"])))}
            for d in duplicates]


def configure(path, managed, root="", alternative_path="/etc/gds-commission/cufile.json",
              priority=1000, register_alternative=False, backup=True, mode=0o644,
              check_mode=False):
    """Merge the ``managed`` keys into the cuFile configuration that ``path`` holds.

    ``path`` may be a plain file (edited in place, atomically, with a backup), absent (created),
    a symlink (its final target is edited in place) or the alternatives link that libcufile's
    packages install (``path -> <root>/etc/alternatives/NAME -> vendor file``): then the vendor's
    file is left alone, the merged content goes to ``alternative_path`` and that file is the
    alternative to select, at ``priority``. ``register_alternative`` selects it here (the link
    and the administrative file update-alternatives would write, for a simulated root);
    otherwise the caller runs update-alternatives. ``path`` and ``alternative_path`` are below
    ``root`` or node paths (then taken below it); nothing outside ``root`` is read or written.
    A key repeated in a file counts with its later value (as JSON parsers read it) and the file
    written keeps only that one. Returns the module result without checks; raises CufileError
    for a malformed file or a dangling link, naming it."""
    paths = NodePaths(root)
    where = paths.resolve_parent(path)
    if os.path.islink(where):
        first = paths.readlink(where)
        if os.path.dirname(first) == paths.local("/etc/alternatives"):
            return _via_alternatives(paths, path, where, paths.resolve_parent(first), managed,
                                     paths.resolve(alternative_path), priority,
                                     register_alternative, backup, mode, check_mode)
        target = paths.resolve(where)
        if not os.path.exists(target):
            raise CufileError("%s is a symlink to %s, which does not exist" % (path, paths.node(target)))
        layout = "symlink"
    else:
        target = where
        layout = "file" if os.path.exists(where) else "absent"

    text, current = "", None
    if layout != "absent":
        text, current = read_config(target)
    desired = merge(current, managed)
    after = (edit_text(text, current, desired) if current is not None else None) or dumps(desired)
    items = differences(current or {}, desired)
    duplicates = _duplicates(paths, [(target, text)])
    write = current is None or canonical(current) != canonical(desired) or bool(duplicates)
    result = {"path": path, "layout": layout, "file": target, "changed": False, "config": desired,
              "previous_format": text_format(text) if current is not None else "absent",
              "keys": [i["setting"] for i in items], "duplicates": duplicates,
              "drift": ([dict(i, setting="%s: %s" % (path, i["setting"])) for i in items]
                        + _duplicate_drift(path, duplicates))}
    if write:
        result["diff"] = {"before": text, "after": after, "before_header": target,
                          "after_header": target}
    result["changed"] = write or _mode_differs(target, mode)
    if check_mode or not result["changed"]:
        return result
    _put(paths, result, target, after, mode, write, backup and current is not None)
    return result


def _vendor_base(paths, admin, admin_file, ours, ours_node, link_node, first, current_file, name):
    """(the vendor's alternative, the file our file starts from).

    The base is the vendor's file (the best alternative that is not ours), so a newer toolkit's
    keys reach our file on the next run; without an administrative file, what the link shows.
    A vendor file that is gone is an error: a file of our keys alone would drop all of NVIDIA's."""
    vendor = best_choice(admin["choices"], exclude=ours_node) if admin else None
    if vendor:
        base_file = paths.resolve(paths.local(vendor["path"]))
        if not os.path.exists(base_file):
            raise CufileError(
                "%s: the cufile.json alternative %s does not exist (a dangling alternative): "
                "reinstall its libcufile package or remove it with update-alternatives --remove "
                "%s %s; nothing was changed" % (paths.node(admin_file), vendor["path"], name,
                                                vendor["path"]))
    else:
        base_file = current_file if current_file != ours else None
        if base_file and not os.path.exists(base_file):
            raise CufileError(
                "%s -> %s: %s does not exist (a dangling alternatives link) and %s lists no "
                "other cufile.json; nothing was changed" % (link_node, paths.node(first),
                                                            paths.node(base_file),
                                                            paths.node(admin_file)))
    return vendor, base_file


def _via_alternatives(paths, path, link, first, managed, ours, priority, register, backup, mode,
                      check_mode):
    name = os.path.basename(first)
    admin_file = paths.resolve(paths.local("/var/lib/dpkg/alternatives/" + name))
    admin = read_alternatives(admin_file)
    ours_node, link_node = paths.node(ours), paths.node(link)
    selected = paths.node(paths.readlink(first)) if os.path.islink(first) else None
    current_file = paths.resolve(link)

    vendor, base_file = _vendor_base(paths, admin, admin_file, ours, ours_node, link_node, first, current_file, name)
    base_text, base = "", {}
    if base_file:
        base_text, base = read_config(base_file)
    text, current = "", None
    if os.path.exists(current_file):
        text, current = read_config(current_file)
    ours_text, ours_config = read_config(ours) if os.path.exists(ours) else ("", None)

    desired = merge(base, managed)
    # our file starts from the vendor's text: NVIDIA's comments stay readable in it
    after = (edit_text(base_text, base, desired) if base_text else None) or dumps(desired)
    items = differences(current or {}, desired)
    duplicates = _duplicates(paths, [(base_file, base_text), (current_file, text), (ours, ours_text)])
    ours_duplicates = [d for d in duplicates if d["file"] == ours_node]
    write = ours_config is None or canonical(ours_config) != canonical(desired) or bool(ours_duplicates)

    choices = [c for c in (admin["choices"] if admin else []) if c["path"] != ours_node]
    choices.append({"path": ours_node, "priority": priority, "slaves": []})
    winner = best_choice(choices)
    if winner["path"] != ours_node or [c["priority"] for c in choices].count(priority) > 1:
        raise CufileError("%s: the alternative %s has priority %d, not below %d: raise "
                          "gds_cufile_alternative_priority" % (admin_file, winner["path"],
                                                               winner["priority"], priority))
    wanted_admin = {"mode": "auto", "link": link_node, "slaves": admin["slaves"] if admin else [],
                    "choices": choices}
    registered = (admin is not None and admin["mode"] == "auto" and admin["link"] == link_node
                  and any(c["path"] == ours_node and c["priority"] == priority
                          for c in admin["choices"]))
    link_ok = registered and selected == ours_node

    drift = [dict(i, setting="%s: %s" % (path, i["setting"])) for i in items]
    drift += _duplicate_drift(ours_node, ours_duplicates)
    if not link_ok:
        drift.append({"setting": "%s: alternative" % path, "expected": ours_node,
                      "actual": selected or "(none)"})
    result = {"path": path, "layout": "alternatives", "file": ours, "changed": False,
              "config": desired,
              "previous_format": text_format(text) if current is not None else "absent",
              "keys": [i["setting"] for i in items], "duplicates": duplicates, "drift": drift,
              "alternative": {"name": name, "link": link_node, "path": ours_node,
                              "priority": priority, "selected": link_ok,
                              "vendor": vendor["path"] if vendor else None}}
    if write or not link_ok:
        result["diff"] = {"before": text, "after": after,
                          "before_header": paths.node(current_file), "after_header": ours_node}
    mode_fix = not write and _mode_differs(ours, mode)
    result["changed"] = write or mode_fix or (not link_ok and (register or check_mode))
    if check_mode or not result["changed"]:
        return result
    _put(paths, result, ours, after, mode, write, backup and ours_config is not None)
    if register and not link_ok:
        write_atomic(paths.guard(admin_file), format_alternatives(wanted_admin), 0o644)
        _atomic_symlink(paths.guard(first), ours_node)
        result["alternative"]["selected"] = True
    return result


def commission(params, check_mode=False):
    """The module's work: validate the managed keys, merge and write them, and the checks.

    Returns ``(result, warnings)``; raises CufileError with a message that names the file, the
    line and column, or every offending key."""
    managed = params["config"]
    deep = too_deep(managed)
    if deep is not None:
        raise CufileError("config: %s is nested deeper than %d levels" % (deep, MAX_DEPTH))
    root = params.get("root") or ""
    remote = None
    if params.get("netfs_mounts"):
        schema = remote_schema(root, [NodePaths(root).resolve(params["path"])])
        extra, listed, notes = remote_fs_keys(params["netfs_mounts"], schema)
        # the role's keys win, except that both address lists count
        addresses = list(dict.fromkeys(
            list(((managed.get("properties") or {}).get("rdma_dev_addr_list")) or [])
            + list(((extra.get("properties") or {}).get("rdma_dev_addr_list")) or [])))
        managed = merge(extra, managed)
        if addresses:
            managed.setdefault("properties", {})["rdma_dev_addr_list"] = addresses
        remote = {"schema": schema, "mounts": listed, "notes": notes}
    errors = validate(managed, params.get("extra_keys") or ())
    if errors:
        raise CufileError("invalid cuFile configuration: %s" % "; ".join(errors))
    result = configure(params["path"], managed, root=root,
                       alternative_path=params["alternative_path"],
                       priority=params["alternative_priority"],
                       register_alternative=params["register_alternative"],
                       backup=params["backup"], mode=parse_mode(params["mode"]),
                       check_mode=check_mode)
    warnings = deprecations(result["config"])
    paths = NodePaths(root)
    for dup in result["duplicates"]:
        warnings.append("%s: key %s appears on lines %s; the value on line %d counts (the later, "
                        "as JSON parsers read it) and the file written, %s, keeps only that one"
                        % (dup["file"], dup["key"], ", ".join(map(str, dup["lines"])),
                           dup["lines"][-1], paths.node(result["file"])))
    alternative = result.get("alternative")
    sentence = None
    if alternative:
        done = alternative["selected"] or (not check_mode and not params["register_alternative"])
        sentence = "%s for %s through update-alternatives (%s, priority %d, auto mode)" % (
            "selected" if done else "would be selected", alternative["link"], alternative["name"],
            alternative["priority"])
    state = "in place"
    if result["changed"]:
        state = "would change" if check_mode else "written"
    outcome = {"state": state, "file": paths.node(result["file"]), "keys": result["keys"],
               "alternative": sentence,
               "vendor": alternative.get("vendor") if alternative else None,
               "backup": paths.node(result["backup_file"]) if result.get("backup_file") else None,
               "duplicates": result["duplicates"]}
    result["checks"] = report_checks(result["config"], params.get("gds_mode") or "nvfs", outcome,
                                     raid_devices=params.get("raid_devices") or (),
                                     rdma_storage=params.get("rdma_storage", False),
                                     rdma_nics=params.get("rdma_nics") or ())
    result["gds_version"] = remote["schema"]["version"] if remote else gds_version(root)[0]
    if remote:
        policy = (managed.get("properties") or {}).get("rdma_load_balancing_policy")
        result["checks"].append(remote_fs_check(remote["schema"], remote["mounts"], remote["notes"],
                                                policy))
        result["remote_fs"] = remote
    return result, warnings


# The role gds_cufile: its variables, the one source of its defaults/main.yml, meta/argument_specs.yml
# and its table in docs/variables.md (make roles)
ROLE_SPEC = RoleSpec(
    'gds_cufile', 'gds_cufile_',
    short_description="Merge the node's cuFile settings into cufile.json, keeping the vendor's content",
    description=("NVIDIA's documented defaults (templates/cufile.json.j2) with computed values (use_pci_p2pdma "
                 'from gds_mode, allow_compat_mode false when commissioning, rdma_dev_addr_list from the affinity '
                 "groups' NICs) and profile and host overrides are the managed keys. They are validated, then "
                 "merged into the existing cufile.json (every other key keeps its value and place); the toolkit's "
                 'alternatives link gets our merged file as a higher-priority alternative, a plain file is edited '
                 'in place with a backup.',
                 'Records the cufile checks in gds_cufile_checks for the report.',),
    variables=[
        Var('gds_cufile_path', 'path',
            'The file cuFile reads; a simulated node has it below its gds_root. The managed keys are merged into '
            "it (a plain file is edited in place); where it is the toolkit's alternatives link, into "
            '`gds_cufile_alternative_path`.',
            on_node('/etc/cufile.json')),
        Var('gds_cufile_alternative_path', 'path',
            "Where the merged configuration goes when `gds_cufile_path` is the toolkit's alternatives link; "
            "registered as the `cufile.json` alternative, the vendor's file stays untouched.",
            on_node('/etc/gds-commission/cufile.json')),
        Var('gds_cufile_alternative_priority', 'int',
            "Priority of that alternative, above the toolkit's (CUDA 13.0 registers 130), so auto mode selects it.",
            1000),
        Var('gds_cufile_mode', 'str',
            'GDS data path this node is commissioned for: nvfs (nvidia-fs), p2pdma (kernel PCI P2PDMA) or compat.',
            "{{ gds_mode | default('nvfs') }}",
            choices=('nvfs', 'p2pdma', 'compat')),
        Var('gds_cufile_use_pci_p2pdma', 'bool',
            "properties.use_pci_p2pdma: true exactly when the node runs GDS over the kernel's PCI P2PDMA.",
            "{{ gds_cufile_mode == 'p2pdma' }}"),
        Var('gds_cufile_allow_compat_mode', 'bool',
            'properties.allow_compat_mode: false when commissioning (a silent POSIX fallback must show); true only '
            'for gds_mode compat.',
            "{{ gds_cufile_mode == 'compat' }}"),
        Var('gds_cufile_rdma_storage', 'bool',
            "Storage is reached over RDMA (NFS/RDMA, Lustre, WekaFS...): fill rdma_dev_addr_list from the groups' "
            'NICs.',
            False),
        Var('gds_cufile_rdma_groups', 'list',
            'Affinity group ids whose NICs carry storage traffic; empty: every group.',
            [],
            elements='int'),
        Var('gds_cufile_rdma_addresses', 'dict',
            'IPv4 address per RDMA device or netdev ({mlx5_0: 10.0.1.11}); else read from the interface facts.',
            {}),
        Var('gds_cufile_netfs_mounts', 'list',
            'Network mounts (role gds_netfs) whose RDMA NIC addresses go into `rdma_dev_addr_list` and the '
            '`fs.<type>` sections (`mount_table` per mount where the installed GDS version has it).',
            "{{ ansible_facts['gds_netfs']['mounts'] | default([]) }}",
            elements='dict'),
        Var('gds_cufile_rdma_load_balancing_policy', 'str',
            '`properties.rdma_load_balancing_policy`: RoundRobin, or RoundRobinMaxMin (least NIC sharing between '
            'GPUs).',
            'RoundRobin',
            choices=('RoundRobin', 'RoundRobinMaxMin')),
        Var('gds_cufile_profile_overrides', 'dict',
            "Platform profile overrides, deep-merged over NVIDIA's defaults (the collection's `profiles/`).",
            {}),
        Var('gds_cufile_overrides', 'dict',
            'Site or host overrides, deep-merged last (they win over the computed values too).',
            {}),
        Var('gds_cufile_extra_keys', 'list',
            "Dotted keys accepted without validation (keys of a libcufile newer than the role's schema).",
            [],
            elements='str'),
        Var('gds_cufile_backup', 'bool',
            'Keep a timestamped backup of a file the role rewrites (`cufile.json.<pid>.<date>@<time>~`).',
            True),
    ],
    entry_points={
        'validate': "main",
        'steps': "main",
    },
    renamed_from='cufile',
)
