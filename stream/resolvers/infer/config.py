"""Tuning of the ``infer`` resolver: one frozen dataclass read by the resolver, the groups and the solver."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InferConfig:
    """Tuning of the ``infer`` resolver. Counts are windows unless stated."""

    history_windows: int = 60  # evidence rows kept per group
    min_rows: int = 4  # windows with bytes before a flow's confidence may reach 1
    confirm_windows: int = 2  # consecutive contradicting windows before re-inferring
    contradiction_factor: float = 10.0  # a window's squared residual / the usual one that contradicts
    noise_floor: float = 0.01  # residual floor, as a share of a member's load in the window
    move_margin: float = 4.0  # a steady-state move must lower SSE by this many sigma^2
    admm_iters: int = 100  # per cold solve
    admm_rho: float = 0.01  # ADMM penalty, relative to the mean squared flow norm
    cold_interval_max: int = 64  # longest gap between cold solves of a settled group
    settle_confidence: float = 0.9  # a group is settled when every flow's confidence reaches this
    establish_confidence: float = 0.95  # a flow is pinned (keeps its confidence) from this on
    refresh_every: int = 8  # windows between recomputing interchangeable flow classes
    remember_flows: int = 20_000  # per group: members of ended flows, reused if they come back
    min_window_bytes: float = 1e6  # added to each window's scale so idle windows weigh little
    doubt_decay: float = 0.7  # per well-predicted window: the share of a member's doubt that remains
    mispredict_factor: float = 25.0  # squared residual / usual one that counts as a misprediction
