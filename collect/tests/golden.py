"""Builds ``golden_samples.jsonl``: what the collector writes, with synthetic times, for parser tests here and in
perfcast's Rust tests. Run ``python3 collect/tests/golden.py`` to rewrite the file after a deliberate format change.

Content: every S1 Table I operator of GPT-NeoX-20B at mp = 4, b = 4 (S1's model; forward and backward, bf16, plus
fp16 for the GEMMs), LLaMA-2-7B's RMSNorm, SwiGLU, Flash_Attention and Linear1 (mp = 2), LLaMA-2-70B's grouped-query
Linear1 (mp = 8), and one line per collective at 1 MiB over 8 ranks on one node. The times are a made-up function of
the shape — not measurements.
"""

from __future__ import annotations

import io
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from perfcast_collect import grid, nccl, output  # noqa: E402

GOLDEN_PATH = os.path.join(HERE, "golden_samples.jsonl")
GPU = "NVIDIA H100 80GB HBM3"
ENV = {"torch": "2.4.0+cu124", "cuda": "12.4", "cudnn": "90100", "driver": "550.54.15", "collector": "0.1.0"}
HEADER = dict(ENV, gpu=GPU, kind="golden", note="synthetic times for parser tests, not measurements")


def _synthetic_us(dims, phase: str) -> float:
    size = 1
    for _, v in dims:
        size *= v
    return round((3.0 + (size % 100_003) / 997.0) * (2.0 if phase == "bwd" else 1.0), 3)


def _cases():
    neox = grid.model_configs([grid.model_by_name("GPT-NeoX-20B")], mps=[4], bs=[4])
    l7 = grid.model_configs([grid.model_by_name("LLaMA-2-7B")], mps=[2], bs=[4])
    l70 = grid.model_configs([grid.model_by_name("LLaMA-2-70B")], mps=[8], bs=[4])
    cases = [c for cfg in neox for c in grid.ops_for_config(cfg)]
    cases += [
        c
        for cfg in l7
        for c in grid.ops_for_config(cfg)
        if c.s1_op in ("RMSNorm", "SwiGLU", "Flash_Attention", "Linear1")
    ]
    cases += [c for cfg in l70 for c in grid.ops_for_config(cfg) if c.s1_op == "Linear1"]
    return grid.dedup(cases)


def samples():
    """The golden samples, in file order."""
    out = []
    for case in _cases():
        dtypes = ("bf16", "fp16") if case.op in ("linear", "bmm") else ("bf16",)
        for dtype in dtypes:
            for phase in case.phases:
                t = _synthetic_us(case.dims, phase)
                attrs = dict(case.attributes(), **ENV, min_us=round(t * 0.98, 3), max_us=round(t * 1.05, 3))
                if case.op == "fused_softmax":
                    attrs["impl"] = "compiled"
                out.append(output.op_sample(case.op, phase, dtype, GPU, case.dims_dict, t, attrs))
    for c in nccl.ALL_COLLECTIVES:
        nbytes, _, _ = nccl.buffer_elements(c, 1 << 20, 8, 2)
        t = 10.0 + nbytes / 150_000.0
        out.append(output.comm_sample(c, nbytes, 8, 1, 8, t, "bf16", GPU, dict(ENV, nccl="2.21.5", backend="nccl")))
    return out


def render() -> str:
    """The golden file's text, exactly as ``SampleWriter`` writes it."""
    buf = io.StringIO()
    w = output.SampleWriter("golden", HEADER, stream=buf)
    w.write_all(samples())
    w.close()
    return buf.getvalue()


if __name__ == "__main__":
    with open(GOLDEN_PATH, "w", encoding="utf-8", newline="\n") as f:
        f.write(render())
    print(f"wrote {GOLDEN_PATH}")
