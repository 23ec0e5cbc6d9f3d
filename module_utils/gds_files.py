# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tolerant readers for sysfs/procfs: a missing or unreadable entry is simply absent.

Callers that must fail on a missing file (naming it) open it themselves; these are for the many
optional attributes where "not there" is an answer.
"""
from __future__ import annotations

import os


def read_text(path, limit=1 << 20):
    """The file's text (at most ``limit`` characters), or None when it cannot be read."""
    try:
        with open(path, "r") as handle:
            return handle.read(limit)
    except (OSError, UnicodeDecodeError):
        return None


def listdir(path, key=None):
    """Sorted entries of a directory ([] when it is missing or unreadable)."""
    try:
        return sorted(os.listdir(path), key=key)
    except OSError:
        return []
