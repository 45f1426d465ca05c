"""The suite's Hypothesis profile (tests/conftest.py) is in force, also under per-test @settings."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

SPEED_CHECKS = {HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example}

pytestmark = pytest.mark.skipif(os.environ.get("UTVM_HYPOTHESIS_PROFILE", "ci") != "ci",
                                reason="another Hypothesis profile was chosen")


def test_ci_profile_has_no_speed_checks() -> None:
    assert settings.default.deadline is None
    assert SPEED_CHECKS <= set(settings.default.suppress_health_check)


def test_per_test_settings_inherit_the_profile() -> None:
    # The test that once failed with FailedHealthCheck on a loaded machine, and one with its own
    # @settings(max_examples=...): both are built on the loaded profile, so neither a deadline nor a speed
    # health check comes back.
    from tests.rpc import test_protocol

    for test, examples in ((test_protocol.test_packed_sequence_roundtrip_every_type_code, 100),
                           (test_protocol.test_fuzz_decoders_raise_only_remote_protocol_error, 400)):
        s = test._hypothesis_internal_use_settings
        assert s.max_examples == examples
        assert s.deadline is None
        assert SPEED_CHECKS <= set(s.suppress_health_check)
