"""The C scanner fuzzed in the suite, for a bounded time (docs/testing.md has a longer run):
fuzz/scan_fuzzer.c under libFuzzer with AddressSanitizer and UndefinedBehaviorSanitizer, then
the scanner against msgspec (fuzz.differential) on the seed corpus, what libFuzzer grew from it,
and mutants of both.

Without clang or the scanner these skip on a developer's machine; where
ATTNPROF_REQUIRE_SCANNER=1 (.ci/run sets it, and installs clang) they fail instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from profiling.trace import scan as trace_scan
from tests.fuzz import differential
from tests.fuzz import run as libfuzzer

REQUIRED = os.environ.get("ATTNPROF_REQUIRE_SCANNER", "") not in ("", "0")  # .ci/run sets it
LIBFUZZER_SECONDS = 45
DIFFERENTIAL_SECONDS = 30

pytestmark = pytest.mark.slow


def unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason}, and ATTNPROF_REQUIRE_SCANNER=1 requires the fuzzers", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def grown(tmp_path_factory) -> Path:
    """libFuzzer's run: a crash, leak or undefined behaviour fails here; the inputs it grew
    (new branches of the scanner) are the differential's too."""
    if libfuzzer.clang() is None:
        unavailable("no clang for the libFuzzer harness: apt-get install clang")
    work = tmp_path_factory.mktemp("fuzz")
    binary = work / "scan_fuzzer"
    built = libfuzzer.build(binary)
    assert built.returncode == 0, f"the harness does not build:\n{built.stderr}"
    done = libfuzzer.run(binary, LIBFUZZER_SECONDS, work / "grown", work / "artifacts")
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Done" in done.stderr and "stat::number_of_executed_units" in done.stderr
    return work / "grown"


def test_the_scanner_survives_libfuzzer_under_the_sanitizers(grown):
    assert any(grown.iterdir()), "libFuzzer grew nothing from the seed corpus"


def test_the_scanner_reads_fuzzed_pieces_as_msgspec_does(request, tmp_path):
    if trace_scan.scanner() is None:
        unavailable(f"no C scanner: {'; '.join(trace_scan.REASON)}")
    folders = [differential.CORPUS]
    if libfuzzer.clang() is not None:
        folders.append(request.getfixturevalue("grown"))
    counts = differential.fuzz(DIFFERENTIAL_SECONDS, folders, tmp_path / "artifacts")
    assert counts["mutants"] > 1000 and counts["scanned"] > 100, counts
