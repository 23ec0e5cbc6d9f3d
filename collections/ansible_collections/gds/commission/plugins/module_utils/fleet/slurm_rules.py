# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Slurm rules the controller's gds_slurm and each node's gds-healthcheck share: which
verdict-file states exist, node names and reason prefixes, how a drain reason is written and
known as ours, how scontrol's node states are read, and when a node is left alone.

One home for both: fleet/slurm.py imports this file, and the gds_slurm role installs
gds-healthcheck with this file's text in it (roles/gds_slurm/tasks/healthcheck.yml), since the
script runs alone on a node under Slurm's HealthCheckProgram. So it imports the standard library
only and has no ``from __future__`` line: the text is valid in the middle of that script.
"""
import re

DEFAULT_PREFIX = "gds:"
REASON_MAX = 200
DRIFT_TAG = "drift:"
# every {status: verdicts} pair and mode load_run writes (and the role into a node's verdict file);
# scripts/gds-healthcheck drains a node whose file holds anything else
STATES = {"good": ("PASS", "WARN"), "bad": ("FAIL", "ERROR", "DRIFTED"), "unknown": ("UNREACHABLE", "SKIP")}
MODES = ("commission", "drift", "both")
# a Slurm node name, one node: no hostlist brackets, commas, spaces or '=' (scontrol would act
# on every node such an expression names)
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
# a reason prefix: how this tool knows its own drains, so nothing scontrol or a reader would
# reinterpret (quotes, '=', spaces, brackets)
PREFIX = re.compile(r"^[A-Za-z0-9_.:/#@+-]{1,32}\Z")


def _printable(ch):
    code = ord(ch)
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code if code < 0x10000 else "\\U%08x" % code


def one_line(text):
    """One line of printable text: whitespace runs (line breaks, tabs) become one space, any
    other control or unprintable character its \\xNN escape."""
    return "".join(ch if ch.isprintable() else _printable(ch) for ch in " ".join(str(text).split()))


def reason(prefix, text):
    """A drain reason: ``<prefix> <text>``, one line of printable characters, at most REASON_MAX.

    '=' becomes ':' so that no part of a reason reads as a Key=value field of scontrol's output
    (`... Reason=gds: x Mode=y` would read back as `gds: x` and never equal itself).
    """
    out = "%s %s" % (prefix, one_line(text).replace("=", ":"))
    return out if len(out) <= REASON_MAX else out[:REASON_MAX - 3] + "..."


def is_ours(text, prefix):
    """A reason this tool wrote: the prefix, a space, then text."""
    return bool(text) and text.startswith(prefix + " ")


def state_problem(entry):
    """Why a host's {status, verdict, mode} is none that load_run writes (STATES, MODES), or None."""
    status, verdict, mode = entry.get("status"), entry.get("verdict"), entry.get("mode")
    if not isinstance(status, str) or status not in STATES or verdict not in STATES[status] or mode not in MODES:
        # plain words: the text becomes a Slurm reason (no quotes for scontrol to read)
        return "status %s, verdict %s, mode %s" % tuple(str(v)[:40] for v in (status, verdict, mode))
    return None


def drift_cannot_resume(mode, text, prefix):
    """Whether a drain of ours stays although the host passes: a pass of a drift check alone
    (``mode`` drift) says nothing about a benchmark, so it resumes only drift drains (the reason
    ``<prefix> drift: ...``)."""
    return mode == "drift" and not str(text or "")[len(prefix):].strip().startswith(DRIFT_TAG)


# --------------------------------------------------------------------------------------------
# Slurm's view of a node
# --------------------------------------------------------------------------------------------
_NODE_LINE = re.compile(r"^NodeName=(\S+)")
_STATE = re.compile(r"(?:^|\s)State=(\S+)")
# Reason=<text> [user@time], the last field of scontrol's one-line output in practice; stop at
# the next Key= field otherwise
_REASON = re.compile(r"(?:^|\s)Reason=(.*?)(?:\s+\[[^\[\]]*@[^\[\]]*\])?(?=\s+[A-Z][A-Za-z]*=|\s*$)")

# Slurm's state names and flags as scontrol (IDLE+DRAIN), sinfo (drng, idle*) and the JSON
# output (lower case) spell them, to one name each
FLAG_ALIASES = {
    "ALLOC": "ALLOCATED", "MIX": "MIXED", "COMP": "COMPLETING", "UNK": "UNKNOWN", "FUTR": "FUTURE",
    "DRAINED": "DRAIN", "DRAINING": "DRAIN", "DRNG": "DRAIN", "FAILING": "FAIL", "FAILG": "FAIL",
    "INVAL": "INVALID_REG", "INVALID": "INVALID_REG", "MAINT": "MAINTENANCE", "RESV": "RESERVED",
    "PLND": "PLANNED", "NPC": "PERFCTRS", "NO_RESPOND": "NOT_RESPONDING", "POW_DN": "POWER_DOWN",
    "POW_UP": "POWER_UP", "POWERED_OFF": "POWERED_DOWN", "REBOOT": "REBOOT_REQUESTED", "BOOT": "REBOOT_ISSUED",
}
# sinfo's suffixes: idle* is IDLE+NOT_RESPONDING, and so on
FLAG_SUFFIXES = {"*": "NOT_RESPONDING", "~": "POWERED_DOWN", "#": "POWERING_UP", "%": "POWERING_DOWN",
                 "!": "POWER_DOWN", "$": "MAINTENANCE", "@": "REBOOT_REQUESTED", "^": "REBOOT_ISSUED",
                 "-": "PLANNED"}
# states in which a node is someone else's business: never drained, resumed or re-reasoned
HANDS_OFF = ("DOWN", "FAIL", "INVALID_REG", "ERROR", "FUTURE", "REBOOT_REQUESTED", "REBOOT_ISSUED")
# every other state this tool knows; a flag outside both lists is a state it does not understand
KNOWN = HANDS_OFF + ("IDLE", "ALLOCATED", "MIXED", "COMPLETING", "UNKNOWN", "DRAIN", "NOT_RESPONDING",
                     "MAINTENANCE", "RESERVED", "CLOUD", "POWER_DOWN", "POWER_UP", "POWERED_DOWN",
                     "POWERING_DOWN", "POWERING_UP", "PLANNED", "PERFCTRS", "DYNAMIC_FUTURE",
                     "DYNAMIC_NORM", "BLOCKED", "POWER_DRAIN", "RES", "NET")


def node_flags(state):
    """['IDLE', 'DRAIN', ...] of a State= value (`DOWN*+DRAIN`, `mixed+drain`, `drng`) or a list."""
    words = state if isinstance(state, (list, tuple)) else str(state or "").split("+")
    flags = []
    for word in words:
        word, marks = str(word).strip().upper(), []
        while word and word[-1] in FLAG_SUFFIXES:
            marks.insert(0, FLAG_SUFFIXES[word[-1]])
            word = word[:-1]
        if word:
            flags.append(FLAG_ALIASES.get(word, word))
        flags.extend(marks)
    return list(dict.fromkeys(flags))


def untouchable(flags, text, prefix):
    """Why a node must be left as it is whatever its host's verdict, or None.

    DOWN, FAIL and the like belong to whoever set them (an admin, Slurm itself); a drain or a
    reason without our prefix belongs to someone else; a state this tool cannot read means do
    nothing.
    """
    if not flags:
        return "no state read from Slurm"
    unknown = [f for f in flags if f not in KNOWN]
    if unknown:
        return "state %s not understood" % "+".join(unknown)
    held = [f for f in flags if f in HANDS_OFF]
    if held:
        return "node is %s (%s)" % ("+".join(held), text or "no reason")
    if text and not is_ours(text, prefix):
        return "drained by someone else" if "DRAIN" in flags else "reason set by someone else"
    if "DRAIN" in flags and not text:
        return "drained by someone else (no reason)"
    return None


def parse_nodes(text):
    """{node: {flags: [IDLE, DRAIN, ...], reason}} from `scontrol -o show node`.

    A node listed twice gets no flags: what scontrol said of it cannot be trusted.
    """
    nodes = {}
    for line in text.splitlines():
        match = _NODE_LINE.match(line.strip())
        if not match:
            continue
        state = _STATE.search(line)
        why = _REASON.search(line)
        name = match.group(1)
        info = {"flags": node_flags(state.group(1)) if state else [], "reason": why.group(1).strip() if why else None}
        nodes[name] = dict(info, flags=[]) if name in nodes else info
    return nodes
