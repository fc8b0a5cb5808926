"""The events inside one tick: between events (an op starting, a transfer finishing, a job's compute gap ending)
every active transfer moves at its max-min fair rate, recomputed when something changed.

Two loops compute the same rule: ``simulate_vector`` over numpy arrays of the transfers (the default) and
``simulate_plain`` one transfer at a time (the reference; tests check both give the same bytes, bit for bit).
They drive a ``TickEnv`` (the engine): its jobs, its transfers and the rate and finishing rules.
"""

from __future__ import annotations

import logging
import math
from typing import Protocol

import numpy as np

from flowtracer.sim.fabric.flows import Transfer
from flowtracer.sim.fabric.jobs import JobRun

log = logging.getLogger(__name__)

#: Bound on events inside one tick, so a degenerate workload cannot hang the engine.
MAX_EVENTS_PER_TICK = 200_000


class TickEnv(Protocol):
    """What the event loops need of the engine."""

    jobs: list[JobRun]
    transfers: list[Transfer]
    #: True when rates must be recomputed before the next interval (a transfer started or finished, a fault).
    rates_dirty: bool

    def refresh_rates(self) -> None:
        """Recompute every transfer's rate (bit/s) and clear ``rates_dirty``."""

    def congestion_interval(self, dt: float) -> None:
        """Run the congestion model over an interval of ``dt`` seconds."""

    def finish_transfers(self, finished: list[Transfer], done_ns: int) -> None:
        """Transfers that moved all their bytes, at ``done_ns`` (ns): retire them."""


def until_job_timer(jobs: list[JobRun], t0: int, t: float, dt: float, first: Transfer | None
                    ) -> tuple[float, Transfer | None]:
    """The step ``dt`` (s) cut at the first job timer due before it (then no transfer finishes first), >= 0.
    ``t0``: the tick's start (ns); ``t``: seconds into the tick."""
    for job in jobs:
        if job.timer_ns is not None:
            dt_job = (job.timer_ns - t0) / 1e9 - t
            if dt_job < dt:
                dt, first = max(dt_job, 0.0), None
    return max(dt, 0.0), first


def store_done(transfers: list[Transfer], done: np.ndarray) -> None:
    """Bytes each flow of each transfer has moved (the vector loop's array) back into the Transfers."""
    for tr, d in zip(transfers, done.tolist(), strict=True):
        tr.done = d


def simulate_vector(env: TickEnv, t0: int, t1: int) -> None:
    """Run the events of the tick ``[t0, t1)`` (ns) over arrays of the transfers."""
    span = (t1 - t0) / 1e9
    t = 0.0
    # The transfers as arrays (their order in ``transfers``): payload bit/s, bytes each flow moves, bytes done.
    # ``done`` lives here between events and goes back to the Transfers before anything else reads it.
    live: list[Transfer] | None = None
    rate = bpf = done = timed = np.zeros(0)
    for _ in range(MAX_EVENTS_PER_TICK):
        now_ns = t0 + round(t * 1e9)
        for job in env.jobs:
            job.poll(now_ns)
        if env.rates_dirty:
            if live is not None:
                store_done(live, done)
            env.refresh_rates()
            live = None
        if live is None:
            live = list(env.transfers)
            rate = np.array([tr.rate for tr in live], dtype=np.float64)
            bpf = np.array([tr.bytes_per_flow for tr in live], dtype=np.float64)
            done = np.array([tr.done for tr in live], dtype=np.float64)
            timed = (rate > 0) & np.isfinite(bpf)
        dt = span - t
        first: Transfer | None = None
        if timed.any():
            # The first transfer to finish (the first of equals, as the plain loop's strict ``<``).
            need = np.where(timed, (bpf - done) * 8 / np.where(timed, rate, 1.0), np.inf)
            i = int(np.argmin(need))
            if need[i] < dt:
                dt, first = float(need[i]), live[i]
        dt, first = until_job_timer(env.jobs, t0, t, dt, first)
        env.congestion_interval(dt)
        done += rate * dt / 8
        t += dt
        done_ns = t0 + round(t * 1e9)
        with np.errstate(invalid="ignore"):  # endless transfers: inf - inf, never done
            hit = done >= bpf - np.maximum(1e-6, bpf * 1e-12)
        if first is not None:
            hit[live.index(first)] = True
        if hit.any():
            store_done(live, done)
            env.finish_transfers([live[i] for i in np.flatnonzero(hit).tolist()], done_ns)
            live = None
        if t >= span:
            if live is not None:
                store_done(live, done)
            return
    if live is not None:
        store_done(live, done)
    log.warning("tick ending %d: more than %d events, cut short", t1, MAX_EVENTS_PER_TICK)


def simulate_plain(env: TickEnv, t0: int, t1: int) -> None:
    """The reference event loop over ``[t0, t1)`` (ns): the rule ``simulate_vector`` computes over arrays, one
    transfer at a time."""
    span = (t1 - t0) / 1e9
    t = 0.0
    for _ in range(MAX_EVENTS_PER_TICK):
        now_ns = t0 + round(t * 1e9)
        for job in env.jobs:
            job.poll(now_ns)
        if env.rates_dirty:
            env.refresh_rates()
        dt = span - t
        first: Transfer | None = None
        for tr in env.transfers:
            if tr.rate > 0 and math.isfinite(tr.bytes_per_flow):
                need = (tr.bytes_per_flow - tr.done) * 8 / tr.rate
                if need < dt:
                    dt, first = need, tr
        dt, first = until_job_timer(env.jobs, t0, t, dt, first)
        env.congestion_interval(dt)
        for tr in env.transfers:
            tr.done += tr.rate * dt / 8
        t += dt
        done_ns = t0 + round(t * 1e9)
        finished = [tr for tr in env.transfers
                    if tr is first or tr.done >= tr.bytes_per_flow - max(1e-6, tr.bytes_per_flow * 1e-12)]
        if finished:
            env.finish_transfers(finished, done_ns)
        if t >= span:
            return
    log.warning("tick ending %d: more than %d events, cut short", t1, MAX_EVENTS_PER_TICK)
