"""The numerical core of the ``infer`` resolver: which member of an ECMP group each flow uses (pure numpy).

Given a window history ``x`` (windows x flows, byte shares) and ``y`` (windows x members, counter byte
shares) with a ``mask`` of trusted entries, find the one-member-per-flow assignment ``a`` that best
explains ``y = x @ a``: a convex relaxation (each flow spread over members, solved by ADMM), rounded and
polished by local search; plus the posterior used for confidence and the detection of flows whose byte
series cannot be told apart. ``resolver.py`` keeps the per-group state around it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from flowtracer.stream.resolvers.infer.config import InferConfig


def project_rows_to_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of ``v`` onto the probability simplex (Duchi et al. 2008)."""
    n, m = v.shape
    u = -np.sort(-v, axis=1)
    css = np.cumsum(u, axis=1) - 1.0
    k = np.arange(1, m + 1)
    rho = m - 1 - np.argmax(((u - css / k) > 0)[:, ::-1], axis=1)
    theta = css[np.arange(n), rho] / (rho + 1)
    return np.maximum(v - theta[:, None], 0.0)


def relax_assignment(x: np.ndarray, y: np.ndarray, mask: np.ndarray, iters: int, rho: float) -> np.ndarray:
    """Rows-on-simplex relaxation of min ||mask * (y - x w)||^2 by ADMM, from the uniform start.

    ``x`` windows x flows, ``y`` and ``mask`` windows x members. The W-step solves
    (x^T x + c I) W = B through the windows x windows matrix (Woodbury), so an iteration costs a
    few products of the data's size; missing counters are imputed with the current prediction.
    """
    t, n = x.shape
    m = y.shape[1]
    c = rho * max(float(np.einsum("ij,ij->", x, x)) / n, 1e-18)
    k = np.linalg.inv(c * np.eye(t) + x @ x.T)
    z = np.full((n, m), 1.0 / m)
    u = np.zeros_like(z)
    full = bool(mask.all())
    xty = x.T @ (y * mask)
    tol = 1e-4 * math.sqrt(n)  # rows of z are probability vectors: 1e-4 per flow is converged
    for it in range(iters):
        if not full:
            xty = x.T @ (mask * y + (1.0 - mask) * (x @ z))
        b = xty + c * (z - u)
        w = (b - x.T @ (k @ (x @ b))) / c
        z_old = z
        z = project_rows_to_simplex(w + u)
        u += w - z
        if it % 10 == 9 and np.linalg.norm(w - z) < tol and np.linalg.norm(z - z_old) < tol:
            break
    return z


@dataclass
class Fit:
    """An assignment with its residual products: R = mask*(y - x A), C = x^T R, Q = (x^2)^T mask."""

    a: np.ndarray
    r: np.ndarray
    c: np.ndarray
    q: np.ndarray

    @property
    def sse(self) -> float:
        return float(np.einsum("ij,ij->", self.r, self.r))


def evaluate(x: np.ndarray, y: np.ndarray, mask: np.ndarray, a: np.ndarray) -> Fit:
    """Residual products of assignment ``a`` (flow -> member index, all assigned)."""
    m = y.shape[1]
    onehot = np.zeros((a.size, m))
    onehot[np.arange(a.size), a] = 1.0
    r = mask * (y - x @ onehot)
    return Fit(a, r, x.T @ r, (x * x).T @ mask)


def move_costs(fit: Fit) -> np.ndarray:
    """SSE change of moving each flow to each member (flows x members; 0 on its own member).

    Taking flow i off member p adds x_i back to R_p: 2 C[i,p] + Q[i,p]; putting it on b takes it
    off R_b: -2 C[i,b] + Q[i,b].
    """
    idx = np.arange(fit.a.size)
    d = (2.0 * fit.c[idx, fit.a] + fit.q[idx, fit.a])[:, None] - 2.0 * fit.c + fit.q
    d[idx, fit.a] = 0.0
    return d


def _apply_move(x: np.ndarray, mask: np.ndarray, fit: Fit, i: int, b: int) -> None:
    p = int(fit.a[i])
    dp, db = mask[:, p] * x[:, i], mask[:, b] * x[:, i]
    fit.r[:, p] += dp
    fit.r[:, b] -= db
    fit.c[:, p] += x.T @ dp
    fit.c[:, b] -= x.T @ db
    fit.a[i] = b


def insert_flows(x: np.ndarray, y: np.ndarray, mask: np.ndarray, a: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Assign the flows ``new`` (a == -1) one by one, largest first, where the residual has room."""
    a = a.copy()
    a_known = np.where(a >= 0, a, 0)
    onehot = np.zeros((a.size, y.shape[1]))
    onehot[np.arange(a.size), a_known] = (a >= 0)
    r = mask * (y - x @ onehot)
    for i in new[np.argsort(-np.einsum("ij,ij->j", x[:, new], x[:, new]), kind="stable")]:
        xi = x[:, i]
        cost = (xi * xi) @ mask - 2.0 * (xi @ r)
        b = int(np.argmin(cost))
        a[i] = b
        r[:, b] -= mask[:, b] * xi
    return a


def local_search(x: np.ndarray, y: np.ndarray, mask: np.ndarray, start: np.ndarray | Fit, margin: float,
                 swaps: bool) -> tuple[Fit, int]:
    """Improve an assignment by single moves, then pairwise swaps, each taken only if it lowers SSE
    by ``margin``. ``start`` is an assignment, or a fit of one (then updated in place).

    Swap costs are screened with the unmasked Gram matrix and checked exactly before being taken.
    Returns the final fit and the number of moves and swaps made.
    """
    fit = start if isinstance(start, Fit) else evaluate(x, y, mask, start.copy())
    n = fit.a.size
    steps = 0
    limit = 4 * n + 50  # a bound, not a target: each step lowers SSE, so no cycles
    gram: np.ndarray | None = None
    idx = np.arange(n)
    while steps < limit and n > 0:
        d = move_costs(fit)
        d[idx, fit.a] = np.inf
        flat = int(np.argmin(d))
        i, b = divmod(flat, d.shape[1])
        if d[i, b] < -margin:
            _apply_move(x, mask, fit, i, b)
            steps += 1
            continue
        if not swaps or n < 2:
            break
        if gram is None:
            gram = x.T @ x
            g = np.diag(gram)
        ca = fit.c[idx, fit.a]
        cm = fit.c[:, fit.a]  # cm[k, i] = C[k, a_i]
        s = 2.0 * (ca[:, None] - cm.T) - 2.0 * (cm - ca[None, :]) + 2.0 * (g[:, None] + g[None, :] - 2.0 * gram)
        s[fit.a[:, None] == fit.a[None, :]] = np.inf
        took = False
        for _ in range(4):  # the screen is approximate under missing counters: check exactly
            i, k = divmod(int(np.argmin(s)), n)
            if not s[i, k] < -margin:
                break
            p, q = int(fit.a[i]), int(fit.a[k])
            dx = x[:, i] - x[:, k]
            rp, rq = fit.r[:, p], fit.r[:, q]
            exact = float(mask[:, p] @ ((rp + dx) ** 2 - rp**2) + mask[:, q] @ ((rq - dx) ** 2 - rq**2))
            if exact < -margin:
                _apply_move(x, mask, fit, i, q)
                _apply_move(x, mask, fit, k, p)
                steps += 1
                took = True
                break
            s[i, k] = np.inf
        if not took:
            break
    return fit, steps


def cold_solve(x: np.ndarray, y: np.ndarray, mask: np.ndarray, cfg: InferConfig) -> tuple[Fit, np.ndarray]:
    """Assignment from scratch: simplex relaxation, rounding, local search to a local optimum.

    Also returns the relaxed solution (flows x members, rows summing to 1): how the evidence alone,
    without integrality, spreads each flow over the members.
    """
    z = relax_assignment(x, y, mask, cfg.admm_iters, cfg.admm_rho)
    fit, _ = local_search(x, y, mask, np.argmax(z, axis=1), 1e-15, swaps=True)
    return fit, z


def member_posterior(d: np.ndarray, sigma2: float) -> np.ndarray:
    """P(flow on its assigned member) from move costs ``d`` (0 on the member) under N(0, sigma2)."""
    z = -d / (2.0 * sigma2)
    zmax = z.max(axis=1, keepdims=True)
    return np.exp(-zmax[:, 0]) / np.exp(z - zmax).sum(axis=1)


def interchangeable_classes(x: np.ndarray, tol: float) -> np.ndarray:
    """Label flows whose series lie within squared distance ``tol`` of each other (transitively)."""
    n = x.shape[1]
    labels = np.arange(n)
    if n < 2:
        return labels
    gram = x.T @ x
    g = np.diag(gram)
    close = (g[:, None] + g[None, :] - 2.0 * gram) <= tol
    if int(close.sum()) == n:  # only the diagonal: every flow stands alone
        return labels
    for _ in range(n):
        nxt = np.min(np.where(close, labels[None, :], n), axis=1)
        nxt = np.minimum(nxt, labels)
        while True:  # pointer jumping: a label's own label is smaller or equal
            jumped = nxt[nxt]
            if np.array_equal(jumped, nxt):
                break
            nxt = jumped
        if np.array_equal(nxt, labels):
            break
        labels = nxt
    return labels
