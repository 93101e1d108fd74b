"""Command line: ``plan``, ``ops``, ``comm``, ``upload`` (``python3 -m perfcast_collect COMMAND --help``).

- ``plan``   — list what ``ops`` would measure (no torch needed).
- ``ops``    — time the Table I operators on one GPU; write samples; optionally upload.
- ``comm``   — time NCCL collectives over message sizes (under ``torchrun``); rank 0 writes and uploads.
- ``upload`` — upload an existing samples file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Dict, List, Optional

from . import __version__, grid, output, upload
from .timing import ITERS, KEEP, WARMUP


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _csv(s: str) -> List[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def _ints(s: str) -> List[int]:
    try:
        return [int(x) for x in _csv(s)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None


def parse_config(text: str) -> grid.Config:
    """``mp=2,b=4,h=32,l=2048,d=4096[,v=50257][,encoders=1]`` → a grid configuration (``ValueError`` when a
    key is missing or unknown, or the constraints fail)."""
    vals: Dict[str, int] = {}
    for item in _csv(text.replace(" ", ",")):
        k, sep, v = item.partition("=")
        if not sep:
            raise ValueError(f"{item!r} is not KEY=VALUE")
        if k not in ("mp", "b", "h", "l", "d", "v", "encoders"):
            raise ValueError(f"unknown key {k!r} (mp, b, h, l, d, v, encoders)")
        vals[k] = int(v)
    missing = [k for k in ("mp", "b", "h", "l", "d") if k not in vals]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    if not grid.is_valid(vals["mp"], vals["b"], vals["h"], vals["l"], vals["d"]):
        raise ValueError("needs h % mp == 0 and d % h == 0")
    return grid.grid_config(
        vals["mp"], vals["b"], vals["h"], vals["l"], vals["d"], vals.get("v", 50257), (vals.get("encoders", 1),), "cli"
    )


def _plan_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what to measure")
    g.add_argument(
        "--max-shapes",
        type=int,
        default=64,
        metavar="N",
        help="grid configurations to sample from S1's ranges (Latin hypercube; default 64)",
    )
    g.add_argument("--seed", type=int, default=0, help="sampling seed (default 0): the same seed gives the same plan")
    g.add_argument(
        "--models",
        default="all",
        help="known models to include: all, none, or comma-separated names (see `plan --list-models`)",
    )
    g.add_argument("--model-mp", type=_ints, default=list(grid.MODEL_MPS), help="tensor-parallel degrees for models")
    g.add_argument("--model-b", type=_ints, default=list(grid.MODEL_BS), help="micro-batch sizes for models")
    g.add_argument("--no-corners", action="store_true", help="leave out the 32 corners of S1's ranges")
    g.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="mp=..,b=..,h=..,l=..,d=..[,v=..]",
        help="add an explicit configuration (repeatable)",
    )
    g.add_argument(
        "--ops",
        type=_csv,
        default=None,
        help="only these operators: S1 names (Linear1, QK^T, Flash_Attention, …) or classes (linear, bmm, …)",
    )
    g.add_argument("--dtypes", type=_csv, default=["bf16", "fp16"], help="precisions (default bf16,fp16)")
    g.add_argument("--phases", type=_csv, default=["fwd", "bwd"], help="fwd, bwd or both (default)")


def _upload_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("upload")
    g.add_argument("--post", metavar="URL", help="perfcast base URL: POST {URL}/v1/profiles?format=perfcast_jsonl")
    g.add_argument("--key", default=None, help="API key (default: the PERFCAST_KEY environment variable)")
    g.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="free label sent as a query parameter (ci_run, git_sha, …; repeatable)",
    )
    g.add_argument(
        "--no-ci-labels",
        action="store_true",
        help="do not add ci_run/git_sha/git_ref from GitHub Actions or GitLab CI variables",
    )
    g.add_argument("--timeout", type=float, default=120.0, help="upload timeout, seconds")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="perfcast_collect", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--version", action="version", version=f"perfcast-collect {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plan", help="list what `ops` would measure (no torch needed)")
    _plan_args(p)
    p.add_argument("--list", action="store_true", help="print every case as a JSON line")
    p.add_argument("--list-models", action="store_true", help="print the known models and exit")
    p.add_argument("--memory-gb", type=float, default=None, help="leave out cases estimated above this many GiB")

    p = sub.add_parser("ops", help="time the Table I operators on this GPU")
    _plan_args(p)
    p.add_argument("--out", default="perfcast_ops.jsonl", help="output file (.gz: gzip; -: stdout)")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (a smoke test, not a measurement)")
    p.add_argument(
        "--time-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop starting new cases after this long (what was measured is kept)",
    )
    p.add_argument(
        "--memory-gb",
        type=float,
        default=None,
        help="skip cases estimated above this many GiB (default 90%% of the device's memory)",
    )
    p.add_argument(
        "--fused-softmax",
        choices=("auto", "megatron", "compile", "eager"),
        default="auto",
        help="Fused_Softmax implementation: Megatron's kernel if installed, else torch.compile (default auto)",
    )
    p.add_argument("--warmup", type=int, default=WARMUP, help=argparse.SUPPRESS)
    p.add_argument("--iters", type=int, default=ITERS, help=argparse.SUPPRESS)
    p.add_argument("-q", "--quiet", action="store_true", help="no per-case progress on stderr")
    _upload_args(p)

    p = sub.add_parser("comm", help="time NCCL collectives (run under torchrun)")
    p.add_argument(
        "--collectives",
        type=_csv,
        default=["all_reduce", "all_gather", "reduce_scatter", "send_recv"],
        help="all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv",
    )
    p.add_argument("--min-bytes", type=int, default=1024)
    p.add_argument("--max-bytes", type=int, default=1 << 30)
    p.add_argument("--factor", type=int, default=2)
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    p.add_argument("--backend", default="nccl", choices=("nccl", "gloo"), help="gloo: CPU smoke test only")
    p.add_argument("--out", default="perfcast_comm.jsonl", help="output file written by rank 0 (.gz: gzip)")
    p.add_argument("--warmup", type=int, default=WARMUP, help=argparse.SUPPRESS)
    p.add_argument("--iters", type=int, default=ITERS, help=argparse.SUPPRESS)
    _upload_args(p)

    p = sub.add_parser("upload", help="upload a samples file to perfcast")
    p.add_argument("file", help="a perfcast_jsonl file (plain or gzip)")
    p.add_argument("--gpu", default=None, help="the gpu= parameter (default: the first sample's gpu)")
    _upload_args(p)
    return ap


def _models(spec: str) -> List[grid.ModelSpec]:
    s = spec.strip().lower()
    if s == "all":
        return list(grid.KNOWN_MODELS)
    if s in ("none", ""):
        return []
    return [grid.model_by_name(n) for n in _csv(spec)]


def plan_from_args(args: argparse.Namespace) -> grid.Plan:
    """The plan the plan options describe (``ValueError``/``KeyError`` on a bad option)."""
    known_ops = {o.lower() for o in grid.S1_OPS} | set(grid.CLASS_DIMS)
    if args.ops:
        bad = [o for o in args.ops if o.lower() not in known_ops]
        if bad:
            raise ValueError(
                f"unknown operator(s) {bad}; S1 names {list(grid.S1_OPS)} or classes {list(grid.CLASS_DIMS)}"
            )
    for d in args.dtypes:
        if d not in grid.DTYPE_BYTES:
            raise ValueError(f"unknown dtype {d!r} (bf16, fp16, fp32)")
    for ph in args.phases:
        if ph not in ("fwd", "bwd"):
            raise ValueError(f"unknown phase {ph!r} (fwd, bwd)")
    return grid.build_plan(
        max_shapes=args.max_shapes,
        seed=args.seed,
        models=_models(args.models),
        corners=not args.no_corners,
        model_mps=args.model_mp,
        model_bs=args.model_b,
        ops=args.ops,
        extra_configs=[parse_config(c) for c in args.config],
    )


def _units(plan: grid.Plan, dtypes: List[str], phases: List[str], cap: Optional[float]):
    """(case, dtype, phases to time) for every case, leaving out phases above the memory cap."""
    for case in plan.cases:
        for dtype in dtypes:
            ph = [p for p in case.phases if p in phases and (cap is None or grid.memory_bytes(case, dtype, p) <= cap)]
            yield case, dtype, ph


def cmd_plan(args: argparse.Namespace) -> int:
    if args.list_models:
        for m in grid.KNOWN_MODELS:
            print(
                f"{m.name:14} layers={m.layers} d={m.hidden} h={m.heads} kv={m.kv} l={m.seq_len} v={m.vocab} "
                f"ffn={m.ffn} {m.norm} {'SwiGLU' if m.gated else 'GeLU'}{' RoPE' if m.rotary else ''}"
            )
        return 0
    plan = plan_from_args(args)
    cap = args.memory_gb * 2**30 if args.memory_gb else None
    timings = skipped = 0
    for case, dtype, ph in _units(plan, args.dtypes, args.phases, cap):
        if args.list and ph:
            print(
                json.dumps(
                    {
                        "op": case.op,
                        "dims": case.dims_dict,
                        "dtype": dtype,
                        "phases": ph,
                        "attributes": case.attributes(),
                    }
                )
            )
        timings += len(ph)
        skipped += len([p for p in case.phases if p in args.phases]) - len(ph)
    by_source: Dict[str, int] = {}
    for c in plan.configs:
        by_source[c.source] = by_source.get(c.source, 0) + 1
    _log(f"configurations: {len(plan.configs)} ({', '.join(f'{k} {v}' for k, v in by_source.items())})")
    _log(
        f"distinct shapes: {len(plan.cases)} ({', '.join(f'{k} {v}' for k, v in sorted(plan.count_by_class().items()))})"  # noqa: E501
    )
    _log(
        f"timings: {timings} over {', '.join(args.dtypes)}" + (f"; {skipped} above {args.memory_gb} GiB" if cap else "")
    )
    return 0


def _key(args: argparse.Namespace) -> str:
    return args.key or os.environ.get("PERFCAST_KEY", "")


def _labels(args: argparse.Namespace) -> Dict[str, str]:
    labels = {} if args.no_ci_labels else upload.ci_labels(os.environ)
    labels.update(upload.parse_labels(args.label))
    return labels


def _do_upload(args: argparse.Namespace, path: str, gpu: Optional[str]) -> int:
    try:
        status, answer = upload.upload_file(path, args.post, _key(args), gpu, _labels(args), args.timeout)
    except (upload.UploadError, ValueError) as e:
        _log(f"error: {e}")
        return 1
    _log(f"uploaded {path} to {args.post}: HTTP {status}")
    if answer is not None:
        print(json.dumps(answer) if not isinstance(answer, str) else answer)
    return 0


def _check_upload_args(args: argparse.Namespace) -> None:
    """Fails before measuring when an upload is asked for but cannot be made."""
    if args.post:
        upload.build_request(args.post, _key(args), b"", None, _labels(args))


def cmd_ops(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    _check_upload_args(args)
    from . import env, ops, timing  # torch from here on

    device = args.device
    info = env.collect(device)
    total = ops.device_memory_bytes(device)
    cap = args.memory_gb * 2**30 if args.memory_gb else (0.9 * total if total else None)
    timer = timing.CudaTimer(device) if device.startswith("cuda") else timing.WallTimer()
    header = dict(
        info,
        kind="ops",
        seed=args.seed,
        max_shapes=args.max_shapes,
        timing=f"mean of middle {KEEP} of {args.iters} after {args.warmup} warm-up",
    )
    base = env.sample_attributes(info)
    if (args.warmup, args.iters) != (WARMUP, ITERS):
        base.update(warmup=args.warmup, iters=args.iters)
    start = time.monotonic()
    n_ok = n_fail = n_mem = n_unsupported = 0
    stopped = False
    with output.SampleWriter(args.out, header) as w:
        for case, dtype, phases in _units(plan, args.dtypes, args.phases, cap):
            wanted = [p for p in case.phases if p in args.phases]
            n_mem += len(wanted) - len(phases)
            if not phases:
                continue
            if args.time_budget is not None and time.monotonic() - start > args.time_budget:
                stopped = True
                break
            label = f"{case.s1_op:>22} {dtype} {json.dumps(case.dims_dict)}"
            bench = None
            try:
                bench = ops.build(
                    case.op, case.dims_dict, dtype, device, tokens=case.config.l, fused_softmax=args.fused_softmax
                )
                rows = []
                for phase in phases:
                    fn = bench.fwd if phase == "fwd" else bench.bwd()
                    m = timing.measure(fn, timer, args.warmup, args.iters)
                    a = dict(case.attributes(), **base, min_us=round(m.min_us, 3), max_us=round(m.max_us, 3))
                    if bench.impl:
                        a["impl"] = bench.impl
                    rows.append(output.op_sample(case.op, phase, dtype, info["gpu"], case.dims_dict, m.time_us, a))
                w.write_all(rows)
                n_ok += len(rows)
                if not args.quiet:
                    _log(f"{label} " + " ".join(f"{r['phase']} {r['time_us']:.1f} us" for r in rows))
            except ops.Unsupported as e:
                n_unsupported += len(phases)
                _log(f"{label} skipped: {e}")
            except Exception as e:  # one failing shape must not end a long run
                if ops.is_oom(e):
                    n_mem += len(phases)
                    _log(f"{label} skipped: out of memory")
                else:
                    n_fail += len(phases)
                    _log(f"{label} failed: {type(e).__name__}: {str(e)[:300]}")
            finally:
                del bench
                ops.free_memory(device)
    _log(
        f"wrote {n_ok} samples to {args.out}; timings skipped: {n_mem} for memory, {n_unsupported} unsupported here; "
        f"{n_fail} failed" + ("; time budget reached" if stopped else "")
    )
    if n_ok == 0:
        _log("error: no sample was measured")
        return 1
    if args.post and args.out != "-":
        return _do_upload(args, args.out, info["gpu"])
    return 0


def cmd_comm(args: argparse.Namespace) -> int:
    from . import nccl

    for c in args.collectives:
        if c not in nccl.ALL_COLLECTIVES:
            raise ValueError(f"unknown collective {c!r}; one of {', '.join(nccl.ALL_COLLECTIVES)}")
    sizes = nccl.message_sizes(args.min_bytes, args.max_bytes, args.factor)
    rank = nccl.topology()[0]
    if rank == 0:
        _check_upload_args(args)
    written = nccl.run(
        args.collectives,
        sizes,
        args.dtype,
        lambda info: output.SampleWriter(args.out, dict(info, kind="comm")),
        backend=args.backend,
        warmup=args.warmup,
        iters=args.iters,
        log=_log,
    )
    if rank != 0:
        return 0
    _log(f"wrote {written} samples to {args.out}")
    if written == 0:
        _log("error: no collective was measured (one process? launch with torchrun --nproc-per-node N)")
        return 1
    if args.post:
        return _do_upload(args, args.out, None)
    return 0


def cmd_upload(args: argparse.Namespace) -> int:
    if not args.post:
        _log("error: --post URL is needed")
        return 2
    return _do_upload(args, args.file, args.gpu)


def main(argv: Optional[List[str]] = None) -> int:
    """Runs the command line; returns the exit status (0 done, 1 nothing measured or the upload failed, 2 bad
    options or no torch)."""
    args = build_parser().parse_args(argv)
    try:
        return {"plan": cmd_plan, "ops": cmd_ops, "comm": cmd_comm, "upload": cmd_upload}[args.command](args)
    except ModuleNotFoundError as e:
        if e.name != "torch":
            raise
        _log(
            f"error: `{args.command}` runs kernels and needs PyTorch, which this Python ({sys.executable}) lacks: "
            "pip install torch (plan and upload work without it)"
        )
        return 2
    except (ValueError, KeyError) as e:
        _log(f"error: {e.args[0] if isinstance(e, KeyError) and e.args else e}")
        return 2
