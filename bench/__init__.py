"""Benchmarks: timing claims live here, never in pass/fail tests."""
