"""The repository explains itself: docs/ covers every module option and return key, every role
variable and every platform profile; no file points outside the repository or into the issue tracker;
relative links in the docs resolve."""
import ast
import glob
import os
import re
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission")
DOCS = os.path.join(ROOT, "docs")

# Written so that a plain `git grep` for the forbidden words does not find this file.
FORBIDDEN = [
    (re.compile(r"[.][.]/shared\b"), "a path outside the repository"),
    (re.compile(r"/wor[k]/shared\b"), "a path outside the repository"),
    (re.compile(r"\bdesign[.]md\b", re.I), "the design notes outside the repository"),
    (re.compile(r"\bissue\s+(ite[m]\s+)?#?[0-9]", re.I), "an issue reference"),
    (re.compile(r"\bissue\s+ite[m]\b", re.I), "an issue reference"),
    (re.compile(r"\bite[m]\s+[0-9]+\b", re.I), "an issue reference"),
    (re.compile(r"\bdevice\s+note[s]\b", re.I), "notes that do not exist"),
]


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def tracked_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        files = [name for name in out.decode().split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for base, dirs, names in os.walk(ROOT):
            dirs[:] = [d for d in dirs if d not in (".git", ".venv", "build", "reports", ".whl", ".peers") and not d.startswith(".venv-core-")]
            files += [os.path.relpath(os.path.join(base, n), ROOT) for n in names]
    return sorted(f for f in files if os.path.isfile(os.path.join(ROOT, f)))


def forbidden_references(text):
    """(line number, line, why) of every reference to something outside the repository."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, why in FORBIDDEN:
            if pattern.search(line):
                found.append((number, line.strip(), why))
    return found


def test_forbidden_reference_patterns_catch_what_they_must():
    design, item = "DES" "IGN", "ite" "m"
    bad = ["see ../" "shared/%s.md" % design, "contract in %s.md section 5" % design.lower(),
           "# Side effect (issue %s 4): reboot" % item, "# %s 5: the guest" % item, "Criteria (issue " "5)",
           "(see the device " "notes in README.md)", "/wor" "k/shared/reference"]
    for line in bad:
        assert forbidden_references(line), line
    good = ["uint64_t issued = 0;", "if issued >= target", "one item per bridge", "docs/architecture.md"]
    for line in good:
        assert not forbidden_references(line), line


def test_no_tracked_file_refers_outside_the_repository():
    offenders = []
    for name in tracked_files():
        path = os.path.join(ROOT, name)
        try:
            text = read(path)
        except (UnicodeDecodeError, OSError):
            continue  # binary
        for number, line, why in forbidden_references(text):
            offenders.append("%s:%d: %s (%s)" % (name, number, line[:100], why))
    assert not offenders, "files refer to things outside the repository:\n" + "\n".join(offenders)


# ---------------------------------------------------------------------------------------------
# docs/modules.md
# ---------------------------------------------------------------------------------------------
def module_docs(path):
    """DOCUMENTATION and RETURN of a module file, parsed with yaml (module-level string constants)."""
    tree = ast.parse(read(path), filename=path)
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in ("DOCUMENTATION", "RETURN"):
                    out[target.id] = yaml.safe_load(node.value.value) or {}
    return out


def option_names(options, prefix=""):
    names = []
    for name, spec in sorted((options or {}).items()):
        names.append(prefix + name)
        names += option_names((spec or {}).get("suboptions"), prefix + name + ".")
    return names


def return_keys(returns, prefix=""):
    names = []
    for name, spec in sorted((returns or {}).items()):
        names.append(prefix + name)
        names += return_keys((spec or {}).get("contains"), prefix + name + ".")
    return names


def md_sections(text, level):
    """{heading text: body} for the headings of one level (`## name`)."""
    marker = "#" * level + " "
    sections, current = {}, None
    for line in text.splitlines():
        if line.startswith(marker):
            current = line[len(marker):].strip().strip("`")
            sections[current] = []
        elif re.match(r"^#{1,%d} " % (level - 1), line):
            current = None
        elif current is not None:
            sections[current].append(line)
    return {name: "\n".join(body) for name, body in sections.items()}


MODULES = sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(COLLECTION, "plugins", "modules", "*.py")))


def test_module_names_and_keys_are_parsed():
    assert "gds_topology" in MODULES and "pcie_acs" in MODULES
    docs = module_docs(os.path.join(COLLECTION, "plugins", "modules", "pcie_acs.py"))
    assert "allow_with_vfio" in option_names(docs["DOCUMENTATION"]["options"])
    assert "bridges.before" in return_keys(docs["RETURN"])
    topo = module_docs(os.path.join(COLLECTION, "plugins", "modules", "gds_topology.py"))
    assert "ansible_facts.gds_topology.groups" in return_keys(topo["RETURN"])


@pytest.mark.parametrize("module", MODULES)
def test_every_module_option_and_return_key_is_in_modules_md(module):
    sections = md_sections(read(os.path.join(DOCS, "modules.md")), 2)
    assert module in sections, "docs/modules.md has no '## %s' section" % module
    body = sections[module]
    docs = module_docs(os.path.join(COLLECTION, "plugins", "modules", module + ".py"))
    assert docs.get("DOCUMENTATION"), "plugins/modules/%s.py has no DOCUMENTATION" % module
    missing = ["option " + name for name in option_names(docs["DOCUMENTATION"].get("options"))
               if "`%s`" % name not in body]
    missing += ["return key " + name for name in return_keys(docs.get("RETURN"))
                if "`%s`" % name not in body]
    assert not missing, "docs/modules.md, section %s, lacks: %s" % (module, ", ".join(missing))


# ---------------------------------------------------------------------------------------------
# docs/variables.md
# ---------------------------------------------------------------------------------------------
ROLES = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
               for p in glob.glob(os.path.join(COLLECTION, "roles", "*", "defaults", "main.yml")))


def role_defaults(role):
    return sorted((yaml.safe_load(read(os.path.join(COLLECTION, "roles", role, "defaults", "main.yml"))) or {}).keys())


def role_spec_options(role):
    path = os.path.join(COLLECTION, "roles", role, "meta", "argument_specs.yml")
    if not os.path.exists(path):
        return []
    specs = (yaml.safe_load(read(path)) or {}).get("argument_specs") or {}
    return sorted({name for entry in specs.values() for name in ((entry or {}).get("options") or {})})


def test_roles_and_variables_are_parsed():
    assert "gds_raid" in ROLES and "gds_raid_allow_destroy" in role_defaults("gds_raid")
    assert "gds_reboot_ok" in role_spec_options("gds_iommu")


@pytest.mark.parametrize("role", ROLES)
def test_every_role_variable_is_in_variables_md(role):
    text = read(os.path.join(DOCS, "variables.md"))
    sections = md_sections(text, 2)
    assert role in sections, "docs/variables.md has no '## %s' section" % role
    missing = [name for name in role_defaults(role) if "`%s`" % name not in sections[role]]
    # shared variables a role's argument spec names (gds_root, gds_mode ...) may sit anywhere
    missing += [name for name in role_spec_options(role) if "`%s`" % name not in text]
    missing = list(dict.fromkeys(missing))
    assert not missing, "docs/variables.md (section %s) lacks: %s" % (role, ", ".join(missing))


# ---------------------------------------------------------------------------------------------
# Profiles
# ---------------------------------------------------------------------------------------------
PROFILE_DIR = os.path.join(COLLECTION, "profiles")


def profiles():
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(PROFILE_DIR, "*.yml")))


def test_every_profile_is_documented():
    names = profiles()
    assert "dgx_a100.yml" in names
    for doc in (os.path.join(DOCS, "profiles.md"), os.path.join(PROFILE_DIR, "README.md")):
        text = read(doc)
        missing = [name for name in names if "`%s`" % name not in text]
        assert not missing, "%s does not list %s" % (os.path.relpath(doc, ROOT), ", ".join(missing))


def test_profile_readme_lists_only_profiles_present():
    listed = set(re.findall(r"`([A-Za-z0-9_.-]+\.yml)`", read(os.path.join(PROFILE_DIR, "README.md"))))
    absent = sorted(listed - set(profiles()))
    assert not absent, "the collection's profiles/README.md lists profiles that do not exist: %s" % ", ".join(absent)


# ---------------------------------------------------------------------------------------------
# Links
# ---------------------------------------------------------------------------------------------
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading):
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path):
    text = re.sub(r"```.*?```", "", read(path), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.M)}


def broken_links(md_path, root=ROOT):
    text = re.sub(r"```.*?```", "", read(md_path), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    broken = []
    for match in LINK.finditer(text):
        target = match.group(1) or match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(md_path), path)) if path else md_path
        if not full.startswith(root + os.sep) and full != root:
            broken.append("%s (outside the repository)" % target)
        elif not os.path.exists(full):
            broken.append("%s (no such file)" % target)
        elif anchor and full.endswith(".md") and anchor not in anchors(full):
            broken.append("%s (no such heading)" % target)
    return broken


def link_sources():
    return sorted(glob.glob(os.path.join(DOCS, "*.md"))) + [os.path.join(ROOT, "README.md")]


def test_link_checker_finds_broken_links(tmp_path):
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "other.md").write_text("# Some Heading: here\n")
    page = root / "docs" / "page.md"
    page.write_text("# Top\n[ok](other.md#some-heading-here) [anchor](#top) [bad](nope.md) [far](../../x.md) "
                    "[badanchor](#nothing) [web](https://example.org) `[code](nope.md)`\n"
                    "[badfar](other.md#nowhere)\n")
    assert broken_links(str(page), str(root)) == [
        "nope.md (no such file)", "../../x.md (outside the repository)", "#nothing (no such heading)",
        "other.md#nowhere (no such heading)"]


@pytest.mark.parametrize("md", [os.path.relpath(p, ROOT) for p in link_sources()])
def test_relative_links_resolve(md):
    broken = broken_links(os.path.join(ROOT, md))
    assert not broken, "%s has broken links: %s" % (md, ", ".join(broken))


def test_docs_index_in_readme_lists_every_page():
    readme = read(os.path.join(ROOT, "README.md"))
    pages = sorted(os.path.basename(p) for p in glob.glob(os.path.join(DOCS, "*.md")))
    assert len(pages) >= 8
    missing = [page for page in pages if "(docs/%s" % page not in readme]
    assert not missing, "README.md's docs index lacks %s" % ", ".join(missing)


def _names_in_row(text, kind):
    """The backticked names of the row ``| kind | ...`` of a markdown table (``gds.commission.``
    dropped), or None when there is no such row."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 2 and cells[1] == kind:
            return {n.replace("gds.commission.", "") for n in re.findall(r"`([A-Za-z0-9_.]+)`", cells[2])}
    return None


def _filters():
    import importlib.util
    names = set()
    for path in glob.glob(os.path.join(COLLECTION, "plugins", "filter", "*.py")):
        spec = importlib.util.spec_from_file_location("doc_filter_" + os.path.basename(path)[:-3], path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        names |= set(module.FilterModule().filters())
    return names


def test_the_collections_readme_lists_every_playbook_role_module_and_filter_and_nothing_else():
    """Its contents table named a filter that did not exist and left out modules and playbooks."""
    text = read(os.path.join(COLLECTION, "README.md"))
    stems = lambda folder, ext: {os.path.basename(p)[:-len(ext)] for p in glob.glob(os.path.join(COLLECTION, folder, "*" + ext))}
    assert _names_in_row(text, "playbooks") == stems("playbooks", ".yml")
    assert _names_in_row(text, "roles") == {os.path.basename(p) for p in glob.glob(os.path.join(COLLECTION, "roles", "*"))}
    assert _names_in_row(text, "modules") == stems("plugins/modules", ".py")
    assert _names_in_row(text, "filters") == _filters()


def test_the_readme_lists_every_module_role_and_playbook():
    text = read(os.path.join(ROOT, "README.md"))
    modules = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(COLLECTION, "plugins", "modules", "*.py"))}
    roles = {os.path.basename(p) for p in glob.glob(os.path.join(COLLECTION, "roles", "*"))}
    row = lambda path: next(line for line in text.splitlines() if line.startswith("| `%s`" % path))
    listed = set(re.findall(r"`([a-z0-9_]+)`", row("collections/ansible_collections/gds/commission/plugins/modules/")))
    assert modules <= listed
    assert roles <= set(re.findall(r"`([a-z0-9_]+)`", row("collections/ansible_collections/gds/commission/roles/")))
    for playbook in glob.glob(os.path.join(COLLECTION, "playbooks", "*.yml")):
        assert re.search(r"\b%s\b" % re.escape(os.path.basename(playbook)), text), playbook
    for name in re.findall(r"filters? `(gds_[a-z_]+)`", text):  # a filter named there exists
        assert name in _filters(), name


@pytest.mark.parametrize("page", ["docs/benchmark.md",
                                  "collections/ansible_collections/gds/commission/roles/gds_bench/files/bench/README.md"])
def test_the_transfer_type_tables_are_gdsbenchs_vocabulary(page):
    """The pages that explain each transfer type list exactly the ones gdsbench runs, by its numbers
    and names (measure/gdsbench_vocab.py, from gdsbench --capabilities), and name the refused ones."""
    from ansible_collections.gds.commission.plugins.module_utils.measure.gdsbench_vocab import VOCABULARY
    text = open(os.path.join(ROOT, page)).read()
    rows = re.findall(r"^\| ([0-9]) \| ([A-Z_]+) \|", text, re.M)
    runs = [(str(t["number"]), t["name"]) for t in VOCABULARY["xfer_types"] if not t.get("refused")]
    assert rows == runs
    for t in VOCABULARY["xfer_types"]:
        if t.get("refused"):
            assert "%d (%s)" % (t["number"], t["name"]) in text or "%d %s" % (t["number"], t["name"]) in text, t
