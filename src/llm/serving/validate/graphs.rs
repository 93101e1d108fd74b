//! The CUDA-graph capture list a request gives (`engine_options.cuda_graph_batch_sizes`): checked, sorted and
//! de-duplicated as each engine does with its own flag, and its largest size made the settings'
//! `cuda_graph_max_batch` (the field's doc in [`crate::llm::serving::request::EngineOptions`] cites each engine).

use crate::llm::config::{bad, ConfigError};
use crate::llm::serving::engine::EngineSettings;
use crate::llm::serving::request::{Engine, EngineOptions};

/// The largest decode batch a capture list may name, sequences per attention data-parallel rank: a bound on the
/// input (no engine's per-rank batch comes near it), not a physical limit.
pub const MAX_CUDA_GRAPH_BATCH: u32 = 65_536;

/// The most sizes one capture list may name (a bound on the input).
pub const MAX_CUDA_GRAPH_SIZES: usize = 4_096;

/// `options`' capture list for `engine` with `settings` (the other options and the engine's defaults applied),
/// ascending and unique; `None` when the request gives none (the engine's default list,
/// [`super::ServingConfig::cuda_graph_sizes`]). Sets `settings.cuda_graph_max_batch` to its largest size. vLLM
/// drops the sizes above `max_num_batched_tokens` (`VllmConfig._set_cudagraph_sizes`, `vllm/config/vllm.py`:
/// `[i for i in dedup_sizes if i <= max_num_tokens]`, sorted).
///
/// Errors (422, naming the field): an empty list, more than [`MAX_CUDA_GRAPH_SIZES`] sizes, or no size left under
/// vLLM's token budget (`engine_options.cuda_graph_batch_sizes`); a size outside 1–[`MAX_CUDA_GRAPH_BATCH`]
/// (`engine_options.cuda_graph_batch_sizes[i]`, `i` its index in the request); a list with CUDA graphs off
/// (`engine_options.cuda_graphs`); a `cuda_graph_max_batch` other than the list's largest size
/// (`engine_options.cuda_graph_max_batch`, as TensorRT-LLM's `CudaGraphConfig` and vLLM refuse both disagreeing).
pub(super) fn capture_list(
    options: &EngineOptions,
    engine: Engine,
    settings: &mut EngineSettings,
) -> Result<Option<Vec<u32>>, ConfigError> {
    const FIELD: &str = "engine_options.cuda_graph_batch_sizes";
    let Some(given) = &options.cuda_graph_batch_sizes else {
        return Ok(None);
    };
    if given.is_empty() {
        return Err(bad(FIELD, "must name at least one batch size (set cuda_graphs false for none)"));
    }
    if given.len() > MAX_CUDA_GRAPH_SIZES {
        return Err(bad(FIELD, format!("at most {MAX_CUDA_GRAPH_SIZES} sizes, got {}", given.len())));
    }
    for (i, &b) in given.iter().enumerate() {
        if b == 0 || b > MAX_CUDA_GRAPH_BATCH {
            return Err(bad(&format!("{FIELD}[{i}]"), format!("must be 1–{MAX_CUDA_GRAPH_BATCH}, got {b}")));
        }
    }
    if !settings.cuda_graphs {
        return Err(bad(
            "engine_options.cuda_graphs",
            "is false, so no graph is captured: drop cuda_graph_batch_sizes",
        ));
    }
    let mut sizes = given.clone();
    sizes.sort_unstable();
    sizes.dedup();
    if engine == Engine::Vllm {
        sizes.retain(|&b| b <= settings.max_num_batched_tokens);
        if sizes.is_empty() {
            return Err(bad(
                FIELD,
                format!(
                    "every size exceeds max_num_batched_tokens {}, and vLLM drops those: give a smaller size",
                    settings.max_num_batched_tokens
                ),
            ));
        }
    }
    let largest = *sizes.last().expect("non-empty");
    if let Some(m) = options.cuda_graph_max_batch.filter(|&m| m != largest) {
        return Err(bad(
            "engine_options.cuda_graph_max_batch",
            format!("is {m} but the largest of cuda_graph_batch_sizes is {largest}: give one, or make them agree"),
        ));
    }
    settings.cuda_graph_max_batch = largest;
    Ok(Some(sizes))
}
