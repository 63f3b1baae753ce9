"""The conformance harness as a test: `ci` profile in the normal suite (derandomized), `deep`
with EPOCHGC_CONFORMANCE_PROFILE=deep (`tox -e deep`)."""

from __future__ import annotations

from tests.conformance.machine import ConformanceMachine, profile_settings

TestConformance = ConformanceMachine.TestCase
TestConformance.settings = profile_settings()
