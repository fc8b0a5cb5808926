"""One target's connection loop: connect, subscribe, read, detect stalls, reconnect, cancel.

``TargetSession.run`` loops until stopped:

1. open a channel (TLS, credentials), call Capabilities (checks reachability, credentials and
   that the switch speaks our encoding), open Subscribe and send the SubscriptionList. We never
   half-close the request side: some switches end the stream on half-close (pygnmi's close()).
2. read SubscribeResponses as bytes; a message laid out like one seen before is read by the
   ``FastDecoder``, any other is parsed and decoded the general way (``Decoder``); the samples
   are merged into the switch's ``BatchAssembler``; completed CounterBatches go to ``emit``.
   sync_response and a grace timer close open batches. Queue and PFC samples (``/qos``, opt-in) go to
   the switch's ``CongestionAssembler`` and leave as CongestionBatches through ``emit_congestion``.
   A message that fails to parse, decode or
   assemble is skipped and counted (``stats.malformed``, logged once per cause): one bad message
   never ends the stream.
3. a watchdog cancels the call when nothing arrived for the liveness timeout (a stalled stream:
   TCP alive, switch silent), including before the first sync_response; only silence it was running to see
   counts (``liveness``): samples waiting unread while the collector was starved of CPU are read, not dropped.
4. on failure: classify the gRPC status (a TLS target whose switch closed the connection while we
   connected is checked for a refused client certificate, ``tls_diagnosis``), count it by reason,
   log one clear line naming the target and the cause, wait (exponential backoff with jitter; slow
   retry for configuration-class errors), and go to 1 with a new session number.
   Deltas never span two sessions: the first sample after a reconnect is a BASELINE.

On stop the call is cancelled (RST_STREAM, so the switch stops sending) and the channel closed.
Counters for metrics are plain attributes (``stats``), read by the service's metrics collector.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

import grpc
from google.protobuf.message import DecodeError as ProtobufDecodeError
from pygnmi.spec.v080.gnmi_pb2 import CapabilityRequest, GetResponse, Notification, SubscribeResponse
from pygnmi.spec.v080.gnmi_pb2 import Encoding as PbEncoding
from pygnmi.spec.v080.gnmi_pb2_grpc import gNMIStub

from flowtracer.collectors.gnmi import polling, tls_diagnosis
from flowtracer.collectors.gnmi.backoff import Backoff, ErrorClass, classify, may_refuse_client
from flowtracer.collectors.gnmi.channel import (
    ENCODING_NAMES,
    connection_for,
    get_request,
    gnmi_for,
    subscribe_request,
    subscriptions_for,
    target_addressed,
)
from flowtracer.collectors.gnmi.config import ConfigError, Gnmi, Target, TargetMode
from flowtracer.collectors.gnmi.counters.assembly import Batch, BatchAssembler
from flowtracer.collectors.gnmi.counters.columns import EncodedBatch
from flowtracer.collectors.gnmi.counters.congestion import CongestionAssembler
from flowtracer.collectors.gnmi.counters.decode import Decoder
from flowtracer.collectors.gnmi.counters.layout import FastDecoder
from flowtracer.collectors.gnmi.counters.shapes import merge_shapes, shapes_text
from flowtracer.collectors.gnmi.liveness import Liveness
from flowtracer.collectors.once import OncePerCause
from flowtracer.fabric.platform_profiles import load_profile

log = logging.getLogger(__name__)


class State(StrEnum):
    IDLE = "idle"
    CONNECTING = "connecting"
    SYNCING = "syncing"  # subscribed, before sync_response
    UP = "up"
    BACKOFF = "backoff"
    STOPPED = "stopped"


class Stalled(Exception):
    """No message within the liveness timeout."""


class StreamEnded(Exception):
    """The switch ended the stream with status OK."""


class TargetRejected(Exception):
    """The target does not fit our subscription (e.g. encoding); configuration class."""


@dataclass
class SessionStats:
    """Monotonic counts and current state of one target (read by the metrics collector)."""

    state: State = State.IDLE
    session: int = 0
    messages: int = 0
    counter_updates: int = 0
    #: Queue and PFC leaves received (counters and watermarks).
    congestion_updates: int = 0
    congestion_batches: int = 0
    decode_errors: int = 0
    #: Updates decoded but not read (not a leaf flowtracer uses), by path shape (``counters/shapes.py``).
    ignored: dict[str, int] = field(default_factory=dict)
    #: Messages skipped because they could not be read, by reason: ``unparseable`` (not a
    #: SubscribeResponse) or ``undecodable`` (parsed, but decoding or assembling it failed).
    malformed: dict[str, int] = field(default_factory=dict)
    reconnects: int = 0
    batches: int = 0
    last_rx: float = 0.0  # time.monotonic() of the last message, 0 = never
    up_since: float = 0.0
    last_error: str = ""
    last_error_class: str = ""
    #: Failed attempts and ended sessions by reason (``backoff.classify``, ``tls_diagnosis``, and
    #: ``config``, ``rejected_target``, ``stalled``, ``stream_ended``, ``unexpected``).
    failures: dict[str, int] = field(default_factory=dict)


class TargetSession:
    """The connection loop of one target. ``emit(batch)`` receives every CounterBatch (or the same, serialized),
    ``emit_congestion(batch)`` every CongestionBatch, serialized (None: they are built and dropped)."""

    def __init__(self, target: Target, gnmi: Gnmi, *, collector_id: str,
                 emit: Callable[[Batch], None], decoder: Decoder | None = None,
                 emit_congestion: Callable[[EncodedBatch], None] | None = None) -> None:
        self.target = target
        self.decoder = decoder or Decoder(profile=load_profile(target.platform))
        self.fast = FastDecoder(self.decoder)  # this switch's repeating notification layouts
        self.gnmi = gnmi = gnmi_for(target, gnmi)
        self.emit = emit
        self.stats = SessionStats()
        # The interval a delta is expected to span (GAP beyond gap_factor x it): the target's own when the
        # collector drives the reads, else each family's shortest SAMPLE interval.
        def interval_ns(family: str) -> int:
            return target.interval_ns if target.polled else gnmi.interval_ns(family)
        self.assembler = BatchAssembler(
            target.name, collector_id=collector_id, counter_bits=target.counter_bits,
            if_interval_ns=interval_ns("/interfaces"), nh_interval_ns=interval_ns("/network-instances"),
            gap_factor=gnmi.gap_factor)
        self.congestion = CongestionAssembler(target.name, collector_id=collector_id, counter_bits=target.counter_bits,
                                              interval_ns=interval_ns("/qos"), gap_factor=gnmi.gap_factor)
        self.emit_congestion = emit_congestion
        self.backoff = Backoff(gnmi.backoff.base, gnmi.backoff.cap, gnmi.backoff.reset_after)
        self.liveness_s = gnmi.liveness_s()
        if target.polled:  # a message every interval at least: silence for 3 of them is a stall
            self.liveness_s = max(self.liveness_s if gnmi.liveness_timeout > 0 else 2.0, 3 * target.interval)
        prefix, self._subs, dropped = target_addressed(subscriptions_for(target, gnmi), target)
        if dropped and prefix is not None:  # one Subscribe, one prefix target: the other DBs' paths are not read
            log.warning("gNMI %s: addressing: target reads %s only; not subscribed: %s", target.name, prefix.target,
                        ", ".join(s.path for s in dropped))
        self._request = (get_request(self._subs, gnmi, prefix) if target.mode is TargetMode.GET
                         else subscribe_request(self._subs, gnmi, target.mode, prefix))
        self._call: grpc.aio.Call | None = None
        self._channel: grpc.aio.Channel | None = None
        self._stalled = False
        self._grace: asyncio.TimerHandle | None = None
        self._stop = asyncio.Event()
        self._malformed_once = OncePerCause()  # (reason, exception type): logged once

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def where(self) -> str:
        return f"{self.target.name} ({self.target.address}:{self.target.port})"

    def stop(self) -> None:
        """Ask ``run`` to end: the current call is cancelled right away."""
        self._stop.set()
        if self._call is not None:
            self._call.cancel()

    # -- the loop ------------------------------------------------------------------------------

    async def run(self, connect_slots: asyncio.Semaphore | None = None, start_delay: float = 0.0) -> None:
        """Connect and stream until ``stop()``; never raises except CancelledError."""
        if start_delay > 0 and await self._sleep(start_delay):
            return
        slots = connect_slots or asyncio.Semaphore(1)
        while not self._stop.is_set():
            error_class, reason = ErrorClass.TRANSIENT, "stream_ended"
            try:
                await self._attempt(slots)
                raise StreamEnded("the switch ended the stream")
            except asyncio.CancelledError:
                if self._stop.is_set():
                    break
                raise
            except ConfigError as e:
                error_class, reason, msg = ErrorClass.CONFIG, "config", f"configuration: {e}"
            except TargetRejected as e:
                error_class, reason, msg = ErrorClass.CONFIG, "rejected_target", str(e)
            except grpc.aio.AioRpcError as e:
                if self._stop.is_set():
                    break
                if self._stalled:
                    reason = "stalled"
                    msg = f"stalled: no message for {self.liveness_s:.1f} s (liveness timeout); reconnecting"
                else:
                    error_class, reason, hint = await self._explain(e)
                    msg = f"{e.code().name}: {hint}: {e.details()}"
            except (StreamEnded, Stalled, ConnectionError, OSError) as e:
                if self._stop.is_set():
                    break
                reason = ("stalled" if isinstance(e, Stalled) else "stream_ended" if isinstance(e, StreamEnded)
                          else "unreachable")
                msg = str(e)
            except Exception as e:  # a bug or a malformed message must not end collection
                log.exception("gNMI %s: unexpected error", self.where)
                reason, msg = "unexpected", f"unexpected error: {e!r}"
            finally:
                await self._close_call()
            if self._stop.is_set():
                break
            self.backoff.healthy(time.monotonic() - self.stats.up_since if self.stats.up_since else 0.0)
            delay = self.gnmi.backoff.slow_retry if error_class is ErrorClass.CONFIG else self.backoff.next_delay()
            self.stats.state, self.stats.up_since = State.BACKOFF, 0.0
            self.stats.last_error, self.stats.last_error_class = msg, error_class.value
            self.stats.failures[reason] = self.stats.failures.get(reason, 0) + 1
            level = logging.ERROR if error_class is ErrorClass.CONFIG else logging.WARNING
            log.log(level, "gNMI %s: %s [%s]; retrying in %.1f s", self.where, msg, reason, delay)
            self.stats.reconnects += 1
            if await self._sleep(delay):
                break
        self._flush_emit()
        self.stats.state = State.STOPPED

    async def _explain(self, e: grpc.aio.AioRpcError) -> tuple[ErrorClass, str, str]:
        """(error class, reason, hint) of a failed call; a TLS connection the switch closed or refused
        while we connected is checked for a refused client certificate (grpc cannot tell, see tls_diagnosis)."""
        details = e.details() or ""
        if (self.target.tls.enabled and self.stats.state is State.CONNECTING
                and e.code() == grpc.StatusCode.UNAVAILABLE and may_refuse_client(details)):
            verdict = await tls_diagnosis.diagnose(self.target.address, self.target.port, self.target.tls,
                                                   self.gnmi.connect_timeout)
            if verdict is not None:
                return ErrorClass.CONFIG, *verdict
        return classify(e.code(), details)

    async def _sleep(self, seconds: float) -> bool:
        """Sleep, or return True early when stopped."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)
        return self._stop.is_set()

    async def _attempt(self, slots: asyncio.Semaphore) -> None:
        self.stats.state = State.CONNECTING
        self._stalled = False
        async with slots:  # bounded concurrency for TLS handshakes and Capabilities
            conn = await connection_for(self.target, self.gnmi)
            self._channel = channel = conn.open()
            stub = gNMIStub(channel)
            md = conn.metadata or None
            try:
                caps = await stub.Capabilities(CapabilityRequest(), metadata=md, timeout=self.gnmi.connect_timeout)
                self._check_capabilities(caps.supported_encodings)
            except grpc.aio.AioRpcError as e:
                if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                log.info("gNMI %s: no Capabilities RPC; subscribing anyway", self.where)
            call = None
            if not self.target.polled:
                call = self._call = polling.open_subscribe(channel, md)
                await call.write(self._request)
        self.stats.session += 1
        self._emit_all(self.assembler.start_session(self.stats.session))
        self._emit_congestion(self.congestion.start_session(self.stats.session))
        self.stats.state = State.SYNCING
        self.stats.last_rx = time.monotonic()
        log.info("gNMI %s: subscribed (session %d, %d paths, %s, %s, platform %s)", self.where, self.stats.session,
                 len(self._subs), self.gnmi.encoding.value, self._mode_text(), self.target.platform)
        watchdog = asyncio.create_task(self._watchdog()) if self.liveness_s > 0 else None
        try:
            if call is not None:
                await self._read(call)
            else:
                await polling.drive(self.target.mode, channel, md, self._request, self.target.interval,
                                    self.liveness_s, self)
        except asyncio.CancelledError:
            if self._stalled and not self._stop.is_set():
                t = asyncio.current_task()
                if t is None or not t.cancelling():
                    raise Stalled(f"stalled: no message for {self.liveness_s:.1f} s (liveness timeout)") from None
            raise
        finally:
            if watchdog is not None:
                watchdog.cancel()

    def _mode_text(self) -> str:
        t = self.target
        return f"{t.mode.value} every {t.interval:g} s" if t.polled else t.mode.value

    def _check_capabilities(self, encodings: list[int] | object) -> None:
        supported = list(encodings)  # type: ignore[call-overload]
        want = ENCODING_NAMES[self.gnmi.encoding]
        names = [PbEncoding.Name(e) if e in PbEncoding.values() else str(e) for e in supported]
        if supported and want not in names:
            raise TargetRejected(f"the switch does not support encoding {want} (it offers {', '.join(names)}): "
                                 "set gnmi.encoding")

    async def _read(self, call: grpc.aio.StreamStreamCall) -> None:
        on_message = self.on_message
        while True:
            raw: bytes = await call.read()
            if raw is grpc.aio.EOF:
                return
            on_message(raw)

    def on_message(self, raw: bytes) -> str | None:
        """Read one serialized SubscribeResponse into the assemblers; its kind (None when skipped as
        malformed or laid out as one seen before)."""
        st = self.stats
        now = time.monotonic()
        st.last_rx = now
        st.messages += 1
        asm = self.assembler
        opened, kind = asm.open_since, None
        # The per-message boundary: whatever one message does to the parse, decode or assembly
        # is that message's fault; it is skipped and counted, and the stream goes on.
        try:
            m = self.fast.match(raw)
            if m is not None:  # a layout seen before: its columns go to the assembler as they are
                lay = m[0]
                st.counter_updates += lay.counter_updates
                if lay.ignored_shapes:
                    self._count_ignored(lay.ignored_shapes)
                out = asm.add_part(lay, m[1], time.time_ns()) if lay.counter_updates or len(lay.st_sel) else []
                if lay.cg:
                    st.congestion_updates += lay.congestion_updates
                    self._emit_congestion(self.congestion.add_part(lay, m[1], time.time_ns()))
                    if self._grace is None:
                        self._arm_grace()
            else:  # parse and decode the general way
                resp = SubscribeResponse.FromString(raw)
                kind = resp.WhichOneof("response")
                if kind == "sync_response":
                    out = asm.sync()
                    self._emit_congestion(self.congestion.flush(time.time_ns()))
                elif kind == "error":  # deprecated in gNMI 0.7, still sent by some switches
                    st.decode_errors += 1
                    log.warning("gNMI %s: error in stream: %s", self.where, resp.error.message)
                    return kind
                elif kind != "update":
                    return kind
                else:
                    out = self._add_notification(resp.update, raw)
        except Exception as e:  # see above: one message never ends the stream
            self._skip_malformed(raw, e)
            return None
        if out:
            self._emit_all(out)
        if kind == "sync_response":
            self._synced(now)
        elif asm.open_since is not None and asm.open_since != opened:
            self._arm_grace()
        return kind

    def on_get(self, raw: bytes) -> None:
        """Read one serialized GetResponse: its Notifications are one sample instant, closed at once."""
        st = self.stats
        now = st.last_rx = time.monotonic()
        st.messages += 1
        try:
            out: list[Batch] = []
            for n in GetResponse.FromString(raw).notification:
                out += self._add_notification(n, None)
            out += self.assembler.sync()
            self._emit_congestion(self.congestion.flush(time.time_ns()))
        except Exception as e:  # as on_message: one bad response is skipped and counted
            self._skip_malformed(raw, e)
            return
        self._emit_all(out)
        self._synced(now)

    def _add_notification(self, notification: Notification, raw: bytes | None) -> list[Batch]:
        """Decode one Notification the general way (learning its layout when it came as the SubscribeResponse
        ``raw``) and add it to the assemblers; the completed CounterBatches."""
        st = self.stats
        s = self.decoder.decode(notification)
        if raw is not None:
            self.fast.learn(raw, notification, s)
        if s.errors:
            st.decode_errors += len(s.errors)
            log.debug("gNMI %s: decode errors: %s", self.where, s.errors[:3])
        if s.ignored_shapes:
            self._count_ignored(s.ignored_shapes)
        st.counter_updates += len(s.if_counters) + len(s.nh_counters)
        out = self.assembler.add(s, time.time_ns())
        if s.congestion_updates:
            st.congestion_updates += s.congestion_updates
            self._emit_congestion(self.congestion.add(s, time.time_ns()))
            if self._grace is None:
                self._arm_grace()
        return out

    def _count_ignored(self, shapes: dict[str, int]) -> None:
        """Count updates not read, by shape; new shapes are logged, one line per message (named, not lost)."""
        if new := merge_shapes(self.stats.ignored, shapes):
            log.info("gNMI %s: updates not read by the %s profile, of %d new shape(s): %s (counted in flowtracer_gnmi_"
                     "ignored_updates_total{shape})", self.where, self.target.platform, len(new), shapes_text(new))

    def _synced(self, now: float) -> None:
        st = self.stats
        if st.state is not State.UP:
            st.state, st.up_since = State.UP, now
            log.info("gNMI %s: synced (session %d)", self.where, st.session)

    # -- the Reader of polling.drive -------------------------------------------------------------

    def set_call(self, call: grpc.aio.Call | None) -> None:
        self._call = call  # type: ignore[assignment]

    async def pause(self, seconds: float) -> bool:
        return await self._sleep(seconds)

    def _skip_malformed(self, raw: bytes, e: Exception) -> None:
        """Count a message that could not be read; log the first of each cause on this target."""
        reason = "unparseable" if isinstance(e, ProtobufDecodeError) else "undecodable"
        self.stats.malformed[reason] = self.stats.malformed.get(reason, 0) + 1
        if not self._malformed_once.first((reason, type(e).__name__)):
            return
        log.warning("gNMI %s: skipped a malformed message (%s, %d bytes): %s; the stream goes on, further ones "
                    "of this cause are only counted (flowtracer_gnmi_malformed_messages_total)",
                    self.where, reason, len(raw), e, exc_info=reason != "unparseable")

    # -- timers --------------------------------------------------------------------------------

    async def _watchdog(self) -> None:
        period = max(0.05, self.liveness_s / 4)
        # Silence counts only while this loop ran to see it: a starved collector is not a silent switch (liveness.py).
        watch = Liveness(self.liveness_s, period, time.monotonic())
        while True:
            await asyncio.sleep(period)
            if watch.stalled(time.monotonic(), self.stats.last_rx):
                self._stalled = True
                if self._call is not None:
                    self._call.cancel()
                return

    def _arm_grace(self, delay: float | None = None) -> None:
        if self._grace is not None:
            self._grace.cancel()
        self._grace = asyncio.get_running_loop().call_later(
            self.gnmi.batch_grace if delay is None else delay, self._grace_due)

    def _grace_due(self) -> None:
        """Emit the open batch if no message came for ``batch_grace`` since it was touched.

        When the loop runs late (busy with other targets), unread messages of this instant may
        be waiting in gRPC's buffers: wait another round rather than cut the instant in two.
        """
        handle, self._grace = self._grace, None
        if self.assembler.open_since is None:
            self._emit_congestion(self.congestion.flush(time.time_ns()))
            return
        grace = self.gnmi.batch_grace
        lag = asyncio.get_running_loop().time() - handle.when() if handle is not None else 0.0
        quiet = time.monotonic() - self.stats.last_rx
        if quiet >= grace * 0.9 and lag < min(0.02, grace / 4):
            self._emit_all(self.assembler.flush())
            self._emit_congestion(self.congestion.flush(time.time_ns()))
        else:
            self._arm_grace(max(grace - quiet, grace / 4))

    # -- output and teardown -------------------------------------------------------------------

    def _emit_all(self, batches: list[Batch]) -> None:
        for b in batches:
            self.stats.batches += 1
            self.emit(b)

    def _emit_congestion(self, batches: list[EncodedBatch]) -> None:
        self.stats.congestion_batches += len(batches)
        if self.emit_congestion is not None:
            for b in batches:
                self.emit_congestion(b)

    def _flush_emit(self) -> None:
        self._emit_all(self.assembler.flush())
        self._emit_congestion(self.congestion.flush(time.time_ns()))

    async def _close_call(self) -> None:
        """Cancel the call for real (RST_STREAM) and close the channel."""
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None
        self._flush_emit()
        call, self._call = self._call, None
        if call is not None:
            call.cancel()
        channel, self._channel = self._channel, None
        if channel is not None:
            with contextlib.suppress(Exception):
                await channel.close(grace=None)
