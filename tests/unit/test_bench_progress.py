"""A benchmark run followed job by job (measure/progress.py, gds_bench_progress): the events
gds_bench writes, the waits that read them, each bounded, and the console's words."""
import json
import os

import pytest

from ansible_collections.gds.commission.plugins.module_utils.measure.progress import (
    Progress, find_event, progress_line, progress_steps, run_finished, wait_for_event,
)

JOBS = [{"name": "raid1 seq_write", "gpu": 0, "xfer_type": 0, "duration": 0},
        {"name": "raid1 seq_read", "gpu": 0, "xfer_type": 0, "duration": 30},
        {"name": "raid1 seq_read non-affine", "skip": "no other group"},
        {"name": "host ceiling", "gpu": None, "xfer_type": 1, "duration": 30}]


class Clock(object):
    """A clock that a sleep moves (no real waiting in a test)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_events_as_jobs_start_end_and_skip(tmp_path):
    path = str(tmp_path / "progress.json")
    progress = Progress(path, JOBS)
    assert json.load(open(path)) == {"jobs": 4, "events": []}  # this run's events only, from the first
    progress.started(2, JOBS[1])
    progress.ended(2, JOBS[1], 31.04, "WARN", "bench: raid1 seq_read: throughput_gib_s: 5.1")
    progress.skipped(3, JOBS[2], "no other group")
    events = json.load(open(path))["events"]
    assert [(e["job"], e["state"]) for e in events] == [(2, "started"), (2, "ended"), (3, "skipped")]
    assert events[0]["label"] == "job 2 of 4: raid1 seq_read, GPU 0, GPUD" and events[0]["expected_s"] == 30
    assert events[1]["elapsed_s"] == 31.0 and events[1]["expected_s"] == 30 and events[1]["verdict"] == "WARN"
    assert not [n for n in os.listdir(str(tmp_path)) if n != "progress.json"]  # replaced whole, no temporary left


def test_a_progress_file_that_cannot_be_written_never_stops_the_run(tmp_path):
    (tmp_path / "file").write_text("x")
    progress = Progress(str(tmp_path / "file" / "progress.json"), JOBS)  # its directory is a file
    progress.started(1, JOBS[0])
    assert "progress.json" in progress.error and len(progress.events) == 1
    assert Progress(None, JOBS).error is None  # none asked for: nothing written


def test_steps_one_wait_a_job_then_the_runs_end():
    steps = progress_steps(JOBS, 60)
    assert [(s["job"], s["state"]) for s in steps] == [(1, "started"), (1, "ended"), (2, "ended"), (4, "ended"),
                                                      (0, "finished")]
    assert steps[0]["label"] == "job 1 of 4: raid1 seq_write, GPU 0, GPUD starts (one full pass)"
    assert [s["label"] for s in steps[1:4]] == ["job 1 of 4", "job 2 of 4", "job 4 of 4"]
    # each bounded: the job's duration (or the pass bound), its start's grace and its own
    assert [s["timeout"] for s in steps] == [60, 1920, 150, 150, 60]
    assert progress_steps([{"name": "x", "skip": "no array"}], 60) == [
        {"job": 0, "state": "finished", "timeout": 60, "label": "the run's last checks"}]


def test_a_wait_returns_the_event_the_runs_end_or_its_timeout(tmp_path):
    path, results = str(tmp_path / "progress.json"), tmp_path / "results"
    results.write_text(json.dumps({"started": True, "finished": False, "ansible_job_id": "j1"}))
    clock = Clock()
    progress = Progress(path, JOBS)
    progress.started(1, JOBS[0])
    got = wait_for_event(path, str(results), 1, "started", 5, clock=clock, sleep=clock.sleep)
    assert got["event"]["state"] == "started" and not got["timed_out"] and clock.now == 0
    got = wait_for_event(path, str(results), 1, "ended", 5, interval=0.5, clock=clock, sleep=clock.sleep)
    assert got == {"event": None, "next": None, "finished": False, "timed_out": True, "waited_s": 5.0}  # bounded
    # an end brings the next job's start with it; a job the plan skips on the way is not it
    progress.ended(1, JOBS[0], 7.0, "PASS")
    progress.started(2, JOBS[1])
    progress.ended(2, JOBS[1], 30.0, "PASS")
    progress.skipped(3, JOBS[2], "no other group")
    progress.started(4, JOBS[3])
    got = wait_for_event(path, str(results), 2, "ended", 5, next_within=3, clock=clock, sleep=clock.sleep)
    assert got["event"]["elapsed_s"] == 30.0 and got["next"]["job"] == 4 and got["next"]["state"] == "started"
    # the last job's end: the next start is waited for at most next_within, less when the run ends
    before = clock.now
    got = wait_for_event(path, str(results), 4, "started", 5, next_within=3, clock=clock, sleep=clock.sleep)
    assert got["next"] is None and clock.now == before  # a start brings nothing more
    progress.ended(4, JOBS[3], 30.0, "PASS")
    got = wait_for_event(path, str(results), 4, "ended", 5, next_within=3, clock=clock, sleep=clock.sleep)
    assert got["next"] is None and clock.now - before == 3
    results.write_text(json.dumps({"failed": True, "msg": "benchmark job(s) broke", "checks": []}))
    before = clock.now
    got = wait_for_event(path, str(results), 4, "ended", 5, next_within=3, clock=clock, sleep=clock.sleep)
    assert got["event"]["job"] == 4 and clock.now == before  # the run has ended: nothing will start
    got = wait_for_event(path, str(results), 9, "ended", 5, clock=clock, sleep=clock.sleep)
    assert got["finished"] and got["event"] is None  # the run ended before the job did
    assert wait_for_event(path, str(results), 0, "finished", 5, clock=clock, sleep=clock.sleep)["finished"]


@pytest.mark.parametrize("content,finished", [
    ('{"started": true, "finished": false, "ansible_job_id": "1"}', False),
    ('{"started": 1, "finished": 0}', False),         # ansible-core before 2.19 wrote numbers
    ("", False), ('{"started": tr', False),            # being written
    ('{"changed": false, "results": []}', True),       # the module's result: no "started"
    ('{"started": true, "finished": true}', True),
    ('{"x": "%s"}' % ("y" * 5000), True),              # longer than any line of async_wrapper's: a result
])
def test_whether_a_run_finished_by_async_statuss_rule(tmp_path, content, finished):
    path = tmp_path / "results"
    path.write_text(content)
    assert run_finished(str(path)) is finished


def test_a_results_file_that_is_no_file_is_not_finished(tmp_path):
    os.mkfifo(str(tmp_path / "fifo"))
    assert run_finished(str(tmp_path / "fifo")) is False and run_finished(str(tmp_path / "none")) is False
    assert run_finished(None) is False


def test_a_skipped_job_answers_both_its_steps():
    events = [{"job": 3, "state": "skipped"}, "x", {"job": 1, "state": "started"}]
    assert find_event(events, 3, "started") is events[0] and find_event(events, 3, "ended") is events[0]
    assert find_event(events, 1, "ended") is None


def test_the_console_line_of_a_jobs_end():
    event = {"label": "job 2 of 4: raid1 seq_read, GPU 0, GPUD", "state": "ended", "elapsed_s": 31.0,
             "expected_s": 30, "verdict": "PASS", "detail": None}
    assert progress_line("dgx1", event) == "dgx1 job 2 of 4: raid1 seq_read, GPU 0, GPUD: PASS, 31.0 s of about 30 s"
    event.update(expected_s=None, verdict="FAIL", detail="bench: x: io path: compat")
    assert progress_line("dgx1", event).endswith(": FAIL, 31.0 s (one full pass); bench: x: io path: compat")
    assert progress_line("dgx1", {"label": "job 3 of 4: x", "state": "skipped", "detail": "no other group"}) == \
        "dgx1 job 3 of 4: x: SKIP (no other group)"
    assert progress_line("dgx1", {"label": "job 4 of 4: y", "state": "started", "expected_s": 30}) == \
        "dgx1 job 4 of 4: y started (about 30 s)"
    assert progress_line("dgx1", {"state": "queued"}) is None and progress_line("dgx1", None) is None
