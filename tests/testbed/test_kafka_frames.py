"""The ApiVersions rewrite and the Produce reading and refusal of the SASL proxy in every layout, checked by
encoding and decoding with kafka-python's own protocol classes."""

from __future__ import annotations

import pytest
from kafka.protocol.metadata.api_versions import ApiVersionsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from flowtracer.testbed.kafka_frames import (
    ERR_TOPIC_AUTHORIZATION_FAILED,
    parse_produce,
    parse_request_header,
    produce_error_response,
    rewrite_api_versions,
)


@pytest.mark.parametrize("version", range(ApiVersionsResponse.min_version, ApiVersionsResponse.max_version + 1))
def test_api_versions_rewrite_adds_sasl_and_keeps_the_rest(version: int) -> None:
    """A broker answer without keys 17 and 36 gets them; other keys, throttle time and (v3+) the tagged
    feature fields come through unchanged, in every layout (compact arrays and tagged fields from v3)."""
    v = ApiVersionsResponse
    features = {} if version < 3 else {
        "supported_features": [v.SupportedFeatureKey(name="metadata.version", min_version=1, max_version=20,
                                                     version=version)],
        "finalized_features_epoch": 3, "finalized_features": [], "zk_migration_ready": False}
    original = v(version=version, error_code=0, throttle_time_ms=5,
                 api_keys=[v.ApiVersion(api_key=0, min_version=0, max_version=9, version=version),
                           v.ApiVersion(api_key=17, min_version=0, max_version=0, version=version)],
                 **features)
    original.with_header(correlation_id=11)
    rewritten = v.decode(rewrite_api_versions(bytes(original.encode(header=True)), version), version=version,
                         header=True)
    assert rewritten.header.correlation_id == 11 and rewritten.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in rewritten.api_keys} == \
        {0: (0, 9), 17: (0, 1), 36: (0, 2)}
    if version >= 1:
        assert rewritten.throttle_time_ms == 5
    if version >= 3:
        assert [f.name for f in rewritten.supported_features] == ["metadata.version"]
        assert rewritten.finalized_features_epoch == 3


@pytest.mark.parametrize("version", range(3, 13))
def test_produce_requests_are_read_and_refused_in_the_version_asked(version: int) -> None:
    """The proxy's ACL check reads each topic and partition of a Produce request (kafka-python's own encoding,
    every version from v3 to v12) and answers TOPIC_AUTHORIZATION_FAILED in a response that kafka-python's own
    decoder reads back."""
    data = ProduceRequest.TopicProduceData.PartitionProduceData
    request = ProduceRequest(version=version, transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="flowtracer.counters.v1", partition_data=[
            data(index=0, records=b"\x01" * 70), data(index=3, records=None)]),
        ProduceRequest.TopicProduceData(name="flowtracer.flows.v1", partition_data=[data(index=1, records=b"")]),
    ])
    request.with_header(correlation_id=41, client_id="acl-test")
    raw = bytes(request.encode(header=True, framed=True))[4:]
    header = parse_request_header(raw)
    produce = parse_produce(raw, header)
    assert produce.acks == -1
    assert produce.topics == [("flowtracer.counters.v1", [0, 3]), ("flowtracer.flows.v1", [1])]
    answer = produce_error_response(header, produce, ERR_TOPIC_AUTHORIZATION_FAILED)
    response = ProduceResponse.decode(answer[4:], version=version, header=True)
    assert response.header.correlation_id == 41
    got = {(t.name, p.index, p.error_code) for t in response.responses for p in t.partition_responses}
    assert got == {("flowtracer.counters.v1", 0, 29), ("flowtracer.counters.v1", 3, 29), ("flowtracer.flows.v1", 1, 29)}
