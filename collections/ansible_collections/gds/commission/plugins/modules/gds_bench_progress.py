#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_bench_progress
short_description: Wait on a node for one benchmark job to start or end, and say how it went
description:
  - "While M(gds.commission.gds_bench) runs in the background (an async task), it writes an event
    to its progress file as each job starts and ends. This module waits on the node for job
    I(job)'s event I(state) and returns it: the job's words (C(job 3 of 13 raid1 seq_read, GPU 0,
    GPUD)), the seconds it is expected to take and, at its end, the seconds it took and its
    verdict; after an end, the next job's start too (I(next_within)). Called in a loop (one item
    a job), the console shows each job as it happens; the C(gds.commission.gds_commission)
    callback prints the lines."
  - It returns early when the background run has ended (its async results file says so), and
    after I(timeout) seconds in any case; neither fails the task (the run's own result says what
    happened). It changes nothing.
version_added: "1.2.0"
author: gds-commission contributors (!UNKNOWN)
options:
  progress_file:
    description: The progress file M(gds.commission.gds_bench) writes (its C(progress_file)).
    type: path
    required: true
  results_file:
    description: The async task's C(results_file) (what M(ansible.builtin.async_status) reads), to stop waiting once the run has ended.
    type: path
  job:
    description: The job's number in the plan, from 1.
    type: int
    required: true
  state:
    description:
      - The event to wait for. A job skipped at run time has one event, which answers both.
        C(finished) waits for the background run's end alone (I(job) is then not read).
    type: str
    choices: [started, ended, finished]
    default: ended
  timeout:
    description: The most seconds to wait.
    type: float
    required: true
  interval:
    description: Seconds between reads of the progress file.
    type: float
    default: 0.5
  next_within:
    description:
      - After an end, the most seconds to wait for the next job's start (it follows at once), so
        that one call a job says both (C(next)). 0 - not waited for.
    type: float
    default: 0
notes:
  - Runs in check mode too (it only reads).
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
"""

EXAMPLES = r"""
- name: Follow the benchmark run job by job
  gds.commission.gds_bench_progress:
    progress_file: /var/cache/gds-commission/bench/progress.json
    results_file: "{{ bench_job.results_file }}"
    job: 3
    state: ended
    timeout: 90
"""

RETURN = r"""
event:
  description:
    - "The job's event: C(job), C(of), C(label), C(state) (started, ended or skipped), C(at)
      (epoch seconds), C(expected_s) (null for a job that runs a full pass), C(elapsed_s),
      C(verdict) and C(detail) (its worst check, at its end). Null when the run ended or the
      wait timed out first."
  returned: always
  type: dict
next:
  description: After an end, the next job's start (or skip), when it came within I(next_within); else null.
  returned: always
  type: dict
finished:
  description: The background run had ended before the event came.
  returned: always
  type: bool
timed_out:
  description: I(timeout) passed before the event came.
  returned: always
  type: bool
waited_s:
  description: Seconds waited.
  returned: always
  type: float
"""

from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.measure.progress import wait_for_event


def main():
    module = AnsibleModule(
        argument_spec=dict(
            progress_file=dict(type="path", required=True),
            results_file=dict(type="path"),
            job=dict(type="int", required=True),
            state=dict(type="str", choices=["started", "ended", "finished"], default="ended"),
            timeout=dict(type="float", required=True),
            interval=dict(type="float", default=0.5),
            next_within=dict(type="float", default=0.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["timeout"] < 0 or p["next_within"] < 0 or p["interval"] <= 0:
        module.fail_json(msg="timeout and next_within must be 0 or more and interval above 0; got %r, %r and %r"
                         % (p["timeout"], p["next_within"], p["interval"]))
    module.exit_json(changed=False, **wait_for_event(p["progress_file"], p["results_file"], p["job"], p["state"],
                                                     p["timeout"], p["interval"], p["next_within"]))


if __name__ == "__main__":
    main()
