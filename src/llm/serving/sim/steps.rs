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

/// Times one engine step (wall time, host overhead included, s).
pub trait StepTimer {
    /// The wall time of a step of `load`, s.
    fn step_s(&mut self, load: &StepLoad) -> Result<f64, ConfigError>;
}

/// Most distinct step shapes one simulation may time (each costs the step model a few dozen operator lookups): a
/// run that needs more is refused rather than left to pin a core.
pub const MAX_DISTINCT_STEPS: usize = 50_000;

impl StepTimer for Solver<'_> {
    fn step_s(&mut self, load: &StepLoad) -> Result<f64, ConfigError> {
        if self.cached_steps() > MAX_DISTINCT_STEPS {
            return Err(crate::llm::config::bad(
                "workload",
                format!(
                    "the simulated steps take more than {MAX_DISTINCT_STEPS} distinct shapes: send fewer or more \
                     uniform requests, or set workload.simulate to false"
                ),
            ));
        }
        Ok(self.step(*load)?.time_s)
    }
}

/// Steps of fixed durations: `decode_s` for a step without prefill, `prefill_s` for one with (the hand-worked
/// tests' timer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConstantSteps {
    pub decode_s: f64,
    pub prefill_s: f64,
}

impl StepTimer for ConstantSteps {
    fn step_s(&mut self, load: &StepLoad) -> Result<f64, ConfigError> {
        Ok(if load.prefill_tokens > 0 { self.prefill_s } else { self.decode_s })
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

/// The decode batch sizes `engine` captures CUDA graphs for, ascending, up to `max_batch` (empty: no graphs).
///
/// - vLLM (`vllm/config/vllm.py`, `_set_cudagraph_sizes`, V1): 1, 2, 4, then multiples of 8 below 256, then
///   multiples of 16 up to the largest capture size (`max_cudagraph_capture_size`, here `cuda_graph_max_batch`).
/// - SGLang (`server_args.py`, the default `cuda_graph_bs`): 1, 2, 4, 8, 12, then multiples of 8 up to 256, then
///   multiples of 16 up to `cuda_graph_max_bs`.
/// - TensorRT-LLM (PyTorch backend `CudaGraphConfig` with `enable_padding`, the serving recipes' setting): 1, 2, 4,
///   multiples of 8 up to 128, then powers of two up to `cuda_graph_config.max_batch_size` [rec: the recipes differ].
pub fn graph_sizes(engine: Engine, max_batch: u32) -> Vec<u32> {
    let mut v: Vec<u32> = match engine {
        Engine::Vllm => [1, 2, 4].into_iter().chain((8..256).step_by(8)).chain((256..=max_batch).step_by(16)).collect(),
        Engine::Sglang => {
            [1, 2, 4, 8, 12].into_iter().chain((16..=256).step_by(8)).chain((272..=max_batch).step_by(16)).collect()
        }
        Engine::Trtllm => [1, 2, 4]
            .into_iter()
            .chain((8..=128).step_by(8))
            .chain((8..31).map(|i| 1u32 << i).take_while(|s| *s <= max_batch))
            .collect(),
    };
    v.retain(|s| *s <= max_batch);
    v.sort_unstable();
    v.dedup();
    v
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
        let v = graph_sizes(Engine::Vllm, 512);
        assert_eq!(&v[..5], &[1, 2, 4, 8, 16]);
        assert!(v.contains(&248) && !v.contains(&264) && v.contains(&272) && *v.last().unwrap() == 512);
        assert_eq!(
            (padded(&v, 3), padded(&v, 63), padded(&v, 257), padded(&v, 513)),
            (Some(4), Some(64), Some(272), None)
        );
        assert_eq!(graph_sizes(Engine::Trtllm, 128).last(), Some(&128));
        assert_eq!(graph_sizes(Engine::Sglang, 16), vec![1, 2, 4, 8, 12, 16]);
    }
}
