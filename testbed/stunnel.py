"""A TLS-terminating proxy (Debian's ``stunnel4``) in front of a loopback server, for tests that need
Kafka over TLS while the embedded broker (Tansu) listens in PLAINTEXT only.

:class:`TlsProxy` accepts TLS on a loopback port with the given server certificate and forwards the
decrypted bytes to ``127.0.0.1:<backend_port>``. Kafka clients follow the address the broker
advertises, so the broker behind it must advertise the proxy's address
(``TansuBroker(advertise=proxy.address)``), or clients would leave TLS after the bootstrap.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path
from typing import Any

from flowtracer.embedded.managed_process import HOST, ManagedProcess

PACKAGE = "stunnel4"
"""Debian package that ships the ``stunnel4`` binary."""


class TlsProxyError(RuntimeError):
    """stunnel4 is missing, cannot start, or does not listen in time."""


class TlsProxy(ManagedProcess):
    """One stunnel4 process: TLS on ``127.0.0.1:<port>`` -> plain TCP to ``127.0.0.1:<backend_port>``.

    Args:
        backend_port: where the decrypted connections go (the backend may start later: stunnel
            connects per client connection).
        cert_file, key_file: the server certificate (PEM) presented to clients, and its key.
        port: the TLS port; ``None`` picks a free one.
    """

    _error = TlsProxyError
    _title = "stunnel4"
    _what = "the TLS proxy"
    _log_name = "stunnel.log"
    _tmp_prefix = "flowtracer-stunnel-"
    _always_tmpdir = True

    def __init__(self, backend_port: int, cert_file: Path, key_file: Path, port: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(port, **kwargs)
        self.backend_port = backend_port
        self.cert_file = cert_file
        self.key_file = key_file

    def _binary(self) -> Path:
        found = shutil.which("stunnel4") or shutil.which("stunnel")
        if found is None:
            raise TlsProxyError(f"stunnel4 is not installed: apt-get install {PACKAGE} (or: make system-deps)")
        return Path(found)

    def _command(self, binary: Path, port: int) -> tuple[list[str], dict[str, Any]]:
        assert self._tmpdir is not None
        conf = self._tmpdir / "stunnel.conf"
        conf.write_text(
            "foreground = yes\npid =\ndebug = notice\n"
            f"[tls]\naccept = {HOST}:{port}\nconnect = {HOST}:{self.backend_port}\n"
            f"cert = {self.cert_file}\nkey = {self.key_file}\n",
            encoding="utf-8")
        return [str(binary), str(conf)], {}

    def _probe(self) -> bool:
        with socket.create_connection((HOST, self._port), timeout=0.5):  # type: ignore[arg-type]
            return True

    @property
    def address(self) -> str:
        """``"127.0.0.1:<port>"``: the TLS address clients bootstrap from and the broker advertises."""
        return f"{HOST}:{self.port}"
