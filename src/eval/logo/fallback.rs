//! Engine keys timed by vLLM's model of the same operator (`eval cross-gpu --fallback`): what a SGLang or
//! TensorRT-LLM request falling back to vLLM's models would see on a held-out GPU (moved out of
//! `src/eval/logo/mod.rs`).

use serde::Serialize;

use super::hold_out::mask;
use super::{Group, Groups, Options};
use crate::learn::fit::{accuracy, fit, predict_rows, Accuracy};
use crate::learn::lgbm::Model;
use crate::learn::op_data::op_training_set;
use crate::learn::op_key;
use crate::op::KernelFamily;

/// The held-out rows of one engine's key timed by another engine's model of the same operator.
#[derive(Debug, Clone, Serialize)]
pub struct FallbackScore {
    /// The stand-in's key (`linear.fwd.fp8` for vLLM's).
    pub key: String,
    /// Fitted on the stand-in engine's rows of the training GPUs (the held-out GPU unseen by either engine).
    pub without_held_out: Accuracy,
    /// Fitted on the stand-in engine's rows of every GPU, the held-out one included, when it has rows there (a
    /// request on a GPU the other engine measured and this one did not).
    pub with_held_out: Option<Accuracy>,
}
/// The engine segment of `key` (`linear.fwd.fp8.sglang[balanced]` → SGLang; none → vLLM), and the key with
/// another engine's segment in its place.
fn with_engine(key: &str, group: &Group, to: KernelFamily) -> (KernelFamily, String) {
    let plain = op_key(group.class, group.phase, group.dtype, None, None);
    let rest = &key[plain.len()..];
    let (from, suffix) = match KernelFamily::ALL
        .iter()
        .filter_map(|f| f.key_segment().map(|seg| (*f, format!(".{seg}"))))
        .find(|(_, seg)| rest.starts_with(seg.as_str()))
    {
        Some((f, seg)) => (f, &rest[seg.len()..]),
        None => (KernelFamily::Vllm, rest),
    };
    (from, format!("{}{suffix}", op_key(group.class, group.phase, group.dtype, Some(to), None)))
}

/// [`FallbackScore`]s of `held`'s rows of an SGLang or TensorRT-LLM `key`: vLLM's model of the same operator (the
/// models without an engine segment, what every request read before the engines had their own, and the last resort
/// of their fallback order) fitted without and with the held-out GPU. None for vLLM's own keys.
pub(super) fn fallbacks(
    key: &str,
    group: &Group,
    groups: &Groups,
    held: &str,
    opts: &Options,
    masked: &[usize],
) -> Result<Vec<FallbackScore>, String> {
    let (own, vllm_key) = with_engine(key, group, KernelFamily::Vllm);
    if own == KernelFamily::Vllm {
        return Ok(Vec::new());
    }
    let (_, test_obs) = group.split(held, opts.max_rows);
    let (mut test, _) = op_training_set(group.class, group.phase, group.dtype, &test_obs);
    mask(&mut test, masked);
    let mut out = Vec::new();
    if test.is_empty() {
        return Ok(out);
    }
    let score = |train_obs: Vec<crate::learn::op_data::OpObservation<'static>>| -> Result<Option<Accuracy>, String> {
        let (mut train, _) = op_training_set(group.class, group.phase, group.dtype, &train_obs);
        mask(&mut train, masked);
        let Ok(fitted) = fit(&train, opts.grid, &mut |_| {}) else { return Ok(None) };
        let model = Model::from_text(&fitted.model_text).map_err(|e| format!("{key}: {e}"))?;
        let idx: Vec<usize> = (0..test.len()).collect();
        let pred = predict_rows(&model, &test, &idx).map_err(|e| format!("{key}: {e}"))?;
        Ok(Some(accuracy(&pred, &test.measured_us)))
    };
    if let Some(standin) = groups.by_key.get(&vllm_key) {
        if let Some(without_held_out) = score(standin.split(held, opts.max_rows).0)? {
            let has_held = standin.by_gpu.get(held).is_some_and(|r| !r.rows.is_empty());
            let with_held_out = if has_held { score(standin.split("", opts.max_rows).0)? } else { None };
            out.push(FallbackScore { key: vllm_key, without_held_out, with_held_out });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_key_names_its_vllm_stand_in() {
        let mut g = Groups::default();
        let h100 = &crate::hw::lookup("H100-SXM5-80GB").unwrap().spec;
        let (moe, bf16) = (crate::op::OpClass::Moe, crate::hw::Precision::Bf16);
        g.add("moe.fwd.bf16.sglang[balanced]", moe, crate::op::Phase::Fwd, bf16, h100, [1, 2, 3, 4, 1], 1.0);
        let group = &g.by_key["moe.fwd.bf16.sglang[balanced]"];
        assert_eq!(
            with_engine("moe.fwd.bf16.sglang[balanced]", group, KernelFamily::Vllm),
            (KernelFamily::Sglang, "moe.fwd.bf16[balanced]".to_string())
        );
        assert_eq!(
            with_engine("moe.fwd.bf16", group, KernelFamily::Trtllm),
            (KernelFamily::Vllm, "moe.fwd.bf16.trtllm".to_string())
        );
    }
}
