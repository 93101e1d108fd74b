//! The host critical path of one SGLang EAGLE/MTP decode iteration under the spec-v1 worker, beyond the engine's
//! per-step host cost ([`super::engine::HostCost`]) that every step pays.
//!
//! **When it applies** ([`applies`]): engine SGLang, `speculative` set, and no overlap scheduling
//! (`engine_options.async_scheduling` false — SGLang's default under speculative decoding, see
//! `validate::instance::sglang_speculative_defaults`). SGLang v0.5.9 (the image of the InferenceX runs,
//! `lmsysorg/sglang:v0.5.9-cu130`) leaves `SGLANG_ENABLE_SPEC_V2` False (`srt/environ.py`), so
//! `ServerArgs._handle_speculative_decoding` (`srt/server_args.py`) sets `disable_overlap_schedule = True` and runs
//! `EAGLEWorker` (`srt/speculative/eagle_worker.py`), whose iteration runs its host work and its GPU work in series
//! around several device syncs. The spec-v2 worker (`SGLANG_ENABLE_SPEC_V2=1`, the default of some later SGLang
//! builds) re-enables the overlap scheduler; perfcast takes `engine_options.async_scheduling: true` for it, and then
//! charges none of this.
//!
//! **What `EAGLEWorker.forward_batch_generation` runs, in order** (v0.5.9, `eagle_worker.py`), and what of it the
//! GPU waits for:
//! 1. `_draft_preprocess_decode`: `batch.seq_lens_sum = torch.sum(batch.seq_lens).item()` waits for the previous
//!    iteration's draft-extend — a sync; then the draft forward is prepared (`ForwardBatch.init_new`,
//!    `EAGLEDraftCudaGraphRunner.replay`'s input copies) and its graph launched with the GPU idle: one **forward
//!    preparation behind a sync** — the engine's per-step host cost [`super::engine::HostCost::step_us`] plus the
//!    draft-decode graph's launch, its nodes × [`ServingConstants::graph_node_launch_us`];
//! 2. `draft()` replays the draft-decode graph (k − 1 MTP passes, B rows each) while the host builds the tree
//!    (`build_tree_kernel_efficient`) and launches the **verify graph** (`verify()` → target
//!    `forward_batch_generation(is_verify=True)`, all of the model's layers over B·(k + 1) rows): that launch costs the
//!    host its nodes × `graph_node_launch_us`, and only the draft-decode GPU time covers it — the rest is exposed:
//!    max(0, nodes(verify) × `graph_node_launch_us` − GPU(draft decode));
//! 3. `EagleVerifyInput.verify` (`srt/speculative/eagle_info.py`) waits for the verify graph through
//!    [`SGLANG_V1_VERIFY_SYNCS`] device syncs, each a round trip with the GPU idle until the host's next eager call
//!    reaches it ([`ServingConstants::custom_op_us`] each), and runs a **second per-request Python pass** over
//!    `batch.reqs` and their accepted tokens (`output_ids.append`, `check_finished`, the acceptance statistics) — one
//!    more [`super::engine::HostCost::seq_us`] per decoding sequence;
//! 4. `forward_draft_extend_after_decode` prepares the draft-extend forward (`prepare_extend_after_decode`,
//!    `init_new`, `EAGLEDraftExtendCudaGraphRunner.replay`) right after those syncs: the second **forward
//!    preparation behind a sync** — `step_us` plus the draft-extend graph's nodes × `graph_node_launch_us`.
//!
//! Steps that do not replay CUDA graphs (a batch beyond `cuda_graph_max_batch`) already pay every kernel's eager
//! launch (`launch::LaunchPath::Eager`); they get the syncs, the per-step preparations and the second per-request
//! pass, not the graph launches.
//!
//! **Cross-check (not a fit).** sgl-project/sglang PR #12128 ran DeepSeek-R1 TP8 at batch 1 with the spec-v1 and the
//! overlapped spec-v2 worker: 140.52 → 159.71 tokens/s at 2.296 accepted tokens per step, 16.34 → 14.38 ms per
//! iteration, −1.96 ms (a lower bound of what overlap hides: spec v2 does more GPU work). perfcast's charge at batch 1
//! is compared with it in the branch report, not tuned to it.

use super::engine::{HostCost, ServingConstants};
use super::request::Engine;
use super::validate::ServingConfig;

/// Device syncs of one `EagleVerifyInput.verify` with top-k 1 and a paged KV pool (SGLang v0.5.9,
/// `srt/speculative/eagle_info.py`): `accept_index.tolist()` and `predict.tolist()` (l. 390–391),
/// `accept_index[accept_index != -1]` (a boolean index: the result's size is read back, l. 438),
/// `accept_length.cpu()` (l. 442), `batch.out_cache_loc[evict_mask]` passed to the allocator (a boolean index,
/// l. 460), and the allocator's `torch.unique(free_index // page_size)` (`PagedTokenToKVPoolAllocator.free`,
/// `srt/mem_cache/allocator.py` l. 507, an output of data-dependent size).
pub const SGLANG_V1_VERIFY_SYNCS: u32 = 6;

/// Whether a decode step of `cfg` runs SGLang's spec-v1 EAGLE worker (module doc).
pub fn applies(cfg: &ServingConfig) -> bool {
    cfg.engine == Engine::Sglang && cfg.speculative.is_some() && !cfg.settings.async_scheduling
}

/// What one spec-v1 iteration's exposed host path depends on (one data-parallel rank's share).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpecV1Step {
    /// The step replays CUDA graphs (target verify and the draft passes): their launches cost
    /// [`ServingConstants::graph_node_launch_us`] a node.
    pub graph: bool,
    /// Kernels (graph nodes) of the verification pass on the slowest stage.
    pub verify_nodes: f64,
    /// Kernels of the draft-decode graph (the k − 1 draft passes after the first).
    pub draft_decode_nodes: f64,
    /// Kernels of the draft-extend graph (the first draft pass).
    pub draft_extend_nodes: f64,
    /// GPU time of the draft-decode passes, µs: what runs while the host launches the verify graph.
    pub draft_decode_gpu_us: f64,
    /// Decoding sequences the rank's scheduler handles.
    pub seqs: f64,
}

/// The exposed host time of one spec-v1 iteration beyond `host`'s per-step cost, µs (module doc, steps 1–4):
/// two forward preparations behind syncs (`step_us` + their graphs' launches), the verify graph's launch beyond the
/// draft-decode GPU time (floored at 0), [`SGLANG_V1_VERIFY_SYNCS`] × `custom_op_us`, and `seq_us` per sequence.
pub fn exposed_host_us(step: &SpecV1Step, host: &HostCost, consts: &ServingConstants) -> f64 {
    let node_us = if step.graph { consts.graph_node_launch_us } else { 0.0 };
    let preparations = 2.0 * host.step_us + (step.draft_decode_nodes + step.draft_extend_nodes) * node_us;
    let verify_launch = (step.verify_nodes * node_us - step.draft_decode_gpu_us).max(0.0);
    let syncs = f64::from(SGLANG_V1_VERIFY_SYNCS) * consts.custom_op_us;
    preparations + verify_launch + syncs + host.seq_us * step.seqs
}
