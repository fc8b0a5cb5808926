"""The ``influx`` sink: points to InfluxDB 2 (``/api/v2/write``) through influxdb-client's WriteApi
in batching mode, with an exact ledger of what is stored.

How influxdb-client 1.50 batches (read in ``influxdb_client/client/write_api.py`` and reactivex 4;
``tests/stream/test_sinks.py`` checks the order against a real server):

* ``write()`` pushes each line into an Rx subject; ``window_with_time_or_count`` closes a batch
  after ``batch_size`` lines or ``flush_interval``. A batch is emitted by whichever thread closes
  the window, under the window operator's lock, so batches leave in the order of their lines
  (one bucket/org/precision per sink, so ``group_by`` makes one group per window).
* Every batch is scheduled on ``WriteOptions.write_scheduler``: a ``ThreadPoolScheduler(1)``, one
  worker thread with a FIFO queue. The HTTP request, its retries (urllib3 ``Retry`` sleeping in
  that thread) and the success/error callback all run there, one batch at a time. Hence
  callbacks arrive in submission order and ``durable(ticket)`` can be a running count. The ledger
  also checks each confirmed batch byte for byte against the oldest pending lines and fails the
  sink if the order ever breaks, rather than commit offsets on a wrong count.
* The library's default ``write_scheduler`` is a default argument: one thread shared by every
  WriteApi in the process, so one store's retries would stall all others. Each sink has its own.
* ``WriteApi.flush()`` does nothing; ``close()`` drains the open window and polls every 100 ms
  until the writer is idle (so close takes >= 0.1 s). Failed batches are only logged unless
  callbacks are given; these callbacks drive the ledger.
* Retries (``WritesRetry``, a urllib3 ``Retry``): 429, 5xx and connection/read errors, with delays
  ``retry_interval * exponential_base**n`` (randomised, capped at ``max_retry_delay``), or the
  server's ``Retry-After`` when it sends one, at most ``max_retries`` times and ``max_retry_time``
  per batch. Other 4xx end the batch at once.
* The window timer runs on a private one-thread pool that the library does not stop: after
  ``close()`` the interpreter cannot exit until the pending timer's ``flush_interval`` has run out
  (influxdb-client-python issue #640). The sink records the timers' event loops and disposes them
  at close, so exit is immediate once the sink has lived one ``flush_interval``; a sink closed
  sooner still keeps the process up to the rest of its first interval.

While the store is down the writer thread sits in retries, later batches queue behind it, and
``write()`` keeps accepting until ``max_pending_points`` are outstanding; then it raises
:class:`SinkBackpressure` and the processor stops consuming (offsets stay uncommitted) until
the store is back. Only when a batch exhausts its retries does the sink fail (:class:`SinkFailed`).

A 4xx that replaying cannot change (:data:`REJECT_STATUSES`: a bad line, an over-long series, a
revoked token, a missing bucket, a body too large) does not fail the sink: retrying the same bytes
would be refused again, and a failed sink would make the processor crash, replay and crash again
until Kafka retention dropped the input uncounted. The batch is *rejected*: settled, kept with the
store's answer, and handed back by :meth:`InfluxSink.take_rejected`; ``durable`` stays at its first
line until then, so the processor publishes the lines as dead letters before it commits past them.

The token comes from the environment or a file, lives in a ``SecretStr`` and is handed only to
the HTTP client (never logged, never in a repr; the client's debug logging stays off).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar
from urllib.parse import urlsplit

from influxdb_client import InfluxDBClient, WriteOptions, WritePrecision
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, SecretStr, model_validator
from reactivex.scheduler import EventLoopScheduler, NewThreadScheduler, ThreadPoolScheduler

from flowtracer.plumbing.durations import parse_duration
from flowtracer.stream.sinks.base import Rejected, SinkBackpressure, SinkFailed, check_lines

log = logging.getLogger(__name__)

REJECT_STATUSES = frozenset({400, 401, 403, 404, 413, 422})
"""HTTP statuses that refuse a batch for good: the same bytes would be refused again (429 and 5xx
are retried instead)."""


def is_loopback(host: str) -> bool:
    """Whether *host* names this machine (a token sent there in clear never leaves it)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

TOKEN_ENV_DEFAULTS = ("FLOWTRACER_INFLUX_TOKEN", "INFLUX_TOKEN")
"""Environment variables tried for the token, in order, when neither ``token_env`` nor
``token_file`` is set (``INFLUX_TOKEN`` is what the ``influx`` CLI reads)."""

_LOGGED_REJECTIONS = 20  # the first few rejected batches are logged, then only counted
_DURATION_HINT = "e.g. 250ms, 1s, 2m"


def _duration(v: Any) -> float:
    """``"250ms"``, ``"1s"``, ``"2m"``, ``1.5`` (seconds) -> seconds (units ms, s, m, h)."""
    if isinstance(v, bool):
        raise ValueError(f"{v!r} is not a duration ({_DURATION_HINT})")
    return parse_duration(v, hint=_DURATION_HINT, units=("ms", "s", "m", "h"),
                          negative=f"{{value!r}} is not a duration ({_DURATION_HINT})")


Duration = Annotated[float, BeforeValidator(_duration)]
"""Seconds, written as a duration (``250ms``, ``1s``) or a number of seconds."""


class InfluxConfig(BaseModel):
    """Config of the ``influx`` sink. Durations in seconds (or ``"250ms"``-style strings).

    The token is never part of the config: it is read from ``token_file``, else from the variable
    ``token_env``, else from ``FLOWTRACER_INFLUX_TOKEN`` or ``INFLUX_TOKEN``, when the config is
    validated, and kept as a ``SecretStr`` (:attr:`token`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    """``http(s)://host:port`` of InfluxDB 2 (or anything that serves ``/api/v2/write``)."""
    org: str = Field(min_length=1)
    bucket: str = Field(min_length=1)
    token_env: str | None = None
    token_file: Path | None = None
    batch_size: int = Field(5000, ge=1)
    """Points per write request (InfluxDB's guidance: 5000)."""
    flush_interval: Duration = 1.0
    """A partial batch is sent after this long; also bounds how stale ``durable`` can be."""
    jitter: Duration = 0.0
    """Random extra delay before each batch and retry, to spread many writers."""
    retry_interval: Duration = 1.0
    """First retry delay; later ones grow by ``exponential_base`` up to ``max_retry_delay``."""
    max_retry_delay: Duration = 30.0
    exponential_base: float = Field(2.0, ge=1.0)
    max_retries: int = Field(20, ge=0)
    """Retries per batch before it fails for good (0: none). 20 at the defaults ~ 8 min."""
    max_retry_time: Duration = 600.0
    """Time per batch after which it fails for good, whatever ``max_retries`` says."""
    max_pending_points: int = Field(100_000, ge=1)
    """Points accepted but not yet stored before ``write`` raises SinkBackpressure (memory bound:
    about 2 x this x the line length)."""
    timeout: Duration = 10.0
    """HTTP timeout per request."""
    verify_ssl: bool = True
    ssl_ca_cert: Path | None = None
    gzip: bool = False
    """Gzip request bodies (saves bandwidth to a remote InfluxDB, costs CPU here)."""

    _token: SecretStr = PrivateAttr()

    @model_validator(mode="before")
    @classmethod
    def _no_inline_token(cls, data: Any) -> Any:
        if isinstance(data, dict) and "token" in data:
            raise ValueError("token: not accepted in the config (it would end up in files, argv and logs); "
                             f"set token_file or token_env, or export {' or '.join(TOKEN_ENV_DEFAULTS)}")
        return data

    @model_validator(mode="after")
    def _check(self) -> InfluxConfig:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url: {self.url!r} is not an http:// or https:// URL with a host")
        if parts.username or parts.password:
            raise ValueError("url: credentials in the URL would be logged; use token_file or token_env")
        for name in ("flush_interval", "retry_interval", "timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be more than 0")
        if self.max_pending_points < self.batch_size:
            raise ValueError(f"max_pending_points ({self.max_pending_points}) must be at least batch_size "
                             f"({self.batch_size}), or batches could never fill")
        if self.ssl_ca_cert is not None and not self.ssl_ca_cert.is_file():
            raise ValueError(f"ssl_ca_cert: no such file: {self.ssl_ca_cert}")
        self._token = self._read_token()
        return self

    def _read_token(self) -> SecretStr:
        if self.token_file is not None:
            try:
                token = self.token_file.read_text(encoding="utf-8").strip()
            except OSError as e:
                raise ValueError(f"token_file: cannot read {self.token_file}: {e.strerror or e}") from None
            if not token:
                raise ValueError(f"token_file: {self.token_file} is empty")
            return SecretStr(token)
        names = (self.token_env,) if self.token_env else TOKEN_ENV_DEFAULTS
        for name in names:
            token = os.environ.get(name, "").strip()
            if token:
                return SecretStr(token)
        field = "token_env" if self.token_env else "token"
        raise ValueError(f"{field}: no InfluxDB token: environment variable {' / '.join(names)} is not set or "
                         "empty (or set token_file)")

    @property
    def token(self) -> SecretStr:
        """The API token (``.get_secret_value()`` only where it is sent)."""
        return self._token

    def write_options(self) -> WriteOptions:
        """influxdb-client batching options; a fresh writer thread (see the module docstring)."""
        return WriteOptions(
            batch_size=self.batch_size, flush_interval=round(self.flush_interval * 1000),
            jitter_interval=round(self.jitter * 1000), retry_interval=round(self.retry_interval * 1000),
            max_retries=self.max_retries, max_retry_delay=round(self.max_retry_delay * 1000),
            max_retry_time=round(self.max_retry_time * 1000), exponential_base=self.exponential_base,
            write_scheduler=ThreadPoolScheduler(max_workers=1),
        )


class _Ledger:
    """Lines accepted vs lines whose batch finished, in submission order; thread-safe.

    ``durable`` is the count of leading lines known stored (or rejected and taken back); it stops
    moving at the first failed batch (later lines may be stored, but not everything before them
    is), and waits at the first rejected batch until :meth:`take_rejected` hands it back.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.submitted = 0
        self.settled = 0
        self.durable = 0
        self.failed = 0
        self.rejected = 0
        self.broken = False
        self._rejected: list[Rejected] = []
        self._lines: deque[bytes] = deque()
        self._lock = threading.Lock()

    @property
    def pending(self) -> int:
        return self.submitted - self.settled

    def submit(self, lines: list[bytes], retry_after_s: float) -> int:
        with self._lock:
            pending = self.submitted - self.settled
            # An oversized write into an empty sink is taken, or it could never be.
            if pending and pending + len(lines) > self.limit:
                raise SinkBackpressure(pending, self.limit, retry_after_s)
            self._lines.extend(lines)
            self.submitted += len(lines)
            return self.submitted

    def settle(self, batch: bytes, ok: bool, rejected: Rejected | None = None) -> bool:
        """Account a finished batch (stored if *ok*; refused for good if *rejected*, which holds its
        lines back for :meth:`take_rejected`); False when it is not the oldest pending lines."""
        n = batch.count(b"\n") + 1
        with self._lock:
            if n > len(self._lines):
                self.broken = True
                return False
            lines = [self._lines.popleft() for _ in range(n)]
            self.settled += n
            in_order = b"\n".join(lines) == batch
            if rejected is not None and in_order:
                self.rejected += n
                self._rejected.append(rejected)
            elif not ok:
                self.failed += n
            if not ((ok or rejected is not None) and in_order):
                self.broken = True
            elif not self.broken and not self._rejected:
                self.durable = self.settled
            return in_order

    def take_rejected(self) -> list[Rejected]:
        """The rejected batches not yet taken, oldest first; ``durable`` moves past them now."""
        with self._lock:
            out, self._rejected = self._rejected, []
            if not self.broken:
                self.durable = self.settled
            return out


class _GiveUp(Exception):
    """Raised from the retry callback to stop retrying a batch (sink failed or closing)."""


class InfluxSink:
    """Writes line protocol to InfluxDB through a batching WriteApi; see the module docstring."""

    name: ClassVar[str] = "influx"
    Config: ClassVar[type[InfluxConfig]] = InfluxConfig

    def __init__(self, config: InfluxConfig) -> None:
        self.config = config
        self._ledger = _Ledger(config.max_pending_points)
        self._submit_lock = threading.Lock()  # keeps ledger order == WriteApi order across callers
        self._failure: str | None = None
        self._closed = False
        self._giving_up = False
        self._retries = 0
        self._batches_ok = 0
        self._rejected_batches = 0
        self._outage = False
        self._options = config.write_options()
        host = urlsplit(config.url).hostname or ""
        if urlsplit(config.url).scheme == "http" and not is_loopback(host):
            log.warning("InfluxDB %s is plain http://: the API token crosses the network in clear; use https://",
                        config.url)
        self._client = InfluxDBClient(
            url=config.url, token=config.token.get_secret_value(), org=config.org,
            timeout=round(config.timeout * 1000), verify_ssl=config.verify_ssl,
            ssl_ca_cert=str(config.ssl_ca_cert) if config.ssl_ca_cert else None, enable_gzip=config.gzip,
        )
        self._write_api = self._client.write_api(
            write_options=self._options, success_callback=self._on_success,
            error_callback=self._on_error, retry_callback=self._on_retry,
        )
        self._timers: weakref.WeakSet[EventLoopScheduler] = weakref.WeakSet()
        self._track_window_timers()

    def _track_window_timers(self) -> None:
        # Record the event loop of each window timer so close() can end it (module docstring).
        window = getattr(self._write_api, "_window_scheduler", None)
        if not isinstance(window, NewThreadScheduler):
            return
        make, timers = window.thread_factory, self._timers

        def factory(target: Callable[[], None]) -> Any:
            owner = getattr(target, "__self__", None)
            if isinstance(owner, EventLoopScheduler):
                timers.add(owner)
            return make(target)

        window.thread_factory = factory

    # -- the Sink contract -------------------------------------------------------------------------

    def write(self, lines: Sequence[str]) -> int:
        """Queue *lines* (line protocol, ns timestamps) and return the ticket of the last one.

        Raises :class:`SinkBackpressure` (nothing queued) when ``max_pending_points`` would be
        exceeded, :class:`SinkFailed` after a permanent failure or close, ValueError for a line
        with a line break.
        """
        self.raise_if_failed()
        if self._closed:
            raise SinkFailed("InfluxDB sink is closed")
        if not lines:
            return self._ledger.submitted
        check_lines(lines)
        encoded = [line.encode() for line in lines]
        with self._submit_lock:
            ticket = self._ledger.submit(encoded, self.config.flush_interval)
            try:
                self._write_api.write(self.config.bucket, self.config.org, encoded, WritePrecision.NS)
            except Exception as e:  # e.g. no thread to schedule on at interpreter exit: the ledger is off now
                self._fail(f"cannot queue points for {self.config.url}: {type(e).__name__}: {e}")
                raise SinkFailed(self._failure) from e
        return ticket

    def durable(self, ticket: int) -> bool:
        """Whether the store confirmed every line up to *ticket*."""
        return ticket <= self._ledger.durable

    def raise_if_failed(self) -> None:
        if self._failure is not None:
            raise SinkFailed(self._failure)

    def take_rejected(self) -> list[Rejected]:
        """Batches the store refused for good (:data:`REJECT_STATUSES`) since the last call, oldest
        first; the lines after them become durable once they are taken."""
        return self._ledger.take_rejected()

    def close(self, timeout: float = 10.0) -> None:
        """Send what is pending and wait up to *timeout* s for it; then stop retrying whatever is
        left (not durable, so the processor replays it) and release the threads."""
        if self._closed:
            return
        self._closed = True
        self._options.max_close_wait = max(100, round(timeout * 1000))  # read by WriteApi.close()
        self._write_api.close()
        left = self._ledger.pending
        if left:
            self._giving_up = True  # the next retry of the running batch raises _GiveUp
            log.warning("InfluxDB sink closed with %d points not written (%s); they are not durable",
                        left, self.config.url)
        self._options.write_scheduler.executor.shutdown(wait=not left, cancel_futures=True)
        for timer in list(self._timers):
            timer.dispose()
        self._client.close()

    # -- callbacks, on the writer thread -----------------------------------------------------------

    def _on_success(self, conf: tuple[str, str, str], data: bytes) -> None:
        if not self._ledger.settle(data, ok=True):
            self._fail("ledger out of order: a confirmed batch is not the oldest pending lines")
        self._batches_ok += 1
        if self._outage:
            self._outage = False
            log.info("InfluxDB at %s accepts writes again after %d retries", self.config.url, self._retries)

    def _on_error(self, conf: tuple[str, str, str], data: bytes, exception: BaseException) -> None:
        status = getattr(exception, "status", None)
        if status in REJECT_STATUSES:
            self._reject(data, status, exception)
            return
        if not self._ledger.settle(data, ok=False):
            self._fail("ledger out of order: a failed batch is not the oldest pending lines")
        n = data.count(b"\n") + 1
        if isinstance(exception, _GiveUp) and self._closed:
            self._fail(f"closed with {n}+ points not written to {self.config.url}", quiet=True)  # close() warned
            return
        first = data.split(b"\n", 1)[0][:200].decode(errors="replace")
        self._fail(f"a batch of {n} points to {self.config.url} failed: "
                   f"{type(exception).__name__}: {str(exception)[:300]} (first point: {first})")

    def _reject(self, data: bytes, status: int, exception: BaseException) -> None:
        body = getattr(exception, "body", None) or getattr(exception, "reason", None) or ""
        if isinstance(body, bytes):
            body = body.decode(errors="replace")
        answer = " ".join(str(body).split())[:300]
        lines = data.decode(errors="replace").split("\n")
        reason = f"InfluxDB at {self.config.url} refused {len(lines)} points: HTTP {status}: {answer}"
        if not self._ledger.settle(data, ok=False, rejected=Rejected(lines, reason, status)):
            self._fail("ledger out of order: a rejected batch is not the oldest pending lines")
            return
        self._rejected_batches += 1
        if self._rejected_batches <= _LOGGED_REJECTIONS:
            log.error("%s (sent to the dead-letter topic; writing continues)", reason)

    def _on_retry(self, conf: tuple[str, str, str], data: bytes, exception: BaseException) -> None:
        self._retries += 1
        if self._failure is not None or self._giving_up:
            raise _GiveUp("sink failed or closed; not retrying")
        if not self._outage:
            self._outage = True
            log.warning("InfluxDB at %s does not accept writes (%s: %s); retrying, %d points pending",
                        self.config.url, type(exception).__name__, str(exception)[:200], self._ledger.pending)

    def _fail(self, why: str, quiet: bool = False) -> None:
        if self._failure is None:
            self._failure = why
            if not quiet:
                log.error("InfluxDB sink failed: %s", why)

    # -- introspection -----------------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Counters for self-monitoring: points submitted / stored / failed / rejected / pending,
        batches written and rejected, retries."""
        led = self._ledger
        return {"submitted": led.submitted, "durable": led.durable, "failed": led.failed,
                "rejected": led.rejected, "pending": led.pending, "batches_ok": self._batches_ok,
                "batches_rejected": self._rejected_batches, "retries": self._retries}

    def __repr__(self) -> str:
        c = self.config
        return (f"InfluxSink(url={c.url!r}, org={c.org!r}, bucket={c.bucket!r}, "
                f"pending={self._ledger.pending}, durable={self._ledger.durable})")
