#!/usr/bin/env python3
"""Print the execution environment's definition for ansible-builder: execution-environment.yml with
what the repository already says elsewhere filled in, so that nothing is typed twice:
- the collection's tarball, named as `ansible-galaxy collection build` names it (galaxy.yml's
  namespace, name and version);
- ansible-core and the ansible package (which bundles community.general and ansible.posix) as
  requirements/core-<newest>.txt pins them, the core this repository tests first.

  python3 scripts/ee-definition.py > build/execution-environment.yml   (make ee)
"""
import glob
import os
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GALAXY = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission", "galaxy.yml")


def newest_core_pins():
    """{name: version} of requirements/core-<newest>.txt."""
    def release(path):
        return tuple(int(part) for part in os.path.basename(path)[5:-4].split("."))
    path = max(glob.glob(os.path.join(ROOT, "requirements", "core-*.txt")), key=release)
    with open(path) as handle:
        return dict(line.strip().split("==", 1) for line in handle if "==" in line and not line.startswith("#"))


def definition():
    with open(os.path.join(ROOT, "execution-environment.yml")) as handle:
        doc = yaml.safe_load(handle)
    with open(GALAXY) as handle:
        galaxy = yaml.safe_load(handle)
    tarball = "%s-%s-%s.tar.gz" % (galaxy["namespace"], galaxy["name"], galaxy["version"])
    pins = newest_core_pins()
    deps = doc["dependencies"]
    deps["ansible_core"]["package_pip"] = "ansible-core==" + pins["ansible-core"]
    deps["python"] = ["ansible==" + pins["ansible"]]
    deps["galaxy"]["collections"] = [{"name": "collections/" + tarball, "type": "file"}]
    doc["additional_build_files"] = [{"src": "collection/" + tarball, "dest": "collections"}]
    return doc


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the usage, before anything is read
        print(__doc__)
        sys.exit(0)
    sys.stdout.write("# written by scripts/ee-definition.py from execution-environment.yml: do not edit\n")
    yaml.safe_dump(definition(), sys.stdout, sort_keys=False)
