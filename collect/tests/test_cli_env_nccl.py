"""The CLI without torch (plan, option errors, a clear message where torch is needed), the environment parsers,
nccl-tests byte conventions, and that the pure modules never import torch."""

import contextlib
import io
import json
import os
import subprocess
import sys
import unittest
from unittest import mock

from perfcast_collect import cli, env, grid, nccl

COLLECT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(argv))
    return rc, out.getvalue(), err.getvalue()


class Plan(unittest.TestCase):
    def test_plan_lists_cases(self):
        rc, out, err = run_cli(
            "plan",
            "--models",
            "GPT-NeoX-20B",
            "--model-mp",
            "4",
            "--max-shapes",
            "0",
            "--no-corners",
            "--dtypes",
            "bf16",
            "--list",
        )
        self.assertEqual(rc, 0, err)
        rows = [json.loads(x) for x in out.splitlines()]
        self.assertEqual(len(rows), 17)  # Table I for GPT-NeoX (Linear3 = Linear4 at mp 4) + 2 optimizer sizes
        qkv = [r for r in rows if r["attributes"]["s1_op"] == "Linear1"][0]
        self.assertEqual(qkv["dims"], {"B": 1, "M": 8192, "N": 4608, "K": 6144})
        self.assertEqual(qkv["phases"], ["fwd", "bwd"])
        self.assertIn("distinct shapes: 17", err)

    def test_plan_memory_cap_and_config(self):
        rc, out, err = run_cli(
            "plan",
            "--models",
            "none",
            "--max-shapes",
            "0",
            "--no-corners",
            "--config",
            "mp=1,b=8,h=16,l=5120,d=2048",
            "--ops",
            "softmax",
            "--memory-gb",
            "72",
            "--list",
        )
        self.assertEqual(rc, 0, err)
        # softmax rows 8·16·5120 of 5120: 3.36e9 elements, 6.7e9 B per bf16 tensor; bwd 3·2·6.7e9 = 40.3e9 B fits
        self.assertEqual(len(out.splitlines()), 2)
        rc, out, err = run_cli(
            "plan",
            "--models",
            "none",
            "--max-shapes",
            "0",
            "--no-corners",
            "--config",
            "mp=1,b=8,h=80,l=5120,d=2560",
            "--ops",
            "softmax",
            "--memory-gb",
            "72",
        )
        # 80 heads: 33.6e9 B per bf16 tensor — (in + out)·1.5 = 100.7e9 B > 72 GiB (77.3e9 B): all left out
        self.assertIn("timings: 0", err)

    def test_option_errors(self):
        for argv, want in [
            (("plan", "--ops", "conv2d"), "unknown operator"),
            (("plan", "--dtypes", "int8"), "unknown dtype"),
            (("plan", "--models", "GPT-5"), "unknown model"),
            (("plan", "--config", "mp=3,b=4,h=16,l=1024,d=2048"), "h % mp"),
            (("plan", "--config", "mp=1,b=4"), "missing"),
        ]:
            rc, _, err = run_cli(*argv)
            self.assertEqual(rc, 2, argv)
            self.assertIn(want, err, argv)

    def test_parse_config(self):
        c = cli.parse_config("mp=2 b=4 h=32 l=2048 d=4096 v=32000")
        self.assertEqual((c.key, c.v, c.source), ((2, 4, 32, 2048, 4096), 32000, "cli"))

    def test_list_models(self):
        rc, out, _ = run_cli("plan", "--list-models")
        self.assertEqual(rc, 0)
        self.assertEqual(len(out.splitlines()), len(grid.KNOWN_MODELS))
        self.assertIn("LLaMA-2-70B", out)


class NoTorch(unittest.TestCase):
    def test_pure_modules_do_not_import_torch(self):
        code = (
            "import sys; import perfcast_collect.cli, perfcast_collect.grid, perfcast_collect.output, "
            "perfcast_collect.timing, perfcast_collect.upload, perfcast_collect.nccl, perfcast_collect.env; "
            "assert 'torch' not in sys.modules, 'torch imported'"
        )
        r = subprocess.run([sys.executable, "-c", code], cwd=COLLECT_DIR, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_commands_that_need_torch_say_so(self):
        # torch made unimportable (None in sys.modules), as on a machine without it
        with mock.patch.dict(sys.modules, {"torch": None}):
            rc, _, err = run_cli("ops", "--max-shapes", "1", "--out", os.devnull)
        self.assertEqual(rc, 2)
        self.assertIn("needs PyTorch", err)

    def test_module_entry_points(self):
        for argv in (
            [sys.executable, "-m", "perfcast_collect", "--version"],
            [sys.executable, os.path.join(COLLECT_DIR, "collect.py"), "--version"],
        ):
            r = subprocess.run(argv, cwd=COLLECT_DIR, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("perfcast-collect", r.stdout)


class Env(unittest.TestCase):
    def test_driver_from_proc(self):
        prop = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023\nGCC 12\n"
        self.assertEqual(env.driver_from_proc(prop), "535.129.03")
        opn = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16)"
        self.assertEqual(env.driver_from_proc(opn), "550.54.15")
        self.assertIsNone(env.driver_from_proc("nothing here"))

    def test_sample_attributes(self):
        info = {
            "torch": "2.4.0",
            "cuda": "12.4",
            "driver": "550.54.15",
            "gpu": "H100",
            "gpu_sms": 132,
            "collector": "0.1.0",
            "cudnn": "90100",
        }
        self.assertEqual(
            env.sample_attributes(info, {"nccl": "2.21.5"}),
            {
                "torch": "2.4.0",
                "cuda": "12.4",
                "cudnn": "90100",
                "driver": "550.54.15",
                "collector": "0.1.0",
                "nccl": "2.21.5",
            },
        )


class NcclConventions(unittest.TestCase):
    def test_message_sizes(self):
        self.assertEqual(nccl.message_sizes(1024, 8192), [1024, 2048, 4096, 8192])
        self.assertEqual(nccl.message_sizes(8, 1000, 4), [8, 32, 128, 512])
        for bad in ((0, 8, 2), (16, 8, 2), (8, 16, 1)):
            with self.assertRaises(ValueError):
                nccl.message_sizes(*bad)

    def test_buffer_elements_as_nccl_tests_counts(self):
        mib = 1 << 20
        # all-reduce 1 MiB of bf16: 524,288 elements in and out
        self.assertEqual(nccl.buffer_elements("all_reduce", mib, 8, 2), (mib, 524288, 524288))
        # all-gather: bytes = the gathered total; each of 8 ranks sends 65,536 elements
        self.assertEqual(nccl.buffer_elements("all_gather", mib, 8, 2), (mib, 65536, 524288))
        # reduce-scatter: bytes = the input; each rank keeps 65,536
        self.assertEqual(nccl.buffer_elements("reduce_scatter", mib, 8, 2), (mib, 524288, 65536))
        self.assertEqual(nccl.buffer_elements("send_recv", mib, 2, 2), (mib, 524288, 524288))
        self.assertEqual(nccl.buffer_elements("all_to_all", mib, 8, 4), (mib, 262144, 262144))
        # 1000 bytes of bf16 over 3 ranks: 500 elements → 498 (a multiple of 3) → 996 bytes reported
        self.assertEqual(nccl.buffer_elements("all_gather", 1000, 3, 2), (996, 166, 498))
        with self.assertRaises(ValueError):
            nccl.buffer_elements("all_gather", 8, 8, 2)  # 4 elements cannot give 8 ranks one each
        with self.assertRaises(ValueError):
            nccl.buffer_elements("allreduce", mib, 8, 2)

    def test_topology_from_torchrun_environment(self):
        e = {"RANK": "9", "WORLD_SIZE": "16", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "8"}
        self.assertEqual(nccl.topology(e), (9, 16, 1, 8))
        self.assertEqual(nccl.topology({}), (0, 1, 0, 1))


if __name__ == "__main__":
    unittest.main()
