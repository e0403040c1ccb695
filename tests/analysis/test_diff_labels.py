"""What the Diff's words say about its figures (issue 42, item 7): one kernel instantiated with
other template arguments on each side is said to be that, not "only A" and "only B" with no
word; each side's per-window figures carry that side's own unit."""

from __future__ import annotations

from profiling.analysis.diff import diff, labelled
from profiling.analysis.role_views import role_diff, role_lines
from profiling.views import diff as views_diff
from tests.conftest import from_document

# fbgemm's embedding backward, as a recommendation model's trace names it, in fp32 and fp16
EMBEDDING = (
    "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1<{}, "
    "float, float, 4ul, 32>(at::GenericPackedTensorAccessor<{}, 2ul, at::RestrictPtrTraits, long>)"
)


def _trace(window: str, kernels: list[str], window_cat: str = "user_annotation"):
    """One window span on the CPU thread, one launch and one kernel per name inside it."""

    def event(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
        return {"ph": "X", "name": name, "ts": ts, "dur": dur, "cat": cat, "pid": pid,
                "tid": tid, "args": args}  # fmt: skip

    events = [event(window, 0, 1_000, cat=window_cat)]
    for i, name in enumerate(kernels):
        events.append(event("aten::embedding_backward", 10 + 100 * i, 50))
        events.append(event("cudaLaunchKernel", 20 + 100 * i, 5, cat="cuda_runtime", correlation=i))
        events.append(event(name, 200 + 100 * i, 40, cat="kernel", pid=0, tid=7, correlation=i))
    return from_document({"traceEvents": events})


def test_one_kernel_with_other_template_arguments_on_each_side_is_said_to_be_one():
    fp32 = _trace("ProfilerStep#1", [EMBEDDING.format("float", "float"), "void other_kernel()"])
    fp16 = _trace("ProfilerStep#1", [EMBEDDING.format("c10::Half", "c10::Half")])
    kernels, _ = diff(fp32, fp16, "fp32", "fp16")
    where = labelled(kernels).set_index("kernel")["where"]
    short = "split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1"
    assert sorted(where[short].tolist()) == [
        "only fp16 (fp32 runs it with other template arguments)",
        "only fp32 (fp16 runs it with other template arguments)",
    ]
    assert where["other_kernel"] == "only fp32"  # a kernel only one side has, as before


def test_each_sides_role_figures_carry_its_own_unit():
    """A backward run's trace (attn_bwd windows) against an uploaded one (ProfilerSteps): the
    upload's per-step figures were labelled "per backward", the first side's unit."""
    backward = _trace("attn_bwd", ["void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_"
                                   "align1>(T1::Params)"])  # fmt: skip
    upload = _trace("ProfilerStep#1", ["void my_custom_kernel<256>(float*)"])
    kernels, _ = diff(backward, upload, "cpu", "mi250")
    assert kernels.attrs["units"] == ("per backward", "per step")
    page = views_diff.diff_page(backward, upload, "cpu", "mi250")
    by_role = next(part for part in page.headline.split("\n\n") if part.startswith("By role"))
    assert "mi250 spends 40.0 µs per step in 1 kernel with no known role" in by_role
    assert "per backward" not in by_role.split("mi250 spends", 1)[1]
    table = role_diff(backward, upload)
    lines = role_lines(table, ("cpu", "mi250"), (" per backward", " per step"))
    assert any(line.startswith("mi250 spends 40.0 µs per step") for line in lines)
    assert all(line.count(" per x") == 1 for line in role_lines(table, ("cpu", "mi250"), " per x"))
