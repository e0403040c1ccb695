"""Fuzzers of the C trace scanner (docs/testing.md): scan_fuzzer.c under libFuzzer with the
sanitizers (run.py), and the scanner against msgspec on mutated pieces (differential.py)."""
