"""By hand, not in the suite (a 2 GiB input: 6.3 GB peak, 47 s here): a pid of 2³¹+53 digits.

    python -m tests.fuzz.huge_number

trace/scan_json.h once counted digits in an `int`, which wrapped past 2³¹: the piece was then
accepted with pid 8198552921648689607, where msgspec refuses it. The scanner must decline it.
"""

from __future__ import annotations

from profiling.trace import scan as trace_scan

DIGITS = 2**31 + 53


def main() -> None:
    pid = b"7" + b"1" * (DIGITS - 1)
    piece = b'[{"ph": "X", "cat": "kernel", "name": "k", "pid": ' + pid + b', "tid": 1}]'
    found = trace_scan.scan(piece)
    assert trace_scan.scanner() is not None, trace_scan.REASON
    assert found is None, f"accepted, pid {found.ints[trace_scan.PID][:1]}"
    print(f"a pid of {DIGITS} digits: declined")


if __name__ == "__main__":
    main()
