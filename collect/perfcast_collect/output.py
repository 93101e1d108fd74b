"""perfcast's sample format (JSON lines), as `src/ingest/samples.rs` parses it.

One JSON object per line; lines starting with ``#`` are comments (we write one header comment with the tool and
library versions). Operator lines::

    {"kind": "op", "op": "linear", "phase": "fwd", "dtype": "bf16", "gpu": "NVIDIA H100 80GB HBM3",
     "dims": {"B": 1, "M": 8192, "N": 4608, "K": 6144}, "time_us": 191.3, "attributes": {"s1_op": "Linear1", ...}}

Collective lines::

    {"kind": "comm", "collective": "all_reduce", "bytes": 1048576, "ranks": 8, "nodes": 1, "gpus_per_node": 8,
     "time_us": 41.2, "dtype": "bf16", "gpu": "NVIDIA H100 80GB HBM3", "attributes": {"nccl": "2.21.5"}}

The parser denies unknown top-level fields, takes dims as unsigned integers named per class, a positive time, and
attribute values that are strings, numbers or booleans. ``validate`` checks the same rules here, so a file this
module writes is a file perfcast accepts; a file ending in ``.gz`` is written gzip-compressed.
"""

from __future__ import annotations

import gzip
import io
import json
import math
from typing import IO, Dict, Iterable, List, Mapping, Optional

from .grid import CLASS_DIMS

OP_FIELDS = ("kind", "op", "phase", "dtype", "gpu", "dims", "time_us", "time_ms", "attributes")
COMM_FIELDS = (
    "kind",
    "collective",
    "bytes",
    "ranks",
    "nodes",
    "gpus_per_node",
    "time_us",
    "dtype",
    "gpu",
    "attributes",
)
#: `src/comm/mod.rs` `Collective` wire names (``p2p`` is an accepted alias of ``send_recv``).
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv")
#: Precision names `Precision::parse` accepts, as this tool writes them.
DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
PHASES = ("fwd", "bwd")
#: dims a class may omit (`place_dims`): a linear's batch defaults to 1, an element-wise op's arity to 2.
OPTIONAL_DIMS = {("linear", "B"), ("elementwise", "I")}


def _round_us(t: float) -> float:
    return round(float(t), 3)


def op_sample(
    op: str,
    phase: str,
    dtype: str,
    gpu: str,
    dims: Mapping[str, int],
    time_us: float,
    attributes: Mapping[str, object],
) -> Dict[str, object]:
    """One operator sample (key order as in the format's doc)."""
    return {
        "kind": "op",
        "op": op,
        "phase": phase,
        "dtype": dtype,
        "gpu": gpu,
        "dims": {k: int(v) for k, v in dims.items()},
        "time_us": _round_us(time_us),
        "attributes": dict(attributes),
    }


def comm_sample(
    collective: str,
    nbytes: int,
    ranks: int,
    nodes: int,
    gpus_per_node: int,
    time_us: float,
    dtype: str,
    gpu: str,
    attributes: Mapping[str, object],
) -> Dict[str, object]:
    """One collective sample; ``nbytes`` as nccl-tests counts them (see ``nccl.py``)."""
    return {
        "kind": "comm",
        "collective": collective,
        "bytes": int(nbytes),
        "ranks": int(ranks),
        "nodes": int(nodes),
        "gpus_per_node": int(gpus_per_node),
        "time_us": _round_us(time_us),
        "dtype": dtype,
        "gpu": gpu,
        "attributes": dict(attributes),
    }


def _is_uint(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**64


def _positive_time(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def validate(sample: Mapping[str, object]) -> List[str]:
    """Everything perfcast's parser would reject in ``sample`` (empty when it is accepted), as messages.

    Operator lines use perfcast's class names in ``op`` (the parser also takes S1 names; this tool always writes
    the class)."""
    problems: List[str] = []
    kind = sample.get("kind", "op")
    if kind == "op":
        allowed, required = OP_FIELDS, ("op", "dtype", "dims")
    elif kind == "comm":
        allowed, required = COMM_FIELDS, ("kind", "collective", "bytes", "ranks", "time_us")
    else:
        return [f"unknown kind {kind!r} (op or comm)"]
    problems += [f"unknown field {k!r}" for k in sample if k not in allowed]
    problems += [f"missing field {k!r}" for k in required if k not in sample]
    for k in ("gpu", "dtype", "phase"):
        if k in sample and not isinstance(sample[k], str):
            problems.append(f"{k} must be a string")
    dtype = sample.get("dtype")
    if kind == "op" and isinstance(dtype, str) and dtype.lower() not in DTYPES:
        problems.append(f"unknown dtype {dtype!r}")
    attrs = sample.get("attributes", {})
    if not isinstance(attrs, dict):
        problems.append("attributes must be an object")
    else:
        for k, v in attrs.items():
            if not isinstance(v, (str, int, float, bool)) or (isinstance(v, float) and not math.isfinite(v)):
                problems.append(f"attribute {k!r} must be a string, a finite number or a boolean, got {v!r}")
    if kind == "op":
        op = sample.get("op")
        if op not in CLASS_DIMS:
            problems.append(f"unknown operator class {op!r}")
        if sample.get("phase", "fwd") not in PHASES:
            problems.append(f"unknown phase {sample.get('phase')!r}")
        has_us, has_ms = "time_us" in sample, "time_ms" in sample
        if has_us == has_ms:
            problems.append("give exactly one of time_us and time_ms")
        elif not _positive_time(sample.get("time_us", sample.get("time_ms"))):
            problems.append("time must be a positive finite number")
        dims = sample.get("dims")
        if not isinstance(dims, dict):
            problems.append("dims must be an object")
        elif op in CLASS_DIMS:
            names = CLASS_DIMS[op]
            for k, v in dims.items():
                if k not in names:
                    problems.append(f"dim {k!r} is not one of {op}'s dims {names}")
                elif not _is_uint(v) or v == 0:
                    problems.append(f"dim {k} must be a positive integer, got {v!r}")
            for n in names:
                if n not in dims and (op, n) not in OPTIONAL_DIMS:
                    problems.append(f"dim {n} of {op} is missing")
    else:
        if sample.get("collective") not in COLLECTIVES:
            problems.append(f"unknown collective {sample.get('collective')!r}")
        if not _is_uint(sample.get("bytes")):
            problems.append("bytes must be a non-negative integer")
        if not _is_uint(sample.get("ranks")) or sample.get("ranks") == 0:
            problems.append("ranks must be a positive integer")
        for k in ("nodes", "gpus_per_node"):
            if k in sample and (not _is_uint(sample[k]) or sample[k] >= 2**32):
                problems.append(f"{k} must be a non-negative integer")
        if not _positive_time(sample.get("time_us")):
            problems.append("time_us must be a positive finite number")
    return problems


def dumps(sample: Mapping[str, object]) -> str:
    """One line of JSON (no newline); ``ValueError`` listing the problems when perfcast would reject it."""
    problems = validate(sample)
    if problems:
        raise ValueError("invalid sample: " + "; ".join(problems))
    return json.dumps(sample, ensure_ascii=False, allow_nan=False)


def header_line(info: Mapping[str, object]) -> str:
    """The header comment: ``# perfcast-collect {json of the run's environment}``."""
    return "# perfcast-collect " + json.dumps(dict(info), ensure_ascii=False, sort_keys=True)


class SampleWriter:
    """Writes the header and then samples, one line each, flushing every line so a run cut short keeps what it
    measured. ``path`` ending in ``.gz`` is gzip-compressed; ``-`` is standard output."""

    def __init__(self, path: str, header: Optional[Mapping[str, object]] = None, stream: Optional[IO[str]] = None):
        self.path = path
        self.count = 0
        self._own = stream is None
        if stream is not None:
            self._f = stream
        elif path == "-":
            import sys

            self._f, self._own = sys.stdout, False
        elif path.endswith(".gz"):
            self._f = io.TextIOWrapper(gzip.GzipFile(path, "wb", mtime=0), encoding="utf-8", newline="\n")
        else:
            self._f = open(path, "w", encoding="utf-8", newline="\n")
        if header is not None:
            self._f.write(header_line(header) + "\n")
            self._f.flush()

    def write(self, sample: Mapping[str, object]) -> None:
        self._f.write(dumps(sample) + "\n")
        self._f.flush()
        self.count += 1

    def write_all(self, samples: Iterable[Mapping[str, object]]) -> None:
        for s in samples:
            self.write(s)

    def close(self) -> None:
        if self._own:
            self._f.close()
        else:
            self._f.flush()

    def __enter__(self) -> "SampleWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_text(path: str) -> str:
    """A samples file's text (gzip or plain, detected by the magic bytes, not the name)."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")


def first_gpu(text: str) -> Optional[str]:
    """The ``gpu`` of the first sample line in ``text`` (for the upload's ``gpu=`` parameter)."""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            g = json.loads(line).get("gpu")
        except (ValueError, AttributeError):
            return None
        if isinstance(g, str) and g.strip():
            return g
    return None
