"""The ``file`` sink: line protocol appended to a local file that ``influx write --file`` loads.

This is the demo's output when no InfluxDB runs: one point per line, ns timestamps (``influx
write``'s default precision), in the order written::

    influx write --bucket flowtracer --file flowtracer.lp

Durability: :meth:`FileSink.durable` flushes and (by default) fsyncs before it answers True, so
fsyncs are paid once per commit, not per write. A crash can leave a torn last line; it was never
durable, so the next :class:`FileSink` on the same path cuts it off (the processor replays those
points) and ``influx write`` never sees half a line.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from flowtracer.stream.sinks.base import Rejected, SinkFailed, check_lines

log = logging.getLogger(__name__)

_TAIL_CHUNK = 64 * 1024  # bytes read at a time when looking for the last complete line


class FileSinkConfig(BaseModel):
    """Config of the ``file`` sink."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path
    """The line-protocol file; created with its parent directories, appended to if it exists."""
    fsync: bool = True
    """Durable = on disk (fsync). False: durable once handed to the OS (survives a processor
    crash, not a power loss) and much cheaper on slow disks."""


def _cut_torn_tail(fd: int, size: int) -> int:
    """Size of the file when cut after its last newline (0 when it has none)."""
    end = size
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        chunk = os.pread(fd, end - start, start)
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            return start + nl + 1
        end = start
    return 0


class FileSink:
    """Appends line protocol to :attr:`FileSinkConfig.path`; see the module docstring.

    Tickets count lines written through this instance. Writes go to a userspace buffer and are
    flushed (and fsynced) when :meth:`durable` is asked about lines not yet on disk, or at close.
    Local disks do not apply backpressure here; an I/O error (disk full) fails the sink.
    """

    name: ClassVar[str] = "file"
    Config: ClassVar[type[FileSinkConfig]] = FileSinkConfig

    def __init__(self, config: FileSinkConfig) -> None:
        self.config = config
        config.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = config.path.open("a+b")  # readable too, to find a torn tail
        size = self._file.seek(0, os.SEEK_END)
        keep = _cut_torn_tail(self._file.fileno(), size) if size else 0
        if keep != size:
            log.warning("%s: cut %d bytes of a torn last line (never durable; they are replayed)",
                        config.path, size - keep)
            self._file.truncate(keep)
        self._written = 0  # lines handed to the buffer
        self._synced = 0  # lines flushed (and fsynced)
        self._failure: str | None = None
        self._closed = False

    def write(self, lines: Sequence[str]) -> int:
        """Append *lines*; returns the ticket of the last one. Raises :class:`SinkFailed` on an
        I/O error or after close, ValueError for a line with a line break."""
        self.raise_if_failed()
        if self._closed:
            raise SinkFailed(f"file sink {self.config.path} is closed")
        if not lines:
            return self._written
        check_lines(lines)
        data = ("\n".join(lines) + "\n").encode()
        try:
            self._file.write(data)
        except OSError as e:
            self._fail(f"cannot write {self.config.path}: {e.strerror or e}")
            raise SinkFailed(self._failure) from None
        self._written += len(lines)
        return self._written

    def _sync(self) -> None:
        try:
            self._file.flush()
            if self.config.fsync:
                os.fsync(self._file.fileno())
        except OSError as e:
            self._fail(f"cannot flush {self.config.path}: {e.strerror or e}")
        else:
            self._synced = self._written

    def durable(self, ticket: int) -> bool:
        """Whether lines up to *ticket* are on disk; flushes and fsyncs when they might not be."""
        if ticket > self._synced and self._failure is None and not self._closed:
            self._sync()
        return ticket <= self._synced

    def raise_if_failed(self) -> None:
        if self._failure is not None:
            raise SinkFailed(self._failure)

    def take_rejected(self) -> list[Rejected]:
        """A local file refuses nothing line by line (a failure fails the sink)."""
        return []

    def _fail(self, why: str) -> None:
        if self._failure is None:
            self._failure = why
            log.error("file sink failed: %s", why)

    def close(self, timeout: float = 10.0) -> None:
        """Flush, fsync and close the file (*timeout* is not needed for a local file)."""
        if self._closed:
            return
        if self._failure is None:
            self._sync()
        self._closed = True
        try:
            self._file.close()  # nothing left in the buffer after a successful sync
        except OSError as e:
            self._fail(f"cannot close {self.config.path}: {e.strerror or e}")

    def __repr__(self) -> str:
        return f"FileSink(path={str(self.config.path)!r}, written={self._written}, durable={self._synced})"
