"""Uploads a samples file to perfcast, with the standard library only (``urllib``).

``POST {URL}/v1/profiles?format=perfcast_jsonl&gpu=…&<labels>`` with ``Authorization: Bearer KEY``,
``Content-Type: application/x-ndjson`` and ``Content-Encoding: gzip`` (the body is gzip; a file that already is
gzip is sent as it is). Free labels (``ci_run``, ``git_sha``, …) become query parameters; in GitHub Actions and
GitLab CI the run id, commit and ref are added unless given. A non-2xx answer raises ``UploadError`` carrying the
RFC 9457 problem's ``title``, ``detail`` and each ``errors[]`` entry.
"""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from . import __version__

GZIP_MAGIC = b"\x1f\x8b"


class UploadError(Exception):
    """The upload failed: the server's problem (status, title, detail, errors) or why it could not be reached."""

    def __init__(self, message: str, status: Optional[int] = None, problem: Optional[dict] = None):
        super().__init__(message)
        self.status = status
        self.problem = problem or {}


def ci_labels(environ: Mapping[str, str]) -> Dict[str, str]:
    """Labels from the CI environment: GitHub Actions (``GITHUB_RUN_ID``/``GITHUB_RUN_ATTEMPT``, ``GITHUB_SHA``,
    ``GITHUB_REF_NAME``) or GitLab CI (``CI_PIPELINE_ID``/``CI_JOB_ID``, ``CI_COMMIT_SHA``,
    ``CI_COMMIT_REF_NAME``) as ``ci_run``, ``git_sha``, ``git_ref``."""
    out: Dict[str, str] = {}
    if environ.get("GITHUB_RUN_ID"):
        run = environ["GITHUB_RUN_ID"]
        if environ.get("GITHUB_RUN_ATTEMPT"):
            run += "." + environ["GITHUB_RUN_ATTEMPT"]
        out["ci_run"] = "github:" + run
        sha, ref = environ.get("GITHUB_SHA"), environ.get("GITHUB_REF_NAME")
    elif environ.get("CI_PIPELINE_ID"):
        run = environ["CI_PIPELINE_ID"]
        if environ.get("CI_JOB_ID"):
            run += "." + environ["CI_JOB_ID"]
        out["ci_run"] = "gitlab:" + run
        sha, ref = environ.get("CI_COMMIT_SHA"), environ.get("CI_COMMIT_REF_NAME")
    else:
        return out
    if sha:
        out["git_sha"] = sha
    if ref:
        out["git_ref"] = ref
    return out


def parse_labels(items: Sequence[str]) -> Dict[str, str]:
    """``["k=v", …]`` → dict; ``ValueError`` naming an item without ``=`` or with an empty key."""
    out: Dict[str, str] = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k.strip():
            raise ValueError(f"label {it!r} is not KEY=VALUE")
        out[k.strip()] = v
    return out


def gzip_body(data: bytes) -> bytes:
    """``data`` gzip-compressed (reproducibly: mtime 0), or as it is when it already is gzip."""
    return data if data[:2] == GZIP_MAGIC else gzip.compress(data, mtime=0)


RESERVED = ("format", "gpu")


def build_request(
    base_url: str,
    key: str,
    data: bytes,
    gpu: Optional[str] = None,
    labels: Optional[Mapping[str, str]] = None,
) -> urllib.request.Request:
    """The POST request for ``data`` (a samples file's bytes, plain or gzip). ``ValueError`` on a URL that is not
    http(s), an empty key, or a label named ``format``/``gpu``."""
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--post needs an http(s) URL such as https://perfcast.example.org, got {base_url!r}")
    if not key:
        raise ValueError("an API key is needed (--key or PERFCAST_KEY)")
    query: List[Tuple[str, str]] = [("format", "perfcast_jsonl")]
    if gpu:
        query.append(("gpu", gpu))
    for k, v in sorted((labels or {}).items()):
        if k in RESERVED:
            raise ValueError(f"label {k!r} is reserved (the upload sets it)")
        query.append((k, v))
    path = parts.path.rstrip("/") + "/v1/profiles"
    url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, urllib.parse.urlencode(query), ""))
    headers = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/x-ndjson",
        "Content-Encoding": "gzip",
        "Accept": "application/json, application/problem+json",
        "User-Agent": f"perfcast-collect/{__version__}",
    }
    return urllib.request.Request(url, data=gzip_body(data), headers=headers, method="POST")


def problem_message(status: int, body: bytes, content_type: str = "") -> Tuple[str, Optional[dict]]:
    """A one-paragraph description of an error response: the problem+json ``title`` and ``detail`` and each of
    its ``errors`` (``line:column`` or ``field``: message), or the start of a non-JSON body."""
    problem = None
    try:
        parsed = json.loads(body.decode("utf-8"))
        if isinstance(parsed, dict):
            problem = parsed
    except (ValueError, UnicodeDecodeError):
        pass
    if problem is None:
        text = body.decode("utf-8", "replace").strip()[:500]
        return f"HTTP {status}" + (f": {text}" if text else ""), None
    head = f"HTTP {status}"
    if problem.get("title"):
        head += f" {problem['title']}"
    if problem.get("detail"):
        head += f": {problem['detail']}"
    lines = [head]
    for e in problem.get("errors") or []:
        if not isinstance(e, dict):
            continue
        where = e.get("field") or ""
        if e.get("line") is not None:
            where = f"line {e['line']}" + (f":{e['column']}" if e.get("column") is not None else "")
        lines.append(f"  - {where + ': ' if where else ''}{e.get('message', '')}")
    return "\n".join(lines), problem


def send(request: urllib.request.Request, timeout: float = 120.0) -> Tuple[int, object]:
    """Sends ``request``; returns (status, the JSON answer or its text). ``UploadError`` on a non-2xx answer (with
    the problem's detail) or when the server cannot be reached."""
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            status, body = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        body = e.read() if e.fp is not None else b""
        msg, problem = problem_message(e.code, body, e.headers.get("Content-Type", "") if e.headers else "")
        raise UploadError(f"upload to {request.full_url} failed: {msg}", e.code, problem) from None
    except urllib.error.URLError as e:
        raise UploadError(f"cannot reach {request.full_url}: {e.reason}") from None
    except OSError as e:  # timeouts, resets
        raise UploadError(f"cannot reach {request.full_url}: {e}") from None
    if not 200 <= status < 300:
        msg, problem = problem_message(status, body)
        raise UploadError(f"upload to {request.full_url} failed: {msg}", status, problem)
    try:
        return status, json.loads(body.decode("utf-8")) if body else None
    except (ValueError, UnicodeDecodeError):
        return status, body.decode("utf-8", "replace")


def upload_file(
    path: str,
    base_url: str,
    key: str,
    gpu: Optional[str] = None,
    labels: Optional[Mapping[str, str]] = None,
    timeout: float = 120.0,
) -> Tuple[int, object]:
    """Uploads the samples file at ``path``; ``gpu`` defaults to the first sample's."""
    from .output import first_gpu, read_text

    with open(path, "rb") as f:
        data = f.read()
    if gpu is None:
        gpu = first_gpu(read_text(path))
    return send(build_request(base_url, key, data, gpu, labels), timeout)
