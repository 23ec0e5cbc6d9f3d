"""What ships is the product: the collection built with ansible-galaxy carries the docs its modules
and role READMEs refer to and the platform profiles, an installed copy gives each platform group
its profile (gds_bench_thresholds is no longer empty there), and execution-environment.yml makes
an ansible-builder context that installs that tarball."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

from conftest import COLLECTION, ROOT

BIN = os.path.dirname(sys.executable)
DOCS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
PROFILES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(COLLECTION, "profiles", "*.yml")))


def run(argv, **kwargs):
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kwargs)
    assert proc.returncode == 0, "%s: %s%s" % (" ".join(argv), proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(the tarball ansible-galaxy builds from the collection, the collection installed from it)."""
    tmp = tmp_path_factory.mktemp("collection")
    run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", COLLECTION, "--output-path", str(tmp / "dist")])
    [tarball] = glob.glob(str(tmp / "dist" / "*.tar.gz"))
    # away from this checkout, whose collections_path already holds gds.commission of that version
    (tmp / "ansible.cfg").write_text("[defaults]\n")
    run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", tarball, "--no-deps", "-p", str(tmp / "installed")],
        env=dict(os.environ, ANSIBLE_CONFIG=str(tmp / "ansible.cfg")), cwd=str(tmp))
    return tarball, tmp / "installed" / "ansible_collections" / "gds" / "commission"


def read(path, mode="r"):
    with open(path, mode) as handle:
        return handle.read()


def test_the_tarball_carries_the_docs_and_the_profiles(built):
    tarball, dummy = built
    with tarfile.open(tarball) as tar:
        members = {m.name: m for m in tar.getmembers()}
        for page in DOCS:
            member = members.get("docs/" + page)
            assert member is not None and member.isfile(), "the collection does not ship docs/%s" % page
            assert tar.extractfile(member).read() == read(os.path.join(ROOT, "docs", page), "rb"), page
        assert len(PROFILES) >= 5 and "dgx_a100.yml" in PROFILES
        for profile in PROFILES + ["README.md"]:
            member = members.get("profiles/" + profile)
            assert member is not None and member.isfile(), "the collection does not ship profiles/%s" % profile
        assert "plugins/vars/gds_profiles.py" in members


def test_every_docs_page_has_its_link_in_the_collection():
    """A page added to docs/ ships only with its link in the collection's docs/."""
    linked = sorted(os.listdir(os.path.join(COLLECTION, "docs")))
    assert linked == DOCS
    for page in linked:
        path = os.path.join(COLLECTION, "docs", page)
        assert os.path.islink(path) and os.path.samefile(path, os.path.join(ROOT, "docs", page)), page


def _links(md_path):
    import re
    text = re.sub(r"```.*?```", "", read(md_path), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    for match in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = match.group(1).split("#")[0]
        if target and not re.match(r"^[a-z][a-z0-9+.-]*:", target):
            yield target


def test_the_installed_collections_pages_link_inside_it(built):
    """Every page the collection carries besides docs/ (its README, the roles' and the profiles')
    points into the installed collection (its docs/), never to a checkout of the repository; the
    docs pages link each other."""
    dummy, installed = built
    pages = [p for p in glob.glob(str(installed / "**" / "*.md"), recursive=True)
             if not p.startswith(str(installed / "docs") + os.sep)]
    broken, checked = [], 0
    for page in pages:
        for target in _links(page):
            checked += 1
            full = os.path.normpath(os.path.join(os.path.dirname(page), target))
            if not full.startswith(str(installed) + os.sep) or not os.path.exists(full):
                broken.append("%s: %s" % (os.path.relpath(page, str(installed)), target))
    for page in glob.glob(str(installed / "docs" / "*.md")):
        for target in _links(page):
            if "/" not in target and not os.path.exists(os.path.join(os.path.dirname(page), target)):
                broken.append("%s: %s" % (os.path.relpath(page, str(installed)), target))
    assert checked >= 8 and not broken, "links that do not resolve in the installed collection: %s" % ", ".join(broken)


PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    # the role's defaults in scope, as its tasks see them (a static import; nothing of it runs)
    - ansible.builtin.import_role:
        name: gds.commission.gds_bench
      when: false
    - ansible.builtin.copy:
        dest: "{{ out }}/{{ inventory_hostname }}.json"
        content: "{{ {'thresholds': gds_bench_thresholds, 'profile': gds_platform_profile | default(none),
                      'duration': gds_bench_duration, 'expect_path': gds_bench_expect_path} | to_json }}"
        mode: "0644"
      delegate_to: localhost
"""


def test_an_installed_collection_gives_each_platform_group_its_profile(built, tmp_path):
    """Installed from its tarball, away from this repository: a host in group dgx_a100 gets the
    collection's dgx_a100 profile (the bench thresholds were empty there, no profile shipped); a
    site's group_vars win over it; a host in no platform group keeps the roles' defaults."""
    dummy, installed = built
    (tmp_path / "ansible.cfg").write_text(
        "[defaults]\ncollections_path = %s\nvars_plugins_enabled = host_group_vars,gds.commission.gds_profiles\n"
        % installed.parent.parent.parent)
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text(json.dumps({"all": {
        "hosts": {"plain": None},
        "children": {"dgx_a100": {"hosts": {"a100": None}}, "dgx_h100": {"hosts": {"h100": None}}},
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}))
    (inventory / "group_vars" / "all.yml").write_text("gds_bench_duration: 7\n")
    (inventory / "group_vars" / "dgx_h100.yml").write_text("gds_bench_expect_path: compat\n")
    (tmp_path / "play.yml").write_text(PLAY)
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"))
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    run([os.path.join(BIN, "ansible-playbook"), "-i", str(inventory), str(tmp_path / "play.yml"), "-e", "out=%s" % out],
        env=env, cwd=str(tmp_path))
    seen = {host: json.loads((out / (host + ".json")).read_text()) for host in ("a100", "h100", "plain")}
    profile = yaml.safe_load(read(os.path.join(COLLECTION, "profiles", "dgx_a100.yml")))
    assert seen["a100"]["thresholds"] == profile["gds_bench_thresholds"] != {}
    assert seen["a100"]["profile"] == "dgx_a100" and seen["h100"]["profile"] == "dgx_h100"
    assert seen["a100"]["expect_path"] == "nvfs" and seen["h100"]["expect_path"] == "compat"  # group_vars win
    assert seen["a100"]["duration"] == seen["h100"]["duration"] == 7  # so does the site's all.yml
    assert seen["plain"]["thresholds"] == {} and seen["plain"]["profile"] is None


def test_the_execution_environment_context_installs_the_built_collection(built, tmp_path):
    """ansible-builder create (no container runtime needed) writes a context whose image installs
    the tarball ansible-galaxy builds, with the Python and system packages the file names, on the
    newest ansible-core this repository tests: scripts/ee-definition.py fills in the tarball's name
    (galaxy.yml) and the core's pins (requirements/core-<newest>.txt), as `make ee` does."""
    tarball, dummy = built
    name = os.path.basename(tarball)  # gds-commission-<galaxy.yml's version>.tar.gz
    (tmp_path / "build" / "collection").mkdir(parents=True)
    shutil.copy(tarball, str(tmp_path / "build" / "collection"))
    text = run([os.path.join(BIN, "python"), os.path.join(ROOT, "scripts", "ee-definition.py")]).stdout
    (tmp_path / "build" / "execution-environment.yml").write_text(text)
    definition = yaml.safe_load(text)
    assert definition["version"] == 3
    [collection] = definition["dependencies"]["galaxy"]["collections"]
    assert collection == {"name": "collections/" + name, "type": "file"}
    run([os.path.join(BIN, "ansible-builder"), "create", "--file", str(tmp_path / "build" / "execution-environment.yml"),
         "--context", str(tmp_path / "context"), "--output-filename", "Containerfile"], cwd=str(tmp_path))
    context = tmp_path / "context"
    assert read(str(context / "_build" / "collections" / name), "rb") == read(tarball, "rb")
    assert yaml.safe_load((context / "_build" / "requirements.yml").read_text()) == {"collections": [collection]}
    containerfile = (context / "Containerfile").read_text()
    assert "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml" in containerfile
    assert 'ARG ANSIBLE_GALAXY_CLI_COLLECTION_OPTS="--no-deps"' in containerfile
    # the collection's dependencies as this repository pins them for its newest core
    newest = sorted(glob.glob(os.path.join(ROOT, "requirements", "core-*.txt")),
                    key=lambda p: tuple(int(x) for x in os.path.basename(p)[5:-4].split(".")))[-1]
    pins = dict(line.strip().split("==") for line in read(newest).splitlines() if "==" in line and not line.startswith("#"))
    assert pins == {k: v for k, v in dict(line.strip().split("==") for line in read(os.path.join(ROOT, "requirements.txt"))
                                          .splitlines() if "==" in line and not line.startswith("#")).items()
                    if k in ("ansible", "ansible-core")}, "requirements.txt pins the newest core"
    assert (context / "_build" / "requirements.txt").read_text().split() == ["ansible==" + pins["ansible"]]
    assert "openssh-clients [platform:rpm]" in (context / "_build" / "bindep.txt").read_text()
    assert 'ANSIBLE_INSTALL_REFS="ansible-core==%s ansible-runner' % pins["ansible-core"] in containerfile
