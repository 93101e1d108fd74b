//! What a training-iteration prediction is asked about: the model, the parallel configuration and the
//! precision, with the defaults of S1 (GPT-NeoX with ZeRO-1) and validation that names the offending field.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::hw::Precision;

/// Normalization layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Norm {
    #[default]
    Layernorm,
    Rmsnorm,
}

/// Attention implementation (S1 Table I): fused scale-mask-softmax, unfused (mask fill + softmax) or
/// FlashAttention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Attention {
    #[default]
    FusedSoftmax,
    Unfused,
    Flash,
}

/// MLP activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    #[default]
    Gelu,
}

/// A decoder-only transformer (GPT-NeoX / LLaMA family).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "GPT-20B", "layers": 44, "hidden": 6144, "heads": 64, "seq_len": 2048,
    "vocab": 50257, "norm": "layernorm", "attention": "fused_softmax", "activation": "gelu",
    "parallel_residual": true}))]
pub struct ModelSpec {
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Encoder (transformer) layers, E.
    pub layers: u32,
    /// Hidden size d.
    pub hidden: u32,
    /// Attention heads h.
    pub heads: u32,
    /// Sequence length l, tokens.
    pub seq_len: u32,
    /// Vocabulary size v before padding.
    pub vocab: u32,
    /// Default `layernorm`.
    #[serde(default)]
    pub norm: Norm,
    /// Default `fused_softmax`.
    #[serde(default)]
    pub attention: Attention,
    /// Default `gelu`.
    #[serde(default)]
    pub activation: Activation,
    /// GPT-NeoX parallel residual (attention and MLP read the same input): one tensor-parallel all-reduce per
    /// encoder forward instead of two. Default `false`.
    #[serde(default)]
    pub parallel_residual: bool,
    /// Rotary position embedding on q and k (GPT-NeoX, LLaMA). Default `true`.
    #[serde(default = "yes")]
    pub rotary: bool,
}

fn yes() -> bool {
    true
}

fn one() -> u32 {
    1
}

/// The parallel configuration: tensor (tp), pipeline (pp) and data (dp) parallel degrees, the micro-batch and
/// the number of micro-batches per step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"tp": 4, "pp": 4, "dp": 8, "micro_batch": 4, "grad_accum": 16, "zero_stage": 1}))]
pub struct ParallelSpec {
    /// Tensor (model) parallel degree, S1's mp. Default 1.
    #[serde(default = "one")]
    pub tp: u32,
    /// Pipeline stages. Default 1.
    #[serde(default = "one")]
    pub pp: u32,
    /// Data-parallel degree. Default 1.
    #[serde(default = "one")]
    pub dp: u32,
    /// Sequences per micro-batch, b. Default 1.
    #[serde(default = "one")]
    pub micro_batch: u32,
    /// Micro-batches per optimizer step per data-parallel rank, m (gradient accumulation steps). Give this or
    /// `global_batch`; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_accum: Option<u32>,
    /// Sequences per optimizer step over all data-parallel ranks = micro_batch · grad_accum · dp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_batch: Option<u32>,
    /// ZeRO stage 0–3 (S1: 1). Stage ≥ 1 partitions the optimizer over dp and all-gathers the updated
    /// parameters; stage ≥ 2 reduce-scatters gradients instead of all-reducing them.
    #[serde(default = "one")]
    pub zero_stage: u32,
}

fn fp16() -> Precision {
    Precision::Fp16
}

/// `POST /v1/predictions/training`: one training iteration of `model` on `system` with `parallelism`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"system": "perlmutter-a100-40g",
    "model": {"name": "GPT-20B", "layers": 44, "hidden": 6144, "heads": 64, "seq_len": 2048, "vocab": 50257,
              "norm": "layernorm", "attention": "fused_softmax", "activation": "gelu", "parallel_residual": true},
    "parallelism": {"tp": 4, "pp": 4, "dp": 8, "micro_batch": 4, "grad_accum": 16, "zero_stage": 1},
    "precision": "fp16"}))]
pub struct TrainingRequest {
    /// Name of a stored system (`GET /v1/systems`).
    pub system: String,
    pub model: ModelSpec,
    pub parallelism: ParallelSpec,
    /// Training precision of GEMMs and activations (mixed precision with fp32 master weights). Default `fp16`.
    #[serde(default = "fp16")]
    pub precision: Precision,
}

/// A configuration the model cannot represent: the field path (as in the request, e.g. `parallelism.tp`) and
/// why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    pub field: String,
    pub message: String,
}

fn bad(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError { field: field.to_string(), message: message.into() }
}

/// A validated configuration with every derived count filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingConfig {
    pub model: ModelSpec,
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub micro_batch: u32,
    /// Micro-batches per step, m.
    pub grad_accum: u32,
    /// micro_batch · grad_accum · dp.
    pub global_batch: u64,
    pub zero_stage: u32,
    pub precision: Precision,
}

impl TrainingConfig {
    /// GPUs used: tp · pp · dp.
    pub fn gpus(&self) -> u64 {
        self.tp as u64 * self.pp as u64 * self.dp as u64
    }
}

/// Validates a model and a parallel configuration against a system of `system_gpus` GPUs.
///
/// Errors (field named as in the request): zero sizes; `model.hidden` not divisible by `model.heads`;
/// `model.heads` or `model.hidden` not divisible by `parallelism.tp`; `parallelism.pp` > `model.layers`;
/// tp·pp·dp above the system's GPUs (`parallelism`); `parallelism.global_batch` not a multiple of
/// micro_batch·dp, or inconsistent with `grad_accum`; `parallelism.zero_stage` > 3.
pub fn validate(
    model: &ModelSpec,
    par: &ParallelSpec,
    precision: Precision,
    system_gpus: u64,
) -> Result<TrainingConfig, ConfigError> {
    for (field, v) in [
        ("model.layers", model.layers),
        ("model.hidden", model.hidden),
        ("model.heads", model.heads),
        ("model.seq_len", model.seq_len),
        ("model.vocab", model.vocab),
        ("parallelism.tp", par.tp),
        ("parallelism.pp", par.pp),
        ("parallelism.dp", par.dp),
        ("parallelism.micro_batch", par.micro_batch),
    ] {
        if v == 0 {
            return Err(bad(field, "must be at least 1"));
        }
    }
    if model.hidden % model.heads != 0 {
        return Err(bad("model.hidden", format!("hidden {} is not divisible by heads {}", model.hidden, model.heads)));
    }
    if model.heads % par.tp != 0 {
        return Err(bad(
            "parallelism.tp",
            format!(
                "heads {} are not divisible by tp {}: each tensor-parallel rank needs whole heads",
                model.heads, par.tp
            ),
        ));
    }
    if model.hidden % par.tp != 0 {
        return Err(bad("parallelism.tp", format!("hidden {} is not divisible by tp {}", model.hidden, par.tp)));
    }
    if par.pp > model.layers {
        return Err(bad(
            "parallelism.pp",
            format!("pp {} exceeds the model's {} layers: every stage needs at least one layer", par.pp, model.layers),
        ));
    }
    if par.zero_stage > 3 {
        return Err(bad("parallelism.zero_stage", format!("ZeRO stages are 0–3, got {}", par.zero_stage)));
    }
    let gpus = par.tp as u64 * par.pp as u64 * par.dp as u64;
    if gpus > system_gpus {
        return Err(bad(
            "parallelism",
            format!("tp·pp·dp = {}·{}·{} = {gpus} GPUs, but the system has {system_gpus}", par.tp, par.pp, par.dp),
        ));
    }
    let per_step = par.micro_batch as u64 * par.dp as u64;
    let grad_accum = match (par.grad_accum, par.global_batch) {
        (Some(0), _) => return Err(bad("parallelism.grad_accum", "must be at least 1")),
        (_, Some(0)) => return Err(bad("parallelism.global_batch", "must be at least 1")),
        (Some(m), Some(gb)) => {
            if m as u64 * per_step != gb as u64 {
                return Err(bad(
                    "parallelism.global_batch",
                    format!(
                        "global_batch {gb} ≠ micro_batch·grad_accum·dp = {}·{m}·{} = {}",
                        par.micro_batch,
                        par.dp,
                        m as u64 * per_step
                    ),
                ));
            }
            m
        }
        (Some(m), None) => m,
        (None, Some(gb)) => {
            if gb as u64 % per_step != 0 {
                return Err(bad(
                    "parallelism.global_batch",
                    format!(
                        "global_batch {gb} is not a multiple of micro_batch·dp = {}·{} = {per_step}",
                        par.micro_batch, par.dp
                    ),
                ));
            }
            (gb as u64 / per_step) as u32
        }
        (None, None) => 1,
    };
    Ok(TrainingConfig {
        model: model.clone(),
        tp: par.tp,
        pp: par.pp,
        dp: par.dp,
        micro_batch: par.micro_batch,
        grad_accum,
        global_batch: grad_accum as u64 * per_step,
        zero_stage: par.zero_stage,
        precision,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpt20b() -> ModelSpec {
        serde_json::from_value(serde_json::json!({"layers": 44, "hidden": 6144, "heads": 64, "seq_len": 2048,
            "vocab": 50257, "parallel_residual": true}))
        .unwrap()
    }

    fn par(v: serde_json::Value) -> ParallelSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn global_batch_derives_grad_accum() {
        let c = validate(
            &gpt20b(),
            &par(serde_json::json!({"tp": 4, "pp": 4, "dp": 8, "micro_batch": 4,
            "global_batch": 512})),
            Precision::Fp16,
            128,
        )
        .unwrap();
        assert_eq!((c.grad_accum, c.global_batch), (16, 512));
    }

    #[test]
    fn impossible_configurations_name_their_field() {
        let m = gpt20b();
        let cases = [
            (serde_json::json!({"tp": 3}), "parallelism.tp"),
            (serde_json::json!({"pp": 45}), "parallelism.pp"),
            (serde_json::json!({"tp": 8, "pp": 4, "dp": 8}), "parallelism"),
            (serde_json::json!({"dp": 8, "micro_batch": 4, "global_batch": 100}), "parallelism.global_batch"),
            (serde_json::json!({"dp": 2, "grad_accum": 4, "global_batch": 10}), "parallelism.global_batch"),
            (serde_json::json!({"zero_stage": 4}), "parallelism.zero_stage"),
            (serde_json::json!({"micro_batch": 0}), "parallelism.micro_batch"),
        ];
        for (p, field) in cases {
            assert_eq!(validate(&m, &par(p.clone()), Precision::Fp16, 128).unwrap_err().field, field, "{p}");
        }
        let odd = ModelSpec { hidden: 6000, ..m };
        assert_eq!(validate(&odd, &par(serde_json::json!({})), Precision::Fp16, 8).unwrap_err().field, "model.hidden");
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = serde_json::from_value::<ParallelSpec>(serde_json::json!({"tp": 2, "tensor_parallel": 2}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `tensor_parallel`"), "{err}");
    }
}
