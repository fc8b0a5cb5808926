"""The agent follows the processor: a switch whose ECMP groups changed has its flows re-traced (pure rule, then over
the real broker), and a flow the processor asks about is re-traced by the agent that knows it."""

from __future__ import annotations

from kafka import KafkaProducer
from waiting import wait_for

from flowtracer.collectors.agent.tracing.group_changes import GroupChanges
from flowtracer.collectors.agent.tracing.processor_feedback import GroupWatch, RequestWatch
from flowtracer.embedded.tansu import TansuBroker
from flowtracer.schemas.v1 import analytics_pb2, traces_pb2

UP1, UP2 = "leaf01:Ethernet3>spine01:Ethernet1", "leaf01:Ethernet4>spine02:Ethernet1"


def groups(switch: str, *members: tuple[str, int], source: str = "aft", end_s: int = 1) -> bytes:
    rec = analytics_pb2.EcmpGroups(schema_version=1, window_end_ns=end_s * 1_000_000_000, switch=switch,
                                   group_source=source)
    rec.groups.add(group=f"{switch}:x", links=[m for m, _ in members], weights=[w for _, w in members])
    return rec.SerializeToString()


def test_a_change_is_a_switch_whose_members_or_weights_differ_from_its_last_record() -> None:
    gc = GroupChanges()
    assert gc.offer(groups("leaf01", (UP1, 1), (UP2, 1), source="topology")) is None  # first: a baseline
    assert gc.offer(groups("leaf01", (UP1, 1), (UP2, 1), end_s=9)) is None  # same members (another window, source)
    assert gc.offer(groups("leaf01", (UP1, 1))) == "leaf01"  # a member withdrawn
    assert gc.offer(groups("leaf01", (UP1, 1), (UP2, 2))) == "leaf01"  # back, with another weight
    assert gc.offer(groups("leaf02", (UP1, 1))) is None
    assert gc.offer(b"\xff\xffnot a record") is None and gc.changes == 2


class FakeTracer:
    def __init__(self) -> None:
        self.changed: list[list[str]] = []
        self.contradicted: list[str] = []

    def link_changed(self, switches: list[str]) -> int:
        self.changed.append(list(switches))
        return 3

    def mark_contradicted(self, flow_id: str) -> bool:
        self.contradicted.append(flow_id)
        return flow_id.startswith("host01:")  # the flows this agent traces


def test_the_watch_re_traces_through_a_switch_whose_groups_changed(kafka: TansuBroker, unique_id: str) -> None:
    kafka.create_topics({unique_id: 2})
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap, enable_idempotence=False)
    producer.send(unique_id, key=b"leaf01", value=groups("leaf01", (UP1, 1), (UP2, 1)))
    producer.flush()
    tracer = FakeTracer()
    watch = GroupWatch(kafka.bootstrap, tracer, "watch-test", topic=unique_id).start()  # type: ignore[arg-type]
    try:
        wait_for(lambda: "leaf01" in watch.changes.seen, 20, "the baseline record read from the beginning")
        assert tracer.changed == []
        producer.send(unique_id, key=b"leaf01", value=groups("leaf01", (UP1, 1)))
        producer.flush()
        wait_for(lambda: tracer.changed == [["leaf01"]], 20, "leaf01's flows re-traced")
        assert watch.retraced == 3
    finally:
        watch.close()
        producer.close()


def test_the_agent_that_knows_a_flow_re_traces_it_when_the_processor_asks(kafka: TansuBroker, unique_id: str) -> None:
    kafka.create_topics({unique_id: 2})
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap, enable_idempotence=False)

    def ask(flow_id: str) -> None:
        req = traces_pb2.TraceRequest(schema_version=1, flow_id=flow_id, src_leaf="leaf01",
                                      reason=traces_pb2.TRACE_REASON_CONTRADICTION, detail="test")
        producer.send(unique_id, key=flow_id.encode(), value=req.SerializeToString())
        producer.flush()

    ask("host01:mlx5_0/1/0")  # before the agent started: an old request, not read (events start at the end)
    tracer = FakeTracer()
    watch = RequestWatch(kafka.bootstrap, tracer, "request-test", topic=unique_id).start()  # type: ignore[arg-type]
    try:
        wait_for(watch.reader.positioned.is_set, 20, "the reader at the topic's end")
        ask("host09:mlx5_0/7/0")  # another agent's flow
        ask("host01:mlx5_0/2/0")
        wait_for(lambda: watch.retraced == 1, 20, "host01's flow re-traced")
        assert tracer.contradicted[-2:] == ["host09:mlx5_0/7/0", "host01:mlx5_0/2/0"]
        assert "host01:mlx5_0/1/0" not in tracer.contradicted
    finally:
        watch.close()
        producer.close()
