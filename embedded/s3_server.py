"""A small S3 server for the embedded broker: an ordered key index in memory, the objects in files.

Why our own: Tansu's ``s3`` storage engine lists every record-batch object of a partition on each fetch
that has data to return (``DynoStore::fetch``, tansu-storage/src/dynostore.rs at v0.6.0). s3rver (npm), tried
first, walks the directory tree and reads a metadata file per object for each listing: at the demo's 16 hosts
it took half a core and grew with retention. Here a listing is a bisect into a sorted key list and a string
join: cheap, whatever the retention. It serves only what Tansu's engine (the Rust ``object_store`` crate with
``S3ConditionalPut::ETagMatch``) and the object sweeper use:

* ``PUT /<bucket>/<key>`` with ``If-None-Match: *`` (create) or ``If-Match: <etag>`` (update) honoured, 412 else;
* ``GET`` / ``HEAD`` with ``If-None-Match`` (304), ``If-Match`` (412) and one ``Range: bytes=a-b`` (206);
* ``DELETE /<bucket>/<key>`` (204, also for a missing key, as S3) and ``POST /<bucket>?delete`` (DeleteObjects);
* ``GET /<bucket>`` ListObjects v1 (``marker``) and v2 (``list-type=2``, ``continuation-token``, ``start-after``),
  ``prefix``, ``delimiter``, ``max-keys`` (at most 1,000, as S3);
* ``GET /_flowtracer/stats``: objects and bytes held (JSON), for the demo's summary and ``make soak``;
  ``?detail=topics`` adds them per Tansu topic (``clusters/<id>/topics/<topic>/...``).

Requests are not authenticated (it listens on 127.0.0.1 only, like every server of the test bed; clients may
sign, the signature is not checked). One bucket, named on the command line. The index is in memory, the bytes in files
(``--directory``) or in memory; the sweeper's retention bounds both.

Run: ``python -m flowtracer.embedded.s3_server --port P --bucket B`` (``embedded/object_store.py`` does).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import ctypes
import ctypes.util
import hashlib
import json
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from xml.sax.saxutils import escape

from aiohttp import web

MAX_KEYS = 1000
"""S3's page size limit for listings."""
MAX_OBJECT_BYTES = 256 * 2**20
"""Largest request body accepted, bytes (a Kafka batch is at most the broker's message.max.bytes, ~1 MB)."""
NS = "http://s3.amazonaws.com/doc/2006-03-01/"
RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


@dataclass(frozen=True)
class StoredObject:
    """One object: its size (bytes), its ETag (quoted MD5, as S3), when it was written (Unix s), and where its
    bytes are: a file of the bucket's directory, or ``data`` when the bucket has none."""

    size: int
    etag: str
    modified_s: float
    path: Path | None = None
    data: bytes | None = None


class Bucket:
    """Objects by key, and the keys in order (listings are ranges of it).

    With a ``directory`` each object's bytes are a file there and only the index is in memory: objects of 1-40 kB
    coming and going all the time fragment the heap, and the resident memory crept (+1.3 MB/min at 32 hosts with
    the data flat) where files leave it flat; the page cache serves the reads. Without one, bytes stay in memory.
    """

    def __init__(self, name: str, directory: Path | None = None) -> None:
        self.name = name
        self.directory = directory
        self.objects: dict[str, StoredObject] = {}
        self.keys: list[str] = []
        self.bytes = 0
        self.written = 0  # names the files: keys may hold any character

    def put(self, key: str, data: bytes) -> StoredObject:
        """Store ``data`` under ``key`` (replacing any), now."""
        etag = f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"'
        if self.directory is not None:
            self.written += 1
            path = self.directory / f"{self.written:012x}"
            path.write_bytes(data)
            obj = StoredObject(len(data), etag, time.time(), path=path)
        else:
            obj = StoredObject(len(data), etag, time.time(), data=data)
        old = self.objects.get(key)
        if old is None:
            bisect.insort(self.keys, key)
        else:
            self.forget(old)
        self.objects[key] = obj
        self.bytes += len(data)
        return obj

    def read(self, obj: StoredObject) -> bytes:
        """The bytes of ``obj``."""
        return obj.path.read_bytes() if obj.path is not None else obj.data or b""

    def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is no error (S3 answers 204 too)."""
        old = self.objects.pop(key, None)
        if old is not None:
            self.forget(old)
            del self.keys[bisect.bisect_left(self.keys, key)]

    def forget(self, obj: StoredObject) -> None:
        self.bytes -= obj.size
        if obj.path is not None:
            obj.path.unlink(missing_ok=True)

    def listing(self, prefix: str, after: str, delimiter: str, max_keys: int) -> tuple[list[str], list[str], bool]:
        """Keys under ``prefix`` after ``after`` (exclusive), at most ``max_keys`` entries (keys and common
        prefixes together), in order; with ``delimiter``, keys that hold it past the prefix roll up into common
        prefixes. Returns (keys, common prefixes, truncated)."""
        i = bisect.bisect_right(self.keys, after) if after >= prefix else bisect.bisect_left(self.keys, prefix)
        keys: list[str] = []
        prefixes: list[str] = []
        while i < len(self.keys):
            key = self.keys[i]
            if not key.startswith(prefix):
                break
            if len(keys) + len(prefixes) >= max_keys:
                return keys, prefixes, True
            cut = key.find(delimiter, len(prefix)) if delimiter else -1
            if cut >= 0:
                common = key[:cut + len(delimiter)]
                prefixes.append(common)
                # skip every key under this common prefix
                i = bisect.bisect_left(self.keys, common[:-1] + chr(ord(common[-1]) + 1))
                continue
            keys.append(key)
            i += 1
        return keys, prefixes, False


def iso(t: float) -> str:
    """``2026-11-28T07:28:47.123Z`` (ListBucketResult's LastModified)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def error(status: int, code: str, message: str, resource: str = "") -> web.Response:
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{escape(message)}'
            f"</Message><Resource>{escape(resource)}</Resource></Error>")
    return web.Response(status=status, body=body.encode(), content_type="application/xml")


def object_headers(obj: StoredObject) -> dict[str, str]:
    return {"ETag": obj.etag, "Last-Modified": formatdate(obj.modified_s, usegmt=True),
            "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}


def etag_matches(header: str, etag: str) -> bool:
    """Whether an If-Match / If-None-Match header value names ``etag`` (or is ``*``)."""
    tags = [t.strip() for t in header.split(",")]
    return "*" in tags or etag in tags or etag.strip('"') in tags


class S3App:
    """The request handlers over one :class:`Bucket`."""

    def __init__(self, bucket: str, directory: Path | None = None) -> None:
        self.bucket = Bucket(bucket, directory)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_OBJECT_BYTES)
        app.router.add_get("/_flowtracer/stats", self.stats)
        app.router.add_route("*", "/{bucket}", self.on_bucket)
        app.router.add_route("*", "/{bucket}/{key:.+}", self.on_object)
        return app

    async def stats(self, request: web.Request) -> web.Response:
        b = self.bucket
        out: dict[str, object] = {"bucket": b.name, "objects": len(b.objects), "bytes": b.bytes}
        if request.query.get("detail") == "topics":
            topics: dict[str, list[int]] = {}
            for key, obj in b.objects.items():
                parts = key.split("/", 4)  # clusters, <id>, topics, <topic>, rest
                name = parts[3] if len(parts) > 4 and parts[2] == "topics" else "(other)"
                entry = topics.setdefault(name, [0, 0])
                entry[0] += 1
                entry[1] += obj.size
            out["topics"] = {name: {"objects": n, "bytes": size} for name, (n, size) in sorted(topics.items())}
        return web.json_response(out)

    async def on_bucket(self, request: web.Request) -> web.Response:
        name = request.match_info["bucket"]
        if name != self.bucket.name:
            return error(404, "NoSuchBucket", "The specified bucket does not exist", f"/{name}")
        if request.method in ("GET", "HEAD") and "location" not in request.query:
            return self.list_objects(request)
        if request.method == "POST" and "delete" in request.query:
            return await self.delete_objects(request)
        if request.method in ("PUT", "HEAD", "GET"):  # create (exists), head, location
            return web.Response(status=200)
        return error(405, "MethodNotAllowed", f"{request.method} on a bucket is not supported", f"/{name}")

    def list_objects(self, request: web.Request) -> web.Response:
        q = request.query
        v2 = q.get("list-type") == "2"
        prefix, delimiter = q.get("prefix", ""), q.get("delimiter", "")
        try:
            max_keys = min(MAX_KEYS, int(q.get("max-keys", MAX_KEYS)))
        except ValueError:
            return error(400, "InvalidArgument", "max-keys must be an integer")
        after = (q.get("continuation-token") or q.get("start-after", "")) if v2 else q.get("marker", "")
        keys, prefixes, truncated = self.bucket.listing(prefix, after, delimiter, max_keys)
        parts = [f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{NS}">',
                 f"<Name>{escape(self.bucket.name)}</Name><Prefix>{escape(prefix)}</Prefix>",
                 f"<MaxKeys>{max_keys}</MaxKeys><IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"]
        if delimiter:
            parts.append(f"<Delimiter>{escape(delimiter)}</Delimiter>")
        last = max(keys[-1:] + prefixes[-1:], default="")
        if v2:
            parts.append(f"<KeyCount>{len(keys) + len(prefixes)}</KeyCount>")
            if truncated:
                parts.append(f"<NextContinuationToken>{escape(last)}</NextContinuationToken>")
        else:
            parts.append(f"<Marker>{escape(after)}</Marker>")
            if truncated:
                parts.append(f"<NextMarker>{escape(last)}</NextMarker>")
        objects = self.bucket.objects
        for key in keys:
            o = objects[key]
            parts.append(f"<Contents><Key>{escape(key)}</Key><LastModified>{iso(o.modified_s)}</LastModified>"
                         f"<ETag>{escape(o.etag)}</ETag><Size>{o.size}</Size>"
                         "<StorageClass>STANDARD</StorageClass></Contents>")
        parts += [f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>" for p in prefixes]
        parts.append("</ListBucketResult>")
        return web.Response(body="".join(parts).encode(), content_type="application/xml")

    async def delete_objects(self, request: web.Request) -> web.Response:
        try:
            root = ET.fromstring(await request.read())
        except ET.ParseError as e:
            return error(400, "MalformedXML", f"DeleteObjects body: {e}")
        keys = [el.text or "" for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "Key"]
        for key in keys:
            self.bucket.delete(key)
        quiet = any(el.tag.rsplit("}", 1)[-1] == "Quiet" and (el.text or "").strip() == "true" for el in root.iter())
        deleted = "" if quiet else "".join(f"<Deleted><Key>{escape(k)}</Key></Deleted>" for k in keys)
        body = f'<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult xmlns="{NS}">{deleted}</DeleteResult>'
        return web.Response(body=body.encode(), content_type="application/xml")

    async def on_object(self, request: web.Request) -> web.StreamResponse:
        name, key = request.match_info["bucket"], request.match_info["key"]
        if name != self.bucket.name:
            return error(404, "NoSuchBucket", "The specified bucket does not exist", f"/{name}")
        resource = f"/{name}/{key}"
        if request.method == "PUT":
            return await self.put_object(request, key, resource)
        if request.method == "DELETE":
            self.bucket.delete(key)
            return web.Response(status=204)
        if request.method not in ("GET", "HEAD"):
            return error(405, "MethodNotAllowed", f"{request.method} on an object is not supported", resource)
        obj = self.bucket.objects.get(key)
        if obj is None:
            return error(404, "NoSuchKey", "The specified key does not exist.", resource)
        headers = object_headers(obj)
        if (m := request.headers.get("If-Match")) is not None and not etag_matches(m, obj.etag):
            return error(412, "PreconditionFailed", "If-Match does not match", resource)
        if (m := request.headers.get("If-None-Match")) is not None and etag_matches(m, obj.etag):
            return web.Response(status=304, headers={"ETag": obj.etag, "Last-Modified": headers["Last-Modified"]})
        if request.method == "HEAD" and "Range" not in request.headers:
            headers["Content-Length"] = str(obj.size)
            return web.Response(status=200, headers=headers)
        body, status = self.bucket.read(obj), 200
        if (r := request.headers.get("Range")) is not None:
            span = byte_range(r, obj.size)
            if span is None:
                return error(416, "InvalidRange", f"Range {r!r} of a {obj.size}-byte object", resource)
            start, end = span
            body, status = body[start:end + 1], 206
            headers["Content-Range"] = f"bytes {start}-{end}/{obj.size}"
        if request.method == "HEAD":
            headers["Content-Length"] = str(len(body))
            return web.Response(status=status, headers=headers)
        return web.Response(status=status, body=body, headers=headers)

    async def put_object(self, request: web.Request, key: str, resource: str) -> web.Response:
        data = await request.read()
        existing = self.bucket.objects.get(key)
        # Conditional writes: the s3 engine creates with If-None-Match: * and updates with If-Match: <etag>.
        if (m := request.headers.get("If-None-Match")) is not None and existing is not None \
                and etag_matches(m, existing.etag):
            return error(412, "PreconditionFailed", "the object exists (If-None-Match)", resource)
        if (m := request.headers.get("If-Match")) is not None and (existing is None
                                                                    or not etag_matches(m, existing.etag)):
            return error(412, "PreconditionFailed", "If-Match does not match", resource)
        obj = self.bucket.put(key, data)
        return web.Response(status=200, headers={"ETag": obj.etag})


def byte_range(header: str, size: int) -> tuple[int, int] | None:
    """``bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` as inclusive (start, end) of ``size`` bytes; None: unsatisfiable."""
    m = RANGE.match(header.strip())
    if m is None or (not m.group(1) and not m.group(2)):
        return None
    if not m.group(1):
        n = int(m.group(2))
        return (max(0, size - n), size - 1) if n > 0 and size > 0 else None
    start = int(m.group(1))
    end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
    return (start, end) if start <= end and start < size else None


TRIM_EVERY_S = 30.0
"""How often freed memory is handed back to the OS, s (glibc ``malloc_trim``)."""


async def trim_forever(app: web.Application) -> AsyncIterator[None]:
    """Give freed heap pages back every ``TRIM_EVERY_S``: objects of 1-40 kB come and go all the time, and glibc
    keeps the holes they leave mapped, so without a trim the resident memory creeps though the data is bounded."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to do
        yield
        return

    async def loop() -> None:
        while True:
            await asyncio.sleep(TRIM_EVERY_S)
            trim(0)

    task = asyncio.create_task(loop())
    yield
    task.cancel()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m flowtracer.embedded.s3_server", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--directory", type=Path, default=None,
                        help="keep the objects' bytes in files here (only the index in memory)")
    args = parser.parse_args(argv)
    print(json.dumps({"listening": f"{args.host}:{args.port}", "bucket": args.bucket}), flush=True)
    if args.directory is not None:
        args.directory.mkdir(parents=True, exist_ok=True)
    app = S3App(args.bucket, args.directory).app()
    app.cleanup_ctx.append(trim_forever)
    web.run_app(app, host=args.host, port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
