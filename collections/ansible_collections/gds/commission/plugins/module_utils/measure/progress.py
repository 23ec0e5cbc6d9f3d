# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A benchmark run's progress, told as it happens: gds_bench (in the background, an async task)
writes an event to the node's progress file as each job starts and ends; gds_bench_progress waits
on the node for one job's start or end and returns it (a loop item each), so the console shows "job N
of M" with its elapsed time against the expected while the run goes on (roles/gds_bench). The
file is the product's own (in gds_bench's directory), replaced whole at each event; progress is a
courtesy: a file that cannot be written never changes the run's verdicts."""
from __future__ import annotations

import json
import time

from ansible_collections.gds.commission.plugins.module_utils.core.files import UnreadableFile, read_bounded, write_atomic
from ansible_collections.gds.commission.plugins.module_utils.measure.vocab import xfer_name

PROGRESS_LIMIT = 1 << 20       # a run's events: a few hundred bytes a job
# the bound on a job that runs one full pass (no duration): gds_bench's pass_timeout default
PASS_TIMEOUT = 1800
STUB_LIMIT = 4096              # async_wrapper's "started, not finished" line is under 200 bytes


def job_label(number, total, job):
    """"job 3 of 13: raid1 seq_read, GPU 0, GPUD" (the event's and the loop item's words)."""
    gpu = job.get("gpu")
    parts = [str(job.get("name"))] + (["GPU %s" % gpu] if gpu is not None else []) + (
        [xfer_name(job["xfer_type"])] if job.get("xfer_type") is not None else [])
    return "job %d of %d: %s" % (number, total, ", ".join(parts))


class Progress(object):
    """The progress file of one run: {jobs, events: [{job, of, label, state, expected_s, ...}]}.
    ``path`` empty: nothing is written."""

    def __init__(self, path, jobs):
        self.path, self.total, self.events, self.error = path, len(jobs), [], None
        self._write()  # this run's events only, from the first

    def _write(self):
        if not self.path or self.error:
            return
        try:
            write_atomic(self.path, json.dumps({"jobs": self.total, "events": self.events}))
        except (OSError, ValueError) as exc:  # the run goes on without its progress lines
            self.error = "%s: %s" % (self.path, exc)

    def started(self, number, job):
        duration = job.get("duration")
        self.events.append({"job": number, "of": self.total, "label": job_label(number, self.total, job),
                            "state": "started", "at": time.time(),
                            "expected_s": duration if isinstance(duration, int) and duration > 0 else None})
        self._write()

    def ended(self, number, job, seconds, verdict, detail=None):
        self.events.append({"job": number, "of": self.total, "label": job_label(number, self.total, job),
                            "state": "ended", "at": time.time(), "elapsed_s": round(seconds, 1),
                            "expected_s": (self.events[-1].get("expected_s") if self.events
                                           and self.events[-1]["job"] == number else None),
                            "verdict": verdict, "detail": detail})
        self._write()

    def skipped(self, number, job, reason):
        self.events.append({"job": number, "of": self.total, "label": job_label(number, self.total, job),
                            "state": "skipped", "at": time.time(), "verdict": "SKIP", "detail": reason})
        self._write()


def _json(path, limit):
    """The JSON document at ``path``; None while it is absent, empty or being written."""
    try:
        text = read_bounded(path, limit=limit).decode("utf-8", "replace")
    except UnreadableFile:
        return None
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return None


def run_finished(results_file):
    """Whether the async job whose results file this is has ended (async_status's rule: a job is
    running while its file says started and not finished); False while that cannot be read. The
    file while the job runs is a line of async_wrapper's; a longer one is the job's result."""
    if not results_file:
        return False
    try:
        data = read_bounded(results_file, limit=STUB_LIMIT, truncate=True)
    except UnreadableFile:
        return False
    if len(data) >= STUB_LIMIT:
        return True
    try:
        doc = json.loads(data.decode("utf-8", "replace")) if data.strip() else None
    except ValueError:
        return False
    return isinstance(doc, dict) and not ("started" in doc and not doc.get("finished"))


def find_event(events, number, state):
    """The event of job ``number`` in ``state`` ("started", "ended"); a skipped job's one event
    answers both."""
    for event in events:
        if isinstance(event, dict) and event.get("job") == number and event.get("state") in (state, "skipped"):
            return event
    return None


def next_start(events, number):
    """The start of the first job after ``number`` that started (a job skipped on the way is said
    at its own step, or is the plan's); None before it."""
    later = [e for e in events if isinstance(e, dict) and isinstance(e.get("job"), int) and not isinstance(e["job"], bool)
             and e["job"] > number and e.get("state") == "started"]
    return min(later, key=lambda e: e["job"]) if later else None


def wait_for_event(path, results_file, number, state, timeout, interval=0.5, next_within=0.0,
                   clock=time.monotonic, sleep=time.sleep):
    """Wait (at most ``timeout`` seconds) until the progress file holds job ``number``'s event
    ``state`` ("started", "ended"; "finished": none, the run's end only) or the run has ended;
    after an end, up to ``next_within`` seconds more for the next job's start (it follows at
    once), so one wait a job says both. {event, next, finished, timed_out, waited_s}."""
    start = clock()
    found = found_at = None
    while True:
        doc = _json(path, PROGRESS_LIMIT) if state != "finished" else None
        events = doc.get("events") if isinstance(doc, dict) and isinstance(doc.get("events"), list) else []
        if found is None:
            found = find_event(events, number, state)
            found_at = clock() if found is not None else None
        now = clock()
        waited = round(now - start, 1)
        if found is not None:
            following = next_start(events, number) if state == "ended" else None
            if state != "ended" or following is not None or now - found_at >= next_within or run_finished(results_file):
                return {"event": found, "next": following, "finished": False, "timed_out": False, "waited_s": waited}
            sleep(max(0.05, min(interval, next_within - (now - found_at))))
            continue
        if run_finished(results_file):
            return {"event": None, "next": None, "finished": True, "timed_out": False, "waited_s": waited}
        if waited >= timeout:
            return {"event": None, "next": None, "finished": False, "timed_out": True, "waited_s": waited}
        sleep(max(0.05, min(interval, timeout - waited)))


def progress_steps(jobs, grace, pass_timeout=PASS_TIMEOUT):
    """The waits that follow a run of ``jobs`` (roles/gds_bench's loop): the first job's start,
    then each job's end (which also brings the next job's start: ``next_within``), each with the
    console's words and the longest it may take (gds_bench's own bound on the job and the grace);
    then the run's end (its last checks). One wait a job: each is a module run on the node. A
    job the plan skips has no step: gds_bench records it at once."""
    total, steps = len(jobs), []
    for number, job in enumerate(jobs, 1):
        if job.get("skip"):
            continue
        duration = job.get("duration") if isinstance(job.get("duration"), int) and job.get("duration") > 0 else 0
        if not steps:
            steps.append({"job": number, "state": "started", "timeout": grace,
                          "label": "%s starts (%s)" % (job_label(number, total, job), expected_text(duration))})
        steps.append({"job": number, "state": "ended", "timeout": (duration or pass_timeout) + 2 * grace,
                      "label": "job %d of %d" % (number, total)})
    steps.append({"job": 0, "state": "finished", "timeout": grace, "label": "the run's last checks"})
    return steps


def expected_text(duration):
    return "about %d s" % duration if duration else "one full pass"


def progress_line(host, event):
    """The console's line for a job's event: its end ("sim-h100 job 3 of 13: raid1 seq_read,
    GPU 0, GPUD: PASS, 10.4 s of about 10 s"), its start ("... started (about 10 s)") or its
    skip; None for what is no event."""
    if not isinstance(event, dict) or event.get("state") not in ("started", "ended", "skipped"):
        return None
    if event["state"] == "skipped":
        return "%s %s: SKIP (%s)" % (host, event.get("label"), event.get("detail"))
    expected = event.get("expected_s")
    if event["state"] == "started":
        return "%s %s started (%s)" % (host, event.get("label"), expected_text(expected if isinstance(expected, int) else 0))
    took = "%s s%s" % (event.get("elapsed_s"), " of about %s s" % expected if expected else " (one full pass)")
    detail = event.get("detail")
    return "%s %s: %s, %s%s" % (host, event.get("label"), event.get("verdict"), took, "; %s" % detail if detail else "")
