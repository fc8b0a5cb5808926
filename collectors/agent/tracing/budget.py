"""The probe budget: a host-wide token bucket and per-destination AIMD pacing against ICMP rate limits.

Pure computation on a caller-supplied clock (ns); nothing here sleeps or reads the time itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved up. Times are ns on any monotonic clock."""

    rate: float
    burst: float
    tokens: float = field(init=False)
    last_ns: int | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.rate <= 0 or self.burst < 1:
            raise ValueError(f"token bucket needs rate > 0 and burst >= 1, got rate {self.rate}, burst {self.burst}")
        self.tokens = float(self.burst)

    def _refill(self, now_ns: int) -> None:
        if self.last_ns is not None and now_ns > self.last_ns:
            self.tokens = min(self.burst, self.tokens + (now_ns - self.last_ns) * self.rate / 1e9)
        if self.last_ns is None or now_ns > self.last_ns:
            self.last_ns = now_ns

    def take(self, now_ns: int, n: float = 1.0) -> bool:
        """Spend ``n`` tokens if there are that many at ``now_ns``."""
        self._refill(now_ns)
        if self.tokens >= n:
            self.tokens -= n
            return True
        return False

    def wait_ns(self, now_ns: int, n: float = 1.0) -> int:
        """ns until ``n`` tokens will be there (0 when they are)."""
        self._refill(now_ns)
        return 0 if self.tokens >= n else int((n - self.tokens) * 1e9 / self.rate) + 1


@dataclass
class Pace:
    """One destination's probe pacing: rate in probes/s, halved on a sign of ICMP rate limiting."""

    rate: float
    next_ns: int = 0
    last_cut_ns: int = -(1 << 62)
    last_gain_ns: int = 0
    loss: float = 0.0  # EWMA of the lost fraction of probes
    answered_ttls: set[int] = field(default_factory=set)


class RateGovernor:
    """Per destination (the key the caller chooses, e.g. the destination IP): AIMD pacing of probes.

    ``ceiling`` probes/s is the normal rate. On a sign of ICMP rate limiting (``lost`` at a TTL that
    answered before, or the loss EWMA above ``loss_threshold``) the rate halves, at most once per
    ``cut_hold_ns``, never below ``floor``; every second without such a sign it regains
    ``ceiling * recover_share`` probes/s (slow additive recovery).
    """

    def __init__(self, ceiling: float, floor: float = 1.0, recover_share: float = 0.05,
                 loss_threshold: float = 0.3, cut_hold_ns: int = 1_000_000_000) -> None:
        self.ceiling = ceiling
        self.floor = min(floor, ceiling)
        self.recover_share = recover_share
        self.loss_threshold = loss_threshold
        self.cut_hold_ns = cut_hold_ns
        self.paces: dict[str, Pace] = {}
        self.cuts = 0

    def _pace(self, key: str, now_ns: int) -> Pace:
        p = self.paces.get(key)
        if p is None:
            p = self.paces[key] = Pace(self.ceiling, last_gain_ns=now_ns)
        elif p.rate < self.ceiling and now_ns > p.last_gain_ns:
            gain = (now_ns - max(p.last_gain_ns, p.last_cut_ns)) / 1e9 * self.ceiling * self.recover_share
            if gain > 0:
                p.rate = min(self.ceiling, p.rate + gain)
            p.last_gain_ns = now_ns
        return p

    def rate(self, key: str, now_ns: int) -> float:
        """The current probe rate toward ``key``, probes/s."""
        return self._pace(key, now_ns).rate

    def ready_ns(self, key: str, now_ns: int) -> int:
        """When the next probe toward ``key`` may leave (<= now_ns: now)."""
        return self._pace(key, now_ns).next_ns

    def sent(self, key: str, now_ns: int) -> None:
        """A probe toward ``key`` left at ``now_ns``."""
        p = self._pace(key, now_ns)
        p.next_ns = max(p.next_ns, now_ns) + int(1e9 / p.rate)

    def answered(self, key: str, ttl: int, now_ns: int) -> None:
        """The probe at ``ttl`` toward ``key`` was answered."""
        p = self._pace(key, now_ns)
        p.answered_ttls.add(ttl)
        p.loss *= 0.9

    def lost(self, key: str, ttl: int, now_ns: int) -> bool:
        """The probe at ``ttl`` toward ``key`` timed out; True when that cut the rate."""
        p = self._pace(key, now_ns)
        p.loss = p.loss * 0.9 + 0.1
        if (ttl in p.answered_ttls or p.loss > self.loss_threshold) and now_ns - p.last_cut_ns >= self.cut_hold_ns:
            p.rate = max(self.floor, p.rate / 2)
            p.last_cut_ns = p.last_gain_ns = now_ns
            p.next_ns = max(p.next_ns, now_ns + int(1e9 / p.rate))
            self.cuts += 1
            return True
        return False
