"""The lifecycle every throw-away server of the test bed shares (Tansu, VictoriaMetrics).

:class:`ManagedProcess` starts one server binary on a loopback port (a free one unless told),
with its output in a log file, waits until a readiness probe says it is *our* server that
answers, and always stops it again: :meth:`~ManagedProcess.stop` (SIGTERM, wait, SIGKILL), the
context manager, and an ``atexit`` hook as the last resort. A subclass says how to build the
command line and how to probe; errors are raised as the subclass's own exception type.
"""

from __future__ import annotations

import atexit
import errno
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any, ClassVar, Self

HOST = "127.0.0.1"


def free_port(host: str = HOST) -> int:
    """A TCP port on *host* that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_port_free(host: str, port: int, what: str, error: type[Exception] = RuntimeError) -> None:
    """Raise *error* ``cannot start <what>: port <host>:<port> is already in use`` when *port* on
    *host* cannot be bound (someone listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # SO_REUSEADDR as the servers set it, so that a port in TIME_WAIT counts as free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise error(f"cannot start {what}: port {host}:{port} is already in use") from e
            raise


def log_tail(path: Path | None, max_chars: int = 4000) -> str:
    """The last *max_chars* characters of a log file, for error messages."""
    if path is None:
        return "<no log>"
    try:
        return path.read_text(errors="replace")[-max_chars:]
    except OSError:
        return "<no log>"


class ManagedProcess:
    """One server process on ``127.0.0.1``, started and stopped by us.

    A subclass sets the class attributes and implements :meth:`_command` and :meth:`_probe`
    (and :meth:`_accept` when a successful probe needs a further check). :meth:`start` and
    :meth:`stop` are idempotent.

    Args:
        port: TCP port to listen on; ``None`` picks a free one. A port in use raises ``_error``.
        ready_timeout_s: seconds to wait for the readiness probe to succeed.
        stop_timeout_s: seconds to wait after SIGTERM before SIGKILL.
        log_dir: directory for the log file (kept after stop); ``None`` puts it in the temporary
            directory that :meth:`stop` removes.
    """

    _error: ClassVar[type[Exception]] = RuntimeError
    """Raised for every failure to start (the subclass's own error type)."""
    _title: ClassVar[str] = "server"
    """Starts the sentences of messages: ``<title> exited with status ...``."""
    _what: ClassVar[str] = "the server"
    """In the middle of messages: ``cannot start <what>: ...``, ``<what> is not started``."""
    _log_name: ClassVar[str] = "server.log"
    _tmp_prefix: ClassVar[str] = "flowtracer-"
    _always_tmpdir: ClassVar[bool] = False
    """Create the temporary directory even when ``log_dir`` is given (e.g. for storage)."""
    _probe_errors: ClassVar[tuple[type[BaseException], ...]] = (OSError,)
    """What a failed probe raises while the server is still coming up (retried until the timeout)."""

    def __init__(
        self,
        port: int | None = None,
        *,
        ready_timeout_s: float = 30.0,
        stop_timeout_s: float = 10.0,
        log_dir: Path | None = None,
    ) -> None:
        self._requested_port = port
        self.ready_timeout_s = ready_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._log_dir = log_dir
        self._tmpdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._port: int | None = None
        self.log_path: Path | None = None
        self.ready_after_s: float | None = None
        """Seconds from process start until the readiness probe succeeded."""

    # -- for subclasses --------------------------------------------------------------------------

    def _binary(self) -> Path:
        """The server executable; raise ``_error`` naming where it comes from when it is missing.
        Called first, before anything is created."""
        raise NotImplementedError

    def _command(self, binary: Path, port: int) -> tuple[list[str], dict[str, Any]]:
        """(argv, extra ``subprocess.Popen`` keyword arguments) to serve on *port*. Called after
        the port check, with the log directory in place (``_tmpdir`` as the class asked)."""
        raise NotImplementedError

    def _probe(self) -> Any:
        """One readiness check; raises one of ``probe_errors`` while not ready, else returns what
        :meth:`_accept` is given."""
        raise NotImplementedError

    def _accept(self, answer: Any) -> bool:
        """Whether the server that answered the probe with *answer* is ready and ours; raise
        ``_error`` when another server answers."""
        return True

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the server and block until it is ready; returns ``self``."""
        if self._proc is not None:
            return self
        binary = self._binary()
        port = self._requested_port if self._requested_port is not None else free_port()
        check_port_free(HOST, port, self._what, self._error)
        if self._always_tmpdir or self._log_dir is None:
            self._tmpdir = Path(tempfile.mkdtemp(prefix=self._tmp_prefix))
        log_dir = self._log_dir if self._log_dir is not None else self._tmpdir
        assert log_dir is not None
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / self._log_name
        self._log_file = self.log_path.open("wb")
        argv, popen_kwargs = self._command(binary, port)
        self._port = port
        started = time.monotonic()
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT, **popen_kwargs,
        )
        atexit.register(self.stop)
        try:
            self._wait_ready(started)
        except BaseException:
            self.stop()
            raise
        self.ready_after_s = time.monotonic() - started
        return self

    def _wait_ready(self, started: float) -> None:
        """Probe until :meth:`_accept` says ready; raise ``_error`` if the process exits or the
        timeout passes first."""
        assert self._proc is not None
        deadline = started + self.ready_timeout_s
        last_error: BaseException | None = None
        while True:
            code = self._proc.poll()
            if code is not None:
                raise self._error(
                    f"{self._title} exited with status {code} before it was ready (port "
                    f"{self._port}); log {self.log_path}:\n{log_tail(self.log_path)}"
                )
            try:
                answer = self._probe()
            except self._probe_errors as e:
                last_error = e
            else:
                if self._accept(answer):
                    return
            if time.monotonic() > deadline:
                raise self._error(
                    f"{self._title} on port {self._port} not ready after {self.ready_timeout_s} s "
                    f"(last error: {last_error!r}); log {self.log_path}:\n{log_tail(self.log_path)}"
                )
            time.sleep(0.02)  # poll interval

    def stop(self) -> None:
        """Stop the server: SIGTERM, wait, SIGKILL after ``stop_timeout_s``; remove the temporary
        directory. Safe to call twice."""
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
        self._port = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- use -------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The server process's id while it is started (benchmarks read its CPU time); None when stopped."""
        return self._proc.pid if self._proc is not None else None

    def resident_bytes(self) -> int | None:
        """The server process's resident memory (``VmRSS``), bytes; None when it is not running."""
        pid = self.pid
        if pid is None:
            return None
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024  # kB
        except OSError:
            return None
        return None

    @property
    def port(self) -> int:
        """The listen port; raises ``_error`` when the server is not started."""
        if self._port is None:
            raise self._error(f"{self._what} is not started")
        return self._port
