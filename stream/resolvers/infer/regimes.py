"""Change detection for the ``infer`` resolver (pure): does a group's evidence history show one routing
regime, or two (the fabric changed: a link went down, a job restarted and its flows rehashed)?

Functions of the history (``x`` flows' bytes, ``y`` members' counter bytes, ``mask`` which counters
were present; rows are windows, oldest first, all scaled per window) and a fit of it.
"""

from __future__ import annotations

import math

import numpy as np

from flowtracer.stream.resolvers.infer.config import InferConfig
from flowtracer.stream.resolvers.infer.solver import Fit, cold_solve, evaluate, local_search


def floor2(cfg: InferConfig, y: np.ndarray, mask: np.ndarray) -> float:
    """The least residual variance per counter: (noise_floor x the mean member load)^2, scaled units."""
    share = (y * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)
    return max(float(np.mean((cfg.noise_floor * share) ** 2)), 1e-18)


def sigma2(cfg: InferConfig, y: np.ndarray, mask: np.ndarray, fit: Fit) -> float:
    """Residual variance per counter, floored (see ``floor2``)."""
    nobs = float(mask.sum())
    if nobs == 0:
        return 1.0
    return max(fit.sse / nobs, floor2(cfg, y, mask))


def row_contradicts(cfg: InferConfig, fit: Fit, y: np.ndarray, mask: np.ndarray, r: int) -> bool:
    """Row ``r`` misfits by far more than the other rows do, and than the noise floor."""
    e = np.einsum("ij,ij->i", fit.r, fit.r)
    others = np.delete(e, r)
    base = float(np.median(others)) if others.size >= 3 else 0.0
    m_obs = max(float(mask[r].sum()), 1.0)
    floor = m_obs * (cfg.noise_floor * float((y[r] * mask[r]).sum()) / m_obs) ** 2
    return bool(e[r] > cfg.contradiction_factor * max(base, floor))


def misfits(cfg: InferConfig, fit: Fit, y: np.ndarray, mask: np.ndarray, usual: slice) -> np.ndarray:
    """Per row: misfits by ``contradiction_factor`` x the median residual of rows ``usual`` (or the floor)."""
    e = np.einsum("ij,ij->i", fit.r, fit.r)
    m_obs = np.maximum(mask.sum(axis=1), 1.0)
    floor = m_obs * (cfg.noise_floor * (y * mask).sum(axis=1) / m_obs) ** 2
    return e > cfg.contradiction_factor * np.maximum(float(np.median(e[usual])), floor)


def two_regimes(cfg: InferConfig, x: np.ndarray, y: np.ndarray, mask: np.ndarray, k: int, single: Fit,
                 after: np.ndarray | None = None) -> tuple[bool, Fit]:
    """Do windows [0, k) and [k, end) have different assignments? Also returns the best single
    assignment found on the way (the part solutions, polished on the whole history, compete).

    Accepted when solving the two parts apart lowers the SSE of the best single assignment by
    more than the second assignment costs in description length (BIC-like, in nats: every flow
    with bytes on both sides may pick one of m members again, ln m each, plus 10), with the
    residual variance of the two-part fit. Seeding the single-regime search with the part
    solutions keeps a solver miss on the whole history from passing for a change.
    ``after``: a known good start for the newer part.
    """
    # The older part must stand on its own: an underdetermined part fits its noise, and any
    # split would then look better than one regime. Ask for min_rows windows and twice as many
    # counter readings as flows to place.
    older = int(np.count_nonzero((x[:k] > 0).any(axis=0)))
    if k < cfg.min_rows or float(mask[:k].sum()) < 2.0 * older:
        return False, single
    before, _ = cold_solve(x[:k], y[:k], mask[:k], cfg)
    start = single.a.copy() if after is None else after
    late, _ = local_search(x[k:], y[k:], mask[k:], start, 1e-15, swaps=True)
    if x.shape[0] - k >= cfg.min_rows:
        fresh, _ = cold_solve(x[k:], y[k:], mask[k:], cfg)
        late = fresh if fresh.sse < late.sse else late
    for seed in (before.a, late.a):
        polished, _ = local_search(x, y, mask, seed.copy(), 1e-15, swaps=True)
        single = polished if polished.sse < single.sse else single
    two = before.sse + late.sse
    s2 = max(two / max(float(mask.sum()), 1.0), floor2(cfg, y, mask))
    both = int(np.count_nonzero((x[:k] > 0).any(axis=0) & (x[k:] > 0).any(axis=0)))
    return (single.sse - two) / (2.0 * s2) > both * math.log(y.shape[1]) + 10.0, single


def stale_prefix(cfg: InferConfig, x: np.ndarray, y: np.ndarray, mask: np.ndarray, fit: Fit) -> int:
    """How many of the oldest windows to forget because the fabric changed after them, or 0.

    The case the newest-window test cannot see: the assignment has already moved to the new
    regime (the new windows outweighed the old), so now it explains every window from some
    point on and contradicts most windows before it; ``two_regimes`` confirms. Only looked
    for when some window misfits.
    """
    e = np.einsum("ij,ij->i", fit.r, fit.r)
    m_obs = np.maximum(mask.sum(axis=1), 1.0)
    floor = m_obs * (cfg.noise_floor * (y * mask).sum(axis=1) / m_obs) ** 2
    t = e.size
    if t < cfg.min_rows + cfg.confirm_windows or not np.any(
            e > cfg.contradiction_factor * np.maximum(np.median(e), floor)):
        return 0
    best = 0
    for k in range(t - cfg.confirm_windows, 0, -1):
        limit = cfg.contradiction_factor * np.maximum(float(np.median(e[k:])), floor)
        if np.any(e[k:] > limit[k:]):
            break  # the newer windows no longer all fit: no longer suffix to find
        if np.mean(e[:k] > limit[:k]) > 0.5:
            best = k
    return best if best and two_regimes(cfg, x, y, mask, best, fit, after=fit.a.copy())[0] else 0


def regime_change(cfg: InferConfig, x: np.ndarray, y: np.ndarray, mask: np.ndarray, fit: Fit) -> int:
    """Where a second regime starts in the history, or 0: the slow path for changes the newest-
    window test missed (a change while still learning, a flapping link).

    Only when the best single assignment leaves windows unexplained. The candidate change point
    comes from solving the newer half alone: the first window after which that solution explains
    everything, the older windows mostly misfitting it; then ``two_regimes`` decides.
    """
    t = x.shape[0]
    if t < 2 * cfg.min_rows or not misfits(cfg, fit, y, mask, slice(None)).any():
        return 0
    half = t // 2
    newer, _ = cold_solve(x[half:], y[half:], mask[half:], cfg)
    bad = misfits(cfg, evaluate(x, y, mask, newer.a.copy()), y, mask, slice(half, None))
    if bad[half:].any() or not bad[:half].any():
        return 0
    k = int(np.flatnonzero(bad[:half])[-1]) + 1
    if np.mean(bad[:k]) <= 0.5:
        return 0
    return k if two_regimes(cfg, x, y, mask, k, fit, after=newer.a)[0] else 0
