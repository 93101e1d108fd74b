//! Training requests name their model as serving requests do (issue 17, item 3): `"model"` is a catalog name
//! (`"Llama-3.1-8B"`, [`crate::llm::serving::catalog`]), `{"hf_config": {…}, "seq_len": 4096}` with the contents
//! of a Hugging Face `config.json`, or the architecture's fields ([`ModelSpec`], as before). Names and configs
//! are resolved into a [`ModelSpec`] while the request is read, so everything downstream sees the architecture.
//!
//! What a name or config sets: layers, hidden, heads, key/value heads, MLP width, vocabulary, norm, activation
//! and tied embeddings from the model; `seq_len` from the request (default [`DEFAULT_SEQ_LEN`]); attention
//! `flash` (FlashAttention, what these models are trained with; a recommendation, not read from the config);
//! rotary position embeddings except for the GPT-3 catalog entries and configs of `model_type` gpt2, opt, bloom or
//! gpt_bigcode (learned or ALiBi positions); GPT-NeoX's / Falcon's parallel residual where the config says so
//! (`use_parallel_residual`, `parallel_attn`); dropout 0.
//!
//! Mixture-of-experts layers, multi-head latent attention and a `head_dim` other than hidden / heads (Qwen3) carry
//! over ([`crate::llm::moe`]); multi-token-prediction layers come from `num_nextn_predict_layers` (DeepSeek's
//! config.json), the request's `mtp_layers`, or for the catalog's DeepSeek-V3 its config's 1.
//!
//! Refused (422 naming `model`, or `model.hf_config.<key>` in the message): unknown names and the config errors of
//! [`crate::llm::serving::hf`].

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::config::{bad, Attention, ConfigError, ModelSpec};
use super::serving::model::ServingModel;
use super::serving::{catalog, hf};

/// Training sequence length when a catalog name or Hugging Face config does not give one, tokens (a
/// recommendation: Llama-2's pretraining context; give `seq_len` for others).
pub const DEFAULT_SEQ_LEN: u32 = 4096;

/// The training model, as the request may give it (the schema; read by [`deserialize_model`]).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(untagged)]
pub enum TrainingModelInput {
    /// A catalog name (case-insensitive, or its Hugging Face repository id), trained at 4,096 tokens
    /// ([`DEFAULT_SEQ_LEN`]).
    Name(String),
    /// A catalog name or Hugging Face config with a sequence length.
    Named(NamedModel),
    /// The architecture's fields.
    Spec(ModelSpec),
}

/// A model by catalog name or Hugging Face `config.json`, with the training sequence length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Llama-3.1-8B", "seq_len": 8192}))]
pub struct NamedModel {
    /// Display name; without `hf_config`, the catalog name to look up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The contents of a Hugging Face `config.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub hf_config: Option<Value>,
    /// Sequence length, tokens. Default 4,096 ([`DEFAULT_SEQ_LEN`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_len: Option<u32>,
    /// Multi-token-prediction layers to train. Default: the config's `num_nextn_predict_layers` (the catalog's
    /// DeepSeek-V3: 1), else 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtp_layers: Option<u32>,
}

/// Hugging Face `model_type`s whose attention normalizes each query and key head (`Qwen3Attention`'s `q_norm` and
/// `k_norm`, `modeling_qwen3.py` / `modeling_qwen3_moe.py`); the catalog's Qwen3 entries likewise.
const QK_NORM_MODEL_TYPES: [&str; 2] = ["qwen3", "qwen3_moe"];

/// Multi-token-prediction layers of catalog models as their config.json trains them (`num_nextn_predict_layers`).
const CATALOG_MTP: [(&str, u32); 1] = [("DeepSeek-V3", 1)];

/// The [`ModelSpec`] of a catalog name or Hugging Face config (`hf_config` wins when both are given; `name` then
/// only names it). Errors name the field.
pub fn resolve_named(m: &NamedModel) -> Result<ModelSpec, ConfigError> {
    let seq_len = m.seq_len.unwrap_or(DEFAULT_SEQ_LEN);
    if seq_len == 0 {
        return Err(bad("model.seq_len", "must be at least 1"));
    }
    match (&m.hf_config, &m.name) {
        (Some(cfg), name) => {
            let model = hf::parse(cfg, name.as_deref())?;
            let obj = cfg.as_object();
            let flag = |k: &str| obj.and_then(|o| o.get(k)).and_then(Value::as_bool).unwrap_or(false);
            let model_type = obj.and_then(|o| o.get("model_type")).and_then(Value::as_str).unwrap_or("");
            let rotary = !["gpt2", "opt", "bloom", "gpt_bigcode"].contains(&model_type);
            let parallel = flag("use_parallel_residual") || flag("parallel_attn");
            let mtp = obj.and_then(|o| o.get("num_nextn_predict_layers")).and_then(Value::as_u64).unwrap_or(0);
            let qk_norm = QK_NORM_MODEL_TYPES.contains(&model_type);
            let mut spec = to_spec(&model, seq_len, rotary, parallel, qk_norm)?;
            spec.mtp_layers = m.mtp_layers.unwrap_or(mtp.min(u32::MAX as u64) as u32);
            Ok(spec)
        }
        (None, Some(name)) => {
            let entry = catalog::lookup(name).ok_or_else(|| {
                bad(
                    "model.name",
                    format!(
                        "unknown model {name:?}: give the architecture, hf_config, or one of {}",
                        catalog::names().join(", ")
                    ),
                )
            })?;
            let rotary = !entry.model.name.starts_with("GPT-3");
            let qk_norm = entry.model.name.starts_with("Qwen3");
            let mut spec = to_spec(&entry.model, seq_len, rotary, false, qk_norm)?;
            let mtp = CATALOG_MTP.iter().find(|(n, _)| *n == entry.model.name).map_or(0, |(_, k)| *k);
            spec.mtp_layers = m.mtp_layers.unwrap_or(mtp);
            Ok(spec)
        }
        (None, None) => Err(bad("model", "give the architecture, a catalog name or hf_config")),
    }
}

/// The training [`ModelSpec`] of a resolved serving model (its MoE layers and MLA carried over; `head_dim` given
/// where heads · head_dim ≠ hidden).
fn to_spec(
    m: &ServingModel,
    seq_len: u32,
    rotary: bool,
    parallel_residual: bool,
    qk_norm: bool,
) -> Result<ModelSpec, ConfigError> {
    let head_dim = (m.mla.is_none() && m.heads * m.head_dim != m.hidden).then_some(m.head_dim);
    Ok(ModelSpec {
        name: Some(m.name.clone()),
        layers: m.layers,
        hidden: m.hidden,
        heads: m.heads,
        seq_len,
        vocab: m.vocab,
        norm: m.norm,
        attention: Attention::Flash,
        activation: m.activation,
        parallel_residual,
        rotary,
        kv_heads: Some(m.kv_heads),
        ffn_hidden: Some(m.ffn_hidden),
        tied_embeddings: m.tied_embeddings,
        dropout: 0.0,
        head_dim,
        moe: m.moe.as_ref().map(|c| c.to_spec()),
        mla: m.mla.clone(),
        mtp_layers: 0,
        qk_norm,
    })
}

/// Reads `"model"` of a training request: a string is a catalog name; an object with `hf_config`, or with no
/// field but `name` / `seq_len`, a [`NamedModel`]; any other object the architecture ([`ModelSpec`], its field
/// errors keeping their path). Resolution errors are reported at `model` with the offending field in the message.
pub fn deserialize_model<'de, D: Deserializer<'de>>(d: D) -> Result<ModelSpec, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = ModelSpec;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a catalog model name, {\"hf_config\": {…}, \"seq_len\": …} or a model object")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<ModelSpec, E> {
            resolve_named(&NamedModel { name: Some(s.to_string()), hf_config: None, seq_len: None, mtp_layers: None })
                .map_err(|e| E::custom(e.to_string()))
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ModelSpec, A::Error> {
            let fields = Fields::deserialize(de::value::MapAccessDeserializer::new(map))?;
            fields.into_spec()
        }
    }
    d.deserialize_any(V)
}

/// Every key a model object may hold (the architecture's and a named model's), each optional, so that one pass
/// over the map keeps serde's field paths and decides which form it is.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fields {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    hf_config: Option<Value>,
    #[serde(default)]
    seq_len: Option<u32>,
    #[serde(default)]
    layers: Option<u32>,
    #[serde(default)]
    hidden: Option<u32>,
    #[serde(default)]
    heads: Option<u32>,
    #[serde(default)]
    vocab: Option<u32>,
    #[serde(default)]
    norm: Option<super::config::Norm>,
    #[serde(default)]
    attention: Option<Attention>,
    #[serde(default)]
    activation: Option<super::config::Activation>,
    #[serde(default)]
    parallel_residual: Option<bool>,
    #[serde(default)]
    rotary: Option<bool>,
    #[serde(default)]
    kv_heads: Option<u32>,
    #[serde(default)]
    ffn_hidden: Option<u32>,
    #[serde(default)]
    tied_embeddings: Option<bool>,
    #[serde(default)]
    dropout: Option<f64>,
    #[serde(default)]
    head_dim: Option<u32>,
    #[serde(default)]
    moe: Option<crate::llm::moe::MoeSpec>,
    #[serde(default)]
    mla: Option<crate::llm::moe::MlaSpec>,
    #[serde(default)]
    mtp_layers: Option<u32>,
    #[serde(default)]
    qk_norm: Option<bool>,
}

impl Fields {
    fn into_spec<E: de::Error>(self) -> Result<ModelSpec, E> {
        let architecture = [self.layers, self.hidden, self.heads, self.vocab, self.kv_heads, self.ffn_hidden]
            .iter()
            .any(Option::is_some)
            || self.norm.is_some()
            || self.attention.is_some()
            || self.activation.is_some()
            || self.parallel_residual.is_some()
            || self.rotary.is_some()
            || self.tied_embeddings.is_some()
            || self.dropout.is_some()
            || self.head_dim.is_some()
            || self.moe.is_some()
            || self.mla.is_some()
            || self.qk_norm.is_some();
        if self.hf_config.is_some() || !architecture {
            if self.hf_config.is_some() && architecture {
                return Err(E::custom("model: give hf_config alone (with an optional name and seq_len)"));
            }
            let named = NamedModel {
                name: self.name,
                hf_config: self.hf_config,
                seq_len: self.seq_len,
                mtp_layers: self.mtp_layers,
            };
            return resolve_named(&named).map_err(|e| E::custom(e.to_string()));
        }
        Ok(ModelSpec {
            name: self.name,
            layers: self.layers.ok_or_else(|| E::missing_field("layers"))?,
            hidden: self.hidden.ok_or_else(|| E::missing_field("hidden"))?,
            heads: self.heads.ok_or_else(|| E::missing_field("heads"))?,
            seq_len: self.seq_len.ok_or_else(|| E::missing_field("seq_len"))?,
            vocab: self.vocab.ok_or_else(|| E::missing_field("vocab"))?,
            norm: self.norm.unwrap_or_default(),
            attention: self.attention.unwrap_or_default(),
            activation: self.activation.unwrap_or_default(),
            parallel_residual: self.parallel_residual.unwrap_or(false),
            rotary: self.rotary.unwrap_or(true),
            kv_heads: self.kv_heads,
            ffn_hidden: self.ffn_hidden,
            tied_embeddings: self.tied_embeddings.unwrap_or(false),
            dropout: self.dropout.unwrap_or(0.0),
            head_dim: self.head_dim,
            moe: self.moe,
            mla: self.mla,
            mtp_layers: self.mtp_layers.unwrap_or(0),
            qk_norm: self.qk_norm.unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Req {
        #[serde(deserialize_with = "deserialize_model")]
        model: ModelSpec,
    }

    fn read(v: Value) -> Result<ModelSpec, String> {
        serde_json::from_value::<Req>(serde_json::json!({ "model": v })).map(|r| r.model).map_err(|e| e.to_string())
    }

    #[test]
    fn a_catalog_name_gives_the_models_config() {
        // Llama-3.1-8B's config.json: 32 layers, hidden 4096, 32 heads, 8 KV heads, intermediate 14336, vocab 128256.
        let m = read(serde_json::json!("llama-3.1-8b")).unwrap();
        assert_eq!((m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden), (32, 4096, 32, Some(8), Some(14336)));
        assert_eq!((m.vocab, m.seq_len, m.attention, m.rotary), (128256, 4096, Attention::Flash, true));
        let m = read(serde_json::json!({"name": "Llama-3.1-8B", "seq_len": 8192})).unwrap();
        assert_eq!(m.seq_len, 8192);
    }

    #[test]
    fn hf_configs_and_refusals() {
        let cfg = serde_json::json!({"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32,
            "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256, "rms_norm_eps": 1e-5,
            "hidden_act": "silu", "tie_word_embeddings": true, "model_type": "llama"});
        let m = read(serde_json::json!({"hf_config": cfg, "seq_len": 2048})).unwrap();
        assert_eq!((m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden), (16, 2048, 32, Some(8), Some(8192)));
        assert!(m.tied_embeddings && m.seq_len == 2048);
        // Unknown names and hf_config mixed with architecture fields are refused; MoE models and a head_dim ≠
        // hidden/heads (32 heads × 128 = 4096 ≠ 2048) carry over.
        assert!(read(serde_json::json!("no-such-model")).unwrap_err().contains("model.name"));
        let mx = read(serde_json::json!("Mixtral-8x7B")).unwrap();
        assert_eq!(mx.moe.as_ref().map(|m| (m.experts, m.top_k)), Some((8, 2)));
        let mut wide = cfg.clone();
        wide["head_dim"] = serde_json::json!(128);
        assert_eq!(read(serde_json::json!({"hf_config": wide})).unwrap().head_dim, Some(128));
        // DeepSeek-V3 by name trains its MTP layer; the request may drop it.
        assert_eq!(read(serde_json::json!("DeepSeek-V3")).unwrap().mtp_layers, 1);
        assert_eq!(read(serde_json::json!({"name": "DeepSeek-V3", "mtp_layers": 0})).unwrap().mtp_layers, 0);
        assert!(read(serde_json::json!({"hf_config": cfg, "layers": 2})).unwrap_err().contains("alone"));
        // The architecture's fields read as before.
        let m = read(serde_json::json!({"layers": 2, "hidden": 64, "heads": 4, "seq_len": 128, "vocab": 100})).unwrap();
        assert_eq!((m.layers, m.rotary, m.attention), (2, true, Attention::FusedSoftmax));
        assert!(read(serde_json::json!({"hidden": 64, "heads": 4, "seq_len": 128, "vocab": 100}))
            .unwrap_err()
            .contains("missing field `layers`"));
    }
}
