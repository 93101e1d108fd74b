"""The upload request (URL, query, headers, gzip body) against a local ``http.server`` in a thread, the error
report on non-2xx answers (problem+json detail and errors), and the CI labels."""

import contextlib
import gzip
import http.server
import io
import json
import os
import socket
import tempfile
import threading
import unittest
import urllib.parse
from unittest import mock

from perfcast_collect import cli, upload

from . import golden


class Recorder(http.server.BaseHTTPRequestHandler):
    """Records each request; answers by the path's first segment: ok → 201 JSON, bad → 422 problem+json,
    auth → 401 problem+json, text → 500 plain text."""

    requests = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Recorder.requests.append(
            {"method": "POST", "path": self.path, "headers": dict(self.headers.items()), "body": body}
        )
        first = self.path.split("/")[1]
        if first == "ok":
            self._send(201, "application/json", {"profile_id": 42, "samples": 3})
        elif first == "bad":
            self._send(
                422,
                "application/problem+json",
                {
                    "type": "urn:perfcast:problem:invalid-profile",
                    "title": "The profile cannot be parsed",
                    "status": 422,
                    "detail": "line 2: expected value",
                    "errors": [
                        {"line": 2, "column": 14, "message": "expected value"},
                        {"field": "gpu", "message": "unknown GPU"},
                    ],
                },
            )
        elif first == "auth":
            self._send(
                401,
                "application/problem+json",
                {"title": "Unauthorized", "status": 401, "detail": "the API key is not valid"},
            )
        else:
            raw = b"internal trouble"
            self.send_response(500)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    def _send(self, status, ctype, obj):
        raw = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


class Server:
    def __enter__(self):
        Recorder.requests = []
        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def query_of(path):
    return urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)


class Request(unittest.TestCase):
    def test_request_construction(self):
        req = upload.build_request(
            "https://perfcast.example.org/base/",
            "sekret",
            b'{"op": "gelu"}\n',
            gpu="NVIDIA H100 80GB HBM3",
            labels={"git_sha": "abc123", "ci_run": "77"},
        )
        self.assertEqual(req.get_method(), "POST")
        self.assertEqual(
            req.full_url,
            "https://perfcast.example.org/base/v1/profiles?format=perfcast_jsonl"
            "&gpu=NVIDIA+H100+80GB+HBM3&ci_run=77&git_sha=abc123",
        )
        headers = {k.lower(): v for k, v in req.header_items()}
        self.assertEqual(headers["authorization"], "Bearer sekret")
        self.assertEqual(headers["content-encoding"], "gzip")
        self.assertEqual(gzip.decompress(req.data), b'{"op": "gelu"}\n')

    def test_already_gzip_is_sent_as_is(self):
        gz = gzip.compress(b"x\n")
        self.assertIs(upload.gzip_body(gz), gz)
        self.assertEqual(gzip.decompress(upload.gzip_body(b"x\n")), b"x\n")

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "http"):
            upload.build_request("ftp://x", "k", b"")
        with self.assertRaisesRegex(ValueError, "http"):
            upload.build_request("perfcast:8080", "k", b"")
        with self.assertRaisesRegex(ValueError, "key"):
            upload.build_request("http://x", "", b"")
        with self.assertRaisesRegex(ValueError, "reserved"):
            upload.build_request("http://x", "k", b"", labels={"format": "csv"})

    def test_labels(self):
        self.assertEqual(upload.parse_labels(["ci_run=1", "note=a=b"]), {"ci_run": "1", "note": "a=b"})
        with self.assertRaises(ValueError):
            upload.parse_labels(["novalue"])
        gh = {"GITHUB_RUN_ID": "9", "GITHUB_RUN_ATTEMPT": "2", "GITHUB_SHA": "deadbeef", "GITHUB_REF_NAME": "main"}
        self.assertEqual(upload.ci_labels(gh), {"ci_run": "github:9.2", "git_sha": "deadbeef", "git_ref": "main"})
        gl = {"CI_PIPELINE_ID": "5", "CI_JOB_ID": "6", "CI_COMMIT_SHA": "cafe"}
        self.assertEqual(upload.ci_labels(gl), {"ci_run": "gitlab:5.6", "git_sha": "cafe"})
        self.assertEqual(upload.ci_labels({}), {})


class AgainstLocalServer(unittest.TestCase):
    def test_successful_upload(self):
        data = golden.render().encode()
        with Server() as s:
            status, answer = upload.send(upload.build_request(s.base + "/ok", "k1", data, "L4", {"ci_run": "3"}))
        self.assertEqual((status, answer), (201, {"profile_id": 42, "samples": 3}))
        (r,) = Recorder.requests
        self.assertEqual(urllib.parse.urlsplit(r["path"]).path, "/ok/v1/profiles")
        self.assertEqual(query_of(r["path"]), {"format": ["perfcast_jsonl"], "gpu": ["L4"], "ci_run": ["3"]})
        h = {k.lower(): v for k, v in r["headers"].items()}
        self.assertEqual(h["authorization"], "Bearer k1")
        self.assertEqual(h["content-encoding"], "gzip")
        self.assertEqual(h["content-type"], "application/x-ndjson")
        self.assertEqual(int(h["content-length"]), len(r["body"]))
        self.assertEqual(gzip.decompress(r["body"]), data)

    def test_problem_detail_on_422(self):
        with Server() as s:
            with self.assertRaises(upload.UploadError) as cm:
                upload.send(upload.build_request(s.base + "/bad", "k", b"{}\n"))
        e = cm.exception
        self.assertEqual(e.status, 422)
        msg = str(e)
        self.assertIn("The profile cannot be parsed: line 2: expected value", msg)
        self.assertIn("line 2:14: expected value", msg)
        self.assertIn("gpu: unknown GPU", msg)
        self.assertEqual(e.problem["type"], "urn:perfcast:problem:invalid-profile")

    def test_401_and_non_json_errors(self):
        with Server() as s:
            with self.assertRaisesRegex(upload.UploadError, "HTTP 401 Unauthorized: the API key is not valid"):
                upload.send(upload.build_request(s.base + "/auth", "k", b"x"))
            with self.assertRaisesRegex(upload.UploadError, "HTTP 500: internal trouble"):
                upload.send(upload.build_request(s.base + "/text", "k", b"x"))

    def test_unreachable(self):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()  # nothing listens there now
        with self.assertRaisesRegex(upload.UploadError, "cannot reach"):
            upload.send(upload.build_request(f"http://127.0.0.1:{port}", "k", b"x"), timeout=5)

    def test_cli_upload_file(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.jsonl.gz")
            with open(path, "wb") as f:
                f.write(gzip.compress(golden.render().encode()))
            with Server() as s:
                out, err = io.StringIO(), io.StringIO()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    rc = cli.main(
                        [
                            "upload",
                            path,
                            "--post",
                            s.base + "/ok",
                            "--key",
                            "k9",
                            "--label",
                            "git_sha=ab",
                            "--no-ci-labels",
                        ]
                    )
                self.assertEqual(rc, 0, err.getvalue())
                self.assertEqual(json.loads(out.getvalue()), {"profile_id": 42, "samples": 3})
                (r,) = Recorder.requests
                # gpu= comes from the file's first sample; the gzip file is sent unchanged
                self.assertEqual(query_of(r["path"])["gpu"], [golden.GPU])
                self.assertEqual(query_of(r["path"])["git_sha"], ["ab"])
                with open(path, "rb") as f:
                    self.assertEqual(r["body"], f.read())

                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    rc = cli.main(["upload", path, "--post", s.base + "/bad", "--key", "k9", "--no-ci-labels"])
                self.assertEqual(rc, 1)
                self.assertIn("line 2: expected value", err.getvalue())

    def test_cli_key_from_environment(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.jsonl")
            with open(path, "w") as f:
                f.write(golden.render())
            quiet = contextlib.ExitStack()
            quiet.enter_context(contextlib.redirect_stdout(io.StringIO()))
            quiet.enter_context(contextlib.redirect_stderr(io.StringIO()))
            with mock.patch.dict(os.environ, {"PERFCAST_KEY": "from-env"}), Server() as s, quiet:
                rc = cli.main(["upload", path, "--post", s.base + "/ok", "--no-ci-labels"])
            self.assertEqual(rc, 0)
            self.assertEqual(Recorder.requests[0]["headers"]["Authorization"], "Bearer from-env")


if __name__ == "__main__":
    unittest.main()
