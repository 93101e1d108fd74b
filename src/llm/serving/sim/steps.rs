//! What one simulated engine step costs: the simulator hands the step's shape ([`StepLoad`]: decoding sequences,
//! their mean context, prefill tokens) to a [`StepTimer`]. The production timer is the steady-state
//! [`Solver`]'s step model ([`super::super::step`] operators timed through the memoizing `Timer` and the cost
//! backend), memoized per load; the simulator quantizes the load first ([`bucket`]) so that a run of thousands of
//! steps needs only a few dozen distinct step timings. Tests use [`ConstantSteps`].
//!
//! **CUDA graphs** ([`graph_sizes`]): a decode-only step replays the captured graph of the smallest captured batch
//! size at least its sequence count — the batch is padded to it, and the padded rows cost what real ones do.
//! Larger decode batches and steps with prefill run eagerly (the step model then adds the per-kernel launch cost).

use super::super::request::Engine;
use super::super::steady::Solver;
use super::super::step::StepLoad;
use crate::llm::config::ConfigError;

/// What one engine step costs, s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepTime {
    /// Wall time, host overhead included, s.
    pub wall_s: f64,
    /// The host's time to launch the step's kernels, s (pp micro-batches together; 0 when a whole-step CUDA graph
    /// is replayed): [`super::super::steady::StepResult::launch_s`] × pp. The simulator uses it for when an overlap
    /// engine streams the previous step's tokens ([`super::instance::InstanceSettings::results_after_launch`]).
    pub launch_s: f64,
}

/// Times one engine step.
pub trait StepTimer {
    /// The wall time and host launch time of a step of `load`, s.
    fn time(&mut self, load: &StepLoad) -> Result<StepTime, ConfigError>;
}

/// Most distinct step shapes one simulation may time (each costs the step model a few dozen operator lookups): a
/// run that needs more is refused rather than left to pin a core.
pub const MAX_DISTINCT_STEPS: usize = 50_000;

impl StepTimer for Solver<'_> {
    fn time(&mut self, load: &StepLoad) -> Result<StepTime, ConfigError> {
        if self.cached_steps() > MAX_DISTINCT_STEPS {
            return Err(crate::llm::config::bad(
                "workload",
                format!(
                    "the simulated steps take more than {MAX_DISTINCT_STEPS} distinct shapes: send fewer or more \
                     uniform requests, or set workload.simulate to false"
                ),
            ));
        }
        let pp = self.config().pp.max(1) as f64;
        let step = self.step(*load)?;
        Ok(StepTime { wall_s: step.time_s, launch_s: pp * step.launch_s })
    }
}

/// Steps of fixed durations: `decode_s` for a step without prefill, `prefill_s` for one with, launched by the host
/// in `decode_launch_s` and `prefill_launch_s` (the hand-worked tests' timer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConstantSteps {
    pub decode_s: f64,
    pub prefill_s: f64,
    pub decode_launch_s: f64,
    pub prefill_launch_s: f64,
}

impl StepTimer for ConstantSteps {
    fn time(&mut self, load: &StepLoad) -> Result<StepTime, ConfigError> {
        Ok(if load.prefill_tokens > 0 {
            StepTime { wall_s: self.prefill_s, launch_s: self.prefill_launch_s }
        } else {
            StepTime { wall_s: self.decode_s, launch_s: self.decode_launch_s }
        })
    }
}

/// `x` rounded to a grid of at most 1/32 of its binary magnitude (exact up to 64): a context of 1,500 tokens is
/// timed as 1,504 (grid 32), 40,000 as 39,936 (grid 1,024). Decode attention is linear in the context and prefill
/// GEMMs in the tokens, so the rounding error of a step is below ±1.6 % and averages out over steps.
pub fn bucket(x: u32) -> u32 {
    if x <= 64 {
        return x;
    }
    let grid = (x.next_power_of_two() / 64).max(1);
    ((x + grid / 2) / grid * grid).max(1)
}

/// vLLM V1's largest CUDA-graph capture size, tokens (`VllmConfig._set_cudagraph_sizes`, `vllm/config/vllm.py`):
/// `compilation_config.max_cudagraph_capture_size` where given (`asked`, perfcast's
/// `engine_options.cuda_graph_max_batch`), else min(2·`max_num_seqs`, 512); capped at `max_num_batched_tokens`; then
/// the largest size of the list vLLM builds up to it ([`graph_sizes`]: 1, 2, 4, multiples of 8 below 256, multiples
/// of 16 from 256), which it stores back as `max_cudagraph_capture_size`. Steps of more tokens run without graphs.
pub fn vllm_max_capture_size(asked: Option<u32>, max_num_seqs: u32, max_num_batched_tokens: u32) -> u32 {
    let max = asked.unwrap_or(max_num_seqs.saturating_mul(2).min(512)).min(max_num_batched_tokens);
    graph_sizes(Engine::Vllm, max, true).last().copied().unwrap_or(0)
}

/// The decode batch sizes `engine` captures CUDA graphs for, ascending, up to `max_batch` (empty: no graphs);
/// `padding`: TensorRT-LLM's `cuda_graph_config.enable_padding` (the other engines ignore it).
///
/// - vLLM (`vllm/config/vllm.py`, `_set_cudagraph_sizes`, V1): 1, 2, 4, then multiples of 8 below 256, then
///   multiples of 16 up to the largest capture size (`max_cudagraph_capture_size`, here `cuda_graph_max_batch`,
///   [`vllm_max_capture_size`]).
/// - SGLang (`server_args.py`, the default `cuda_graph_bs`): 1, 2, 4, 8, 12, then multiples of 8 up to 256, then
///   multiples of 16 up to `cuda_graph_max_bs`.
/// - TensorRT-LLM (PyTorch backend, `CudaGraphConfig._generate_cuda_graph_batch_sizes` in
///   `tensorrt_llm/llmapi/llm_args.py`): with padding 1, 2, 4 and multiples of 8 up to 128, without 1–31, 32, 64
///   and 128; then the powers of two 2^i for 8 ≤ i < ⌈log2 max⌉, those above `max_batch` dropped, and `max_batch`
///   itself appended when it is not the last.
pub fn graph_sizes(engine: Engine, max_batch: u32, padding: bool) -> Vec<u32> {
    let mut v: Vec<u32> = match engine {
        Engine::Vllm => [1, 2, 4].into_iter().chain((8..256).step_by(8)).chain((256..=max_batch).step_by(16)).collect(),
        Engine::Sglang => {
            [1, 2, 4, 8, 12].into_iter().chain((16..=256).step_by(8)).chain((272..=max_batch).step_by(16)).collect()
        }
        Engine::Trtllm => {
            let head: Vec<u32> = if padding {
                [1, 2, 4].into_iter().chain((8..=128).step_by(8)).collect()
            } else {
                (1..32).chain([32, 64, 128]).collect()
            };
            // ⌈log2 max⌉ (exclusive bound of the powers of two).
            let ceil_log2 = 32 - max_batch.max(1).saturating_sub(1).leading_zeros();
            let mut v: Vec<u32> =
                head.into_iter().chain((8..ceil_log2).map(|i| 1u32 << i)).filter(|s| *s <= max_batch).collect();
            v.sort_unstable();
            if max_batch > 0 && v.last() != Some(&max_batch) {
                v.push(max_batch);
            }
            v
        }
    };
    v.retain(|s| *s <= max_batch);
    v.sort_unstable();
    v.dedup();
    v
}

/// Whether a decode-only step of `n` sequences per data-parallel rank replays a CUDA graph among `sizes`: with
/// `padding`, when it is at most the largest (it is padded up to the next captured size), else only when `n` is
/// one of them (TensorRT-LLM without `enable_padding`: `CUDAGraphRunner` finds no graph for another size and the
/// step runs eagerly).
pub fn replays_graph(sizes: &[u32], n: u32, padding: bool) -> bool {
    if padding {
        sizes.last().is_some_and(|m| n <= *m)
    } else {
        sizes.binary_search(&n).is_ok()
    }
}

/// The captured size a decode batch of `n` sequences is padded to (`None`: larger than every captured size).
pub fn padded(sizes: &[u32], n: u32) -> Option<u32> {
    let i = sizes.partition_point(|s| *s < n);
    sizes.get(i).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_and_graph_padding() {
        assert_eq!((bucket(1), bucket(64), bucket(65)), (1, 64, 66));
        // 1,500: next power of two 2,048, grid 32 → 1,504; 40,000: grid 65,536/64 = 1,024 → 39,936.
        assert_eq!((bucket(1500), bucket(40_000)), (1504, 39_936));
        let v = graph_sizes(Engine::Vllm, 512, true);
        assert_eq!(&v[..5], &[1, 2, 4, 8, 16]);
        assert!(v.contains(&248) && !v.contains(&264) && v.contains(&272) && *v.last().unwrap() == 512);
        assert_eq!(
            (padded(&v, 3), padded(&v, 63), padded(&v, 257), padded(&v, 513)),
            (Some(4), Some(64), Some(272), None)
        );
    }

    #[test]
    fn tensorrt_llm_graph_sizes_follow_cuda_graph_config() {
        // `CudaGraphConfig()` (max_batch_size 0 → 128, enable_padding False): list(range(1, 32)) + [32, 64, 128];
        // the powers 2^i for 8 <= i < ceil(log2 128) = 7 are none; 128 is already last. 31 + 3 = 34 sizes.
        let serve = graph_sizes(Engine::Trtllm, 128, false);
        assert_eq!(serve.len(), 34);
        assert_eq!(&serve[29..], &[30, 31, 32, 64, 128]);
        // Without padding 33 and 100 are no captured size (eager); 64 is.
        assert!(!replays_graph(&serve, 33, false) && !replays_graph(&serve, 100, false));
        assert!(replays_graph(&serve, 64, false) && !replays_graph(&serve, 129, false));
        // trtllm-bench at max_batch_size 520 with padding: [1, 2, 4] + 8·(1..=16) = 19 sizes up to 128, then 2^8 =
        // 256 and 2^9 = 512 (i < ceil(log2 520) = 10), then 520 appended: 22 sizes.
        let bench = graph_sizes(Engine::Trtllm, 520, true);
        assert_eq!(bench.len(), 22);
        assert_eq!(&bench[17..], &[120, 128, 256, 512, 520]);
        // With padding 300 replays (padded to 512); 521 does not.
        assert!(replays_graph(&bench, 300, true) && !replays_graph(&bench, 521, true));
        assert_eq!(padded(&bench, 300), Some(512));
        assert_eq!(graph_sizes(Engine::Sglang, 16, true), vec![1, 2, 4, 8, 12, 16]);
    }
}
