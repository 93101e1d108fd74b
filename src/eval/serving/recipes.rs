//! Server options the runs' own recipes set, read per run: what the engines were started with where the file does
//! not say. Each reading is cited from the recipe's script.

use super::rows::INFERENCEX_SHAPES;
use crate::llm::serving::request::Engine;

/// The `--scheduler-recv-interval` InferenceX's SGLang DeepSeek-R1 recipes start the server with: 10 below 16 clients,
/// 30 from 16 (`benchmarks/dsr1_fp4_b200.sh`, `dsr1_fp8_b200.sh`, and `single_node/dsr1_fp4_b300.sh`, which reuses the
/// B200 recipe: `if [[ $CONC -ge 16 ]]; then SCHEDULER_RECV_INTERVAL=30 else 10`); `None` for every other run — other
/// engines, disaggregated runs, other models (InferenceX's GLM-5 recipe, `glm5_fp8_b200.sh`, leaves SGLang's default
/// 1), and the shapes InferenceX does not run ([`INFERENCEX_SHAPES`]). The file's DeepSeek-V3 SGLang runs repeat its
/// DeepSeek-R1 runs (the same deployments and measurements), so they read the same recipe. `concurrency` is the run's
/// clients.
pub fn sglang_recv_interval(
    engine: Engine,
    mode: &str,
    model: &str,
    shape: (u32, u32),
    concurrency: u32,
) -> Option<u32> {
    let deepseek = model.starts_with("deepseek-ai/DeepSeek-R1") || model.starts_with("deepseek-ai/DeepSeek-V3");
    (engine == Engine::Sglang && mode == "agg" && deepseek && INFERENCEX_SHAPES.contains(&shape))
        .then_some(if concurrency >= 16 { 30 } else { 10 })
}

/// The `--kv-cache-dtype` InferenceX's SGLang fp8 recipes start the server with: `fp8_e4m3` (perfcast's `fp8`) in
/// `benchmarks/dsr1_fp8_b200.sh` (DeepSeek-R1; `--quantization fp8 --moe-runner-backend flashinfer_trtllm
/// --attention-backend trtllm_mla --kv-cache-dtype fp8_e4m3`) and `benchmarks/glm5_fp8_b200.sh` (GLM-5,
/// `--quantization fp8 --kv-cache-dtype fp8_e4m3`); `None` — the engine's `auto`, a 16-bit cache for these
/// self-quantized checkpoints, which name no KV-cache quantization — for every other run: other engines and
/// precisions (fp4 checkpoints already default to fp8), disaggregated runs (their recipes are not InferenceX's
/// single-node scripts) and the shapes InferenceX does not run ([`INFERENCEX_SHAPES`]). The runs read as those
/// recipes are the ones [`sglang_recv_interval`] reads (DeepSeek-V3's SGLang rows repeat R1's), plus GLM-5's.
/// `precision` is the row's (`fp8`, `fp4`, `bf16`).
pub fn sglang_kv_cache_dtype(
    engine: Engine,
    mode: &str,
    model: &str,
    precision: &str,
    shape: (u32, u32),
) -> Option<&'static str> {
    let recipe = model.starts_with("deepseek-ai/DeepSeek-R1")
        || model.starts_with("deepseek-ai/DeepSeek-V3")
        || model.starts_with("zhipuai/GLM-5");
    (engine == Engine::Sglang && mode == "agg" && precision == "fp8" && recipe && INFERENCEX_SHAPES.contains(&shape))
        .then_some("fp8")
}

/// Which worker of a deployment a TensorRT-LLM budget is for ([`trtllm_max_num_tokens`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerRole {
    /// An aggregated worker: prefills and decodes.
    Agg,
    /// A disaggregated prefill (context) worker.
    Prefill,
    /// A disaggregated decode (generation) worker.
    Decode,
}

/// A TensorRT-LLM worker's `max_num_tokens` as aiconfigurator's generator writes it
/// (`src/aiconfigurator/generator/rule_plugin/trtllm.rule`, rounded up to `tokens_per_block` 32 so that
/// `maxNumTokens % tokensPerBlock == 0`): aggregated `max_batch_size + isl + 1500`, prefill `isl + 1500`, decode
/// `max_batch_size`; `batch_size` is the requests per attention-DP rank
/// (0 when the row gives none). With chunked context off (the PyTorch backend's default) every prompt then fits
/// one step beside a full batch of decodes; the engine's own 8,192 would hold an 8,192-token prompt back for as
/// long as any request decodes.
pub fn trtllm_max_num_tokens(role: WorkerRole, isl: u32, batch_size: u32) -> u32 {
    const TOKENS_PER_BLOCK: u32 = 32;
    let raw = match role {
        WorkerRole::Agg => batch_size + isl + 1500,
        WorkerRole::Prefill => isl + 1500,
        WorkerRole::Decode => batch_size,
    };
    raw.max(1).div_ceil(TOKENS_PER_BLOCK) * TOKENS_PER_BLOCK
}

/// The CUDA-graph capture list of aiconfigurator's engine template for TensorRT-LLM 1.3.0rc1
/// (ai-dynamo/aiconfigurator `src/aiconfigurator/generator/config/backend_templates/trtllm/
/// extra_engine_args.1.3.0rc1.yaml.j2` @581e4591: `cuda_graph_config.batch_sizes` defaults to
/// `[1,2,4,8,16,32,64,128,256]` and `enable_padding` to `false`), for the runs of that engine version
/// (`backend_version` 1.3.0rc1: NVIDIA's gap-analysis job on `ai-dynamo/tensorrtllm-runtime:0.9.0`, the file's six
/// DeepSeek-R1-NVFP4 B200 4,000 / 1,000 rows); `None` for every other run. Without padding a decode batch of
/// another size has no graph and runs eagerly (TensorRT-LLM's `CUDAGraphRunner._get_padded_batch` pads nothing
/// when `not self.padding_enabled`, `tensorrt_llm/_torch/pyexecutor/cuda_graph_runner.py`). Which rule and template
/// the job ran is not recorded; the template of its version is the reading (oddrows' row A).
pub fn trtllm_template_graph_batch_sizes(engine: Engine, backend_version: &str) -> Option<&'static [u32]> {
    const TRTLLM_1_3_0RC1: [u32; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];
    (engine == Engine::Trtllm && backend_version == "1.3.0rc1").then_some(&TRTLLM_1_3_0RC1[..])
}

/// Whether a run's `silicon_data_source` names an NVIDIA Dynamo runtime image (`…/ai-dynamo/…-runtime:…`, with or
/// without the `image=` key): its requests went through Dynamo's front end, which tokenizes them concurrently
/// ([`crate::llm::serving::frontend`]), not the engine's own API server.
pub fn runs_under_dynamo(silicon_data_source: &str) -> bool {
    silicon_data_source.contains("ai-dynamo/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_1_3_0rc1_template_captures_powers_of_two_and_dynamo_images_are_read() {
        let l = trtllm_template_graph_batch_sizes(Engine::Trtllm, "1.3.0rc1").unwrap();
        // 2^0 … 2^8: nine sizes, 256 the largest; the per-rank batches of the six runs (56, 28, 10, 12, 6, 5) are
        // none of them.
        assert_eq!((l.len(), l[8]), (9, 256));
        assert!([56, 28, 10, 12, 6, 5].iter().all(|b| !l.contains(b)));
        assert_eq!(trtllm_template_graph_batch_sizes(Engine::Trtllm, "1.3.0rc5"), None);
        assert_eq!(trtllm_template_graph_batch_sizes(Engine::Sglang, "1.3.0rc1"), None);
        assert!(runs_under_dynamo("measured=2026-03-06; image=nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1"));
        assert!(runs_under_dynamo("workflow_run_id=265; nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post2"));
        assert!(!runs_under_dynamo("measured=2026-03-25; image=lmsysorg/sglang:v0.5.9-cu130"));
    }

    #[test]
    fn aiconfigurators_trtllm_token_budgets() {
        // agg: 128 + 8192 + 1500 = 9,820 → ⌈9820 / 32⌉ = 307 blocks → 9,824; prefill 1024 + 1500 = 2,524 →
        // 79 · 32 = 2,528; decode 48 → 2 · 32 = 64.
        assert_eq!(trtllm_max_num_tokens(WorkerRole::Agg, 8192, 128), 9824);
        assert_eq!(trtllm_max_num_tokens(WorkerRole::Prefill, 1024, 1), 2528);
        assert_eq!(trtllm_max_num_tokens(WorkerRole::Decode, 1024, 48), 64);
    }

    #[test]
    fn inferencexs_deepseek_sglang_recipes_receive_every_10_or_30_decode_batches() {
        let r1 = "deepseek-ai/DeepSeek-R1";
        // `if [[ $CONC -ge 16 ]]; then 30 else 10`: 4 and 15 clients 10, 16 and 512 clients 30.
        let at = |c| sglang_recv_interval(Engine::Sglang, "agg", r1, (1024, 1024), c);
        assert_eq!((at(4), at(15), at(16), at(512)), (Some(10), Some(10), Some(30), Some(30)));
        // DeepSeek-V3's rows repeat R1's; 8k/1k is an InferenceX shape.
        assert_eq!(sglang_recv_interval(Engine::Sglang, "agg", "deepseek-ai/DeepSeek-V3", (8192, 1024), 8), Some(10));
        // Not the recipe: another engine, a disaggregated run, GLM-5 (its recipe leaves the default), NVIDIA's
        // 4,000 / 1,000 shape.
        assert_eq!(sglang_recv_interval(Engine::Vllm, "agg", r1, (1024, 1024), 4), None);
        assert_eq!(sglang_recv_interval(Engine::Sglang, "disagg", r1, (1024, 1024), 4), None);
        assert_eq!(sglang_recv_interval(Engine::Sglang, "agg", "zhipuai/GLM-5", (1024, 1024), 4), None);
        assert_eq!(sglang_recv_interval(Engine::Sglang, "agg", r1, (4000, 1000), 4), None);
    }

    #[test]
    fn inferencexs_sglang_fp8_recipes_set_an_fp8_kv_cache() {
        // dsr1_fp8_b200.sh and glm5_fp8_b200.sh: `--kv-cache-dtype fp8_e4m3`.
        let kv = |model, mode, precision, shape| sglang_kv_cache_dtype(Engine::Sglang, mode, model, precision, shape);
        assert_eq!(kv("deepseek-ai/DeepSeek-R1", "agg", "fp8", (1024, 1024)), Some("fp8"));
        assert_eq!(kv("deepseek-ai/DeepSeek-V3", "agg", "fp8", (8192, 1024)), Some("fp8"));
        assert_eq!(kv("zhipuai/GLM-5", "agg", "fp8", (1024, 8192)), Some("fp8"));
        // Not those recipes: fp4 and bf16 rows, disaggregated runs, Qwen3.5, another shape, another engine.
        assert_eq!(kv("deepseek-ai/DeepSeek-R1", "agg", "fp4", (1024, 1024)), None);
        assert_eq!(kv("deepseek-ai/DeepSeek-R1", "disagg", "fp8", (1024, 1024)), None);
        assert_eq!(kv("Qwen/Qwen3.5-397B-A17B", "agg", "fp8", (1024, 1024)), None);
        assert_eq!(kv("deepseek-ai/DeepSeek-R1", "agg", "fp8", (4000, 1000)), None);
        let trt = sglang_kv_cache_dtype(Engine::Trtllm, "agg", "deepseek-ai/DeepSeek-R1", "fp8", (1024, 1024));
        assert_eq!(trt, None);
    }
}
