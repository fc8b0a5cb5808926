"""embedded/s3_server.py: the listing rule alone, then the S3 requests Tansu's engine makes, over HTTP."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowtracer.embedded.object_store import ObjectStore
from flowtracer.embedded.s3_server import Bucket, byte_range


def filled(*keys: str) -> Bucket:
    b = Bucket("b")
    for k in keys:
        b.put(k, k.encode())
    return b


def test_listing_is_ordered_bounded_and_pages_after_the_marker() -> None:
    b = filled("t/p1/r/3", "t/p0/r/2", "t/p0/r/1", "u/x", "t/p0/r/10")
    assert b.listing("t/p0/", "", "", 1000) == (["t/p0/r/1", "t/p0/r/10", "t/p0/r/2"], [], False)
    assert b.listing("t/", "", "", 2) == (["t/p0/r/1", "t/p0/r/10"], [], True)
    assert b.listing("t/", "t/p0/r/10", "", 2) == (["t/p0/r/2", "t/p1/r/3"], [], False)
    assert b.listing("t/", "", "/", 1000) == ([], ["t/p0/", "t/p1/"], False)


def test_delete_and_replace_keep_index_and_bytes_exact() -> None:
    b = filled("a", "bb", "ccc")
    b.put("bb", b"12345")
    b.delete("a")
    b.delete("missing")
    assert b.keys == ["bb", "ccc"] and b.bytes == 8 and set(b.objects) == {"bb", "ccc"}


@pytest.mark.parametrize(("header", "span"), [
    ("bytes=0-3", (0, 3)), ("bytes=4-", (4, 9)), ("bytes=-3", (7, 9)), ("bytes=5-100", (5, 9)),
    ("bytes=10-", None), ("bytes=-", None), ("lines=1-2", None),
])
def test_byte_range(header: str, span: tuple[int, int] | None) -> None:
    assert byte_range(header, 10) == span


@pytest.fixture(scope="module")
def store() -> Iterator[ObjectStore]:
    with ObjectStore() as s:
        yield s


def call(store: ObjectStore, method: str, key: str, body: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    req = urllib.request.Request(f"{store.endpoint}/{store.bucket}/{key}", data=body, method=method,
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def test_conditional_writes_as_the_s3_engine_uses_them(store: ObjectStore) -> None:
    assert call(store, "PUT", "w.json", b"1", {"If-None-Match": "*"})[0] == 200
    status, body, _ = call(store, "PUT", "w.json", b"2", {"If-None-Match": "*"})
    assert status == 412 and b"PreconditionFailed" in body
    _, _, head = call(store, "HEAD", "w.json")
    etag = head["ETag"]
    assert call(store, "PUT", "w.json", b"3", {"If-Match": '"not-it"'})[0] == 412
    assert call(store, "PUT", "w.json", b"3", {"If-Match": etag})[0] == 200
    assert call(store, "GET", "w.json")[1] == b"3"
    assert call(store, "PUT", "absent.json", b"x", {"If-Match": etag})[0] == 412


def test_reads_deletes_and_listings_over_http(store: ObjectStore) -> None:
    for i in range(5):
        call(store, "PUT", f"l/k{i}", b"0123456789")
    status, body, headers = call(store, "GET", "l/k1", headers={"Range": "bytes=2-4"})
    assert (status, body, headers["Content-Range"]) == (206, b"234", "bytes 2-4/10")
    assert call(store, "GET", "l/k1", headers={"If-None-Match": headers["ETag"]})[0] == 304
    assert call(store, "DELETE", "l/k1")[0] == 204
    status, body, _ = call(store, "GET", "l/k1")
    assert status == 404 and b"NoSuchKey" in body
    url = f"{store.endpoint}/{store.bucket}?list-type=2&prefix=l/&max-keys=2"
    with urllib.request.urlopen(url, timeout=5) as r:
        page = r.read().decode()
    assert re.findall(r"<Key>([^<]*)</Key>", page) == ["l/k0", "l/k2"]
    token = re.search(r"<NextContinuationToken>([^<]*)<", page)
    assert token is not None
    with urllib.request.urlopen(f"{url}&continuation-token={token.group(1)}", timeout=5) as r:
        assert re.findall(r"<Key>([^<]*)</Key>", r.read().decode()) == ["l/k3", "l/k4"]
    delete = (b"<Delete><Object><Key>l/k3</Key></Object><Object><Key>l/k4</Key></Object></Delete>")
    req = urllib.request.Request(f"{store.endpoint}/{store.bucket}?delete", data=delete, method="POST")
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.read().count(b"<Deleted>") == 2
    with urllib.request.urlopen(f"{store.endpoint}/{store.bucket}", timeout=5) as r:
        listed = re.findall(r"<Size>(\d+)</Size>", r.read().decode())
    assert store.stats()["objects"] == len(listed) and store.stats()["bytes"] == sum(map(int, listed))
    with urllib.request.urlopen(f"{store.endpoint}/{store.bucket}?prefix=l/", timeout=5) as r:
        assert re.findall(r"<Key>([^<]*)</Key>", r.read().decode()) == ["l/k0", "l/k2"]


def test_a_bucket_with_a_directory_keeps_bytes_in_files_and_removes_them(tmp_path: Path) -> None:
    b = Bucket("b", tmp_path)
    b.put("k1", b"first")
    b.put("k1", b"second")  # replaced: the first file goes
    b.put("k2", b"x" * 40_000)
    assert [b.read(b.objects[k]) for k in ("k1", "k2")] == [b"second", b"x" * 40_000]
    assert len(list(tmp_path.iterdir())) == 2 and b.bytes == 6 + 40_000
    b.delete("k1")
    b.delete("k2")
    assert list(tmp_path.iterdir()) == [] and b.bytes == 0 and b.keys == []
