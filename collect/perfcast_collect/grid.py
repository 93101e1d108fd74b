"""The shapes to measure: S1's sampling ranges, known models, and S1 Table I operators mapped onto perfcast's classes.

Pure Python (no torch): a plan can be built, listed and tested on any machine.

S1 (Zhang et al., "Efficient Fine-Grained GPU Performance Modeling for Distributed Deep Learning of LLM") samples
the operator benchmarks over

    mp 1–16 (×2), b 4–8 (×2), h 16–80 (+8), l 1024–5120 (+512), d 2048–8192 (+512)

— 5·2·9·9·13 = 10,530 points before the divisibility constraints, ~70 timed kernels each: far too many. A plan is

1. the configurations of well-known models (their own l, v, FFN width, norm, activation, grouped-query heads),
2. a seeded Latin-hypercube subset of the valid grid (``max_shapes`` configurations), and
3. the 32 corners of the box (snapped to the nearest valid hidden size where the corner itself is invalid),

each expanded into Table I operators (``ops_for_config``) and deduplicated on (class, dims): the same kernel shape
is measured once, whichever model or grid point asked for it.

Validity (Megatron's constraints): ``h % mp == 0`` (whole heads per tensor-parallel rank) and ``d % h == 0`` (a
whole head dimension); ``d % mp == 0`` follows. Models with grouped-query attention also need ``kv % mp == 0``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

# --- S1 sampling ranges ------------------------------------------------------------------------------------------

MP_VALUES: Tuple[int, ...] = (1, 2, 4, 8, 16)
B_VALUES: Tuple[int, ...] = (4, 8)
H_VALUES: Tuple[int, ...] = tuple(range(16, 81, 8))
L_VALUES: Tuple[int, ...] = tuple(range(1024, 5121, 512))
D_VALUES: Tuple[int, ...] = tuple(range(2048, 8193, 512))
AXES: Tuple[Tuple[str, Tuple[int, ...]], ...] = (
    ("mp", MP_VALUES),
    ("b", B_VALUES),
    ("h", H_VALUES),
    ("l", L_VALUES),
    ("d", D_VALUES),
)

#: Vocabularies a grid configuration draws from (LLaMA-2, GPT-2/GPT-NeoX as S1 uses it, LLaMA-3 tokenizers).
GRID_VOCABS: Tuple[int, ...] = (32000, 50257, 128256)
#: Encoders per pipeline stage a grid configuration's optimizer step covers (S1's Optimizer feature "encoders").
GRID_ENCODERS: Tuple[int, ...] = (1, 2, 4)

#: S1 Table I operator names as perfcast's decomposition spells them (`src/llm/operators.rs`, `OpName`), plus
#: SwiGLU (LLaMA's MLP gate, perfcast class `swiglu`; not in S1's table).
S1_OPS: Tuple[str, ...] = (
    "Embedding",
    "LayerNorm",
    "RMSNorm",
    "Linear1",
    "RoPE",
    "QK^T",
    "Fillmask",
    "Softmax",
    "Fused_Softmax",
    "V",
    "Flash_Attention",
    "Linear2",
    "Linear3",
    "GeLU",
    "SwiGLU",
    "Linear4",
    "Final_Linear",
    "Parallel_Cross_Entropy",
    "Optimizer",
)

#: perfcast operator class → dim names, in order (`src/op/mod.rs`, `OpClass::dim_names`).
CLASS_DIMS: Dict[str, Tuple[str, ...]] = {
    "linear": ("B", "M", "N", "K"),
    "bmm": ("B", "M", "N", "K"),
    "layernorm": ("B", "H"),
    "rmsnorm": ("B", "H"),
    "softmax": ("B", "H"),
    "fused_softmax": ("B", "H"),
    "fillmask": ("B", "H"),
    "gelu": ("B", "H"),
    "swiglu": ("B", "H"),
    "elementwise": ("B", "H", "I"),
    "rope": ("B", "H"),
    "flash_attention": ("B", "L", "A", "D"),
    "embedding": ("T", "V", "H"),
    "cross_entropy": ("T", "V"),
    "optimizer": ("P",),
}

#: FlashAttention (PyTorch's flash backend) needs a head dimension that is a multiple of 8 and at most 256.
FLASH_MAX_HEAD_DIM = 256


def padded_vocab(v: int, mp: int) -> int:
    """S1 eq. 1–2 (Megatron's ``_vocab_size_with_padding``): ``ceil(v / (128·mp)) · 128·mp``.

    e.g. v = 50257, mp = 4 → 50688.
    """
    div = 128 * max(1, mp)
    return -(-v // div) * div


def encoder_params(d: int, mp: int) -> float:
    """Parameters of one encoder on one tensor-parallel rank, S1 eq. 6: ``4d + 8d(d+1)/mp + d(4d+1)/mp``."""
    mp = max(1, mp)
    return 4 * d + 8 * d * (d + 1) / mp + d * (4 * d + 1) / mp


def is_valid(mp: int, b: int, h: int, l: int, d: int) -> bool:
    """Megatron's constraints: whole heads per rank (``h % mp == 0``), whole head dimension (``d % h == 0``)."""
    return min(mp, b, h, l, d) > 0 and h % mp == 0 and d % h == 0


# --- configurations ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    """A well-known model's architecture. ``ffn`` is the MLP's intermediate width (unsplit); ``gated`` means a
    SwiGLU MLP whose up-projection (Linear3) produces gate and up together, 2·ffn columns; ``kv_heads`` < ``heads``
    is grouped-query attention."""

    name: str
    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    ffn: int
    norm: str  # "LayerNorm" | "RMSNorm"
    gated: bool
    rotary: bool
    kv_heads: int = 0  # 0: same as heads

    @property
    def kv(self) -> int:
        return self.kv_heads or self.heads


#: Shapes of well-known models (published configurations). GPT-3 per Brown et al. 2020 Table 2.1 with the
#: Megatron/NeMo head counts where the table is inconsistent (1.3B: 16 heads of 128; 13B: d = 5120, as trained in
#: practice); GPT-NeoX-20B and LLaMA-13B/Llemma-7B as in perfcast's examples (S1's models); LLaMA-2/3 per their
#: model cards. GPT-NeoX-20B's partial rotary (25 % of the head dimension) is measured as full-head RoPE, the
#: shape perfcast's decomposition uses.
KNOWN_MODELS: Tuple[ModelSpec, ...] = (
    ModelSpec("GPT-3-1.3B", 24, 2048, 16, 2048, 50257, 4 * 2048, "LayerNorm", False, False),
    ModelSpec("GPT-3-2.7B", 32, 2560, 32, 2048, 50257, 4 * 2560, "LayerNorm", False, False),
    ModelSpec("GPT-3-6.7B", 32, 4096, 32, 2048, 50257, 4 * 4096, "LayerNorm", False, False),
    ModelSpec("GPT-3-13B", 40, 5120, 40, 2048, 50257, 4 * 5120, "LayerNorm", False, False),
    ModelSpec("GPT-3-175B", 96, 12288, 96, 2048, 50257, 4 * 12288, "LayerNorm", False, False),
    ModelSpec("GPT-NeoX-20B", 44, 6144, 64, 2048, 50257, 4 * 6144, "LayerNorm", False, True),
    ModelSpec("LLaMA-13B", 40, 5120, 40, 2048, 32000, 13824, "RMSNorm", True, True),
    ModelSpec("Llemma-7B", 32, 4096, 32, 4096, 32016, 11008, "RMSNorm", True, True),
    ModelSpec("LLaMA-2-7B", 32, 4096, 32, 4096, 32000, 11008, "RMSNorm", True, True),
    ModelSpec("LLaMA-2-13B", 40, 5120, 40, 4096, 32000, 13824, "RMSNorm", True, True),
    ModelSpec("LLaMA-2-70B", 80, 8192, 64, 4096, 32000, 28672, "RMSNorm", True, True, kv_heads=8),
    ModelSpec("LLaMA-3-8B", 32, 4096, 32, 8192, 128256, 14336, "RMSNorm", True, True, kv_heads=8),
    ModelSpec("LLaMA-3-70B", 80, 8192, 64, 8192, 128256, 28672, "RMSNorm", True, True, kv_heads=8),
)

#: Tensor-parallel degrees and micro-batch sizes the known models are measured with by default.
MODEL_MPS: Tuple[int, ...] = (1, 2, 4, 8)
MODEL_BS: Tuple[int, ...] = (4,)


def model_by_name(name: str) -> ModelSpec:
    """The known model called ``name`` (case-insensitive); ``KeyError`` naming the known ones otherwise."""
    for m in KNOWN_MODELS:
        if m.name.lower() == name.strip().lower():
            return m
    raise KeyError(f"unknown model {name!r}; known: {', '.join(m.name for m in KNOWN_MODELS)}")


@dataclass(frozen=True)
class Config:
    """One point to expand into operators: S1's symbols plus what the architecture adds.

    ``norms``/``acts`` list the Table I norm and MLP-activation operators to emit (a grid point emits both of each;
    a model its own); ``gated`` doubles Linear3's output (fused gate+up); ``encoders`` are the stage sizes whose
    optimizer step is timed; ``source`` is ``grid``, ``corner`` or ``model``."""

    mp: int
    b: int
    h: int
    l: int
    d: int
    v: int
    ffn: int
    kv: int
    norms: Tuple[str, ...]
    acts: Tuple[str, ...]
    gated: bool
    rotary: bool
    encoders: Tuple[int, ...]
    source: str
    model: Optional[str] = None

    @property
    def key(self) -> Tuple[int, int, int, int, int]:
        return (self.mp, self.b, self.h, self.l, self.d)


def grid_config(mp: int, b: int, h: int, l: int, d: int, v: int, encoders: Tuple[int, ...], source: str) -> Config:
    """A grid point: every Table I operator (both norms, GeLU and SwiGLU over the S1 MLP width 4d/mp, RoPE)."""
    return Config(
        mp=mp,
        b=b,
        h=h,
        l=l,
        d=d,
        v=v,
        ffn=4 * d,
        kv=h,
        norms=("LayerNorm", "RMSNorm"),
        acts=("GeLU", "SwiGLU"),
        gated=False,
        rotary=True,
        encoders=encoders,
        source=source,
    )


def model_configs(
    models: Sequence[ModelSpec], mps: Sequence[int] = MODEL_MPS, bs: Sequence[int] = MODEL_BS
) -> List[Config]:
    """Each model at each tensor-parallel degree it can be split by (heads, kv heads, hidden and FFN width
    divisible by mp) and each micro-batch size, at its own sequence length. Optimizer stages: 1 encoder and a
    quarter of the layers (a pipeline of 4)."""
    out = []
    for m in models:
        for mp in mps:
            if m.heads % mp or m.kv % mp or m.hidden % mp or m.ffn % mp or m.hidden % m.heads:
                continue
            for b in bs:
                out.append(
                    Config(
                        mp=mp,
                        b=b,
                        h=m.heads,
                        l=m.seq_len,
                        d=m.hidden,
                        v=m.vocab,
                        ffn=m.ffn,
                        kv=m.kv,
                        norms=(m.norm,),
                        acts=("SwiGLU",) if m.gated else ("GeLU",),
                        gated=m.gated,
                        rotary=m.rotary,
                        encoders=tuple(sorted({1, math.ceil(m.layers / 4)})),
                        source="model",
                        model=m.name,
                    )
                )
    return out


def valid_grid() -> List[Tuple[int, int, int, int, int]]:
    """Every valid (mp, b, h, l, d) of S1's ranges, in lexicographic order."""
    return [
        (mp, b, h, l, d)
        for mp in MP_VALUES
        for b in B_VALUES
        for h in H_VALUES
        for l in L_VALUES
        for d in D_VALUES
        if is_valid(mp, b, h, l, d)
    ]


def _norm_coords(p: Tuple[int, int, int, int, int]) -> Tuple[float, ...]:
    """Each axis value at the centre of its equal-width bin of [0, 1]: value i of n sits at (i + ½)/n."""
    return tuple((vals.index(x) + 0.5) / len(vals) for x, (_, vals) in zip(p, AXES))


def sample_grid(n: int, seed: int) -> List[Config]:
    """``n`` distinct valid grid configurations by Latin-hypercube sampling, reproducible from ``seed``.

    Each axis is cut into ``n`` equal strata and every stratum holds exactly one point (the strata are matched
    across axes by independent random permutations). A point is mapped to the valid configuration nearest to it in
    normalized index space (value i of an axis with n values owns the bin [i/n, (i+1)/n)) among those not chosen
    yet and with the point's own mp and b — so mp and b keep their
    stratification exactly (their value counts differ by at most one) while h, l and d move as little as the
    constraints require. Fewer than ``n`` come back only when the valid grid has fewer. Each configuration then
    draws its vocabulary from ``GRID_VOCABS`` and its optimizer stage size from ``GRID_ENCODERS``.
    """
    if n <= 0:
        return []
    rng = random.Random(seed)
    valid = valid_grid()
    coords = {p: _norm_coords(p) for p in valid}
    by_mpb: Dict[Tuple[int, int], List[Tuple[int, int, int, int, int]]] = {}
    for p in valid:
        by_mpb.setdefault((p[0], p[1]), []).append(p)
    n = min(n, len(valid))
    perms = [rng.sample(range(n), n) for _ in AXES]
    points = [[(perms[a][i] + rng.random()) / n for a in range(len(AXES))] for i in range(n)]
    chosen: List[Tuple[int, int, int, int, int]] = []
    taken = set()
    for u in points:
        mp = MP_VALUES[min(int(u[0] * len(MP_VALUES)), len(MP_VALUES) - 1)]
        b = B_VALUES[min(int(u[1] * len(B_VALUES)), len(B_VALUES) - 1)]
        pool = [p for p in by_mpb[(mp, b)] if p not in taken] or [p for p in valid if p not in taken]
        if not pool:
            break
        best = min(pool, key=lambda p: (sum((c - x) ** 2 for c, x in zip(coords[p][2:], u[2:])), p))
        taken.add(best)
        chosen.append(best)
    return [
        grid_config(*p, v=rng.choice(GRID_VOCABS), encoders=(rng.choice(GRID_ENCODERS),), source="grid") for p in chosen
    ]


def valid_hidden(h: int, mp: int = 1) -> List[int]:
    """The hidden sizes of S1's range that ``h`` heads (split ``mp`` ways) can use."""
    return [d for d in D_VALUES if is_valid(mp, 1, h, 1, d)]


def corner_configs() -> List[Config]:
    """The 2⁵ = 32 corners of S1's box. Where a corner's hidden size is not divisible by its heads (h = 80 with
    d = 2048 or 8192), d is snapped to the extreme valid value on that side (2560 or 7680). The small-d corners
    use the smallest vocabulary, the large-d corners the largest; the optimizer covers one encoder."""
    out = []
    for mp in (MP_VALUES[0], MP_VALUES[-1]):
        for b in (B_VALUES[0], B_VALUES[-1]):
            for h in (H_VALUES[0], H_VALUES[-1]):
                for l in (L_VALUES[0], L_VALUES[-1]):
                    ds = valid_hidden(h, mp)
                    for d, v in ((ds[0], min(GRID_VOCABS)), (ds[-1], max(GRID_VOCABS))):
                        out.append(grid_config(mp, b, h, l, d, v=v, encoders=(1,), source="corner"))
    return out


# --- operators --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpCase:
    """One kernel shape to time: the S1 operator, perfcast's class and dims (names per ``CLASS_DIMS``), the phases
    to time, the configuration it came from, the models that share this exact shape, and the attributes only this
    operator's shape depends on (``v``, ``ffn``, ``kv_heads``, ``encoders``)."""

    s1_op: str
    op: str
    dims: Tuple[Tuple[str, int], ...]
    phases: Tuple[str, ...]
    config: Config
    models: Tuple[str, ...] = field(default=())
    extra: Tuple[Tuple[str, int], ...] = field(default=())

    @property
    def dims_dict(self) -> Dict[str, int]:
        return dict(self.dims)

    @property
    def key(self) -> Tuple[str, Tuple[Tuple[str, int], ...]]:
        """The deduplication key: the same class and dims is the same kernel."""
        return (self.op, self.dims)

    def attributes(self) -> Dict[str, object]:
        """Sample attributes describing where the shape came from: ``s1_op``, S1's symbols (``mp``, ``b``, ``l``,
        ``d``, ``h``, and the operator's ``extra``), ``model`` (``;``-joined) when known models have this shape,
        and ``source``."""
        c = self.config
        a: Dict[str, object] = {"s1_op": self.s1_op, "mp": c.mp, "b": c.b, "l": c.l, "d": c.d, "h": c.h}
        a.update(self.extra)
        if self.models:
            a["model"] = ";".join(self.models)
        a["source"] = c.source
        return a


def _case(
    s1_op: str,
    op: str,
    dims: Sequence[Tuple[str, int]],
    cfg: Config,
    phases=("fwd", "bwd"),
    extra: Sequence[Tuple[str, int]] = (),
) -> OpCase:
    return OpCase(s1_op, op, tuple(dims), tuple(phases), cfg, (cfg.model,) if cfg.model else (), tuple(extra))


def flash_supported(head_dim: int) -> bool:
    """PyTorch's flash-attention kernel takes head dimensions that are multiples of 8, up to 256."""
    return head_dim % 8 == 0 and head_dim <= FLASH_MAX_HEAD_DIM


def ops_for_config(cfg: Config) -> List[OpCase]:
    """S1 Table I for one configuration, in perfcast's classes and dims (the same as perfcast's decomposition,
    ``src/llm/operators.rs``). With bl = b·l, hp = h/mp, dh = d/h, vp = v_padded/mp, f = ffn/mp:

    Embedding → embedding T=bl V=vp H=d; LayerNorm/RMSNorm → B=bl H=d; Linear1 → linear M=bl N=(hp+2·kvp)·dh
    (= 3d/mp without GQA) K=d; RoPE → rope B=bl·hp H=dh; QK^T → bmm B=b·hp M=l N=l K=dh; Fillmask, Softmax,
    Fused_Softmax → B=b·hp·l H=l; V → bmm B=b·hp M=l N=dh K=l; Flash_Attention → B=b L=l A=hp D=dh (only where the
    flash kernel takes dh); Linear2 → linear M=bl N=d K=d/mp; Linear3 → linear M=bl N=f (2f gated) K=d;
    GeLU/SwiGLU → B=bl H=f; Linear4 → linear M=bl N=d K=f; Final_Linear → linear M=bl N=vp K=d;
    Parallel_Cross_Entropy → cross_entropy T=bl V=vp; Optimizer → optimizer P = encoders · S1 eq. 6 (forward only).
    """
    b, l, d, h, mp = cfg.b, cfg.l, cfg.d, cfg.h, cfg.mp
    bl, hp, dh = b * l, h // mp, d // h
    kvp = max(1, cfg.kv // mp)
    vp = padded_vocab(cfg.v, mp) // mp
    f = cfg.ffn // mp
    vocab, width = (("v", cfg.v),), (("ffn", cfg.ffn),)
    ops: List[OpCase] = [_case("Embedding", "embedding", (("T", bl), ("V", vp), ("H", d)), cfg, extra=vocab)]
    for norm in cfg.norms:
        ops.append(_case(norm, norm.lower(), (("B", bl), ("H", d)), cfg))
    gqa = (("kv_heads", cfg.kv),) if cfg.kv != h else ()
    ops.append(_case("Linear1", "linear", (("B", 1), ("M", bl), ("N", (hp + 2 * kvp) * dh), ("K", d)), cfg, extra=gqa))
    if cfg.rotary:
        ops.append(_case("RoPE", "rope", (("B", bl * hp), ("H", dh)), cfg))
    ops.append(_case("QK^T", "bmm", (("B", b * hp), ("M", l), ("N", l), ("K", dh)), cfg))
    rows = (("B", b * hp * l), ("H", l))
    ops.append(_case("Fillmask", "fillmask", rows, cfg))
    ops.append(_case("Softmax", "softmax", rows, cfg))
    ops.append(_case("Fused_Softmax", "fused_softmax", rows, cfg))
    ops.append(_case("V", "bmm", (("B", b * hp), ("M", l), ("N", dh), ("K", l)), cfg))
    if flash_supported(dh):
        ops.append(_case("Flash_Attention", "flash_attention", (("B", b), ("L", l), ("A", hp), ("D", dh)), cfg))
    ops.append(_case("Linear2", "linear", (("B", 1), ("M", bl), ("N", d), ("K", d // mp)), cfg))
    up = (2 if cfg.gated else 1) * f
    ops.append(_case("Linear3", "linear", (("B", 1), ("M", bl), ("N", up), ("K", d)), cfg, extra=width))
    for act in cfg.acts:
        ops.append(_case(act, act.lower(), (("B", bl), ("H", f)), cfg, extra=width))
    ops.append(_case("Linear4", "linear", (("B", 1), ("M", bl), ("N", d), ("K", f)), cfg, extra=width))
    ops.append(_case("Final_Linear", "linear", (("B", 1), ("M", bl), ("N", vp), ("K", d)), cfg, extra=vocab))
    ops.append(_case("Parallel_Cross_Entropy", "cross_entropy", (("T", bl), ("V", vp)), cfg, extra=vocab))
    for n in cfg.encoders:
        p = round(n * encoder_params(d, mp))
        ops.append(_case("Optimizer", "optimizer", (("P", p),), cfg, phases=("fwd",), extra=(("encoders", n),)))
    return ops


def dedup(cases: Iterable[OpCase]) -> List[OpCase]:
    """Keeps the first case of each (class, dims), in order; later duplicates add their model names to it."""
    first: Dict[tuple, int] = {}
    out: List[OpCase] = []
    for c in cases:
        i = first.get(c.key)
        if i is None:
            first[c.key] = len(out)
            out.append(c)
            continue
        extra = tuple(m for m in c.models if m not in out[i].models)
        if extra:
            o = out[i]
            out[i] = OpCase(o.s1_op, o.op, o.dims, o.phases, o.config, o.models + extra, o.extra)
    return out


# --- memory -------------------------------------------------------------------------------------------------------

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def _io_elements(op: str, dm: Dict[str, int]) -> Tuple[int, int]:
    """(input, output) elements of one call of ``op`` with dims ``dm``."""
    if op in ("linear", "bmm"):
        bt, m, n, k = dm.get("B", 1) or 1, dm["M"], dm["N"], dm["K"]
        weights = n * k if op == "linear" else bt * n * k
        return bt * m * k + weights, bt * m * n
    if op == "swiglu":
        return 2 * dm["B"] * dm["H"], dm["B"] * dm["H"]
    if op == "rope":
        return 2 * dm["B"] * dm["H"], 2 * dm["B"] * dm["H"]
    if op == "elementwise":
        rows = dm["B"] * dm["H"]
        return (dm.get("I") or 2) * rows, rows
    if op == "flash_attention":
        x = dm["B"] * dm["L"] * dm["A"] * dm["D"]
        return 3 * x, x
    if op == "embedding":
        return dm["V"] * dm["H"] + dm["T"], dm["T"] * dm["H"]
    if op == "cross_entropy":
        return dm["T"] * dm["V"], 1
    if op == "optimizer":
        return dm["P"], 0
    return dm["B"] * dm["H"], dm["B"] * dm["H"]


def memory_bytes(case: OpCase, dtype: str, phase: str) -> int:
    """Estimated device memory to time ``case`` in ``dtype`` and ``phase``, bytes — used to skip shapes that
    cannot fit before trying them (an out-of-memory error is still caught at run time).

    Inputs + outputs × 1.5 forward (temporaries), × 3 backward (saved tensors, gradients of inputs and output).
    Cross-entropy adds its fp32 copy of the logits (and its gradient backward); the fused Adam step holds fp32
    parameters, gradients and two moments, 16 bytes per parameter, in either phase.
    """
    e = DTYPE_BYTES.get(dtype, 4)
    dm = case.dims_dict
    if case.op == "optimizer":
        return 16 * dm["P"]
    i, o = _io_elements(case.op, dm)
    factor = 1.5 if phase == "fwd" else 3.0
    total = e * (i + o) * factor
    if case.op == "cross_entropy":
        total += 4 * dm["T"] * dm["V"] * (2 if phase == "fwd" else 4)
    return int(total)


# --- the plan -------------------------------------------------------------------------------------------------------


@dataclass
class Plan:
    """The configurations and the deduplicated operator cases to time, in order: known models, the sampled grid,
    the corners (a run cut short by a time budget still has whole configurations)."""

    configs: List[Config]
    cases: List[OpCase]

    def count_by_class(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        for c in self.cases:
            out[c.op] = out.get(c.op, 0) + 1
        return out


def build_plan(
    max_shapes: int = 64,
    seed: int = 0,
    models: Optional[Sequence[ModelSpec]] = KNOWN_MODELS,
    corners: bool = True,
    model_mps: Sequence[int] = MODEL_MPS,
    model_bs: Sequence[int] = MODEL_BS,
    ops: Optional[Sequence[str]] = None,
    extra_configs: Sequence[Config] = (),
) -> Plan:
    """The whole plan: ``extra_configs`` (given on the command line), ``models`` at ``model_mps`` × ``model_bs``,
    ``max_shapes`` Latin-hypercube grid points from ``seed``, the 32 corners; expanded to Table I operators,
    filtered to ``ops`` (S1 names or perfcast classes, case-insensitive) and deduplicated on (class, dims)."""
    configs: List[Config] = list(extra_configs)
    if models:
        configs += model_configs(models, model_mps, model_bs)
    configs += sample_grid(max_shapes, seed)
    if corners:
        configs += corner_configs()
    wanted = {o.strip().lower() for o in ops} if ops else None
    cases = [
        c
        for cfg in configs
        for c in ops_for_config(cfg)
        if wanted is None or c.s1_op.lower() in wanted or c.op in wanted
    ]
    return Plan(configs, dedup(cases))
