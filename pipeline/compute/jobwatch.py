"""The jobs of a dask-jobqueue cluster as a run sees them: replaced when they end, described when
a run stops for want of workers.

A worker job ends when its worker retires at its ``lifetime`` (state ``COMPLETED``), when SLURM
kills it at its walltime (``TIMEOUT``), or when its node fails or it is preempted. dask-jobqueue's
``SpecCluster`` forgets such a job's worker ``distributed.deploy.lost-worker-timeout`` seconds
(15 s) after the scheduler lost it, and submits a new job for it the next time its state is
corrected, which ``cluster.scale`` does: :meth:`JobWatch.tick` calls it while jobs are missing. A
job cancelled by a user (``scancel``: state ``CANCELLED`` without a time limit) is not replaced:
someone wanted it gone, and when no worker is left the run stops after ``worker_wait`` saying so.

Job states are read with ``scontrol show job -o ID`` (SLURM keeps ended jobs for ``MinJobAge``,
300 s by default); where that fails, a job is reported as ``unknown``.
"""
from __future__ import annotations

import subprocess
import time

#: States of a job that ended and should be replaced.
ENDED = {"COMPLETED", "TIMEOUT", "FAILED", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
#: Seconds between two reads of the job states.
LOOK_EVERY = 5.0


def job_state(job_id: str, timeout: float = 10.0) -> tuple:
    """``(state, reason)`` of a SLURM job, e.g. ``("PENDING", "Resources")``, ``("TIMEOUT", "None")``;
    ``("unknown", why)`` when scontrol cannot tell."""
    try:
        out = subprocess.run(["scontrol", "show", "job", "-o", str(job_id)], capture_output=True, text=True,
                             timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "unknown", type(e).__name__
    fields = dict(f.split("=", 1) for f in out.stdout.split() if "=" in f)
    if out.returncode != 0 or "JobState" not in fields:
        return "unknown", (out.stderr.strip() or "not found")
    return fields["JobState"], fields.get("Reason", "None")


class JobWatch:
    """Watches the worker jobs of a dask-jobqueue ``cluster`` started with ``low``-``high`` jobs."""

    def __init__(self, cluster, low: int, high: int, per_job: int = 1, clock=time.monotonic, state=job_state):
        self.cluster, self.low, self.high, self.per_job = cluster, int(low), int(high), int(per_job)
        self.clock, self.state = clock, state
        self.jobs: dict = {}  # job id -> last known state, reason
        self._next = 0.0
        self.replaced = 0

    def _ids(self) -> list:
        ids = []
        for job in list(getattr(self.cluster, "workers", {}).values()):
            jid = getattr(job, "job_id", None)
            if jid:
                ids.append(str(jid))
        return ids

    def tick(self, n_workers: int):
        """One look (at most every :data:`LOOK_EVERY` s): record the jobs; with fewer workers than
        the minimum, read the job states and, while an ended job is not replaced, ask the cluster
        to resubmit what it has forgotten."""
        now = self.clock()
        if now < self._next:
            return
        self._next = now + LOOK_EVERY
        for jid in self._ids():
            self.jobs.setdefault(jid, ("submitted", "None"))
        if n_workers >= self.low * self.per_job:
            return
        for jid, (st, _) in list(self.jobs.items()):
            if st not in ENDED and not st.startswith("CANCELLED"):
                self.jobs[jid] = self.state(jid)
        ended = sum(st in ENDED for st, _ in self.jobs.values())
        if ended:
            self.replaced = ended
            self.cluster.scale(jobs=max(self.low, min(self.high, len(getattr(self.cluster, "worker_spec", ())))))

    def describe(self) -> str:
        """The jobs, for a message: ``2 job(s): 101 CANCELLED, 102 PENDING (Resources)``."""
        if not self.jobs:
            return "no job was submitted"
        parts = []
        for jid, (st, why) in self.jobs.items():
            if st == "CANCELLED" and why == "None":
                st = "CANCELLED by a user"
            elif st == "PENDING":
                st = f"still queued ({why})"
            parts.append(f"{jid} {st}")
        more = f"; {self.replaced} ended and were resubmitted" if self.replaced else ""
        return f"{len(self.jobs)} job(s): {', '.join(parts[-6:])}{more}"
