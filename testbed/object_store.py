"""A throw-away S3 object store for the embedded broker: s3rver (npm), files on local disk.

Why: the embedded Tansu broker frees no record with its memory storage (docs/operations.md, "The
embedded broker's memory"), but its ``s3`` storage engine keeps every record batch as one object in
a bucket, and an object can be deleted. :class:`ObjectStore` runs s3rver 3.7.1 (a filesystem-backed
S3 server; ``testbed/objectstore/package.json``, installed by ``make setup`` with ``npm ci``) on a
loopback port with one bucket; :class:`~flowtracer.testbed.tansu.TansuBroker` stores its records
there (``object_store=``), and the object sweeper (``testbed/object_sweeper.py``) applies each
topic's retention and compaction by deleting batch objects. The broker then holds no record in
memory, and the store holds what retention keeps, on disk.

s3rver checks no credentials it is not given (it accepts the fixed key pair below, and unsigned
requests); it listens on 127.0.0.1 only, like every server of the test bed.
"""

from __future__ import annotations

import functools
import shutil
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from flowtracer.testbed.managed_process import HOST, ManagedProcess

PACKAGE_DIR = Path(__file__).resolve().parent / "objectstore"
"""Holds ``package.json`` and ``package-lock.json``; ``npm ci`` puts s3rver in its ``node_modules``."""
SCRIPT = PACKAGE_DIR / "node_modules" / "s3rver" / "bin" / "s3rver.js"

ACCESS_KEY = "S3RVER"
"""s3rver's fixed credentials: a local test server's, not a secret."""
SECRET_KEY = "S3RVER"
REGION = "us-east-1"


class ObjectStoreError(RuntimeError):
    """s3rver (or node) is missing, cannot start, or does not become ready."""


class ObjectStore(ManagedProcess):
    """One s3rver process on ``127.0.0.1`` with one bucket, its files in a temporary directory.

    Args:
        port: TCP port; ``None`` picks a free one.
        ready_timeout_s, stop_timeout_s, log_dir: as :class:`~flowtracer.testbed.managed_process.ManagedProcess`.
    """

    _error = ObjectStoreError
    _title = "s3rver (object store)"
    _what = "the object store (s3rver)"
    _log_name = "s3rver.log"
    _tmp_prefix = "flowtracer-objects-"
    _always_tmpdir = True  # the objects live there, also when the log is kept elsewhere

    def __init__(self, port: int | None = None, **kwargs: Any) -> None:
        super().__init__(port, **kwargs)
        self.data_dir: Path | None = None

    @functools.cached_property
    def bucket(self) -> str:
        """Unique per store: the readiness probe tells our s3rver from another one by it."""
        return f"flowtracer-{uuid.uuid4().hex[:12]}"

    # -- lifecycle (ManagedProcess) --------------------------------------------------------------

    def _binary(self) -> Path:
        node = shutil.which("node")
        if node is None:
            raise ObjectStoreError("node is not installed; the object store is s3rver, an npm package: "
                                   "apt-get install nodejs npm, then make setup")
        if not SCRIPT.is_file():
            raise ObjectStoreError(f"s3rver is not installed ({SCRIPT} is missing): make setup "
                                   f"(or: npm ci --prefix {PACKAGE_DIR})")
        return Path(node)

    def _command(self, binary: Path, port: int) -> tuple[list[str], dict[str, Any]]:
        assert self._tmpdir is not None
        self.data_dir = self._tmpdir / "objects"
        self.data_dir.mkdir()
        # s3rver makes ListObjectsV2 continuation tokens with DES, which Node's OpenSSL 3 has only in its legacy
        # provider: without it every listing longer than a page (1000 keys) answers 500, and Tansu, which lists a
        # partition's batch objects for each Fetch and ListOffsets, cannot serve a partition of over 1000 batches.
        argv = [str(binary), "--openssl-legacy-provider", str(SCRIPT), "--directory", str(self.data_dir),
                "--address", HOST, "--port", str(port), "--configure-bucket", self.bucket, "--silent"]
        return argv, {"cwd": self._tmpdir}

    def _probe(self) -> int:
        """List our bucket (at most one key); another s3rver has no such bucket and answers 404."""
        try:
            with urllib.request.urlopen(f"{self.endpoint}/{self.bucket}?max-keys=1", timeout=1.0) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                raise ObjectStoreError(f"another S3 server answers on port {self._port}; ours could "
                                       "not bind it") from None
            raise OSError(f"s3rver answered {e.code}") from None

    # -- use -------------------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{HOST}:{self.port}"

    def client_env(self) -> dict[str, str]:
        """Environment for a client of this store that reads AWS's variables (Tansu's ``s3`` engine)."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT": self.endpoint, "AWS_ALLOW_HTTP": "true"}

    def disk_bytes(self) -> int:
        """Bytes of the files under the store's directory (objects and s3rver's metadata files)."""
        if self.data_dir is None:
            return 0
        return sum(p.stat().st_size for p in self.data_dir.rglob("*") if p.is_file())

    def __repr__(self) -> str:
        state = f"endpoint={self.endpoint}" if self._port is not None else "stopped"
        return f"ObjectStore({state}, bucket={self.bucket!r})"
