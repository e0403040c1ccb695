"""Bytes of the C scanner's tables per byte of piece, for pieces of the tiniest events.

    python -m benchmarks.scan_tables

Rows are kept only for complete (X) and metadata (M) events and grow by doubling, at most one
per 11 bytes (`{"ph":"X"},`), 200 bytes each. Before (rows sized by the piece's count of `{`,
one per event), a 12 MiB piece of `{},` made 839 MB of tables per scanning thread. Measured
2026-12-03 on the project's 2-core machine:

    {},                12 MiB  events  4194304  kept        0  tables   18.8 MiB (1.6 B / byte)
    {"ph":"X"},        12 MiB  events  1143901  kept  1143901  tables  218.2 MiB (18.2 B / byte)
    torch-like kernel  12 MiB  events    74455  kept    74455  tables   18.8 MiB (1.6 B / byte)

The second is the bound: 200 bytes per 11. The reader's pieces are ~8 MiB (trace_stream.PIECE)
and two threads scan, so at most ~0.3 GB of tables in all for any content.
"""

from __future__ import annotations

from profiling.trace import scan as trace_scan

SIZE = 12 * 1024**2
KERNEL = (
    b'{"ph":"X","cat":"kernel","name":"void at::native::elementwise_kernel<128, 4>","pid":0,'
    b'"tid":7,"ts":5111183402378.472,"dur":2.5,"args":{"correlation":3,"External id":4}},'
)
UNITS = {"{},": b"{},", '{"ph":"X"},': b'{"ph":"X"},', "torch-like kernel": KERNEL}


def main() -> None:
    for name, unit in UNITS.items():
        trace_scan._tables.tables = None
        piece = b"[" + (unit * (SIZE // len(unit)))[:-1] + b"]"
        found = trace_scan.scan(piece)
        assert found is not None, trace_scan.REASON
        tables = sum(t.nbytes for t in trace_scan._tables.tables)
        print(
            f"{name:18} {len(piece) / 2**20:.0f} MiB  events {found.n_events:>8}  "
            f"kept {found.ints.shape[1]:>8}  tables {tables / 2**20:6.1f} MiB "
            f"({tables / len(piece):.1f} B / byte)"
        )


if __name__ == "__main__":
    main()
