//! Mixture-of-experts training through the real router: DeepSeek-V3 and Qwen3-235B-A22B on 256 H100 answered
//! with their parameters, expert parallelism and memory, and timelines whose expert-parallel all-to-alls have a
//! track of their own; MoE configuration errors as problems naming their field.

use crate::common::TestApp;
use serde_json::{json, Value};

/// The complete events of a trace.
fn spans(trace: &Value) -> Vec<&Value> {
    trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "X").collect()
}

fn end(e: &Value) -> f64 {
    e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap()
}

/// The timeline of training request `req`, after asserting that it is answered and that its last span ends at
/// `prediction`'s `iteration_time_s` (to 1e-6 relative).
async fn timeline_spanning(app: &TestApp, req: &Value, prediction: &Value) -> Value {
    let t = app.post_json("/v1/predictions/training/timeline", req).await;
    assert_eq!(t.status, 200, "{} {}", req["model"], String::from_utf8_lossy(&t.body));
    let trace = t.json();
    let last = spans(&trace).iter().map(|e| end(e)).fold(0.0, f64::max);
    let iteration_us = prediction["iteration_time_s"].as_f64().unwrap() * 1e6;
    assert!(((last - iteration_us) / iteration_us).abs() < 1e-6, "{}: {last} vs {iteration_us}", req["model"]);
    trace
}

/// DeepSeek-V3 on 256 H100 as Megatron-Bridge's `deepseek_v3_pretrain_config_32nodes` lays it out (tp 2, pp 8,
/// ep 32; its pipeline layout puts the embedding and 8 layers on the first stage, 5 layers, the MTP layer and the
/// loss on the last), DeepEP, the distributed optimizer with overlapped reduction, MLA's up-projections and the
/// dense MLPs recomputed.
fn deepseek_v3() -> Value {
    json!({"system": "dgx-h100", "precision": "bf16", "model": "DeepSeek-V3",
        "parallelism": {"tp": 2, "pp": 8, "dp": 16, "ep": 32, "expert_tp": 1, "micro_batch": 1,
            "global_batch": 1024, "sequence_parallel": true, "distributed_optimizer": true,
            "overlap_grad_reduce": true, "num_layers_in_first_pipeline_stage": 8,
            "num_layers_in_last_pipeline_stage": 5, "moe_token_dispatcher": "deepep", "moe_grouped_gemm": true,
            "moe_router_force_load_balancing": true, "recompute": "selective",
            "recompute_modules": ["mla_up_proj", "mlp"]}})
}

/// Qwen3-235B-A22B on 256 H100: tp 2, pp 8 · vp 4 with the embedding and the loss counted as pipeline layers (94 + 2
/// = 96 slots, 3 per chunk), ep 32, DeepEP, the 1F1B all-to-all overlap.
fn qwen3_235b() -> Value {
    json!({"system": "dgx-h100", "precision": "bf16", "model": {"name": "Qwen3-235B-A22B", "seq_len": 4096},
        "parallelism": {"tp": 2, "pp": 8, "dp": 16, "virtual_stages": 4, "ep": 32, "expert_tp": 1,
            "micro_batch": 1, "global_batch": 512, "sequence_parallel": true, "distributed_optimizer": true,
            "overlap_grad_reduce": true, "account_for_embedding_in_pipeline_split": true,
            "account_for_loss_in_pipeline_split": true, "moe_token_dispatcher": "deepep", "moe_grouped_gemm": true,
            "moe_router_force_load_balancing": true, "overlap_moe_expert_parallel_comm": true}})
}

#[tokio::test]
async fn deepseek_v3_and_qwen3_235b_on_256_h100_are_answered_with_timelines() {
    let app = TestApp::new().await;
    for (name, req) in [("DeepSeek-V3", deepseek_v3()), ("Qwen3-235B-A22B", qwen3_235b())] {
        let r = app.post_json("/v1/predictions/training", &req).await;
        assert_eq!(r.status, 200, "{name}: {}", String::from_utf8_lossy(&r.body));
        let p = r.json();
        let cfg = &p["config"];
        assert_eq!(cfg["gpus"], 256, "{name}");
        let moe = &cfg["moe"];
        // Folding: a stage's tp·cp·dp = 32 ranks are ep 32 × expert_tp 1 × expert_dp 1.
        assert_eq!((moe["ep"].as_u64(), moe["expert_dp"].as_u64()), (Some(32), Some(1)), "{name}");
        assert_eq!(moe["moe_token_dispatcher"], "deepep");
        let (total, active) = (cfg["model_parameters"].as_f64().unwrap(), cfg["active_parameters"].as_f64().unwrap());
        if name == "DeepSeek-V3" {
            // 671,026,404,352 of which 37,552,282,624 per token (hand-worked in src/llm/moe/tests.rs); 8 local
            // experts of 256 at ep 32; the MTP layer on the last stage.
            assert_eq!((total, active), (671_026_404_352.0, 37_552_282_624.0));
            assert_eq!((moe["local_experts"].as_u64(), moe["mtp_layers"].as_u64()), (Some(8), Some(1)));
            assert_eq!(cfg["recompute_modules"], json!(["mla_up_proj", "mlp"]));
        } else {
            // Qwen3-235B-A22B: about 235 B of which 22 B per token (Qwen's model card).
            assert!((total / 1e9 - 235.1).abs() < 0.5 && (active / 1e9 - 22.2).abs() < 0.3, "{total} {active}");
        }
        let ops = p["operators"].as_array().unwrap();
        for op in ["EP_Alltoall", "Expert_FC1", "MoE_Router", "EDP_Allgather"] {
            let present = ops.iter().any(|o| o["name"] == op);
            // expert_dp 1: no expert-parameter gather.
            assert_eq!(present, op != "EDP_Allgather", "{name}: {op}");
        }
        // The timeline spans the prediction; every stage's dispatch and combine are on the ep all-to-all track.
        let trace = timeline_spanning(&app, &req, &p).await;
        let x = spans(&trace);
        let events = trace["traceEvents"].as_array().unwrap();
        let track = events
            .iter()
            .find(|e| e["name"] == "thread_name" && e["args"]["name"] == "ep all-to-all")
            .expect("an ep all-to-all track");
        for stage in 0..8 {
            let a2a: Vec<_> = x.iter().filter(|e| e["pid"] == stage && e["cat"] == "ep_all_to_all").collect();
            assert!(!a2a.is_empty(), "{name}: stage {stage} has no all-to-all");
            assert!(a2a.iter().all(|e| e["tid"] == track["tid"]), "{name}: stage {stage}");
        }
    }
}

#[tokio::test]
async fn moe_configuration_errors_name_their_field() {
    let app = TestApp::new().await;
    let cases = [
        // 128 experts over ep 48: not divisible.
        (json!({"ep": 48}), "parallelism.ep"),
        // tp 2 with ep 32 needs sequence parallelism.
        (json!({"sequence_parallel": false}), "parallelism.sequence_parallel"),
        // The 1F1B overlap needs the interleaved schedule with pp > 1.
        (
            json!({"virtual_stages": 1, "account_for_embedding_in_pipeline_split": false,
            "account_for_loss_in_pipeline_split": false}),
            "parallelism.overlap_moe_expert_parallel_comm",
        ),
        (json!({"moe_load_imbalance": 0.5}), "parallelism.moe_load_imbalance"),
        // HybridEP's SM budget: its dispatcher only (this request runs deepep), at a measured count (16 or 32).
        (json!({"moe_hybridep_num_sms": 32}), "parallelism.moe_hybridep_num_sms"),
        (json!({"moe_token_dispatcher": "hybridep", "moe_hybridep_num_sms": 24}), "parallelism.moe_hybridep_num_sms"),
        (json!({"recompute": "none", "recompute_modules": ["moe_act"]}), "parallelism.recompute_modules"),
    ];
    for (change, field) in cases {
        let mut req = qwen3_235b();
        for (k, v) in change.as_object().unwrap() {
            req["parallelism"][k] = v.clone();
        }
        let p = app.post_json("/v1/predictions/training", &req).await.problem(422);
        assert_eq!(p["errors"][0]["field"], field, "{change}: {p}");
    }
    // What the framework lacks: Hugging Face Transformers has no expert parallelism, DeepSpeed-MoE no DeepEP,
    // torchtitan not Megatron-Core's 1F1B all-to-all overlap (Qwen3's request asks for it).
    for (framework, field) in [
        ("hf", "parallelism.ep"),
        ("deepspeed", "parallelism.moe_token_dispatcher"),
        ("torchtitan", "parallelism.overlap_moe_expert_parallel_comm"),
    ] {
        let mut req = qwen3_235b();
        req["framework"] = json!(framework);
        let p = app.post_json("/v1/predictions/training", &req).await.problem(422);
        assert_eq!(p["errors"][0]["field"], field, "{framework}: {p}");
    }
    // Expert parallelism on a dense model.
    let dense = json!({"system": "dgx-h100", "model": "Llama-3.1-8B", "parallelism": {"dp": 8, "ep": 8}});
    let p = app.post_json("/v1/predictions/training", &dense).await.problem(422);
    assert_eq!(p["errors"][0]["field"], "parallelism.ep");
}

#[tokio::test]
async fn deepseek_v3_under_torchtitan_runs_its_eager_experts_and_reduces_in_fp32() {
    let app = TestApp::new().await;
    // torchtitan has DeepEP (`expert_parallel_comm_backend = "deepep"`); without torch.compile the experts' SwiGLU
    // and the norms launch their eager kernels, and FSDP reduces gradients in fp32.
    let mut req = deepseek_v3();
    req["framework"] = json!("torchtitan");
    let r = app.post_json("/v1/predictions/training", &req).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let p = r.json();
    let cfg = &p["config"];
    assert_eq!((&cfg["framework"], &cfg["moe"]["moe_token_dispatcher"]), (&json!("torchtitan"), &json!("deepep")));
    assert_eq!(cfg["grad_reduce_in_fp32"], true);
    assert!(p["operators"].as_array().unwrap().iter().any(|o| o["name"] == "Eager_Elementwise"));
    // The same layout under Megatron-LM (fused kernels, FlashAttention-3-class attention) is faster.
    let mega = app.post_json("/v1/predictions/training", &deepseek_v3()).await.json();
    assert!(mega["iteration_time_s"].as_f64() < p["iteration_time_s"].as_f64(), "{mega} {p}");
}

/// Issue 29: DeepSeek-V3 on 256 H100 at tp 2, pp 8 · vp 4, ep 32 with DeepEP, as Megatron-Bridge's `deepseek.py`
/// `layout_map` lays out pp 8 · vp 4: "Et|(tt|)*30mL". Megatron-Core's uneven first/last options cannot split 61
/// layers into 32 chunks (61 is prime), the layout can.
#[tokio::test]
async fn deepseek_v3_with_an_interleaved_pipeline_layout_is_answered_with_a_timeline() {
    let app = TestApp::new().await;
    let mut req = deepseek_v3();
    let par = &mut req["parallelism"];
    par.as_object_mut().unwrap().remove("num_layers_in_first_pipeline_stage");
    par.as_object_mut().unwrap().remove("num_layers_in_last_pipeline_stage");
    par["virtual_stages"] = json!(4);
    // Without a layout: 61 layers over pp·v = 32 chunks are refused.
    let p = app.post_json("/v1/predictions/training", &req).await.problem(422);
    assert_eq!(p["errors"][0]["field"], "parallelism.virtual_stages", "{p}");
    req["parallelism"]["pipeline_model_parallel_layout"] = json!("Et|(tt|)*30mL");
    let r = app.post_json("/v1/predictions/training", &req).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let p = r.json();
    assert_eq!(p["config"]["gpus"], 256);
    let trace = timeline_spanning(&app, &req, &p).await;
    let x = spans(&trace);
    // Every one of the 8 stages runs. A 32-chunk layout of 1 + 29·2 + 1 = 60 layers, "Et|(tt|)*29,t|mL", for the
    // model's 61 is refused, naming the field.
    for stage in 0..8 {
        assert!(x.iter().any(|e| e["pid"] == stage), "stage {stage} has no span");
    }
    req["parallelism"]["pipeline_model_parallel_layout"] = json!("Et|(tt|)*29,t|mL");
    let p = app.post_json("/v1/predictions/training", &req).await.problem(422);
    assert_eq!(p["errors"][0]["field"], "parallelism.pipeline_model_parallel_layout", "{p}");
    assert!(p["errors"][0]["message"].as_str().unwrap().contains("60 transformer layers"), "{p}");
}
