# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The text of a cufile.json: NVIDIA's JSON with comments read (malformed text named with its
line and column), the strict JSON we write, the text edited in place so that comments, layout
and untouched values stay as they were, and the keys an object repeats."""
from __future__ import annotations

import bisect
import json
import re

from ansible_collections.gds.commission.plugins.module_utils.core.files import UnreadableFile, read_utf8

# a cufile.json is some kB (NVIDIA's, every key with its comment: ~15 kB); far more is no cufile.json
MAX_BYTES = 1 << 20


class CufileError(Exception):
    """Malformed cufile.json text; the message names the line and column."""


# Deeper than any cufile.json NVIDIA documents (fs.nfs.mount_table.<mount>.rdma_dev_addr_list is
# 6 levels) and far below what would exhaust Python's recursion in the parser.
MAX_DEPTH = 32


# one token at a time, each a regular expression's match (a loop per character made a 4 MB file
# take seconds): a string (to its closing quote, or the end), a comment, a run of anything else
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"?'
_TOKEN = re.compile(_STRING + r'|//[^\n]*|/\*.*?(?:\*/|\Z)|[^"/]+|/', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


def _strip(text, max_depth=None):
    """(text without comments and trailing commas, index in ``text`` of the first ``{`` or ``[``
    nested deeper than ``max_depth``, or None)."""
    out, depth, too_deep = [], 0, None
    for token in _TOKEN.finditer(text):
        chunk = token.group(0)
        if chunk.startswith("//"):
            continue  # the newline after it stays: line numbers stay right
        if chunk.startswith("/*"):
            out.append("\n" * chunk.count("\n"))
            continue
        if not chunk.startswith('"'):
            for bracket in _BRACKET.finditer(chunk):
                depth += 1 if bracket.group(0) in "{[" else -1
                if max_depth is not None and depth > max_depth and too_deep is None:
                    too_deep = token.start() + bracket.start()
        out.append(chunk)
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out)), too_deep


def strip_comments(text):
    """Remove // and /* */ comments outside strings, and trailing commas before } or ]."""
    return _strip(text)[0]


def _line_column(text, pos):
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _line_finder(text):
    """pos -> its line number, in log time: a scan that names many lines stays linear."""
    breaks = [match.start() for match in re.finditer("\n", text)]
    return lambda pos: bisect.bisect_left(breaks, pos) + 1


def _last_wins(pairs):
    """An object whose repeated key has its later value, at its later place: what JSON parsers
    read, and the text left once the earlier one is removed (duplicate_keys, edit_text)."""
    out = {}
    for key, value in pairs:
        out.pop(key, None)
        out[key] = value
    return out


def loads(text, source="cufile.json"):
    """Parse cufile.json text (comments and trailing commas allowed; a repeated key counts with
    its later value). Raises CufileError naming ``source``, the line and the column."""
    stripped, deep_at = _strip(text, MAX_DEPTH)
    if deep_at is not None:
        raise CufileError("%s is nested deeper than %d levels at line %d column %d"
                          % ((source, MAX_DEPTH) + _line_column(text, deep_at)))
    try:
        data = json.loads(stripped, object_pairs_hook=_last_wins)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        col = getattr(exc, "colno", None)
        where = " at line %s column %s" % (line, col) if line else ""
        raise CufileError("%s is not valid JSON%s: %s" % (source, where, getattr(exc, "msg", exc)))
    except RecursionError:  # cannot happen below MAX_DEPTH; a message, never a traceback
        raise CufileError("%s is nested too deeply to be read" % source)
    if not isinstance(data, dict):
        raise CufileError("%s: the top level must be an object" % source)
    return data


def too_deep(value, limit=MAX_DEPTH, prefix=""):
    """The dotted path where ``value`` (objects and lists) nests deeper than ``limit``, or None.
    Walks without recursion: the value may be as deep as its sender made it."""
    todo = [(value, prefix, 1)]
    while todo:
        item, path, depth = todo.pop()
        if not isinstance(item, (dict, list)):
            continue
        if depth > limit:
            return path or "(top level)"
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        for key, sub in pairs:
            sub_path = ("%s[%d]" % (path, key)) if isinstance(item, list) else (
                "%s.%s" % (path, key) if path else str(key))
            todo.append((sub, sub_path, depth + 1))
    return None


def dumps(config):
    """The strict JSON we write: 4-space indent, key order kept, newline at the end."""
    return json.dumps(config, indent=4, sort_keys=False) + "\n"


def canonical(value):
    """A comparison key that tells 0 from false and ignores key order."""
    return json.dumps(value, sort_keys=True)


def read_config(path):
    """(text, config) of an existing cufile.json. Raises CufileError naming the file."""
    try:
        text = read_utf8(path, MAX_BYTES)
    except UnreadableFile as exc:
        raise CufileError(str(exc))
    return text, loads(text, path)


def text_format(text):
    """``strict`` (plain JSON) or ``commented`` (NVIDIA's JSON with comments)."""
    try:
        json.loads(text)
        return "strict"
    except ValueError:
        return "commented"


# --------------------------------------------------------------------------------------------
# Editing the text in place: comments, layout and untouched values stay as they were
# --------------------------------------------------------------------------------------------
_GAP = re.compile(r"(?:[ \t\r\n]+|//[^\n]*|/\*.*?(?:\*/|\Z))*", re.S)  # blanks and comments
_CLOSED_STRING = re.compile(_STRING[:-1])  # loads() accepted the text: every string is closed
_SCALAR = re.compile(r"[^,\]} \t\r\n/]*")


class _Scanner(object):
    """Spans of the values of a cufile.json text that loads() accepted (comments allowed)."""

    def __init__(self, text):
        self.text, self.pos = text, 0

    def _skip(self):
        self.pos = _GAP.match(self.text, self.pos).end()

    def _string(self):
        start = self.pos
        self.pos = _CLOSED_STRING.match(self.text, start).end()
        raw = self.text[start + 1:self.pos - 1]
        return json.loads(self.text[start:self.pos]) if "\\" in raw else raw

    def value(self):
        self._skip()
        start, char = self.pos, self.text[self.pos]
        if char == "{":
            return self._object()
        if char in "[":
            depth = 0
            while True:  # lists are leaves: only their span matters
                char = self.text[self.pos]
                if char == '"':
                    self._string()
                    continue
                if char in "/" and self.text[self.pos + 1] in "/*":
                    self._skip()
                    continue
                depth += {"[": 1, "]": -1}.get(char, 0)
                self.pos += 1
                if depth == 0:
                    break
        elif char == '"':
            self._string()
        else:
            self.pos = _SCALAR.match(self.text, self.pos).end()
        return {"kind": "value", "start": start, "end": self.pos}

    def _object(self):
        node = {"kind": "object", "start": self.pos, "members": []}
        self.pos += 1
        while True:
            self._skip()
            if self.text[self.pos] == "}":
                node["close"] = self.pos
                self.pos += 1
                node["end"] = self.pos
                return node
            key_start = self.pos
            key = self._string()
            self._skip()
            self.pos += 1  # the colon
            member = {"key": key, "key_start": key_start, "value": self.value(), "comma": False}
            node["members"].append(member)
            self._skip()
            if self.text[self.pos] == ",":
                member["comma"] = True
                member["comma_at"] = self.pos
                self.pos += 1


def _indent_at(text, pos):
    line = text.rfind("\n", 0, pos) + 1
    return re.match(r"[ \t]*", text[line:]).group(0)


def _dump_at(value, indent):
    """JSON for a value written at ``indent``: objects one key a line, lists on one line."""
    if isinstance(value, dict) and value:
        inner = indent + "    "
        return "{\n%s\n%s}" % (",\n".join("%s%s: %s" % (inner, json.dumps(k), _dump_at(v, inner))
                                          for k, v in value.items()), indent)
    return json.dumps(value)


def _removal(text, member):
    """The edit that removes a member followed by a comma, with its line when it has one."""
    start, end = member["key_start"], member["comma_at"] + 1
    line, rest = text.rfind("\n", 0, start) + 1, text.find("\n", end)
    if not text[line:start].strip() and rest >= 0 and not text[end:rest].strip():
        return (line, rest + 1, "")  # the member's whole line
    while end < len(text) and text[end] in " \t":
        end += 1
    return (start, end, "")


def _edits(text, node, current, wanted, out):
    members = {}
    for member in node["members"]:
        earlier = members.get(member["key"])
        if earlier is not None:  # a repeated key: the later counts, as for json; the earlier goes
            out.append(_removal(text, earlier))
        members[member["key"]] = member
    for key, value in wanted.items():
        if key not in current:
            continue
        member = members[key]
        if isinstance(value, dict) and isinstance(current[key], dict):
            _edits(text, member["value"], current[key], value, out)
        elif canonical(value) != canonical(current[key]):
            out.append((member["value"]["start"], member["value"]["end"],
                        _dump_at(value, _indent_at(text, member["key_start"]))))
    new = [key for key in wanted if key not in current]
    if not new:
        return
    if node["members"]:
        last = node["members"][-1]
        indent = _indent_at(text, last["key_start"])
        if not last["comma"]:
            out.append((last["value"]["end"], last["value"]["end"], ","))
    else:
        indent = _indent_at(text, node["start"]) + "    "
    at = node["close"]
    while at > node["start"] + 1 and text[at - 1] in " \t\r\n":
        at -= 1
    added = ",".join("\n%s%s: %s" % (indent, json.dumps(key), _dump_at(wanted[key], indent))
                     for key in new)
    if at == node["start"] + 1:
        added += "\n" + _indent_at(text, node["start"])
    out.append((at, at, added))


def edit_text(text, current, wanted):
    """``text`` (which parses to ``current``) changed to say ``wanted``, keeping its comments,
    layout and untouched values; None when the edit cannot be made (then write dumps())."""
    try:
        root = _Scanner(text).value()
        if root["kind"] != "object":
            return None
        out = []
        _edits(text, root, current, wanted, out)
    except (IndexError, ValueError, KeyError):
        return None
    # from the end backwards; at one position the later edit first, so a comma lands before
    # the members added after it
    for dummy, (start, end, new) in sorted(enumerate(out), key=lambda e: (e[1][0], e[1][1], e[0]),
                                           reverse=True):
        text = text[:start] + new + text[end:]
    try:  # the edit must say exactly what we want, in the same key order, each key once
        if json.dumps(loads(text)) != json.dumps(wanted) or duplicate_keys(text):
            return None
    except CufileError:
        return None
    return text


def duplicate_keys(text):
    """[{key, lines}] for every key an object of a cufile.json text holds more than once: its
    dotted path and the lines of each occurrence. The later value counts (loads reads it so, as
    JSON parsers do). Only for text that loads() accepted; [] when it cannot be scanned."""
    try:
        root = _Scanner(text).value()
    except (IndexError, ValueError):
        return []
    out, todo = [], [(root, "")] if root["kind"] == "object" else []
    line_of = _line_finder(text)
    while todo:
        node, prefix = todo.pop()
        where = {}
        for member in node["members"]:
            where.setdefault(member["key"], []).append(line_of(member["key_start"]))
            if member["value"]["kind"] == "object":
                todo.append((member["value"], prefix + member["key"] + "."))
        out.extend({"key": prefix + key, "lines": lines} for key, lines in where.items()
                   if len(lines) > 1)
    return sorted(out, key=lambda d: d["lines"])
