"""A throw-away S3 object store for the embedded broker: ``embedded/s3_server.py`` on a loopback port.

Why: the embedded Tansu broker frees no record with its memory storage (docs/operations.md, "The
embedded broker's memory"), but its ``s3`` storage engine keeps every record batch as one object in
a bucket, and an object can be deleted. :class:`ObjectStore` runs the project's small S3 server
(an ordered key index in memory, the objects in files of its temporary directory; why not s3rver:
its docstring) with one bucket; :class:`~flowtracer.embedded.tansu.TansuBroker` stores its records
there (``object_store=``), and the object sweeper (``embedded/object_sweeper.py``) applies each
topic's retention and compaction by deleting batch objects. The broker then holds no record, and
the store holds what retention keeps.
"""

from __future__ import annotations

import functools
import json
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from flowtracer.embedded.managed_process import HOST, ManagedProcess

ACCESS_KEY = "flowtracer"
"""Credentials for clients that insist on signing (Tansu's engine): the store checks none, they are no secret."""
SECRET_KEY = "flowtracer"
REGION = "us-east-1"


def store_stats(endpoint: str, timeout_s: float = 5.0, topics: bool = False) -> dict[str, Any]:
    """The stats of the store at ``endpoint`` (:meth:`ObjectStore.stats`); raises OSError when it does not answer."""
    query = "?detail=topics" if topics else ""
    try:
        with urllib.request.urlopen(f"{endpoint}/_flowtracer/stats{query}", timeout=timeout_s) as r:
            return dict(json.loads(r.read()))
    except (urllib.error.URLError, ValueError) as e:
        raise OSError(f"object store stats at {endpoint}: {e}") from None


class ObjectStoreError(RuntimeError):
    """The object store cannot start or does not become ready."""


class ObjectStore(ManagedProcess):
    """One S3 server process on ``127.0.0.1`` with one bucket.

    Args:
        port: TCP port; ``None`` picks a free one.
        ready_timeout_s, stop_timeout_s, log_dir: as :class:`~flowtracer.embedded.managed_process.ManagedProcess`.
    """

    _error = ObjectStoreError
    _title = "object store (s3_server)"
    _what = "the object store"
    _log_name = "object-store.log"
    _tmp_prefix = "flowtracer-objects-"
    _always_tmpdir = True  # the objects' files live there, also when the log is kept elsewhere

    @functools.cached_property
    def bucket(self) -> str:
        """Unique per store: the readiness probe tells our server from another one by it."""
        return f"flowtracer-{uuid.uuid4().hex[:12]}"

    # -- lifecycle (ManagedProcess) --------------------------------------------------------------

    def _binary(self) -> Path:
        return Path(sys.executable)

    def _command(self, binary: Path, port: int) -> tuple[list[str], dict[str, Any]]:
        assert self._tmpdir is not None
        return [str(binary), "-m", "flowtracer.embedded.s3_server", "--host", HOST, "--port", str(port),
                "--bucket", self.bucket, "--directory", str(self._tmpdir / "objects")], {}

    def _probe(self) -> dict[str, Any]:
        """The store's stats: they name its bucket."""
        return self.stats(timeout_s=1.0)

    def _accept(self, stats: dict[str, Any]) -> bool:
        if stats.get("bucket") != self.bucket:
            raise ObjectStoreError(f"another object store answers on port {self._port}; ours could not bind it")
        return True

    # -- use -------------------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{HOST}:{self.port}"

    def client_env(self) -> dict[str, str]:
        """Environment for a client of this store that reads AWS's variables (Tansu's ``s3`` engine)."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT": self.endpoint, "AWS_ALLOW_HTTP": "true"}

    def stats(self, timeout_s: float = 5.0, topics: bool = False) -> dict[str, Any]:
        """``{"bucket", "objects", "bytes"}``: what the store holds now (bytes of object data); with ``topics``
        also ``"topics"``: Tansu topic -> ``{"objects", "bytes"}``."""
        return store_stats(self.endpoint, timeout_s, topics)

    def __repr__(self) -> str:
        state = f"endpoint={self.endpoint}" if self._port is not None else "stopped"
        return f"ObjectStore({state}, bucket={self.bucket!r})"
