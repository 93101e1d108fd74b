"""NCCL collectives over message sizes, through ``torch.distributed`` (launched with ``torchrun``).

Byte counts follow nccl-tests (its ``size`` column; MODELS.md §3.3, perfcast `src/comm/mod.rs`):

| collective | ``bytes`` | each rank's buffers (elements of ``e`` bytes, count = bytes/e) |
|---|---|---|
| all_reduce | the full vector | in = out = count |
| all_gather | the gathered total | in = count/ranks, out = count |
| reduce_scatter | the input | in = count, out = count/ranks |
| broadcast, reduce | the vector | in = out = count |
| all_to_all | the whole send buffer per rank | in = out = count (count/ranks to each peer) |
| send_recv | the message | a ring, as nccl-tests' sendrecv: each rank sends count to rank+1, receives from rank−1 |

Sizes where the count does not split evenly over the ranks are rounded down to a multiple of ranks·e (and the
line carries the bytes actually moved). Each size is timed by S1's rule on every rank (10 warm-up, 10 timed with
CUDA events, mean of the middle 5); the line's time is the average over ranks (nccl-tests' default). Rank 0 writes.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple

DEFAULT_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "send_recv")
ALL_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv")
SPLIT = ("all_gather", "reduce_scatter", "all_to_all")


def message_sizes(min_bytes: int, max_bytes: int, factor: int = 2) -> List[int]:
    """``min_bytes``, ``min_bytes·factor``, … up to ``max_bytes`` inclusive (nccl-tests' ``-b -e -f``).
    ``ValueError`` when ``min_bytes`` < 1, ``max_bytes`` < ``min_bytes`` or ``factor`` < 2."""
    if min_bytes < 1 or max_bytes < min_bytes or factor < 2:
        raise ValueError(f"need 1 <= min_bytes <= max_bytes and factor >= 2, got {min_bytes}, {max_bytes}, {factor}")
    out, s = [], min_bytes
    while s <= max_bytes:
        out.append(s)
        s *= factor
    return out


def buffer_elements(collective: str, nbytes: int, ranks: int, elem_bytes: int) -> Tuple[int, int, int]:
    """(bytes as nccl-tests counts them after rounding, input elements, output elements) per rank for
    ``collective`` of ``nbytes`` over ``ranks`` ranks (see the module table). ``ValueError`` on an unknown
    collective or a size too small to give every rank an element."""
    if collective not in ALL_COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}; one of {', '.join(ALL_COLLECTIVES)}")
    count = nbytes // elem_bytes
    if collective in SPLIT:
        count -= count % ranks
    if count < (ranks if collective in SPLIT else 1):
        raise ValueError(f"{nbytes} bytes is too small for {collective} over {ranks} ranks")
    if collective == "all_gather":
        return count * elem_bytes, count // ranks, count
    if collective == "reduce_scatter":
        return count * elem_bytes, count, count // ranks
    return count * elem_bytes, count, count


def topology(environ: Optional[Dict[str, str]] = None) -> Tuple[int, int, int, int]:
    """(rank, world size, local rank, GPUs per node) from torchrun's environment (``RANK``, ``WORLD_SIZE``,
    ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``)."""
    env = os.environ if environ is None else environ
    world = int(env.get("WORLD_SIZE", "1"))
    return (
        int(env.get("RANK", "0")),
        world,
        int(env.get("LOCAL_RANK", "0")),
        int(env.get("LOCAL_WORLD_SIZE", str(world))),
    )


def _op(collective: str, dist, inp, out, rank: int, world: int):
    """A callable running one ``collective`` on the prepared buffers."""
    if collective == "all_reduce":
        return lambda: dist.all_reduce(inp)
    if collective == "all_gather":
        if hasattr(dist, "all_gather_into_tensor"):
            return lambda: dist.all_gather_into_tensor(out, inp)
        return lambda: dist._all_gather_base(out, inp)
    if collective == "reduce_scatter":
        if hasattr(dist, "reduce_scatter_tensor"):
            return lambda: dist.reduce_scatter_tensor(out, inp)
        return lambda: dist._reduce_scatter_base(out, inp)
    if collective == "broadcast":
        return lambda: dist.broadcast(inp, src=0)
    if collective == "reduce":
        return lambda: dist.reduce(inp, dst=0)
    if collective == "all_to_all":
        return lambda: dist.all_to_all_single(out, inp)
    # send_recv: a ring, batched so that sends and receives cannot deadlock.
    nxt, prv = (rank + 1) % world, (rank - 1) % world

    def ring():
        ops = [dist.P2POp(dist.isend, inp, nxt), dist.P2POp(dist.irecv, out, prv)]
        for r in dist.batch_isend_irecv(ops):
            r.wait()

    return ring


def run(
    collectives: Sequence[str],
    sizes: Sequence[int],
    dtype: str,
    writer_factory,
    backend: str = "nccl",
    warmup: int = 10,
    iters: int = 10,
    log=print,
) -> int:
    """Times every collective at every size on the ``torch.distributed`` group torchrun set up; rank 0 writes a
    ``kind: "comm"`` line per (collective, size) through the writer ``writer_factory(info)`` returns (``info``:
    the environment for the header). Returns the number of lines written (0 on other ranks)."""
    import torch
    import torch.distributed as dist

    from . import env, output, timing
    from .ops import TORCH_DTYPES

    rank, world, local_rank, per_node = topology()
    nodes = max(1, world // max(1, per_node))
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=backend)
    try:
        info = env.collect(str(device))
        info.update({"backend": backend, "ranks": world, "nodes": nodes, "gpus_per_node": per_node})
        attrs = env.sample_attributes(info, {"nccl": info["nccl"]} if "nccl" in info else None)
        attrs["backend"] = backend
        tdtype = TORCH_DTYPES[dtype]
        esize = torch.tensor([], dtype=tdtype).element_size()
        timer = timing.CudaTimer(device) if device.type == "cuda" else timing.WallTimer(lambda: None)
        writer = writer_factory(info) if rank == 0 else None
        written = 0
        for c in collectives:
            if c == "send_recv" and world < 2:
                continue
            for s in sizes:
                try:
                    nbytes, n_in, n_out = buffer_elements(c, s, world, esize)
                except ValueError as e:
                    if rank == 0:
                        log(f"skip {c} {s} B: {e}")
                    continue
                inp = torch.ones(n_in, dtype=tdtype, device=device)
                out = torch.empty(n_out, dtype=tdtype, device=device)
                fn = _op(c, dist, inp, out, rank, world)
                dist.barrier()
                m = timing.measure(fn, timer, warmup, iters)
                t = torch.tensor([m.time_us], dtype=torch.float64, device=device)
                dist.all_reduce(t)
                mean_us = t.item() / world
                if writer is not None:
                    a = dict(attrs, min_us=round(m.min_us, 3), max_us=round(m.max_us, 3))
                    writer.write(output.comm_sample(c, nbytes, world, nodes, per_node, mean_us, dtype, info["gpu"], a))
                    written += 1
                    log(f"{c:>15} {nbytes:>12} B {mean_us:12.2f} us")
                del inp, out
        if writer is not None:
            writer.close()
        return written
    finally:
        dist.destroy_process_group()
