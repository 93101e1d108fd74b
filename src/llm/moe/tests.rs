//! Hand-worked tests of MoE training through validation, the decomposition and the prediction.

use super::*;
use crate::cost::AnalyticBackend;
use crate::hw::{presets, Precision, System};
use crate::llm::config::TrainingRequest;
use crate::llm::{predict, validate};

fn system(name: &str, nodes: u32) -> System {
    let mut spec = presets().into_iter().find(|p| p.name == name).unwrap();
    spec.nodes = nodes;
    spec.resolve().unwrap()
}

fn cfg(model: serde_json::Value, par: serde_json::Value, gpus: u64) -> TrainingConfig {
    let req: TrainingRequest = serde_json::from_value(serde_json::json!({"system": "dgx-h100", "model": model,
        "parallelism": par, "precision": "bf16"}))
    .unwrap();
    validate(&req.model, &req.parallelism, req.precision, gpus).unwrap()
}

fn qwen235(par: serde_json::Value) -> TrainingConfig {
    cfg(serde_json::json!({"name": "Qwen3-235B-A22B", "seq_len": 4096}), par, 256)
}

#[test]
fn deepseek_v3_has_37b_active_of_671b_parameters_by_hand() {
    // Per layer: MLA 187,107,328 (spec.rs) + two RMSNorms 14,336 = 187,121,664; × 61 = 11,414,421,504. Three dense
    // MLPs 3·7168·18432 = 396,361,728 each: 1,189,085,184. 58 MoE MLPs: 256 experts of 3·7168·2048 = 44,040,192
    // (11,274,289,152), router 7168·256 = 1,835,008, one shared expert 44,040,192 → 11,320,164,352 each,
    // 656,569,532,416 in all. Embedding and LM head 2·129,280·7168 = 1,853,358,080, final norm 7168.
    // Total 11,414,421,504 + 1,189,085,184 + 656,569,532,416 + 1,853,365,248 = 671,026,404,352 (671 B).
    // Active: 8 routed experts, 352,321,536 + router + shared = 398,196,736 per MoE layer, × 58 = 23,095,410,688:
    // 11,414,421,504 + 1,189,085,184 + 23,095,410,688 + 1,853,365,248 = 37,552,282,624 (37 B).
    let c = cfg(serde_json::json!("DeepSeek-V3"), serde_json::json!({}), 8);
    let (total, active) = params::model_params(&c, 129_280);
    assert_eq!((total, active), (671_026_404_352.0, 37_552_282_624.0));
    let p = predict(&c, &AnalyticBackend::new(system("dgx-h100", 1))).unwrap();
    assert_eq!((p.config.model_parameters, p.config.active_parameters), (total, active));
    assert_eq!(p.config.moe.as_ref().map(|m| (m.moe_layers, m.local_experts, m.mtp_layers)), Some((58, 256, 1)));
}

#[test]
fn qwen3_235b_layer_memory_per_gpu_by_hand() {
    // Qwen3-235B-A22B at tp 2 (sequence parallel), dp 16, pp 8, ep 32, expert_tp 1, the distributed optimizer,
    // micro-batch 1 of 4,096 tokens, the load factor set to 1.
    let c = qwen235(serde_json::json!({"tp": 2, "pp": 8, "dp": 16, "ep": 32, "expert_tp": 1,
        "sequence_parallel": true, "distributed_optimizer": true, "global_batch": 1024, "moe_load_imbalance": 1.0,
        "moe_token_dispatcher": "alltoall", "moe_grouped_gemm": true}));
    let moe = c.moe.as_ref().unwrap();
    assert_eq!((moe.edp, moe.local_experts(), c.head_dim), (1, 4, 128));
    // Parameters of one MoE layer on one GPU: attention 4096·128·(64 + 2·4) + 64·128·4096 = 71,303,168 / tp 2 =
    // 35,651,584; two RMSNorms 8,192; router 4096·128 = 524,288 → dense 36,184,064. Experts: 128/32 = 4 of
    // 3·4096·1536 = 18,874,368 → 75,497,472.
    let p = params::moe_layer(&c, moe);
    assert_eq!((p.dense, p.expert), (36_184_064.0, 75_497_472.0));
    // Model states: 16-bit weights and gradients 2·2·111,681,536 = 446,726,144 B; fp32 master weights and Adam
    // moments 12 B per parameter, the dense ones sharded over dp·cp = 16 (27,138,048 B), the experts' over
    // edp = 1 (905,969,664 B): 1,379,833,856 B ≈ 1.29 GiB per layer.
    let states = 4.0 * p.total() + 12.0 * p.dense / 16.0 + 12.0 * p.expert;
    assert_eq!(states, 1_379_833_856.0);
    // Activations per micro-batch: attention 4096 tokens · (4·4096 B replicated / 2 + (2·64·128 + 4·4·128 +
    // 2·64·128) B / 2) = 4096 · 25,600 = 104,857,600; the MoE input side 2,048 tokens · (4·4096 + 8·128) B =
    // 35,651,584; the 2048·8 = 16,384 routed copies · (2·4096 + 4·1536 + 2·1536 + 2·4096) B = 419,430,400.
    // In all 559,939,584 B.
    assert_eq!(memory::layer_bytes(&c, true, Recompute::None), 559_939_584.0);
    // `moe_act` recompute drops the experts' activation output, 16,384 · 2·1536 B = 50,331,648.
    let mut r = c.clone();
    r.recompute = Recompute::Selective;
    r.recompute_modules = vec![RecomputeModule::MoeAct];
    assert_eq!(memory::layer_bytes(&r, true, Recompute::Selective), 559_939_584.0 - 50_331_648.0);
}

#[test]
fn qwen3_235b_all_to_all_bytes_per_layer_through_validation() {
    // The operator table's all-to-all of an MoE layer at ep 8 (one node) and 32 (four nodes): 2,048 tokens per GPU
    // (4,096 / tp 2), 8 copies each of 4096 bf16 values = 134,217,728 B per all-to-all, two per pass.
    for (ep, nodes) in [(8, 1), (32, 4)] {
        let c = qwen235(serde_json::json!({"tp": 2, "pp": 8, "dp": 16, "ep": ep, "expert_tp": 1,
            "sequence_parallel": true, "global_batch": 1024, "moe_token_dispatcher": "alltoall",
            "moe_load_imbalance": 1.0}));
        let layout = crate::llm::layout::Layout::new(&c, 8);
        let prec = crate::llm::operators::OpPrecisions { gemm: Precision::Bf16, other: Precision::Bf16 };
        let ops = ops::moe_layer_ops(&c, &layout, c.moe.as_ref().unwrap(), prec);
        let a2a: Vec<_> = ops.iter().filter(|o| o.name == crate::llm::operators::OpName::EpAllToAll).collect();
        assert_eq!(a2a.len(), 2, "one forward, one backward");
        for o in a2a {
            let crate::llm::operators::Work::Collective { bytes, group, .. } = o.work else { panic!() };
            assert_eq!((bytes, o.calls, group.ranks, group.nodes), (134_217_728.0, 2, ep, nodes));
        }
    }
}

#[test]
fn an_imbalanced_router_is_slower_than_a_forced_balance() {
    let run = |extra: serde_json::Value| {
        let mut par = serde_json::json!({"tp": 2, "pp": 1, "dp": 4, "ep": 8, "expert_tp": 1,
            "sequence_parallel": true, "global_batch": 16, "moe_token_dispatcher": "alltoall",
            "moe_grouped_gemm": true});
        for (k, v) in extra.as_object().unwrap() {
            par[k] = v.clone();
        }
        let c = cfg(serde_json::json!({"name": "Qwen3-30B-A3B", "seq_len": 4096}), par, 8);
        predict(&c, &AnalyticBackend::new(system("dgx-h100", 1))).unwrap()
    };
    let balanced = run(serde_json::json!({"moe_router_force_load_balancing": true}));
    let skewed = run(serde_json::json!({"moe_load_imbalance": 1.5}));
    // The busiest rank's experts process 1.5× the routed tokens and receive 1.5× the bytes: slower.
    assert!(
        skewed.iteration_time_s > balanced.iteration_time_s * 1.05,
        "{} vs {}",
        skewed.iteration_time_s,
        balanced.iteration_time_s
    );
    assert!(balanced.config.moe.as_ref().unwrap().load_factor < 1.05);
    // A capacity factor of 1.25 with token dropping caps the skew at 1.25.
    let capped = run(serde_json::json!({"moe_load_imbalance": 1.5, "moe_expert_capacity_factor": 1.25}));
    assert!(capped.iteration_time_s < skewed.iteration_time_s);
    assert_eq!(capped.config.moe.as_ref().unwrap().load_factor, 1.25);
}

#[test]
fn moe_layers_per_chunk_follow_the_layer_order() {
    // DeepSeek-V3-like: 3 dense layers then MoE; 8 layers of a smaller model over pp 2 · v 2 (2 layers per chunk):
    // virtual stages 0..4 hold layers [0,1], [2,3], [4,5], [6,7]; chunk (s, c) is virtual stage c·pp + s.
    let c = cfg(
        serde_json::json!({"layers": 8, "hidden": 256, "heads": 4, "seq_len": 256, "vocab": 1000,
            "norm": "rmsnorm", "activation": "swiglu", "attention": "flash",
            "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 128, "dense_layers": 3}}),
        serde_json::json!({"pp": 2, "virtual_stages": 2, "grad_accum": 4}),
        8,
    );
    let layers = crate::llm::partition::chunk_layers(&c);
    // Index s·v + c: (0,0) = vs 0 [0,1] → 0 MoE; (0,1) = vs 2 [4,5] → 2; (1,0) = vs 1 [2,3] → 1; (1,1) = vs 3 → 2.
    assert_eq!(chunk_moe_layers(&c, &layers), vec![0, 2, 1, 2]);
}

#[test]
fn hybridep_permutes_and_unpermutes_the_routed_rows_in_kernels_of_their_own() {
    // Qwen3-30B-A3B (hidden 2048, top-8 of 128) at tp 1, ep 8, micro-batch 1 of 4,096 tokens, the load factor set
    // to 1: R = 4096 · 8 = 32,768 routed rows on the busiest rank. HybridEP's `dispatch_with_permute` copies them
    // out of its registered buffer grouped by expert after the dispatch (a permute kernel: 32,768 × 2048 read and
    // written) and `combine_with_unpermute` copies the expert outputs back into it before the combine (the same
    // 32,768 × 2048); the combine kernel sums each token's 8 copies, so the unpermute reads one input, not two.
    let c = cfg(
        serde_json::json!({"name": "Qwen3-30B-A3B", "seq_len": 4096}),
        serde_json::json!({"pp": 1, "dp": 8, "ep": 8, "expert_tp": 1, "global_batch": 8,
            "moe_token_dispatcher": "hybridep", "moe_grouped_gemm": true, "moe_load_imbalance": 1.0}),
        8,
    );
    let layout = crate::llm::layout::Layout::new(&c, 8);
    let prec = crate::llm::operators::OpPrecisions { gemm: Precision::Bf16, other: Precision::Bf16 };
    let ops = ops::moe_layer_ops(&c, &layout, c.moe.as_ref().unwrap(), prec);
    use crate::llm::operators::{OpName, Work};
    let fwd = |name: OpName| {
        ops.iter().position(|o| o.name == name && o.phase == crate::op::Phase::Fwd && !o.recompute).unwrap()
    };
    for name in [OpName::MoePermute, OpName::MoeUnpermute] {
        let o = &ops[fwd(name)];
        let Work::Compute { shape, dtype } = o.work else { panic!("{name:?}") };
        assert_eq!((&shape.dims[..3], dtype, o.calls), (&[32_768, 2048, 1][..], Precision::Bf16, 1), "{name:?}");
        // One read and one write of 32,768 · 2048 bf16 values: 2 · 134,217,728 B = 268,435,456 B per pass.
        assert_eq!(2 * shape.dims[0] * shape.dims[1] * 2, 268_435_456);
    }
    // The permute follows the dispatch (after the host has the tokens per expert); the unpermute follows the
    // second projection.
    assert!(fwd(OpName::EpAllToAll) < fwd(OpName::MoePermute));
    assert!(fwd(OpName::MoePermute) < fwd(OpName::ExpertFc1));
    assert!(fwd(OpName::ExpertFc2) < fwd(OpName::MoeUnpermute));
}

#[test]
fn hybridep_permute_runs_on_the_communication_stream_under_ep_overlap() {
    use crate::cost::{Source, Timed};
    use crate::llm::operators::{OpName, StageOp, Work};
    use crate::llm::timing::TimedOp;
    use crate::op::{Collective, OpClass, OpShape, Phase};
    // One layer, κ = 0. Per pass: the dispatch and combine all-to-all (2 calls × 100 µs), HybridEP's permute and
    // unpermute (30 µs each) and the experts' GEMM (150 µs forward, 200 µs backward).
    let group = crate::comm::Group { ranks: 8, nodes: 1, ranks_per_node: 8 };
    let op = |name, phase, calls, us: f64| {
        let work = if name == OpName::EpAllToAll {
            Work::Collective { collective: Collective::AllToAll, bytes: 1.0, group, active_per_node: 8 }
        } else {
            Work::Compute { shape: OpShape::new(OpClass::Elementwise, phase, &[1, 1, 1]), dtype: Precision::Bf16 }
        };
        let o = StageOp { name, phase, calls, work, features: vec![], recompute: false, overlaps: None };
        let time = Timed { time_us: us, analytic_us: us, source: Source::Analytic, host_us: 0.0, kernels: 1 };
        (o, TimedOp { time, charged_us: us })
    };
    let mut ops = Vec::new();
    for (phase, gemm) in [(Phase::Fwd, 150.0), (Phase::Bwd, 200.0)] {
        ops.push(op(OpName::EpAllToAll, phase, 2, 100.0));
        ops.push(op(OpName::MoePermute, phase, 1, 30.0));
        ops.push(op(OpName::ExpertFc1, phase, 1, gemm));
        ops.push(op(OpName::MoeUnpermute, phase, 1, 30.0));
    }
    let (stage, timed): (Vec<StageOp>, Vec<TimedOp>) = ops.into_iter().unzip();
    let charged = |hybridep: bool| {
        let mut t = timed.clone();
        timing::apply_ep_overlap(&stage, &mut t, 0.0, hybridep);
        t.iter().map(|t| t.charged_us).collect::<Vec<_>>()
    };
    // HybridEP: the forward's communication stream carries 2·100 + 30 + 30 = 260 µs beside the backward's 200 µs of
    // computation → 60 µs exposed, each op charged 60/260 of its time (100 → 23.077, 30 → 6.923); the backward's
    // 260 µs beside the forward's 150 → 110 exposed, ratio 110/260 (100 → 42.308, 30 → 12.692). The GEMMs keep
    // theirs.
    let h = charged(true);
    let (rf, rb) = (60.0 / 260.0, 110.0 / 260.0);
    let want = [100.0 * rf, 30.0 * rf, 150.0, 30.0 * rf, 100.0 * rb, 30.0 * rb, 200.0, 30.0 * rb];
    for (got, want) in h.iter().zip(want) {
        assert!((got - want).abs() < 1e-9, "{h:?}");
    }
    // The forward charges 2·23.077 + 2·6.923 + 150 = 210 µs: the GEMM plus the 60 µs exposed.
    assert!((2.0 * h[0] + h[1] + h[2] + h[3] - 210.0).abs() < 1e-9);
    // Another dispatcher's permutes are computation: the forward's 200 µs of all-to-all hide behind the backward's
    // 200 + 30 + 30 = 260 µs, the backward's behind the forward's 150 + 60 = 210 µs; the permutes keep their 30 µs.
    assert_eq!(charged(false), vec![0.0, 30.0, 150.0, 30.0, 0.0, 30.0, 200.0, 30.0]);
}

#[test]
fn deepseek_v3_pipeline_layout_places_layers_and_mtp_by_hand() {
    // Megatron-Bridge deepseek.py layout_map, pp 8 · vp 4: "Et|(tt|)*30mL" on 256 GPUs (tp 2, dp 16, ep 32).
    let par = serde_json::json!({"tp": 2, "pp": 8, "dp": 16, "ep": 32, "expert_tp": 1, "virtual_stages": 4,
        "global_batch": 1024, "sequence_parallel": true, "pipeline_model_parallel_layout": "Et|(tt|)*30mL"});
    let c = cfg(serde_json::json!("DeepSeek-V3"), par.clone(), 256);
    let layers = crate::llm::partition::chunk_layers(&c);
    // Index s·4 + c is virtual stage c·8 + s: index 0 (vs 0) 1 layer, index 31 (vs 31: "mL") none, the rest 2.
    assert_eq!((layers.len(), layers[0], layers[1], layers[31], layers.iter().sum::<u32>()), (32, 1, 2, 0, 61));
    // Layers in virtual-stage order: vs 0 holds layer 0, vs 1 (index 4) layers 1–2, vs 2 (index 8) layers 3–4: the
    // 3 dense layers are 0–2, so indexes 0 and 4 hold no MoE layer, index 8 two.
    let moe = chunk_moe_layers(&c, &layers);
    assert_eq!((moe[0], moe[4], moe[8], moe.iter().sum::<u32>()), (0, 0, 2, 58));
    // The MTP layer on chunk 3 of stage 7 (vs 31), nowhere else.
    assert_eq!((c.chunk_mtp_layers(7, 3), c.stage_mtp_layers(7), c.stage_mtp_layers(6)), (1, 1, 0));
    // With Megatron-Core's uneven-split options as well: refused, naming the layout.
    let mut both = par;
    both["num_layers_in_first_pipeline_stage"] = 8.into();
    let req: TrainingRequest = serde_json::from_value(serde_json::json!({"system": "dgx-h100",
        "model": "DeepSeek-V3", "parallelism": both, "precision": "bf16"}))
    .unwrap();
    let e = validate(&req.model, &req.parallelism, req.precision, 256).unwrap_err();
    assert_eq!(e.field, "parallelism.pipeline_model_parallel_layout");
}

#[test]
fn a_standalone_mtp_chunk_runs_where_the_layout_puts_it() {
    // 8 layers (3 dense) and 1 MTP layer over pp 4 · vp 2 with "Et|tt|tt|t|t|t|m|L": virtual stages 0–7, the t
    // count 1 + 2 + 2 + 1 + 1 + 1 = 8; the m in virtual stage 6 = chunk 6 / 4 = 1 of stage 6 mod 4 = 2 (a stage's
    // last chunk, as Megatron-Core requires), the loss alone in virtual stage 7 = chunk 1 of stage 3.
    let c = cfg(
        serde_json::json!({"layers": 8, "hidden": 256, "heads": 4, "seq_len": 256, "vocab": 1000,
            "norm": "rmsnorm", "activation": "swiglu", "attention": "flash", "mtp_layers": 1,
            "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 128, "dense_layers": 3}}),
        serde_json::json!({"pp": 4, "virtual_stages": 2, "grad_accum": 4,
            "pipeline_model_parallel_layout": "Et|tt|tt|t|t|t|m|L"}),
        8,
    );
    let d = crate::llm::decompose::decompose(&c, &system("dgx-h100", 1));
    let mtp: Vec<Vec<u32>> = d.stages.iter().map(|s| s.chunks.iter().map(|c| c.mtp).collect()).collect();
    assert_eq!(mtp, vec![vec![0, 0], vec![0, 0], vec![0, 1], vec![0, 0]]);
    // Stage s holds virtual stages s and s + 4: stage 0 "Et" + "t" = 2 layers, 1: 2 + 1, 2: 2 + 0, 3: 1 + 0.
    let layers: Vec<u32> = d.stages.iter().map(|s| s.encoders).collect();
    assert_eq!(layers, vec![2, 3, 2, 1]);
    assert!(d.stages[3].chunks[1].head && d.stages[3].chunks[1].layers == 0);
    assert!(predict(&c, &AnalyticBackend::new(system("dgx-h100", 1))).is_ok());
}
