#!/usr/bin/env python3
"""Inventory: this node as the only host, connection local, for a node that commissions itself
(scripts/gds-node-run, which srun starts on each node; docs/fleet.md#node-local-runs-under-slurm).

- The host's name: GDS_NODE_NAME, else SLURMD_NODENAME (srun and slurmd's health check set it),
  else the short host name; one plain Slurm node name (letters, digits, . _ -), as gds_slurm maps
  hosts to nodes.
- Its platform group, which gives it its platform profile (the collection's profiles/):
  GDS_NODE_PLATFORM; none: no profile (the report WARNs `topology: platform profile`); one that
  names no profile (a typo, dgx_h200): the host gets `gds_platform_unknown` and the report is
  ERROR naming the known profiles.
- GDS_NODE_GROUPS: more groups, comma separated (`simulated`: a simulated node of the tests).
group_vars/all.yml beside this file: connection local, the report in host scope.
"""
import importlib.util
import json
import os
import re
import socket
import sys

# a node name as gds_slurm reads one: the rule's one home, fleet/slurm_rules.py of this checkout
# (standard library only, so it loads without Ansible)
COLLECTION = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "collections", "ansible_collections", "gds", "commission")
_RULES = importlib.util.spec_from_file_location("gds_slurm_rules", os.path.join(
    COLLECTION, "plugins", "module_utils", "fleet", "slurm_rules.py"))
slurm_rules = importlib.util.module_from_spec(_RULES)
_RULES.loader.exec_module(slurm_rules)
NODE = slurm_rules.NODE_NAME
GROUP = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def inventory(env):
    name = env.get("GDS_NODE_NAME") or env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    if not NODE.match(name):
        raise ValueError("node name %r is not one plain node name (letters, digits, . _ -)" % name)
    groups = [g.strip() for g in [env.get("GDS_NODE_PLATFORM", "")] + env.get("GDS_NODE_GROUPS", "").split(",") if g.strip()]
    for group in groups:
        if not GROUP.match(group) or group in ("all", "ungrouped"):
            raise ValueError("group %r is not an inventory group name (GDS_NODE_PLATFORM, GDS_NODE_GROUPS)" % group)
    hostvars = {}
    platform = env.get("GDS_NODE_PLATFORM", "").strip()
    known = sorted(n[:-4] for n in os.listdir(os.path.join(COLLECTION, "profiles")) if n.endswith(".yml"))
    if platform and platform not in known:
        hostvars["gds_platform_unknown"] = {"group": platform, "known": known}
    out = {"_meta": {"hostvars": {name: hostvars}}, "all": {"hosts": [name], "children": groups}}
    for group in groups:
        out[group] = {"hosts": [name]}
    return out


def main(argv):
    if "--host" in argv:  # every variable is in _meta
        print("{}")
        return 0
    try:
        print(json.dumps(inventory(os.environ), indent=1))
    except ValueError as exc:
        sys.stderr.write("inventory/node-local: %s\n" % exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
