"""The ApiVersions rewrite of the SASL proxy in every layout, checked by decoding with kafka-python's own
protocol classes."""

from __future__ import annotations

import pytest
from kafka.protocol.metadata.api_versions import ApiVersionsResponse

from flowtracer.testbed.kafka_frames import rewrite_api_versions


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
