"""Consumer lag per partition: positioned, read, unread."""

from flowtracer.stream.runtime.read_positions import ReadPositions


def test_unread_until_the_records_up_to_the_high_watermark_are_handled() -> None:
    hw = {("flows", 0): 10, ("counters", 0): 4}
    r = ReadPositions()
    assert r.unread(lambda t, p: hw.get((t, p))) == frozenset()  # nothing positioned: unknown counts as read
    r.positioned({("flows", 0): 0, ("counters", 0): 4})  # counters committed at the end, flows from the beginning
    assert r.unread(lambda t, p: hw.get((t, p))) == {("flows", 0)}
    r.read("flows", 0, 8)
    assert r.unread(lambda t, p: hw.get((t, p))) == {("flows", 0)}  # offset 9 is left
    r.read("flows", 0, 9)
    assert r.unread(lambda t, p: hw.get((t, p))) == frozenset()
    hw[("flows", 0)] = 11  # a newer fetch saw one more record
    assert r.unread(lambda t, p: hw.get((t, p))) == {("flows", 0)}
    r.positioned({("flows", 0): 11})  # sought (a rebalance): from there on
    assert r.unread(lambda t, p: hw.get((t, p))) == frozenset()
    r.positioned({("flows", 0): 3})  # sought back: records 3.. are read again
    assert r.unread(lambda t, p: hw.get((t, p))) == {("flows", 0)}
    r.forget([("flows", 0)])
    assert r.unread(lambda t, p: hw.get((t, p))) == frozenset()
    assert r.unread(lambda t, p: None) == frozenset()  # no fetch yet: no high watermark
