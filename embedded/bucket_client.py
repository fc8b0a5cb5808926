"""The few S3 requests the object sweeper and its tests make, unsigned over plain HTTP (urllib, no SDK).

The embedded object store (``s3_server.py``) takes unsigned requests. Listings are ListObjects version 1
(``marker`` paging), which every S3 server pages the same way, and are made below one topic's ``partitions/``,
where every key has the same form. (s3rver, the store tried first, needed both: it listed keys in the order it
walked its directories, ``t/p/1`` before ``t-b/p/1``, so paging across differently named folders skipped keys,
and its version 2 continuation tokens needed DES, which Node's OpenSSL 3 lacks.)
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime

LAST_MODIFIED_RESOLUTION_S = 1.0
"""S3's ListObjects may give LastModified in whole seconds, cut down (S3 and s3rver do; ``s3_server.py`` gives ms):
an object was written at most this long after the time it reports, s. Ages are judged with it, whatever the store."""


ATTEMPTS = 3
"""Tries of a request that fails with a server error or no connection."""
RETRY_PAUSE_S = 0.05
"""Pause before the n-th retry: n times this, s."""


class BucketError(RuntimeError):
    """The store could not be reached, refused a request, or answered something unreadable."""


@dataclass(frozen=True)
class ObjectInfo:
    """One object of a listing."""

    key: str
    last_modified_s: float
    """LastModified as the store reports it, Unix s (whole seconds: :data:`LAST_MODIFIED_RESOLUTION_S`)."""
    size: int
    """bytes"""


class BucketClient:
    """List, read and delete the objects of one bucket at ``endpoint`` (``http://host:port``).

    Every method raises :class:`BucketError` on any failure, naming the request; ``timeout_s`` bounds each
    request (s).
    """

    def __init__(self, endpoint: str, bucket: str, timeout_s: float = 5.0) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.bucket = bucket
        self.timeout_s = timeout_s

    def request(self, method: str, key: str = "", query: dict[str, str] | None = None) -> bytes:
        """The body of the answer to ``method`` on ``key`` (the bucket itself when empty).

        A server error (5xx) or a failed connection is tried again, :data:`ATTEMPTS` times in all (every request
        made here is idempotent; S3's own clients retry those too).
        """
        url = f"{self.endpoint}/{self.bucket}" + (f"/{urllib.parse.quote(key)}" if key else "")
        if query:
            url += "?" + urllib.parse.urlencode(query)
        for attempt in range(1, ATTEMPTS + 1):
            try:
                with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=self.timeout_s) as r:
                    return bytes(r.read())
            except urllib.error.HTTPError as e:
                if e.code < 500 or attempt == ATTEMPTS:
                    raise BucketError(f"{method} {url}: HTTP {e.code} {e.reason}") from None
            except OSError as e:  # refused, reset, timed out
                if attempt == ATTEMPTS:
                    raise BucketError(f"{method} {url}: {e}") from None
            time.sleep(RETRY_PAUSE_S * attempt)
        raise AssertionError("unreachable")

    def list_page(self, prefix: str, marker: str) -> ET.Element:
        """One page of ListObjects (version 1) as XML."""
        body = self.request("GET", query={"prefix": prefix, "marker": marker})
        try:
            return ET.fromstring(body)
        except ET.ParseError as e:
            raise BucketError(f"listing {prefix!r}: unreadable XML ({e})") from None

    def pages(self, prefix: str) -> list[ET.Element]:
        """Every page of the listing of ``prefix``, following ``IsTruncated``."""
        out: list[ET.Element] = []
        marker = ""
        while True:
            page = self.list_page(prefix, marker)
            out.append(page)
            if page.findtext("{*}IsTruncated") != "true":
                return out
            following = max((e.text or "" for e in page.iterfind("{*}Contents/{*}Key")), default="")
            if following <= marker:
                raise BucketError(f"listing {prefix!r}: a truncated page that does not move on from {marker!r}")
            marker = following

    def objects(self, prefix: str) -> list[ObjectInfo]:
        """Every object whose key starts with ``prefix``, in key order."""
        out = []
        for page in self.pages(prefix):
            for c in page.iterfind("{*}Contents"):
                try:
                    out.append(ObjectInfo(
                        key=c.findtext("{*}Key") or "",
                        last_modified_s=datetime.fromisoformat(c.findtext("{*}LastModified") or "").timestamp(),
                        size=int(c.findtext("{*}Size") or ""),
                    ))
                except ValueError as e:
                    raise BucketError(f"listing {prefix!r}: unreadable entry ({e})") from None
        return out

    def get(self, key: str) -> bytes:
        """The object's content."""
        return self.request("GET", key)

    def delete(self, key: str) -> None:
        """Delete the object (S3 answers 204 also for a key that is not there)."""
        self.request("DELETE", key)
