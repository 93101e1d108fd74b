"""The Table I operators as PyTorch kernels, built from perfcast's class and dims (see ``grid.ops_for_config``).

Imports torch: load this module only to run kernels.

Each builder returns a ``Bench``: ``fwd()`` runs the forward operator as training does (inputs that need
gradients, autograd recording); ``bwd()`` runs its backward — ``torch.autograd.grad`` of the forward's output
(kept with ``retain_graph``) with respect to the inputs and weights, so a GEMM's backward is its two GEMMs
(input and weight gradient), as S1 counts it. ``impl`` names the implementation where there is a choice.

| class | forward | notes |
|---|---|---|
| linear | ``F.linear(x[M,K], W[N,K])`` | B > 1: x is [B,M,K] |
| bmm | ``torch.bmm(a[B,M,K], b[B,K,N])`` | QK^T and ·V |
| layernorm | ``F.layer_norm`` over H, with γ, β | |
| rmsnorm | ``F.rms_norm`` (torch ≥ 2.4) else x·rsqrt(mean(x²)+ε)·γ | impl ``native`` / ``eager`` |
| softmax | ``softmax(x[B,H], -1)`` | |
| fillmask | ``x.masked_fill(causal, -10000)`` on [B/H, H, H] | Megatron's unfused mask |
| fused_softmax | softmax(scale·x, causal mask) on [B/H, H, H] | impl megatron, compiled or eager |
| gelu | ``F.gelu`` (erf) | |
| swiglu | ``silu(a)·b`` with [a, b] = x[B, 2H] | |
| rope | x·cos + rotate_half(x)·sin on q and k, [l, B/l, H] | GPT-NeoX/LLaMA eager form |
| flash_attention | ``F.scaled_dot_product_attention(causal)`` on the flash backend, q,k,v [B,A,L,D] | |
| embedding | ``F.embedding(ids[T], W[V,H])`` | |
| cross_entropy | ``F.cross_entropy(logits[T,V].float(), target)`` | Megatron casts the logits to fp32 |
| optimizer | ``torch.optim.AdamW(fused=True).step()``, P fp32 parameters | impl ``fused``/``foreach``; fwd only |
"""

from __future__ import annotations

import math
from typing import Callable, Dict, Optional, Sequence

import torch
import torch.nn.functional as F

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class Unsupported(Exception):
    """This shape or dtype cannot be run here (e.g. the flash kernel refuses the head dimension)."""


class Bench:
    """A forward callable and, built on first use, the backward of its output with respect to ``inputs``."""

    def __init__(
        self,
        fwd: Callable[[], object],
        inputs: Sequence[torch.Tensor] = (),
        impl: str = "",
        bwd: Optional[Callable[[], object]] = None,
        keep: Sequence[object] = (),
    ):
        self.fwd = fwd
        self.inputs = tuple(inputs)
        self.impl = impl
        self._bwd = bwd
        self._keep = keep  # tensors/objects the callables need alive

    def bwd(self) -> Callable[[], object]:
        """The backward callable (``Unsupported`` when the operator has none)."""
        if self._bwd is None:
            if not self.inputs:
                raise Unsupported("no backward")
            out = self.fwd()
            outs = out if isinstance(out, tuple) else (out,)
            grads = tuple(torch.ones_like(o) if o.dim() == 0 else torch.randn_like(o) for o in outs)
            inputs = self.inputs

            def backward():
                return torch.autograd.grad(outs, inputs, grads, retain_graph=True)

            self._bwd = backward
        return self._bwd


def _randn(shape, dtype, device, grad=True, scale=1.0):
    t = torch.randn(*shape, dtype=dtype, device=device)
    if scale != 1.0:
        t.mul_(scale)
    return t.requires_grad_(grad)


def _linear(dm, dtype, device, **_):
    b, m, n, k = dm.get("B", 1) or 1, dm["M"], dm["N"], dm["K"]
    x = _randn((m, k) if b == 1 else (b, m, k), dtype, device)
    w = _randn((n, k), dtype, device, scale=0.02)
    return Bench(lambda: F.linear(x, w), (x, w))


def _bmm(dm, dtype, device, **_):
    a = _randn((dm["B"], dm["M"], dm["K"]), dtype, device)
    b = _randn((dm["B"], dm["K"], dm["N"]), dtype, device, scale=0.05)
    return Bench(lambda: torch.bmm(a, b), (a, b))


def _layernorm(dm, dtype, device, **_):
    h = dm["H"]
    x = _randn((dm["B"], h), dtype, device)
    g = torch.ones(h, dtype=dtype, device=device, requires_grad=True)
    beta = torch.zeros(h, dtype=dtype, device=device, requires_grad=True)
    return Bench(lambda: F.layer_norm(x, (h,), g, beta, 1e-5), (x, g, beta))


def _rmsnorm(dm, dtype, device, **_):
    h = dm["H"]
    x = _randn((dm["B"], h), dtype, device)
    g = torch.ones(h, dtype=dtype, device=device, requires_grad=True)
    if hasattr(F, "rms_norm"):
        return Bench(lambda: F.rms_norm(x, (h,), g, 1e-5), (x, g), impl="native")

    def rms():
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype) * g

    return Bench(rms, (x, g), impl="eager")


def _softmax(dm, dtype, device, **_):
    x = _randn((dm["B"], dm["H"]), dtype, device)
    return Bench(lambda: torch.softmax(x, -1), (x,))


def _square_rows(dm):
    """[B, H] rows of attention scores as [B/H, H, H] (B = b·hp·l rows of H = l keys)."""
    b, h = dm["B"], dm["H"]
    if b % h:
        raise Unsupported(f"B = {b} rows are not whole [{h}×{h}] score matrices")
    return b // h, h


def _causal(l, device):
    return torch.ones(l, l, dtype=torch.bool, device=device).triu_(1)


def _fillmask(dm, dtype, device, **_):
    n, l = _square_rows(dm)
    x = _randn((n, l, l), dtype, device)
    mask = _causal(l, device)
    return Bench(lambda: x.masked_fill(mask, -10000.0), (x,), keep=(mask,))


def _scaled_causal_softmax(x, mask, scale: float):
    return torch.softmax(x.mul(scale).masked_fill(mask, float("-inf")), -1)


def _scaled_softmax_backward(gy, y, scale: float):
    """∂/∂x of softmax(scale·x) given the output y and its gradient gy (masked entries have y = 0)."""
    return (gy - (gy * y).sum(-1, keepdim=True)) * y * scale


_compiled: Dict[str, Callable] = {}
_compile_broken: list = []  # the first torch.compile failure of this process, if any


def _megatron_kernel():
    try:
        import scaled_upper_triang_masked_softmax_cuda as k  # Megatron-LM / GPT-NeoX fused kernels

        return k
    except ImportError:
        return None


def _fused_megatron(x, scale):
    k = _megatron_kernel()
    if k is None:
        raise Unsupported("scaled_upper_triang_masked_softmax_cuda is not installed")
    xd = x.detach()
    y = k.forward(xd, scale)
    gy = torch.randn_like(y)
    k.backward(gy, y, scale)  # a trial: the kernel refuses some shapes
    return Bench(lambda: k.forward(xd, scale), (), impl="megatron", bwd=lambda: k.backward(gy, y, scale), keep=(y, gy))


def _fused_compiled(x, mask, scale):
    if _compile_broken:
        raise Unsupported(f"torch.compile failed earlier: {_compile_broken[0]}")
    if not hasattr(torch, "compile"):
        raise Unsupported("torch.compile needs torch >= 2.0")
    if not _compiled:
        _compiled["fwd"] = torch.compile(_scaled_causal_softmax, dynamic=True)
        _compiled["bwd"] = torch.compile(_scaled_softmax_backward, dynamic=True)
    fwd, bwd = _compiled["fwd"], _compiled["bwd"]
    xd = x.detach()
    with torch.no_grad():
        y = fwd(xd, mask, scale)
        gy = torch.randn_like(y)
        bwd(gy, y, scale)

    def forward():
        with torch.no_grad():
            return fwd(xd, mask, scale)

    def backward():
        with torch.no_grad():
            return bwd(gy, y, scale)

    return Bench(forward, (), impl="compiled", bwd=backward, keep=(mask, y, gy))


def _fused_softmax(dm, dtype, device, fused_softmax="auto", **_):
    """Scale + causal mask + softmax as one kernel forward and one backward, like Megatron's
    ``ScaledUpperTriangMaskedSoftmax``. ``auto`` tries, in order: its CUDA kernel (when installed; it refuses some
    shapes), the same two functions compiled by torch.compile (each becomes one fused kernel), eager autograd
    (several kernels). The first that runs a trial forward and backward is used and named in ``impl``."""
    n, l = _square_rows(dm)
    scale = 1.0 / math.sqrt(128.0)
    x = _randn((n, l, l), dtype, device)
    mask = _causal(l, device)
    is_cuda = torch.device(device).type == "cuda"
    tries = []
    if fused_softmax in ("auto", "megatron") and is_cuda and dtype != torch.float32:
        tries.append(lambda: _fused_megatron(x, scale))
    if fused_softmax in ("auto", "compile"):
        tries.append(lambda: _fused_compiled(x, mask, scale))
    errors = []
    for attempt in tries:
        try:
            return attempt()
        except Unsupported as e:
            errors.append(str(e))
        except Exception as e:  # a kernel refusing the shape, or the compiler failing
            if is_oom(e):
                raise
            errors.append(f"{type(e).__name__}: {str(e)[:200]}")
            if attempt is tries[-1] and fused_softmax in ("auto", "compile") and not _compile_broken:
                _compile_broken.append(errors[-1])
    if fused_softmax in ("megatron", "compile"):
        raise Unsupported("; ".join(errors) or "Megatron's fused kernel needs a CUDA device and fp16 or bf16")
    return Bench(lambda: _scaled_causal_softmax(x, mask, scale), (x,), impl="eager", keep=(mask,))


def _gelu(dm, dtype, device, **_):
    x = _randn((dm["B"], dm["H"]), dtype, device)
    return Bench(lambda: F.gelu(x), (x,))


def _swiglu(dm, dtype, device, **_):
    x = _randn((dm["B"], 2 * dm["H"]), dtype, device)

    def swiglu():
        a, b = x.chunk(2, dim=-1)
        return F.silu(a) * b

    return Bench(swiglu, (x,))


def _rope(dm, dtype, device, tokens: Optional[int] = None, **_):
    rows, hd = dm["B"], dm["H"]
    if hd % 2:
        raise Unsupported(f"RoPE needs an even head dimension, got {hd}")
    l = tokens if tokens and rows % tokens == 0 else rows
    per = rows // l
    q = _randn((l, per, hd), dtype, device)
    k = _randn((l, per, hd), dtype, device)
    inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
    ang = torch.outer(torch.arange(l, device=device, dtype=torch.float32), inv)
    ang = torch.cat((ang, ang), -1)[:, None, :]
    cos, sin = ang.cos().to(dtype), ang.sin().to(dtype)

    def rotate_half(t):
        t1, t2 = t.chunk(2, dim=-1)
        return torch.cat((-t2, t1), dim=-1)

    def rope():
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    return Bench(rope, (q, k), keep=(cos, sin))


def _sdpa_flash_context():
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    except ImportError:
        return lambda: torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False)


def _flash(dm, dtype, device, **_):
    b, l, a, d = dm["B"], dm["L"], dm["A"], dm["D"]
    if dtype == torch.float32 and torch.device(device).type == "cuda":
        raise Unsupported("the flash kernel needs fp16 or bf16")
    # [b, l, a, d] storage seen as [b, a, l, d], as Megatron hands its activations to the kernel.
    qb, kb, vb = (_randn((b, l, a, d), dtype, device) for _ in range(3))
    q, k, v = (t.transpose(1, 2) for t in (qb, kb, vb))
    ctx = _sdpa_flash_context()

    def attn():
        with ctx():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    try:
        attn()  # a trial: the flash backend refuses some GPUs, dtypes and head dimensions
    except RuntimeError as e:
        if is_oom(e):
            raise
        raise Unsupported(f"the flash kernel refuses this shape here: {str(e)[:200]}") from None
    return Bench(attn, (qb, kb, vb))


def _embedding(dm, dtype, device, **_):
    t, v, h = dm["T"], dm["V"], dm["H"]
    w = _randn((v, h), dtype, device, scale=0.02)
    ids = torch.randint(0, v, (t,), device=device)
    return Bench(lambda: F.embedding(ids, w), (w,), keep=(ids,))


def _cross_entropy(dm, dtype, device, **_):
    t, v = dm["T"], dm["V"]
    logits = _randn((t, v), dtype, device)
    target = torch.randint(0, v, (t,), device=device)
    return Bench(lambda: F.cross_entropy(logits.float(), target), (logits,), keep=(target,))


def _optimizer(dm, dtype, device, **_):
    p = torch.nn.Parameter(torch.randn(dm["P"], dtype=torch.float32, device=device).mul_(0.02))
    p.grad = torch.randn_like(p).mul_(1e-3)
    try:
        opt, impl = torch.optim.AdamW([p], lr=1e-4, weight_decay=0.01, fused=True), "fused"
        opt.step()
    except (RuntimeError, TypeError, ValueError):
        opt, impl = torch.optim.AdamW([p], lr=1e-4, weight_decay=0.01, foreach=True), "foreach"
    return Bench(opt.step, (), impl=impl, keep=(p,))


BUILDERS: Dict[str, Callable[..., Bench]] = {
    "linear": _linear,
    "bmm": _bmm,
    "layernorm": _layernorm,
    "rmsnorm": _rmsnorm,
    "softmax": _softmax,
    "fillmask": _fillmask,
    "fused_softmax": _fused_softmax,
    "gelu": _gelu,
    "swiglu": _swiglu,
    "rope": _rope,
    "flash_attention": _flash,
    "embedding": _embedding,
    "cross_entropy": _cross_entropy,
    "optimizer": _optimizer,
}


def build(op: str, dims: Dict[str, int], dtype: str, device: str, **options) -> Bench:
    """A ``Bench`` for perfcast class ``op`` with ``dims`` in ``dtype`` on ``device``. ``options``:
    ``tokens`` (RoPE's sequence length, to lay q/k out as [l, rows/l, H]), ``fused_softmax``
    (``auto``/``megatron``/``compile``/``eager``). ``Unsupported`` for classes or shapes this tool cannot run."""
    if op not in BUILDERS:
        raise Unsupported(f"no benchmark for class {op!r}")
    return BUILDERS[op](dims, TORCH_DTYPES[dtype], device, **options)


def is_oom(e: BaseException) -> bool:
    """Whether ``e`` is the device running out of memory."""
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(e, oom)) or "out of memory" in str(e).lower()


def free_memory(device: str) -> None:
    """Returns cached blocks to the device after a case."""
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def device_memory_bytes(device: str) -> Optional[int]:
    """Total memory of a CUDA ``device``, bytes (None for the CPU)."""
    d = torch.device(device)
    if d.type != "cuda":
        return None
    return torch.cuda.get_device_properties(
        d.index if d.index is not None else torch.cuda.current_device()
    ).total_memory
