"""Benchmark scripts; importable so tests can reuse the synthetic trace generator."""
