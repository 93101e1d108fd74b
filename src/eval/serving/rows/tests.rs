//! The serving eval's row loader on the shared Blackwell runs: clients, worker counts, engine recipes.

use super::*;

#[test]
fn inferencexs_client_draws_the_lengths_of_its_three_shapes_only() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/aiconfigurator/serving_runs_blackwell.csv");
    let (fixed, _) = load(&path, Client::Fixed).unwrap();
    assert!(fixed.iter().all(|r| r.request.workload.min_length_ratio.is_none()));
    let (ix, _) = load(&path, Client::InferenceX).unwrap();
    assert_eq!(ix.len(), fixed.len());
    let shaped = |r: &RunRow| [(1024, 1024), (1024, 8192), (8192, 1024)].contains(&(r.isl, r.osl));
    // The 1k/1k, 1k/8k and 8k/1k runs with [⌊0.8 L⌋, L]; NVIDIA's 4,000 / 1,000 and 15,000 / 500 jobs stay fixed.
    assert!(ix.iter().filter(|r| shaped(r)).all(|r| r.request.workload.min_length_ratio == Some(0.8)));
    let others: Vec<&RunRow> = ix.iter().filter(|r| !shaped(r)).collect();
    assert!(!others.is_empty() && others.iter().all(|r| r.request.workload.min_length_ratio.is_none()));
    // 10 requests per client either way (InferenceX's --num-prompts $((CONC * 10))).
    let r = ix.iter().find(|r| shaped(r) && r.replicas == 1 && r.concurrency == 4).unwrap();
    assert_eq!(r.request.workload.num_requests, Some(40));
}

#[test]
fn tensorrt_llm_graphs_cover_512_or_the_batch_size_plus_8() {
    // aiconfigurator's rule: graphs for 1…512 and batch_size ± 8. batch_size 256: 512; 1,024: 1,032; none
    // given: 512.
    assert_eq!(
        (trtllm_graph_max_batch(Some(256)), trtllm_graph_max_batch(Some(1024)), trtllm_graph_max_batch(None)),
        (512, 1032, 512)
    );
}

#[test]
fn a_disaggregated_runs_decode_batch_size_caps_its_decode_workers() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/aiconfigurator/serving_runs_blackwell.csv");
    let (rows, _) = load(&path, Client::Fixed).unwrap();
    // Kimi-K2.5 on GB200, TensorRT-LLM disaggregated at 192 clients: decode_num_workers 4, decode_tp_size 8,
    // decode_attention_dp_size 1, decode_batch_size 48 (4 × 1 × 48 = 192 clients): max_num_seqs 48 per decode
    // worker; the prefill pool keeps the engine's default batch (prefill_batch_size 1 is not passed).
    let r = rows.iter().find(|r| r.id == "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c192_cfg759").unwrap();
    let (p, d) = (r.request.prefill.clone().unwrap(), r.request.decode.clone().unwrap());
    assert_eq!((d.workers, d.engine_options.as_ref().and_then(|o| o.max_num_seqs)), (4, Some(48)));
    // aiconfigurator's TensorRT-LLM workers: prefill with the overlap scheduler off and 1024 + 1500 → 2,528
    // tokens; decode's budget 48 → 64.
    let po = p.engine_options.unwrap();
    assert_eq!((po.max_num_seqs, po.max_num_batched_tokens, po.async_scheduling), (None, Some(2528), Some(false)));
    assert_eq!(d.engine_options.and_then(|o| o.max_num_batched_tokens), Some(64));
}

#[test]
fn a_squared_gpu_count_is_read_back_when_it_exceeds_the_node() {
    // tp_size 16 = moe_tp 4 × moe_ep 4 on an 8-GPU DGX B200: 4 GPUs (tp 16 / 4), MoE EP 4.
    assert_eq!(unsquared(16, 1, 4, 4, 8), (4, 1));
    // tp_size 64 = 8 × 8: 8 GPUs; attention_dp_size 64 = 8 × 8 with tp 1: 8 DP ranks.
    assert_eq!(unsquared(64, 1, 8, 8, 8), (8, 1));
    assert_eq!(unsquared(1, 64, 8, 8, 8), (1, 8));
    // 4 = 2 × 2 fits the node, 16 without moe_tp > 1, and tp and DP both above 1: kept as written.
    assert_eq!(unsquared(4, 1, 2, 2, 8), (4, 1));
    assert_eq!(unsquared(16, 1, 1, 16, 8), (16, 1));
    assert_eq!(unsquared(4, 4, 4, 4, 8), (4, 4));
    // The file: DeepSeek-R1 NVFP4, SGLang, B200, 8k/1k at 4 clients, 317.14 ms / 9.15 ms, recorded by one dump as
    // `…_tp4_ep4_1049` with tp_size 16, moe 4 × 4 and by the other as `…_tp4_0_ep4_0_311` with tp_size 4,
    // moe 1 × 4: read back, the first is a copy of the second (dropped), a worker of 4 GPUs (tp 4, ep 4). The same
    // measurement is filed first as `dsr1_…_c4_cfg202` (tp_size 16, moe 4 × 4, model id DeepSeek-V3): read back
    // alike, it is the one kept, and `…_311` goes as the same measurement under other labels.
    // `…_tp8_ep8_1043` (tp_size 64, moe 8 × 8) and its earlier filing `dsr1_…_c4_cfg201`: 8 GPUs, ep 8.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/aiconfigurator/serving_runs_blackwell.csv");
    let (rows, skipped) = load(&path, Client::Fixed).unwrap();
    let find = |id: &str| rows.iter().find(|r| r.id.ends_with(id));
    assert!(find("_c4_tp4_ep4_1049").is_none());
    assert!(skipped.keys().any(|k| k.contains("squared")));
    assert!(find("_c4_tp4_0_ep4_0_311").is_none());
    assert!(find("_c4_tp8_ep8_1043").is_none());
    let dsr1 = |cfg: u32| format!("dsr1_b200_sglang_fp4_agg_8192x1024_c4_cfg{cfg}");
    for (id, tp_ep) in [(dsr1(202), (4, 4)), (dsr1(201), (8, 8))] {
        let r = find(&id).unwrap_or_else(|| panic!("{id}"));
        assert_eq!((r.request.parallelism.tp, r.request.parallelism.ep), tp_ep, "{id}");
    }
}

#[test]
fn an_aggregated_runs_replicas_follow_from_its_per_rank_batch() {
    // 416 clients of a tp-2 Qwen3-32B at batch_size 13 without attention DP: 416 / 13 = 32 workers of 13.
    assert_eq!(replicas(416, Some(13), 1), 32);
    // Attention DP 2 at batch_size 8 per rank and 32 clients: one worker holds 16, so 2 workers.
    assert_eq!(replicas(32, Some(8), 2), 2);
    // A worker of 4 DP ranks at batch_size 8 holds all 32 clients: 1 worker (Kimi-K2.5 tp 4 adp 4 c 32).
    assert_eq!(replicas(32, Some(8), 4), 1);
    // batch_size = concurrency, no batch size, or one that does not divide the clients: 1.
    assert_eq!(replicas(64, Some(64), 1), 1);
    assert_eq!(replicas(64, None, 1), 1);
    assert_eq!(replicas(100, Some(30), 1), 1);
    // A batch above the clients (the run's max, not reached): 1.
    assert_eq!(replicas(8, Some(16), 1), 1);
}

#[test]
fn one_measurement_filed_under_two_labels_is_kept_once_with_its_worker_counts() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/aiconfigurator/serving_runs_blackwell.csv");
    let (rows, skipped) = load(&path, Client::Fixed).unwrap();
    let ids = |needle: &str| rows.iter().filter(|r| r.id.contains(needle)).map(|r| r.id.as_str()).collect::<Vec<_>>();
    // DeepSeek-R1 fp8 on GB200, TensorRT-LLM disaggregated, 1k/8k at 2,048 clients, TTFT 1,877.1552708941047 ms:
    // `dsr1_…_cfg375` (model id DeepSeek-V3, 1 prefill + 1 decode worker stated) and `2026_04_06_…_1601` (DeepSeek-R1,
    // worker counts empty). One run: the copy with its worker counts stays.
    // `2026_03_25_…_1058` prints the same TTFT with 16 digits (1,877.155270894105): the same run, dropped too.
    assert_eq!(
        ids("gb200_trtllm_fp8_disagg_1024x8192_c2048_"),
        ["dsr1_gb200_trtllm_fp8_disagg_1024x8192_c2048_cfg375"]
    );
    let kept = rows.iter().find(|r| r.id == "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c2048_cfg375").unwrap();
    assert!(kept.workers_known);
    // SGLang DeepSeek-R1 NVFP4 on B200, 8k/1k at 8 clients, TTFT 9,188.18521729554 ms: `dsr1_…_cfg99` first in the
    // file, `2026_04_06_…_tp8_ep1_6` (aggregated: neither states workers) dropped.
    assert!(ids("2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_8192x1024_c8_tp8_ep1_6").is_empty());
    assert_eq!(ids("dsr1_b200_sglang_fp4_agg_8192x1024_c8_cfg99").len(), 1);
    // No two rows left share a measurement (to 7 digits, coarser than the rule).
    let mut seen = std::collections::HashSet::new();
    for r in &rows {
        let key = (
            r.engine,
            &r.mode,
            &r.gpu,
            r.isl,
            r.osl,
            r.concurrency,
            format!("{:.6e}", r.ttft_ms),
            format!("{:.6e}", r.tpot_ms),
        );
        assert!(seen.insert(key), "{}", r.id);
    }
    assert!(skipped[SAME_MEASUREMENT] > 0);
}

#[test]
fn the_1_3_0rc1_runs_capture_their_templates_graphs_and_dynamo_runs_use_its_front_end() {
    use crate::llm::serving::request::FrontendServer;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/aiconfigurator/serving_runs_blackwell.csv");
    let (rows, _) = load(&path, Client::Fixed).unwrap();
    // The six DeepSeek-R1-NVFP4 B200 4,000 / 1,000 runs of TensorRT-LLM 1.3.0rc1 (image
    // ai-dynamo/tensorrtllm-runtime:0.9.0): aiconfigurator's 1.3.0rc1 template, 1, 2, 4, …, 256 without padding, in
    // place of the 512 padded graphs of the other TensorRT-LLM runs; Dynamo's front end.
    let r1: Vec<&RunRow> =
        rows.iter().filter(|r| r.id.contains("deepseek_r1_nvfp4_b200_sxm_trtllm_agg_4000x1000")).collect();
    assert_eq!(r1.len(), 6);
    for r in &r1 {
        let o = &r.request.engine_options;
        assert_eq!(o.cuda_graph_batch_sizes.as_deref(), Some(&[1, 2, 4, 8, 16, 32, 64, 128, 256][..]));
        assert_eq!((o.cuda_graph_padding, o.cuda_graph_max_batch), (Some(false), None));
        assert_eq!(r.request.frontend.map(|f| f.server), Some(FrontendServer::Dynamo));
    }
    // The Qwen3-32B GB200 15,000 / 500 disaggregated run (image ai-dynamo/tensorrtllm-runtime:0.8.1): Dynamo's
    // front end, and TensorRT-LLM's usual padded graphs up to 512.
    let q = rows
        .iter()
        .find(|r| {
            r.id == "nvidia_qwen3_32b_nvfp4_nvidia_qwen3_32b_nvfp4_gb200_trtllm_disagg_15000x500_c552_tp_epnone_1"
        })
        .unwrap();
    assert_eq!(q.request.frontend.map(|f| f.server), Some(FrontendServer::Dynamo));
    assert_eq!(q.request.engine_options.cuda_graph_max_batch, Some(512));
    // No vLLM run names a Dynamo image: each keeps its engine's own front end.
    assert!(rows.iter().filter(|r| r.engine == Engine::Vllm).all(|r| r.request.frontend.is_none()));
}
