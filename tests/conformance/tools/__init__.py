"""Converters from KAI-Scheduler's Go tests to the scenario files of tests/conformance (see act2yaml, go2yaml)."""
