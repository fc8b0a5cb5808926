"""An incident as its Kafka record and its line-protocol point."""

from __future__ import annotations

from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.diagnosis.incidents import Incident, State
from flowtracer.stream.diagnosis.records import incident_record
from flowtracer.stream.sinks.line_protocol import incident_line

S = 1_000_000_000
T0 = 1_800_000_000 * S
CABLE = "cable:leaf03:Ethernet5~spine01:Ethernet3"


def _incident(state: State) -> Incident:
    inc = Incident(f"degraded_link/{CABLE}/{T0}", "degraded_link", T0, detected_ns=T0 + S, windows=3, state=state,
                   suspects={CABLE: 2.25, "switch:spine01": 0.3}, flows={"host09:mlx5_0>host12:mlx5_0"},
                   hosts={"host09", "host12"}, jobs={"4711", "k8s:pod1"})
    inc.evidence[CABLE] = ("capacity_loss spine01:Ethernet3>leaf03:Ethernet5: 741 ECN-marked packets",)
    if state is State.CLOSED:
        inc.end_ns = T0 + 5 * S
    return inc


def test_the_record_carries_the_ranked_suspects_and_survives_the_wire() -> None:
    rec = incident_record(_incident(State.OPEN), T0 + 2 * S)
    back = analytics_pb2.Incident.FromString(rec.SerializeToString())
    assert (back.schema_version, back.kind, back.state, back.window_end_ns, back.end_ns) == \
        (1, "degraded_link", "open", T0 + 2 * S, 0)
    assert [s.component for s in back.suspects] == [CABLE, "switch:spine01"]
    assert back.suspects[0].evidence[0].startswith("capacity_loss") and list(back.hosts) == ["host09", "host12"]
    assert list(back.jobs) == ["4711", "k8s:pod1"]


def test_the_line_tags_kind_and_top_suspect_and_leaves_end_out_while_open() -> None:
    line = incident_line(incident_record(_incident(State.OPEN), T0 + 2 * S))
    assert line.startswith(f"incident,kind=degraded_link,top_suspect={CABLE} ")
    assert "open=1i" in line and 'jobs="4711,k8s:pod1"' in line and "end_ns=" not in line and line.endswith(f" {T0 + 2 * S}")
    closed = incident_line(incident_record(_incident(State.CLOSED), T0 + 6 * S))
    assert "open=0i" in closed and f"end_ns={T0 + 5 * S}i" in closed
