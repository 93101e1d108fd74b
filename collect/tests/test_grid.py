"""The shape grid: S1's ranges, the divisibility constraints, Latin-hypercube sampling (determinism, budget,
stratification), the corners, the known models, the Table I → perfcast mapping (values by hand) and dedup."""

import collections
import unittest

from perfcast_collect import grid


def dims_of(cases, s1_op):
    return [c.dims_dict for c in cases if c.s1_op == s1_op]


class Ranges(unittest.TestCase):
    def test_s1_ranges(self):
        self.assertEqual(grid.MP_VALUES, (1, 2, 4, 8, 16))
        self.assertEqual(grid.B_VALUES, (4, 8))
        self.assertEqual(grid.H_VALUES, (16, 24, 32, 40, 48, 56, 64, 72, 80))
        self.assertEqual(grid.L_VALUES, (1024, 1536, 2048, 2560, 3072, 3584, 4096, 4608, 5120))
        self.assertEqual(len(grid.D_VALUES), 13)
        self.assertEqual((grid.D_VALUES[0], grid.D_VALUES[-1]), (2048, 8192))

    def test_validity(self):
        self.assertTrue(grid.is_valid(16, 4, 80, 1024, 2560))  # 80 heads over 16 ranks, head dim 32
        self.assertFalse(grid.is_valid(16, 4, 24, 1024, 3072))  # 24 heads do not split 16 ways
        self.assertFalse(grid.is_valid(1, 4, 80, 1024, 2048))  # 2048 / 80 is not whole
        self.assertFalse(grid.is_valid(0, 4, 16, 1024, 2048))

    def test_valid_grid_respects_constraints_and_ranges(self):
        valid = grid.valid_grid()
        self.assertEqual(len(valid), len(set(valid)))
        for mp, b, h, l, d in valid:
            self.assertEqual(h % mp, 0)
            self.assertEqual(d % h, 0)
            self.assertEqual(d % mp, 0)
            self.assertIn(mp, grid.MP_VALUES)
            self.assertIn(b, grid.B_VALUES)
            self.assertIn(l, grid.L_VALUES)
        # By hand: heads 72 = 8·9 need d a multiple of lcm(512, 72) = 4608 — only 4608 lies in 2048–8192.
        self.assertEqual(grid.valid_hidden(72), [4608])
        self.assertEqual(grid.valid_hidden(80), [2560, 5120, 7680])
        self.assertEqual(grid.valid_hidden(56), [3584, 7168])

    def test_vocab_padding_s1_eq_1_2(self):
        self.assertEqual(grid.padded_vocab(50257, 4), 50688)  # 512 · 99
        self.assertEqual(grid.padded_vocab(50257, 1), 50304)  # 128 · 393
        self.assertEqual(grid.padded_vocab(32000, 8), 32768)  # 1024 · 32
        self.assertEqual(grid.padded_vocab(32000, 1), 32000)

    def test_encoder_params_s1_eq_6(self):
        # d = 6144, mp = 4: 4·6144 + 8·6144·6145/4 + 6144·24577/4 = 24576 + 75509760 + 37750272
        self.assertEqual(grid.encoder_params(6144, 4), 113284608)


class Sampling(unittest.TestCase):
    def test_deterministic_with_seed(self):
        self.assertEqual(grid.sample_grid(40, 7), grid.sample_grid(40, 7))
        self.assertNotEqual([c.key for c in grid.sample_grid(40, 7)], [c.key for c in grid.sample_grid(40, 8)])

    def test_budget_respected_and_distinct(self):
        for n in (0, 1, 5, 33, 200):
            s = grid.sample_grid(n, 3)
            self.assertEqual(len(s), n)
            self.assertEqual(len({c.key for c in s}), n)
        self.assertEqual(len(grid.sample_grid(10**6, 0)), len(grid.valid_grid()))

    def test_samples_are_valid_and_in_range(self):
        for c in grid.sample_grid(100, 11):
            self.assertTrue(grid.is_valid(c.mp, c.b, c.h, c.l, c.d), c)
            self.assertIn(c.v, grid.GRID_VOCABS)
            self.assertEqual(len(c.encoders), 1)
            self.assertEqual(c.source, "grid")

    def test_latin_hypercube_keeps_mp_and_b_stratified(self):
        s = grid.sample_grid(50, 5)
        mp = collections.Counter(c.mp for c in s)
        b = collections.Counter(c.b for c in s)
        self.assertEqual(mp, {v: 10 for v in grid.MP_VALUES})
        self.assertEqual(b, {4: 25, 8: 25})
        # every sequence length appears with 45 samples over 9 values
        self.assertEqual(set(c.l for c in grid.sample_grid(45, 2)), set(grid.L_VALUES))

    def test_corners(self):
        corners = grid.corner_configs()
        self.assertEqual(len(corners), 32)
        self.assertEqual(len({c.key for c in corners}), 32)
        keys = {c.key for c in corners}
        for k in [
            (1, 4, 16, 1024, 2048),
            (1, 8, 16, 5120, 8192),
            (16, 8, 16, 5120, 8192),
            (16, 4, 80, 1024, 2560),
            (16, 8, 80, 5120, 7680),
            (1, 4, 80, 5120, 2560),
        ]:
            self.assertIn(k, keys)
        for c in corners:
            self.assertTrue(grid.is_valid(*c.key))


class Mapping(unittest.TestCase):
    """Table I → perfcast class and dims, every value computed by hand."""

    def test_gpt_neox_20b_mp4_b4(self):
        (cfg,) = grid.model_configs([grid.model_by_name("GPT-NeoX-20B")], mps=[4], bs=[4])
        ops = grid.ops_for_config(cfg)
        by = {c.s1_op: (c.op, c.dims_dict) for c in ops if c.s1_op != "Optimizer"}
        # b = 4, l = 2048, d = 6144, h = 64, mp = 4: bl = 8192, hp = 16, dh = 96, vp = 50688 / 4 = 12672
        self.assertEqual(by["Embedding"], ("embedding", {"T": 8192, "V": 12672, "H": 6144}))
        self.assertEqual(by["LayerNorm"], ("layernorm", {"B": 8192, "H": 6144}))
        self.assertEqual(by["Linear1"], ("linear", {"B": 1, "M": 8192, "N": 4608, "K": 6144}))
        self.assertEqual(by["RoPE"], ("rope", {"B": 131072, "H": 96}))
        self.assertEqual(by["QK^T"], ("bmm", {"B": 64, "M": 2048, "N": 2048, "K": 96}))
        self.assertEqual(by["Fillmask"], ("fillmask", {"B": 131072, "H": 2048}))
        self.assertEqual(by["Softmax"], ("softmax", {"B": 131072, "H": 2048}))
        self.assertEqual(by["Fused_Softmax"], ("fused_softmax", {"B": 131072, "H": 2048}))
        self.assertEqual(by["V"], ("bmm", {"B": 64, "M": 2048, "N": 96, "K": 2048}))
        self.assertEqual(by["Flash_Attention"], ("flash_attention", {"B": 4, "L": 2048, "A": 16, "D": 96}))
        self.assertEqual(by["Linear2"], ("linear", {"B": 1, "M": 8192, "N": 6144, "K": 1536}))
        self.assertEqual(by["Linear3"], ("linear", {"B": 1, "M": 8192, "N": 6144, "K": 6144}))
        self.assertEqual(by["GeLU"], ("gelu", {"B": 8192, "H": 6144}))
        self.assertEqual(by["Linear4"], ("linear", {"B": 1, "M": 8192, "N": 6144, "K": 6144}))
        self.assertEqual(by["Final_Linear"], ("linear", {"B": 1, "M": 8192, "N": 12672, "K": 6144}))
        self.assertEqual(by["Parallel_Cross_Entropy"], ("cross_entropy", {"T": 8192, "V": 12672}))
        self.assertNotIn("RMSNorm", by)
        self.assertNotIn("SwiGLU", by)
        # Optimizer: ceil(44 / 4) = 11 encoders and 1 encoder of 113,284,608 parameters (S1 eq. 6)
        self.assertEqual(sorted(c.dims_dict["P"] for c in ops if c.s1_op == "Optimizer"), [113284608, 1246130688])
        self.assertTrue(all(c.phases == ("fwd",) for c in ops if c.s1_op == "Optimizer"))
        self.assertTrue(all(c.phases == ("fwd", "bwd") for c in ops if c.s1_op != "Optimizer"))

    def test_llama2_7b_mp2_swiglu_and_rmsnorm(self):
        (cfg,) = grid.model_configs([grid.model_by_name("LLaMA-2-7B")], mps=[2], bs=[4])
        by = {c.s1_op: c.dims_dict for c in grid.ops_for_config(cfg) if c.s1_op != "Optimizer"}
        # bl = 16384, d = 4096, ffn 11008 / 2 = 5504, gated up-projection 2·5504 = 11008; v 32000 → 32000 / 2
        self.assertEqual(by["RMSNorm"], {"B": 16384, "H": 4096})
        self.assertEqual(by["Linear1"], {"B": 1, "M": 16384, "N": 6144, "K": 4096})
        self.assertEqual(by["Linear3"], {"B": 1, "M": 16384, "N": 11008, "K": 4096})
        self.assertEqual(by["SwiGLU"], {"B": 16384, "H": 5504})
        self.assertEqual(by["Linear4"], {"B": 1, "M": 16384, "N": 4096, "K": 5504})
        self.assertEqual(by["Final_Linear"], {"B": 1, "M": 16384, "N": 16000, "K": 4096})
        self.assertNotIn("LayerNorm", by)
        self.assertNotIn("GeLU", by)

    def test_grouped_query_attention_qkv(self):
        (cfg,) = grid.model_configs([grid.model_by_name("LLaMA-2-70B")], mps=[8], bs=[4])
        by = {c.s1_op: c for c in grid.ops_for_config(cfg)}
        # 64 q heads / 8 = 8, 8 kv heads / 8 = 1 each for k and v: (8 + 2)·128 = 1280 columns
        self.assertEqual(by["Linear1"].dims_dict, {"B": 1, "M": 16384, "N": 1280, "K": 8192})
        self.assertEqual(by["Linear1"].attributes()["kv_heads"], 8)

    def test_grid_point_has_every_table_i_operator(self):
        cfg = grid.grid_config(2, 4, 32, 1024, 4096, v=50257, encoders=(1,), source="grid")
        names = [c.s1_op for c in grid.ops_for_config(cfg)]
        self.assertEqual(sorted(names), sorted(grid.S1_OPS))
        by = {c.s1_op: c.dims_dict for c in grid.ops_for_config(cfg)}
        # 3d/mp = 6144, 4d/mp = 8192, h/mp = 16, d/h = 128
        self.assertEqual(by["Linear1"]["N"], 6144)
        self.assertEqual(by["Linear3"]["N"], 8192)
        self.assertEqual(by["SwiGLU"], {"B": 4096, "H": 8192})
        self.assertEqual(by["Flash_Attention"], {"B": 4, "L": 1024, "A": 16, "D": 128})

    def test_flash_only_where_the_kernel_takes_the_head_dim(self):
        # d/h = 8192/16 = 512 > 256: no flash attention; 7680/80 = 96 is fine
        big = grid.grid_config(1, 4, 16, 1024, 8192, v=32000, encoders=(1,), source="grid")
        self.assertNotIn("Flash_Attention", [c.s1_op for c in grid.ops_for_config(big)])
        ok = grid.grid_config(1, 4, 80, 1024, 7680, v=32000, encoders=(1,), source="grid")
        self.assertIn("Flash_Attention", [c.s1_op for c in grid.ops_for_config(ok)])

    def test_dims_names_match_the_class(self):
        for case in grid.build_plan(max_shapes=20, seed=1).cases:
            names = grid.CLASS_DIMS[case.op]
            self.assertEqual(tuple(k for k, _ in case.dims), names[: len(case.dims)], case)
            self.assertTrue(all(isinstance(v, int) and v > 0 for _, v in case.dims), case)


class PlanTests(unittest.TestCase):
    def test_dedup_merges_models_and_keeps_order(self):
        plan = grid.build_plan(
            max_shapes=0,
            corners=False,
            models=[grid.model_by_name("LLaMA-2-7B"), grid.model_by_name("Llemma-7B")],
            model_mps=[1],
            model_bs=[4],
        )
        keys = [c.key for c in plan.cases]
        self.assertEqual(len(keys), len(set(keys)))
        # Llemma-7B is LLaMA-2-7B with a 32016 vocabulary: the encoder shapes are shared, the vocabulary ones not
        by = {(c.s1_op): c for c in plan.cases if c.s1_op in ("Linear1", "RMSNorm")}
        self.assertEqual(by["Linear1"].models, ("LLaMA-2-7B", "Llemma-7B"))
        self.assertEqual(by["Linear1"].attributes()["model"], "LLaMA-2-7B;Llemma-7B")
        finals = [c for c in plan.cases if c.s1_op == "Final_Linear"]
        self.assertEqual(sorted(c.dims_dict["N"] for c in finals), [32000, 32128])  # 32016 pads to 128·251

    def test_known_model_shapes_present(self):
        plan = grid.build_plan(max_shapes=8, seed=0)
        keys = {c.key for c in plan.cases}
        # GPT-3-175B, mp 8, b 4: M = 8192, N = 3·12288/8 = 4608, K = 12288
        self.assertIn(("linear", (("B", 1), ("M", 8192), ("N", 4608), ("K", 12288))), keys)
        # LLaMA-3-8B, mp 1, b 4, l 8192: flash attention B 4, L 8192, A 32, D 128
        self.assertIn(("flash_attention", (("B", 4), ("L", 8192), ("A", 32), ("D", 128))), keys)
        # GPT-NeoX-20B, mp 4: Linear1 as S1 measured it
        self.assertIn(("linear", (("B", 1), ("M", 8192), ("N", 4608), ("K", 6144))), keys)
        models = {m for c in plan.cases for m in c.models}
        self.assertEqual(models, {m.name for m in grid.KNOWN_MODELS})

    def test_models_skip_mp_that_does_not_divide(self):
        cfgs = grid.model_configs([grid.model_by_name("LLaMA-3-70B")], mps=[1, 2, 4, 8, 16], bs=[4])
        self.assertEqual([c.mp for c in cfgs], [1, 2, 4, 8])  # 8 kv heads do not split 16 ways

    def test_plan_is_deterministic_and_ops_filter(self):
        a = grid.build_plan(max_shapes=12, seed=4)
        b = grid.build_plan(max_shapes=12, seed=4)
        self.assertEqual([c.key for c in a.cases], [c.key for c in b.cases])
        only = grid.build_plan(max_shapes=12, seed=4, ops=["QK^T", "flash_attention"])
        self.assertEqual({c.s1_op for c in only.cases}, {"QK^T", "Flash_Attention"})
        self.assertEqual(len(a.configs), 12 + 32 + len(grid.model_configs(grid.KNOWN_MODELS)))

    def test_memory_estimate_by_hand(self):
        cfg = grid.grid_config(1, 4, 16, 1024, 2048, v=32000, encoders=(1,), source="grid")
        by = {c.s1_op: c for c in grid.ops_for_config(cfg)}
        # Linear1: M 4096, N 6144, K 2048 in bf16: (4096·2048 + 6144·2048 + 4096·6144)·2 B = 92,274,688 B
        self.assertEqual(grid.memory_bytes(by["Linear1"], "bf16", "fwd"), int(92274688 * 1.5))
        self.assertEqual(grid.memory_bytes(by["Linear1"], "bf16", "bwd"), int(92274688 * 3))
        # Optimizer: 16 B per parameter
        p = by["Optimizer"].dims_dict["P"]
        self.assertEqual(grid.memory_bytes(by["Optimizer"], "fp16", "fwd"), 16 * p)


if __name__ == "__main__":
    unittest.main()
