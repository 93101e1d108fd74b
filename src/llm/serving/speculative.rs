//! Speculative decoding with the model's multi-token-prediction (MTP) module: the request's `speculative` checked
//! ([`validate`]), the tokens a decode step yields ([`Speculative::tokens_per_step`]), and the operators the
//! drafter adds to a step ([`mtp_module_extras`]; the step solver, `steady::step_time`, times the rest).
//!
//! A decode step of a speculative engine (Leviathan et al. 2023, "Fast Inference from Transformers via
//! Speculative Decoding", §2.3; DeepSeek-V3 technical report §2.2 and §5.4.3 for MTP):
//! - **drafting**: k sequential passes of the MTP module over the batch's B sequences, one token each. DeepSeek-V3's
//!   module is one transformer layer (MLA and an MoE MLP: its index 61 is past `first_k_dense_replace` 3) behind
//!   `enorm` and `hnorm` (RMSNorms of the token's embedding and of the model's last hidden state), their
//!   concatenation projected by `eh_proj` [2d → d], and the model's shared embedding and output head
//!   (`shared_head.norm`, `lm_head`). With k above the model's one MTP layer the engines run that one layer k times,
//!   each pass on the previous pass's hidden state: TensorRT-LLM's `MTPConfig.update_from_model_config`
//!   (`tensorrt_llm/_torch/speculative/mtp.py`) switches to `SpeculativeDecodingMode.MTP_EAGLE` when the model has
//!   `num_nextn_predict_layers` 1 ("MTP Eagle" in NVIDIA's blog "DeepSeek R1 MTP Implementation and Optimization"),
//!   and SGLang's `--speculative-algorithm EAGLE` on DeepSeek runs the NextN layer as an EAGLE draft model for
//!   `--speculative-num-steps` steps (InferenceX `benchmarks/dsr1_fp8_b200_mtp.sh`: 2 steps, top-k 1, 3 draft
//!   tokens);
//! - **verification**: one forward pass of the model over k + 1 tokens per sequence (the last accepted token and
//!   the k drafts): its GEMMs, norms, all-reduces and experts run B·(k + 1) rows, decode attention runs k + 1
//!   query tokens per sequence over its cached context (folded into the query heads as FlashMLA does:
//!   `get_mla_metadata(cache_seqlens, s_q * h_q // h_kv, h_kv)`), and the LM head and sampler run all B·(k + 1)
//!   positions (each draft is checked against the model's own distribution there);
//! - **tokens out**: the accepted prefix of the drafts plus the model's own next token. With every draft accepted
//!   with probability a given the previous one was (Leviathan et al.'s i.i.d. assumption), the expected tokens per
//!   step are E = 1 + a + … + a^k = (1 − a^{k+1})/(1 − a) (their eq. 1, with α = a and γ = k).
//!
//! The prefill also runs the MTP module once over its prompt tokens (the module's own KV cache, and the first
//! draft from the prompt's last hidden state: TensorRT-LLM's `MTPWorker.forward` runs on context requests too),
//! and the remaining k − 1 draft passes for the prompts that sample.
//!
//! **Acceptance by position.** The engines run DeepSeek's one MTP layer k times, each pass on its own previous
//! output, and the later drafts are accepted less often than the first: TensorRT-LLM's tech blog 1 ("Pushing
//! Latency Boundaries: Optimizing DeepSeek-R1 Performance on NVIDIA B200 GPUs", § MTP, table "Autoregressive MTP
//! Layers", `docs/source/blogs/tech_blog/blog1_…md`) measured DeepSeek-R1's tokens per step with strict top-1
//! acceptance at k = 1…5 as 1.92, 2.58, 2.82, 2.99, 3.01 — conditional acceptance 0.92, 0.72, 0.36 at the first
//! three positions, where the i.i.d. formula at the report's 0.85 gives 3.19 at k = 3. Without a request's
//! `acceptance_rate` perfcast takes those measured values ([`REUSED_MTP_TOKENS_PER_STEP`]); with one, the i.i.d.
//! formula above. The blog ran batch 1 on prompts from a real dataset; no source gives the acceptance on
//! synthetic prompts, and none is modelled.
//!
//! **SGLang.** Its EAGLE worker's first draft pass of a decode step is the draft-extend, padded to k + 1 rows per
//! sequence ([`Speculative::draft_passes`]); without overlap scheduling (spec v1, SGLang v0.5.9's default) its
//! iteration's host path around the verify's device syncs is charged by [`super::spec_v1`]. SGLang runs the draft
//! layer's experts on its Triton fused MoE when the main runner is `flashinfer_trtllm`
//! (`ServerArgs._handle_speculative_decoding`: `speculative_moe_runner_backend` "auto"; `Fp8MoEMethod.create_moe_runner`
//! picks Triton without JIT DeepGEMM): not modelled, the operator timer takes one kernel family per engine.
//!
//! Not modelled: the drafts' KV-cache writes beyond the accepted tokens; the host's launches of the draft passes
//! outside CUDA graphs.

use serde::Serialize;
use utoipa::ToSchema;

use super::model::ServingModel;
use super::request::{Engine, SpeculativeDecoding, SpeculativeMethod};
use super::step::{compute, Emit, StepLoad};
use super::validate::ServingConfig;
use crate::llm::config::{bad, ConfigError};
use crate::llm::operators::OpName;
use crate::op::OpClass;

/// Tokens per decode step of DeepSeek-R1's one MTP layer run k = 1…5 times (index k − 1), strict top-1
/// acceptance: TensorRT-LLM tech blog 1, table "Autoregressive MTP Layers" (8×B200, batch 1, 1k/2k tokens, 10
/// prompts from a real dataset). The default of a request without `acceptance_rate`; k above 5 gets k = 5's
/// value (the fifth draft adds 0.02 tokens: the chain has saturated). Consistent with the DeepSeek-V3 technical
/// report's second-token acceptance of 85–90 % (§5.4.3), E = 1.85–1.90 at k = 1.
pub const REUSED_MTP_TOKENS_PER_STEP: [f64; 5] = [1.92, 2.58, 2.82, 2.99, 3.01];

/// Most draft tokens per step a request may ask for.
pub const MAX_SPECULATIVE_TOKENS: u32 = 16;

/// Validated speculative decoding.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct Speculative {
    /// How drafts are made ([`SpeculativeMethod`]; `mtp`: the model's own multi-token-prediction layers).
    pub method: SpeculativeMethod,
    /// Draft tokens per sequence and decode step, k.
    pub draft_tokens: u32,
    /// The request's acceptance probability of each draft token given the previous one's, a in [0, 1); absent:
    /// the measured tokens per step of a reused MTP layer ([`REUSED_MTP_TOKENS_PER_STEP`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acceptance_rate: Option<f64>,
    /// Expected tokens one decode step yields per sequence, E, in [1, k + 1] ([`Speculative::tokens_per_step`]).
    pub tokens_per_step: f64,
}

impl Speculative {
    /// Validated speculative decoding of `draft_tokens` k ≥ 1 drafts, with the request's `acceptance_rate` a or
    /// without one (its [`Speculative::tokens_per_step`] computed here).
    pub fn new(method: SpeculativeMethod, draft_tokens: u32, acceptance_rate: Option<f64>) -> Self {
        let tokens_per_step = match acceptance_rate {
            // E = (1 − a^{k+1})/(1 − a) = Σ_{i=0..k} a^i (Leviathan et al. 2023, eq. 1).
            Some(a) => (0..=draft_tokens).map(|i| a.powi(i as i32)).sum(),
            None => REUSED_MTP_TOKENS_PER_STEP[(draft_tokens.clamp(1, 5) - 1) as usize],
        };
        Speculative { method, draft_tokens, acceptance_rate, tokens_per_step }
    }

    /// Expected tokens one decode step yields per sequence, at least 1 (the model's own token) and at most k + 1:
    /// with the request's acceptance rate a, E = (1 − a^{k+1})/(1 − a) (Leviathan et al. 2023, eq. 1); without,
    /// the measured [`REUSED_MTP_TOKENS_PER_STEP`].
    pub fn tokens_per_step(&self) -> f64 {
        self.tokens_per_step
    }

    /// The verification pass's load for a step of `load`: every decoding sequence runs its k drafts besides its
    /// token ([`StepLoad::draft_tokens`]) and samples all k + 1 positions.
    pub fn verification(&self, load: &StepLoad) -> StepLoad {
        StepLoad {
            draft_tokens: self.draft_tokens,
            sampled: load.sampled + load.decode_seqs * self.draft_tokens,
            ..*load
        }
    }

    /// The MTP module's passes of a step of `load` (one micro-batch) under `engine`, as (load, passes): the first
    /// over the step's decodes and prefill tokens (one token per decode), sampling as the step does; the k − 1 more
    /// over the sequences that sample (decodes and finished prompts), one token each, at the decodes' context (the
    /// prompt's length for a prefill-only step).
    ///
    /// SGLang's first pass over decodes is EAGLE's draft-extend (`EAGLEWorker.forward_draft_extend_after_decode`,
    /// `srt/speculative/eagle_worker.py`, v0.5.9), replayed from `EAGLEDraftExtendCudaGraphRunner`, whose graphs are
    /// captured with `num_tokens_per_bs = speculative_num_steps + 1` (`eagle_draft_extend_cuda_graph_runner.py`):
    /// every decode runs k + 1 rows through the layer's GEMMs and experts whatever it accepted (padded), with k + 1
    /// query tokens in attention ([`StepLoad::draft_tokens`] k), while the LM head runs one position per sequence
    /// (`LogitsProcessor` keeps each sequence's last token in an extend mode, `layers/logits_processor.py`).
    pub fn draft_passes(&self, load: &StepLoad, engine: Engine) -> [(StepLoad, u32); 2] {
        let extend_rows = if engine == Engine::Sglang && load.decode_seqs > 0 { self.draft_tokens } else { 0 };
        let first = StepLoad { draft_tokens: extend_rows, graph_pad_tokens: 0, ..*load };
        let context = if load.decode_seqs > 0 { load.decode_context } else { load.prompt_len };
        let rest = StepLoad {
            decode_seqs: load.sampled,
            decode_context: context,
            prefill_tokens: 0,
            prompt_len: load.prompt_len,
            sampled: load.sampled,
            graph_pad_tokens: 0,
            draft_tokens: 0,
        };
        [(first, 1), (rest, self.draft_tokens.saturating_sub(1))]
    }
}

/// The request's `speculative` checked against `model`: `None` without one. Errors (RFC 9457 fields):
/// `speculative.num_speculative_tokens` missing or outside 1–[`MAX_SPECULATIVE_TOKENS`];
/// `speculative.acceptance_rate` outside [0, 1); `speculative.method` `mtp` on a model without MTP layers
/// (config.json `num_nextn_predict_layers` absent or 0).
pub fn validate(spec: &Option<SpeculativeDecoding>, model: &ServingModel) -> Result<Option<Speculative>, ConfigError> {
    let Some(s) = spec else {
        return Ok(None);
    };
    let k = match s.num_speculative_tokens {
        None => return Err(bad("speculative.num_speculative_tokens", "missing: the draft tokens per step, k")),
        Some(k) if (1..=MAX_SPECULATIVE_TOKENS).contains(&k) => k,
        Some(k) => {
            return Err(bad(
                "speculative.num_speculative_tokens",
                format!("must be 1–{MAX_SPECULATIVE_TOKENS}, got {k}"),
            ))
        }
    };
    if let Some(a) = s.acceptance_rate.filter(|a| !(0.0..1.0).contains(a)) {
        return Err(bad("speculative.acceptance_rate", format!("must be in [0, 1), got {a}")));
    }
    match s.method {
        SpeculativeMethod::Mtp if model.mtp_layers == 0 => Err(bad(
            "speculative.method",
            format!(
                "{} has no multi-token-prediction layers (config.json num_nextn_predict_layers): mtp needs a model \
                 trained with them, such as DeepSeek-V3 or R1",
                model.name
            ),
        )),
        method => Ok(Some(Speculative::new(method, k, s.acceptance_rate))),
    }
}

/// What the MTP module runs beyond one transformer layer with the embedding and the output head (which
/// [`super::step::for_each_op`] emits for a first-and-last stage): `enorm` and `hnorm` (two RMSNorms [T, d]) and
/// `eh_proj` [T, 2d → d] (DeepSeek-V3 technical report §2.2: h' = M[RMSNorm(h); RMSNorm(Emb(t))]; SGLang's
/// `DeepseekModelNextN`, `python/sglang/srt/models/deepseek_nextn.py`, and TensorRT-LLM's `DeepseekV3MTP` hold
/// `eh_proj` as a replicated 16-bit linear layer, so every GPU runs it whole).
pub fn mtp_module_extras(cfg: &ServingConfig, load: &StepLoad, out: &mut Emit) {
    let (t, d, act) = (load.gemm_tokens() as u64, cfg.model.hidden as u64, cfg.activation_precision);
    if t == 0 {
        return;
    }
    compute(out, OpName::RMSNorm, OpClass::RmsNorm, act, &[t, d], 2.0);
    compute(out, OpName::Linear1, OpClass::Linear, act, &[1, t, d, 2 * d], 1.0);
}
