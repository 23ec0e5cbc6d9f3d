"""The product's Python reads in pieces: no function of plugins/ over 80 lines (a longer one is
split where its steps are)."""
import ast
import glob
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission", "plugins")
LONGEST = 80


def test_no_function_is_longer_than_80_lines():
    long = []
    for path in sorted(glob.glob(os.path.join(PLUGINS, "**", "*.py"), recursive=True)):
        with open(path) as handle:
            tree = ast.parse(handle.read())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > LONGEST:
                long.append("%s:%d %s (%d lines)" % (os.path.relpath(path, PLUGINS), node.lineno, node.name,
                                                     node.end_lineno - node.lineno + 1))
    assert long == []
