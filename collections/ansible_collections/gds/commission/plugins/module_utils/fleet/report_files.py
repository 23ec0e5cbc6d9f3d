# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the report's files go: host names and run ids as file names (inventory names and run ids
are data, never paths) and the run directory, written through fleet/output.py."""
from __future__ import annotations

import hashlib
import os
import re
import time

from ansible_collections.gds.commission.plugins.module_utils.fleet.output import OutDir, RefusedPath

_PLAIN = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*\Z")
_KEEP = re.compile(r"[A-Za-z0-9_-]")
# what write_run accepts: plain names and host_file_name's stems
_FILE = re.compile(r"[A-Za-z0-9_%~-][A-Za-z0-9._%~-]*\Z")
# a stem leaves room for ".drift.prom", the temporary and backup names around it (NAME_MAX 255)
STEM_MAX = 150
# the run directory's own files: no host's file may take their place (on a case-insensitive
# file system either)
RESERVED_STEMS = ("summary", "junit", "report", "drift")
# reports_dir's own entries: no run id may take their place
RESERVED_RUN_IDS = ("latest", "history")
# a host's inputs file is STEM + INPUTS_SUFFIX (fleet/merge.py): no stem ends in ".inputs", so no
# host's HOST.json is another host's inputs file
INPUTS_SUFFIX = ".inputs.json"
_RESERVED_END = ".inputs"


def _percent(char):
    return "".join("%%%02X" % byte for byte in char.encode("utf-8", "surrogatepass"))


def host_file_name(host):
    """The stem of a host's files (HOST.json, HOST.prom, HOST.drift.prom, history/HOST.json).

    A plain name (letters, digits, ``_ - .``, not starting with a dot, at most STEM_MAX
    characters, not one of the run's own files) is its own stem. In any other every character but
    letters, digits, ``_`` and ``-`` (and ``.`` after the first) is percent-encoded from its UTF-8
    bytes (``rack1/gpu+01`` -> ``rack1%2Fgpu%2B01``): no stem holds a ``/`` or is ``..``, and two
    hosts never share one. A stem still too long is cut and ends in ``~`` and a hash of the whole
    name (``~`` appears in no other stem). A name ending in ``.inputs`` has its dots encoded too:
    ``STEM.inputs.json`` is a host's inputs file."""
    host = str(host)
    reserved_end = host.lower().endswith(_RESERVED_END)
    if _PLAIN.match(host) and len(host) <= STEM_MAX and host.lower() not in RESERVED_STEMS and not reserved_end:
        return host
    # a reserved name gets its first character encoded, like any odd one
    stem = "".join(char if (_KEEP.match(char) or (char == "." and i and not reserved_end))
                   and (i or host.lower() not in RESERVED_STEMS)
                   else _percent(char) for i, char in enumerate(host))
    if len(stem) > STEM_MAX or not stem:
        digest = hashlib.sha256(host.encode("utf-8", "surrogatepass")).hexdigest()[:20]
        stem = "%s~%s" % (stem[:STEM_MAX - 21], digest)
    return stem


def run_id_error(run_id):
    """Why ``run_id`` cannot name a run directory (it is a path, hidden, reserved or too long);
    None when it can. Run ids are the user's (GDS_RUN_ID): refused, never silently renamed."""
    text = str(run_id)
    if not _PLAIN.match(text) or len(text) > STEM_MAX or text in RESERVED_RUN_IDS:
        return ("run id %r must be a plain name of at most %d characters (letters, digits, . _ -, not starting "
                "with a dot, not %s)" % (run_id, STEM_MAX, " or ".join(RESERVED_RUN_IDS)))
    return None


def write_run_dir(reports_dir, run_id, files):
    """Write {name: text} into reports_dir/run_id/ (each file atomically, UTF-8; fleet/output.py);
    its path. A run id or file name that is not a plain name raises ValueError: nothing is
    written outside reports_dir. A run directory, or a file of the run's, that is a link or
    anything else this tool did not make is refused (RefusedPath naming it)."""
    error = run_id_error(run_id)
    if error:
        raise ValueError(error)
    for name in files:
        if not _FILE.match(name) or len(name) > 255 - 16:
            raise ValueError("report file name %r is not a plain name" % (name,))
    with OutDir(reports_dir) as reports, reports.child(run_id) as run:
        for name, text in files.items():
            run.write(name, text, sync=False)
        return run.path


def set_aside_other_hosts(reports_dir, run_id, files, mode):
    """A run id used again (a second push run of the same name): the host files of that earlier
    run whose hosts this report does not have (HOST.json, HOST.prom and HOST.html; HOST.drift.prom in drift
    mode) moved into RUN/.earlier-<time>/, so the run directory holds this report's hosts alone and
    nothing is lost. The names moved."""
    suffixes = (".drift.prom",) if mode == "drift" else (".json", ".prom", ".html")
    with OutDir(reports_dir) as reports, reports.child(run_id) as run:
        stale = [name for name in sorted(os.listdir(run.fd))
                 if name not in files and name not in ("summary.json", "drift.json", "report.html") and not name.startswith(".")
                 and not name.endswith(INPUTS_SUFFIX) and name.endswith(suffixes)
                 and (mode == "drift" or not name.endswith(".drift.prom"))]
        return run.set_aside(stale, ".earlier-%s" % time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())) if stale else []


def point_latest(reports_dir, run_id):
    """Point reports_dir/latest at the run atomically. Only a link of ours is replaced (a link to
    a run directory beside it): a directory, a file or any other link there is someone else's
    and is refused, naming it; the run's own directory stays as written."""
    with OutDir(reports_dir) as reports:
        try:
            return reports.point("latest", run_id, lambda target: run_id_error(target) is None)
        except RefusedPath as exc:
            raise RefusedPath("%s, so it does not point at run %s: move it away and the next run sets it"
                              % (exc, run_id)) from None


def write_run(reports_dir, run_id, files):
    """write_run_dir, then point_latest: the run directory is written even when latest is refused."""
    run_dir = write_run_dir(reports_dir, run_id, files)
    point_latest(reports_dir, run_id)
    return run_dir
