//! A Hugging Face `config.json` → [`ServingModel`]. The keys read (others are ignored; errors name
//! `model.hf_config.<key>`):
//!
//! | what | keys, first present wins | default |
//! |---|---|---|
//! | hidden size | `hidden_size`, `n_embd`, `d_model` | required |
//! | layers | `num_hidden_layers`, `n_layer`, `num_layers` | required |
//! | query heads | `num_attention_heads`, `n_head` | required |
//! | key/value heads | `num_key_value_heads` | query heads |
//! | head dim | `head_dim` (MLA: `qk_nope_head_dim + qk_rope_head_dim`) | hidden / heads |
//! | MLP width | `intermediate_size`, `n_inner`, `ffn_dim` | 4·hidden (GeLU), expert width (MoE) |
//! | vocabulary | `vocab_size` | required |
//! | activation | `hidden_act`, `activation_function`: `silu`/`swiglu` → SwiGLU, `gelu*`/`relu` → a two-matrix MLP | SwiGLU |
//! | norm | `layer_norm_eps` / `layer_norm_epsilon` → LayerNorm, else RMSNorm | RMSNorm |
//! | tied LM head | `tie_word_embeddings` | `false` |
//! | experts | `num_local_experts` (Mixtral), `num_experts` (Qwen-MoE), `n_routed_experts` (DeepSeek) | dense |
//! | routed per token | `num_experts_per_tok` | required with experts |
//! | expert width | `moe_intermediate_size`, else `intermediate_size` (Mixtral) | |
//! | shared experts | `n_shared_experts` (× expert width), `shared_expert_intermediate_size` (one of that width) | none |
//! | dense leading layers | `first_k_dense_replace`; Qwen's `mlp_only_layers` (their count) | 0 |
//! | group-limited routing | `n_group`, `topk_group` (DeepSeek) | none |
//! | MLA | `kv_lora_rank`, `q_lora_rank` (null = 0), `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim` | none |
//! | MTP modules (speculative decoding's drafter) | `num_nextn_predict_layers` (0–16) | 0 |
//! | sliding-window attention ([`SlidingWindow`]) | `sliding_window` (tokens) on the `layer_types` entries `"sliding_attention"` | none |
//!
//! A `sliding_window` without `layer_types` is not modelled (every layer attends the whole context): which layers
//! it applies to differs by architecture (Qwen2's only with `use_sliding_window`, Gemma 2's every other layer).
//!
//! `decoder_sparse_step` other than 1 (MoE every k-th layer) is refused: perfcast's MoE layers are contiguous.

use serde_json::{Map, Value};

use super::model::{DsaIndexer, MoeConfig, ServingModel, SlidingWindow};
use super::request::MlaSpec;
use crate::llm::config::{bad, Activation, ConfigError, Norm};

const FIELD: &str = "model.hf_config";

fn field(key: &str) -> String {
    format!("{FIELD}.{key}")
}

/// The first of `keys` present (and not null) in `cfg`, as a positive integer that fits u32: `Ok(None)` when none
/// is present; an error naming the key otherwise.
fn uint(cfg: &Map<String, Value>, keys: &[&str]) -> Result<Option<u32>, ConfigError> {
    for k in keys {
        match cfg.get(*k) {
            None | Some(Value::Null) => continue,
            Some(v) => {
                return match v.as_u64() {
                    Some(n) if n >= 1 && n <= u32::MAX as u64 => Ok(Some(n as u32)),
                    _ => Err(bad(&field(k), format!("must be a positive integer, got {v}"))),
                }
            }
        }
    }
    Ok(None)
}

/// The multi-token-prediction modules `num_nextn_predict_layers` names (DeepSeek-V3's config.json: 1), 0 when
/// absent; an error naming the key unless it is a non-negative integer.
fn nextn_layers(cfg: &Map<String, Value>) -> Result<u32, ConfigError> {
    const KEY: &str = "num_nextn_predict_layers";
    match cfg.get(KEY) {
        None | Some(Value::Null) => Ok(0),
        Some(v) => match v.as_u64() {
            Some(n) if n <= 16 => Ok(n as u32),
            _ => Err(bad(&field(KEY), format!("must be an integer 0–16, got {v}"))),
        },
    }
}

fn required(cfg: &Map<String, Value>, keys: &[&str]) -> Result<u32, ConfigError> {
    uint(cfg, keys)?.ok_or_else(|| bad(&field(keys[0]), format!("missing: config.json needs one of {keys:?}")))
}

/// Parses `hf_config` (the JSON object of a `config.json`), naming the model `name` (else its `_name_or_path`, its
/// first `architectures` entry or `"hf_config"`).
pub fn parse(hf_config: &Value, name: Option<&str>) -> Result<ServingModel, ConfigError> {
    let Some(cfg) = hf_config.as_object() else {
        return Err(bad(FIELD, "must be the JSON object of a Hugging Face config.json"));
    };
    let hidden = required(cfg, &["hidden_size", "n_embd", "d_model"])?;
    let layers = required(cfg, &["num_hidden_layers", "n_layer", "num_layers"])?;
    let heads = required(cfg, &["num_attention_heads", "n_head"])?;
    let vocab = required(cfg, &["vocab_size"])?;
    let kv_heads = uint(cfg, &["num_key_value_heads"])?.unwrap_or(heads);
    if heads % kv_heads != 0 {
        return Err(bad(
            &field("num_key_value_heads"),
            format!("{kv_heads} key/value heads do not divide {heads} attention heads"),
        ));
    }
    let act = cfg.get("hidden_act").or_else(|| cfg.get("activation_function")).and_then(Value::as_str);
    let activation = match act.map(str::to_ascii_lowercase).as_deref() {
        None | Some("silu") | Some("swiglu") | Some("swish") => Activation::Swiglu,
        Some(a) if a.starts_with("gelu") || a == "relu" => Activation::Gelu,
        Some(a) => {
            let key = if cfg.contains_key("hidden_act") { "hidden_act" } else { "activation_function" };
            return Err(bad(&field(key), format!("unknown activation {a:?} (silu, swiglu, gelu*, relu)")));
        }
    };
    let norm = if cfg.contains_key("layer_norm_eps") || cfg.contains_key("layer_norm_epsilon") {
        Norm::Layernorm
    } else {
        Norm::Rmsnorm
    };
    let tied = match cfg.get("tie_word_embeddings") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(bad(&field("tie_word_embeddings"), format!("must be true or false, got {v}"))),
    };
    let mla = match uint(cfg, &["kv_lora_rank"])? {
        None => None,
        Some(kv_lora_rank) => Some(MlaSpec {
            q_lora_rank: uint(cfg, &["q_lora_rank"])?.unwrap_or(0),
            kv_lora_rank,
            qk_nope_head_dim: required(cfg, &["qk_nope_head_dim"])?,
            qk_rope_head_dim: required(cfg, &["qk_rope_head_dim"])?,
            v_head_dim: required(cfg, &["v_head_dim"])?,
        }),
    };
    let head_dim = match (&mla, uint(cfg, &["head_dim"])?) {
        (Some(m), _) => m.qk_nope_head_dim + m.qk_rope_head_dim,
        (None, Some(d)) => d,
        (None, None) if hidden % heads == 0 => hidden / heads,
        (None, None) => {
            return Err(bad(
                &field("num_attention_heads"),
                format!("hidden_size {hidden} is not divisible by {heads} heads and head_dim is not given"),
            ))
        }
    };
    let intermediate = uint(cfg, &["intermediate_size", "n_inner", "ffn_dim"])?;
    let moe = moe(cfg, layers, intermediate)?;
    let ffn_hidden = match (intermediate, &moe) {
        (Some(f), _) => f,
        (None, Some(m)) => m.expert_ffn_hidden,
        (None, None) if activation == Activation::Gelu => 4 * hidden,
        (None, None) => return Err(bad(&field("intermediate_size"), "missing: the MLP width is needed")),
    };
    let name = name
        .map(str::to_string)
        .or_else(|| cfg.get("_name_or_path").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string))
        .or_else(|| {
            cfg.get("architectures")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| "hf_config".to_string());
    Ok(ServingModel {
        name,
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        ffn_hidden,
        vocab,
        norm,
        activation,
        tied_embeddings: tied,
        moe,
        dsa: dsa(cfg, mla.is_some())?,
        mla,
        mtp_layers: nextn_layers(cfg)?,
        sliding_window: sliding_window(cfg, layers)?,
    })
}

/// The sliding window `layer_types` asks for: its `"sliding_attention"` entries counted, over the
/// `sliding_window` tokens (gpt-oss's config.json: 128, every other layer); `None` without `layer_types` or
/// without such an entry. Errors name `layer_types` (not an array of strings, or not one entry per layer) or
/// `sliding_window` (missing while a layer needs it).
fn sliding_window(cfg: &Map<String, Value>, layers: u32) -> Result<Option<SlidingWindow>, ConfigError> {
    const TYPES: &str = "layer_types";
    let types = match cfg.get(TYPES) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(a)) => a,
        Some(v) => return Err(bad(&field(TYPES), format!("must be an array of layer types, got {v}"))),
    };
    if types.len() != layers as usize {
        let n = types.len();
        return Err(bad(&field(TYPES), format!("has {n} entries for {layers} layers (num_hidden_layers)")));
    }
    let mut windowed = 0;
    for t in types {
        match t.as_str() {
            Some("sliding_attention") => windowed += 1,
            Some(_) => {}
            None => return Err(bad(&field(TYPES), format!("entries must be strings, got {t}"))),
        }
    }
    if windowed == 0 {
        return Ok(None);
    }
    let window_tokens = uint(cfg, &["sliding_window"])?.ok_or_else(|| {
        bad(&field("sliding_window"), "missing: layer_types names sliding_attention layers")
    })?;
    Ok(Some(SlidingWindow { window_tokens, layers: windowed }))
}

/// DeepSeek sparse attention's indexer (`index_n_heads`, `index_head_dim`, `index_topk`, as DeepSeek-V3.2's and
/// GLM-5's config.json give them), on an MLA model; `None` without `index_topk`. A config sharing one indexer
/// over several layers (GLM-5.2's `index_topk_freq` > 1) is refused: perfcast runs the indexer on every layer.
fn dsa(cfg: &Map<String, Value>, mla: bool) -> Result<Option<DsaIndexer>, ConfigError> {
    let Some(topk) = uint(cfg, &["index_topk"])? else {
        return Ok(None);
    };
    if !mla {
        return Err(bad(
            &field("index_topk"),
            "sparse attention's indexer is served only on MLA models (kv_lora_rank)",
        ));
    }
    if uint(cfg, &["index_topk_freq"])?.is_some_and(|f| f > 1) {
        return Err(bad(&field("index_topk_freq"), "an indexer shared over several layers is not modelled"));
    }
    Ok(Some(DsaIndexer {
        heads: required(cfg, &["index_n_heads"])?,
        head_dim: required(cfg, &["index_head_dim"])?,
        topk,
    }))
}

fn moe(cfg: &Map<String, Value>, layers: u32, intermediate: Option<u32>) -> Result<Option<MoeConfig>, ConfigError> {
    let Some(experts) = uint(cfg, &["num_local_experts", "num_experts", "n_routed_experts"])? else {
        return Ok(None);
    };
    let top_k = required(cfg, &["num_experts_per_tok"])?;
    if top_k > experts {
        return Err(bad(&field("num_experts_per_tok"), format!("{top_k} routed experts per token of only {experts}")));
    }
    let expert_ffn_hidden = match uint(cfg, &["moe_intermediate_size"])?.or(intermediate) {
        Some(f) => f,
        None => return Err(bad(&field("moe_intermediate_size"), "missing: the experts' MLP width is needed")),
    };
    if let Some(step) = uint(cfg, &["decoder_sparse_step"])? {
        if step != 1 {
            return Err(bad(&field("decoder_sparse_step"), format!("MoE every {step} layers is not supported (1 is)")));
        }
    }
    let (shared_experts, shared_ffn_hidden) =
        match (uint(cfg, &["n_shared_experts"])?, uint(cfg, &["shared_expert_intermediate_size"])?) {
            (Some(n), _) => (n, n * expert_ffn_hidden),
            (None, Some(w)) => (1, w),
            (None, None) => (0, 0),
        };
    let mlp_only = cfg.get("mlp_only_layers").and_then(Value::as_array).map_or(0, |a| a.len() as u32);
    let dense_layers = uint(cfg, &["first_k_dense_replace"])?.unwrap_or(0).max(mlp_only);
    if dense_layers >= layers {
        return Err(bad(
            &field("first_k_dense_replace"),
            format!("{dense_layers} dense layers of {layers}: no MoE layer"),
        ));
    }
    let router_groups = uint(cfg, &["n_group"])?.unwrap_or(0);
    let router_group_top_k = if router_groups > 0 { uint(cfg, &["topk_group"])?.unwrap_or(0) } else { 0 };
    if router_group_top_k > router_groups {
        return Err(bad(
            &field("topk_group"),
            format!("{router_group_top_k} groups per token of only {router_groups}"),
        ));
    }
    Ok(Some(MoeConfig {
        experts,
        top_k,
        expert_ffn_hidden,
        shared_experts,
        shared_ffn_hidden,
        dense_layers,
        layer_freq: 1,
        router_groups,
        router_group_top_k,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::serving::catalog::lookup;
    use serde_json::json;

    #[test]
    fn llama_and_mixtral_configs_give_the_catalog_models() {
        // meta-llama/Llama-3.1-70B config.json (abridged to the keys read, plus some that are not).
        let llama = json!({"architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": 8192,
            "intermediate_size": 28672, "num_attention_heads": 64, "num_hidden_layers": 80,
            "num_key_value_heads": 8, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": false,
            "torch_dtype": "bfloat16", "vocab_size": 128256});
        let m = parse(&llama, Some("Llama-3.1-70B")).unwrap();
        assert_eq!(m, lookup("Llama-3.1-70B").unwrap().model);
        let mixtral = json!({"hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
            "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2,
            "vocab_size": 32000, "hidden_act": "silu", "rms_norm_eps": 1e-5});
        assert_eq!(parse(&mixtral, Some("Mixtral-8x7B")).unwrap(), lookup("Mixtral-8x7B").unwrap().model);
        // Qwen3-32B: head_dim 128 with hidden 5120 and 64 heads.
        let qwen3 = json!({"hidden_size": 5120, "head_dim": 128, "intermediate_size": 25600,
            "num_attention_heads": 64, "num_hidden_layers": 64, "num_key_value_heads": 8, "vocab_size": 151936,
            "_name_or_path": "Qwen/Qwen3-32B"});
        let q = parse(&qwen3, None).unwrap();
        assert_eq!((q.name.as_str(), q.head_dim), ("Qwen/Qwen3-32B", 128));
        // DeepSeek-V3: MLA and shared experts.
        let ds = json!({"hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128,
            "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64, "v_head_dim": 128, "intermediate_size": 18432, "moe_intermediate_size": 2048,
            "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1, "first_k_dense_replace": 3,
            "n_group": 8, "topk_group": 4, "vocab_size": 129280, "tie_word_embeddings": false,
            "num_nextn_predict_layers": 1});
        assert_eq!(parse(&ds, Some("DeepSeek-V3")).unwrap(), lookup("DeepSeek-V3").unwrap().model);
    }

    #[test]
    fn gpt_oss_config_gives_the_catalog_model_with_its_sliding_window() {
        // openai/gpt-oss-120b config.json (abridged to the keys read): 36 layers alternating from
        // "sliding_attention", so 18 windowed layers of a 128-token window.
        let types: Vec<&str> =
            (0..36).map(|i| if i % 2 == 0 { "sliding_attention" } else { "full_attention" }).collect();
        let oss = json!({"hidden_size": 2880, "num_hidden_layers": 36, "num_attention_heads": 64,
            "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 2880, "num_local_experts": 128,
            "num_experts_per_tok": 4, "vocab_size": 201088, "tie_word_embeddings": false, "sliding_window": 128,
            "layer_types": types});
        let m = parse(&oss, Some("gpt-oss-120b")).unwrap();
        assert_eq!(m.sliding_window, Some(SlidingWindow { window_tokens: 128, layers: 18 }));
        assert_eq!(m, lookup("gpt-oss-120b").unwrap().model);
        // Qwen2.5's sliding_window without layer_types (and use_sliding_window false): not modelled.
        let mut q = oss.clone();
        q.as_object_mut().unwrap().remove("layer_types");
        q["use_sliding_window"] = json!(false);
        assert_eq!(parse(&q, None).unwrap().sliding_window, None);
        // Errors name their key: a layer_types of the wrong length, a window missing while a layer needs one.
        let mut short = oss.clone();
        short["layer_types"] = json!(["sliding_attention", "full_attention"]);
        assert_eq!(parse(&short, None).unwrap_err().field, "model.hf_config.layer_types");
        let mut bad_entry = oss.clone();
        bad_entry["layer_types"][3] = json!(7);
        assert_eq!(parse(&bad_entry, None).unwrap_err().field, "model.hf_config.layer_types");
        let mut no_window = oss;
        no_window.as_object_mut().unwrap().remove("sliding_window");
        assert_eq!(parse(&no_window, None).unwrap_err().field, "model.hf_config.sliding_window");
    }

    #[test]
    fn unknown_or_inconsistent_values_name_their_key() {
        let base = json!({"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
            "intermediate_size": 14336, "vocab_size": 32000});
        let cases = [
            ("num_key_value_heads", json!(5), "model.hf_config.num_key_value_heads"),
            ("hidden_size", json!("big"), "model.hf_config.hidden_size"),
            ("num_hidden_layers", json!(0), "model.hf_config.num_hidden_layers"),
            ("hidden_act", json!("mish"), "model.hf_config.hidden_act"),
            ("num_local_experts", json!(8), "model.hf_config.num_experts_per_tok"),
            ("tie_word_embeddings", json!("yes"), "model.hf_config.tie_word_embeddings"),
        ];
        for (k, v, field) in cases {
            let mut c = base.clone();
            c[k] = v;
            assert_eq!(parse(&c, None).unwrap_err().field, field, "{k}");
        }
        let mut c = base.clone();
        c.as_object_mut().unwrap().remove("vocab_size");
        assert_eq!(parse(&c, None).unwrap_err().field, "model.hf_config.vocab_size");
        let mut c = base.clone();
        c["num_attention_heads"] = json!(30);
        assert_eq!(parse(&c, None).unwrap_err().field, "model.hf_config.num_attention_heads");
        assert_eq!(parse(&json!([1]), None).unwrap_err().field, "model.hf_config");
        let mut c = base;
        c["num_local_experts"] = json!(8);
        c["num_experts_per_tok"] = json!(9);
        assert_eq!(parse(&c, None).unwrap_err().field, "model.hf_config.num_experts_per_tok");
    }
}
