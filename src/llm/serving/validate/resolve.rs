//! The served model resolved from the request: a catalog name, a Hugging Face `config.json` or the fields, and the
//! size limits every model is held to.

use crate::llm::config::{bad, default_ffn_hidden, Activation, ConfigError, Norm};
use crate::llm::moe::{validate_mla, validate_moe};
use crate::llm::serving::model::ServingModel;
use crate::llm::serving::request::{ModelRef, ServingModelSpec};
use crate::llm::serving::{catalog, hf};

/// The model `r` names or describes. Errors name `model` (unknown catalog name) or the offending field.
pub fn resolve_model(r: &ModelRef) -> Result<ServingModel, ConfigError> {
    match r {
        ModelRef::Name(n) => catalog::lookup(n).map(|e| e.model.clone()).ok_or_else(|| {
            bad(
                "model",
                format!("unknown model {n:?}: give the architecture, or one of {}", catalog::names().join(", ")),
            )
        }),
        ModelRef::Spec(s) => match &s.hf_config {
            Some(hf_config) => {
                let mut extra = serde_json::to_value(ServingModelSpec { hf_config: None, name: None, ..s.clone() })
                    .unwrap_or_default();
                if let Some(first) = extra.as_object_mut().and_then(|o| o.keys().next().cloned()) {
                    return Err(bad(&format!("model.{first}"), "give hf_config alone (with an optional name)"));
                }
                hf::parse(hf_config, s.name.as_deref())
            }
            None => from_fields(s),
        },
    }
}

fn from_fields(s: &ServingModelSpec) -> Result<ServingModel, ConfigError> {
    let need = |v: Option<u32>, f: &str| -> Result<u32, ConfigError> {
        match v {
            None => Err(bad(&format!("model.{f}"), "missing (or name a catalog model, or give hf_config)")),
            Some(0) => Err(bad(&format!("model.{f}"), "must be at least 1")),
            Some(n) => Ok(n),
        }
    };
    let (layers, hidden, heads, vocab) =
        (need(s.layers, "layers")?, need(s.hidden, "hidden")?, need(s.heads, "heads")?, need(s.vocab, "vocab")?);
    let kv_heads = need(s.kv_heads.or(Some(heads)), "kv_heads")?;
    if heads % kv_heads != 0 {
        return Err(bad("model.kv_heads", format!("kv_heads {kv_heads} must divide heads {heads}")));
    }
    let head_dim = match s.head_dim {
        Some(d) => need(Some(d), "head_dim")?,
        None if hidden % heads == 0 => hidden / heads,
        None => {
            return Err(bad(
                "model.head_dim",
                format!("hidden {hidden} is not divisible by heads {heads}: give head_dim"),
            ))
        }
    };
    let activation = s.activation.unwrap_or(Activation::Swiglu);
    let ffn_hidden = need(s.ffn_hidden.or(Some(default_ffn_hidden(hidden, activation))), "ffn_hidden")?;
    let moe = match &s.moe {
        None => None,
        Some(m) => {
            if m.layer_freq.is_some_and(|f| f > 1) {
                return Err(bad(
                    "model.moe.layer_freq",
                    "serving models every layer after dense_layers as an MoE layer: leave layer_freq out",
                ));
            }
            Some(validate_moe(m, layers, "model.moe")?)
        }
    };
    if let Some(m) = &s.mla {
        validate_mla(m, "model.mla")?;
    }
    Ok(ServingModel {
        name: s.name.clone().unwrap_or_else(|| "custom".to_string()),
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim: s.mla.as_ref().map_or(head_dim, |m| m.qk_nope_head_dim + m.qk_rope_head_dim),
        ffn_hidden,
        vocab,
        norm: s.norm.unwrap_or(Norm::Rmsnorm),
        activation,
        tied_embeddings: s.tied_embeddings.unwrap_or(false),
        moe,
        mla: s.mla.clone(),
        dsa: None,
        mtp_layers: 0,
        sliding_window: None,
    })
}

/// Sizes beyond any model's, refused so that shapes stay far from integer overflow.
pub(super) fn limits(m: &ServingModel) -> Result<(), ConfigError> {
    let moe = m.moe.as_ref();
    for (f, v, max) in [
        ("layers", m.layers, 100_000),
        ("hidden", m.hidden, 1 << 20),
        ("heads", m.heads, 1 << 16),
        ("head_dim", m.head_dim, 1 << 16),
        ("ffn_hidden", m.ffn_hidden, 1 << 24),
        ("vocab", m.vocab, 1 << 24),
        ("moe.experts", moe.map_or(1, |x| x.experts), 1 << 16),
        ("moe.expert_ffn_hidden", moe.map_or(1, |x| x.expert_ffn_hidden), 1 << 24),
        ("moe.shared_ffn_hidden", moe.map_or(1, |x| x.shared_ffn_hidden), 1 << 24),
    ] {
        if v > max {
            return Err(bad(&format!("model.{f}"), format!("{v} is above the largest supported, {max}")));
        }
    }
    Ok(())
}
