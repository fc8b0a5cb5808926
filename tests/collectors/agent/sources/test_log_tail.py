"""Following NCCL log files: partial lines held back within a bound, over-long lines dropped and
counted, files that are gone forgotten, at most ``max_files`` followed."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowtracer.collectors.agent.sources.log_tail import GlobTail, LogTail


@pytest.mark.parametrize(("writes", "lines", "dropped"), [
    ([b"short\n"], [["short"]], 0),
    ([b"ab", b"cd\n"], [[], ["abcd"]], 0),  # a partial line within the bound waits for its end
    ([b"x" * 17, b"x" * 5 + b"\nnext\n"], [[], ["next"]], 1),  # a partial over the bound is dropped to its newline
    ([b"x" * 17, b"x" * 30, b"yy\nnext\n"], [[], [], ["next"]], 1),  # ... however many reads it spans
    ([b"a\n" + b"x" * 20 + b"\nb\n"], [["a", "b"]], 1),  # complete but too long: the same rule
    ([b"x" * 16 + b"\n"], [["x" * 16]], 0),  # exactly the bound is kept
])
def test_a_line_longer_than_the_bound_is_dropped_and_counted(tmp_path: Path, writes: list[bytes],
                                                             lines: list[list[str]], dropped: int) -> None:
    path = tmp_path / "nccl.log"
    path.write_bytes(b"")
    tail = LogTail(path, max_line_bytes=16)
    got = []
    for chunk in writes:
        with path.open("ab") as f:
            f.write(chunk)
        got.append(tail.read_lines())
        assert len(tail._partial) <= 16
    assert got == lines
    assert (tail.dropped, tail.take_dropped(), tail.take_dropped()) == (dropped, dropped, 0)


@pytest.mark.parametrize(("files", "max_files", "followed", "skipped"), [
    (3, 8, 3, 0),
    (3, 3, 3, 0),
    (5, 3, 3, 2),
])
def test_glob_follows_at_most_max_files(tmp_path: Path, files: int, max_files: int, followed: int,
                                        skipped: int) -> None:
    for i in range(files):
        (tmp_path / f"nccl.{i}").write_text(f"line {i}\n")
    tail = GlobTail(str(tmp_path / "nccl.*"), max_files=max_files)
    assert tail.read_lines() == [f"line {i}" for i in range(followed)]
    assert (len(tail._tails), tail.skipped_files) == (followed, skipped)


def test_deleted_files_are_forgotten_with_their_drops_counted(tmp_path: Path) -> None:
    tail = GlobTail(str(tmp_path / "nccl.*"), max_line_bytes=8)
    for pid in range(100):  # short-lived processes, each with its own log file, deleted afterwards
        path = tmp_path / f"nccl.{pid}"
        path.write_text(f"p{pid}\n" + "z" * 20)  # ends inside an over-long line
        assert tail.read_lines() == [f"p{pid}"]
        path.unlink()
        assert tail.read_lines() == []
        assert tail._tails == {}
    assert tail.take_dropped() == 100 and tail.take_dropped() == 0


def test_chunks_name_their_file_and_lines_and_what_was_there_at_the_first_read_is_history(tmp_path: Path) -> None:
    path = tmp_path / "nccl.1"
    path.write_bytes(b"old 1\nold 2\n" + b"x" * 20 + b"\nold 4\nhalf")  # line 3 is over-long: dropped, numbered
    tail = GlobTail(str(tmp_path / "nccl.*"), max_line_bytes=16, catch_up=True)
    [old] = tail.read_chunks()
    assert (old.path, old.first_line, old.lines, old.history) == (str(path), 1, ["old 1", "old 2", "old 4"], True)
    with path.open("ab") as f:
        f.write(b" done\nnew 6\n")
    [new] = tail.read_chunks()  # the half line was completed after the first read: news
    assert (new.first_line, new.lines, new.history) == (5, ["half done", "new 6"], False)
    (tmp_path / "nccl.2").write_text("later 1\n")  # a file that appears later is news from its first line
    [later] = tail.read_chunks()
    assert (later.path, later.first_line, later.history) == (str(tmp_path / "nccl.2"), 1, False)
    path.unlink()
    path.write_text("rotated 1\n")  # replaced: all news
    assert [(c.first_line, c.lines, c.history) for c in tail.read_chunks()] == [(1, ["rotated 1"], False)]


def test_without_catch_up_everything_is_news(tmp_path: Path) -> None:
    path = tmp_path / "nccl.log"
    path.write_text("a\nb\n")
    assert [(c.first_line, c.history) for c in LogTail(path).read_chunks()] == [(1, False)]
