# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pieces every role's variable check is made of (the ``validate_vars`` of each area's file,
run by the ``gds_validate`` filter from the role's ``tasks/validate.yml``).

A role's argument specs say the types and choices; what they cannot say (absolute paths, ranges,
a list that must not be a string, names that end up in commands) is judged in Python, beside the
rule the module applies to the same value. Each helper returns why a value is bad, or None; the
message names the variable and the value, as the role's users wrote them.
"""
from __future__ import annotations

import re

from ansible_collections.gds.commission.plugins.module_utils.core.numbers import is_figure

_DOTDOT = re.compile(r"(^|/)\.\.(/|$)")


def given_int(value):
    """``value`` as the argument specs take an int (an int, or its digits as text from ``-e``);
    None when it is none (a bool, a fraction, other text)."""
    if isinstance(value, str) and re.match(r"^\s*[-+]?[0-9]+\s*$", value):
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def given_number(value):
    """``value`` as the argument specs take a float (a number, or its text from ``-e``) when it is
    a figure (core/numbers.is_figure: finite); None when it is none."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    return value if is_figure(value) else None


def is_list(value):
    """A YAML list: the argument specs would split a string at commas, a role's loop by characters."""
    return isinstance(value, (list, tuple))


def path_error(name, value, empty=False, spaces=True):
    """Why ``value`` is no absolute path without '..' (``empty``: "" stands for "none"; not
    ``spaces``: no white space, as in fstab or a unit file); None when it is one."""
    if empty and value == "":
        return None
    if not isinstance(value, str) or not value.startswith("/") or _DOTDOT.search(value) \
            or (not spaces and re.search(r"\s", value)):
        return "%s (%s) must be an absolute path without '..'%s%s" % (
            name, value, "" if spaces else " or spaces", " (or empty for none)" if empty else "")
    return None


def errors(*found):
    """The messages among ``found`` (the helpers' answers), Nones left out."""
    return [message for message in found if message]
