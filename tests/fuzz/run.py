"""Build tests/fuzz/scan_fuzzer.c with clang's libFuzzer, AddressSanitizer and
UndefinedBehaviorSanitizer, and run it over tests/fuzz/corpus for a bounded time.

    python -m tests.fuzz.run --seconds 3600 [--jobs 2] [--grown DIR]

New inputs that reach new branches go to --grown (tests.fuzz.differential checks them against
msgspec); a crash, leak or undefined behaviour stops the run, its input saved in --artifacts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
HARNESS = HERE / "scan_fuzzer.c"
CORPUS = HERE / "corpus"
DICTIONARY = HERE / "trace.dict"
SANITIZERS = ["-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all"]
SCRATCH = Path(tempfile.gettempdir()) / "attnprof-fuzz"


def clang() -> str | None:
    return os.environ.get("FUZZ_CLANG") or shutil.which("clang")


def build(binary: Path) -> subprocess.CompletedProcess:
    """The harness with the scanner's source compiled in, sanitized (clang's answer)."""
    compiler = clang()
    if compiler is None:
        raise FileNotFoundError("no clang: apt-get install clang")
    command = [compiler, "-g", "-O1", "-std=c99", *SANITIZERS, "-o", str(binary), str(HARNESS)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def run(binary: Path, seconds: int, grown: Path, artifacts: Path, jobs: int = 1):
    """libFuzzer for `seconds` over the seed corpus, new inputs into `grown`."""
    grown.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    command = [
        str(binary), f"-max_total_time={seconds}", f"-dict={DICTIONARY}", "-max_len=16384",
        "-timeout=10", "-rss_limit_mb=2048", "-print_final_stats=1",
        f"-artifact_prefix={artifacts}/", str(grown), str(CORPUS),
    ]  # fmt: skip
    if jobs > 1:
        command[1:1] = [f"-fork={jobs}"]
    # ASan's 256 MB quarantine and cached size classes grew the RSS past libFuzzer's 2 GB limit
    # in a 45 s CI run (an out-of-memory with 24 MB live); 16 MB, released to the OS: ~70 MB
    asan = "quarantine_size_mb=16:allocator_release_to_os_interval_ms=500"
    env = {**os.environ, "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", asan)}  # fmt: skip
    # Through a shell that forks it: libFuzzer's RSS limit reads getrusage's peak, which Linux
    # carries across exec from the process that forked (pytest, ~2 GB after the big-trace tests:
    # "out-of-memory (used: 2050Mb)" within a second); a small shell's child starts afresh
    command = ["/bin/sh", "-c", '"$@"; exit $?', "sh", *command]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=seconds + 120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--grown", type=Path, default=SCRATCH / "grown")
    parser.add_argument("--artifacts", type=Path, default=SCRATCH / "artifacts")
    parser.add_argument("--binary", type=Path, default=SCRATCH / "scan_fuzzer")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    args.binary.parent.mkdir(parents=True, exist_ok=True)
    built = build(args.binary)
    if built.returncode != 0:
        raise SystemExit(f"the harness does not build:\n{built.stderr}")
    done = run(args.binary, args.seconds, args.grown, args.artifacts, args.jobs)
    print(done.stderr[-3000:])
    raise SystemExit(done.returncode)


if __name__ == "__main__":
    main()
