//! What the benchmarks share: a registry with a LightGBM model for every (operator class, phase) of one precision.
#![allow(dead_code)]

use perfcast::cost::roofline::estimate;
use perfcast::hw::{Precision, System};
use perfcast::learn::features::{op_features, OP_FEATURES};
use perfcast::learn::fit::{fit, Grid, TrainingSet};
use perfcast::learn::lgbm::Model;
use perfcast::learn::{op_key, ActiveRegressor, Registry};
use perfcast::op::{OpClass, OpShape, Phase};

/// (key, LightGBM model text) for every (class, phase) of `dtype` on the system's GPU, trained on synthetic samples
/// (analytic time × a smooth shape-dependent factor): the models are real LightGBM models of realistic size, so
/// prediction cost is what production pays.
pub fn regressor_texts(system: &System, dtype: Precision) -> Vec<(String, String, f64)> {
    let mut out = Vec::new();
    for class in OpClass::ALL {
        for phase in [Phase::Fwd, Phase::Bwd] {
            if class.is_serving() && phase == Phase::Bwd {
                continue;
            }
            let mut set = TrainingSet::new(&OP_FEATURES);
            let mut key = 0u64;
            for a in [64u64, 256, 1024, 4096, 16384] {
                for b in [64u64, 512, 2048, 8192] {
                    for c in [64u64, 128, 1024, 4096] {
                        let dims: [u64; 5] = match class {
                            OpClass::Linear | OpClass::Bmm => [1 + a / 1024, a, b, c, 0],
                            OpClass::FlashAttention => [1 + a / 4096, b, 16, 128, 0],
                            OpClass::AttentionPrefill => [1 + a / 4096, b, 16, 2, 128],
                            OpClass::AttentionDecode => [1 + a / 64, b * 4, 16, 2, 128],
                            OpClass::Moe => [a, 4096, b, 8, 2],
                            OpClass::Embedding => [a, b * 4, c, 0, 0],
                            OpClass::Optimizer => [a * b * c / 64, 0, 0, 0, 0],
                            OpClass::Elementwise => [a, b, 2, 0, 0],
                            _ => [a, b * c / 64, 0, 0, 0],
                        };
                        let shape = OpShape { class, phase, dims };
                        let Ok(cost) = estimate(&shape, dtype, &system.gpu) else { continue };
                        let factor = 1.2 + 0.3 * ((a as f64).ln() - (c as f64).ln()).tanh();
                        let x = op_features(&shape, dtype, &system.gpu, &cost);
                        set.push(&x, cost.time_us, cost.time_us * factor, key);
                        key += 1;
                    }
                }
            }
            let fitted = fit(&set, Grid::Fast, &mut |_| {}).expect("synthetic fit");
            out.push((op_key(class, phase, dtype, None, None), fitted.model_text, fitted.validation.mape));
        }
    }
    out
}

/// A registry (a new generation: nothing of it is cached yet) over `texts`.
pub fn registry(texts: &[(String, String, f64)]) -> Registry {
    Registry::new(texts.iter().map(|(key, text, mape)| ActiveRegressor {
        key: key.clone(),
        version: 1,
        model: Model::from_text(text).expect("model loads"),
        feature_names: OP_FEATURES.iter().map(|s| s.to_string()).collect(),
        validation_mape: *mape,
        summary: serde_json::Value::Null,
    }))
}

/// A registry with a model for every (class, phase) of `dtype`.
pub fn all_regressors(system: &System, dtype: Precision) -> Registry {
    registry(&regressor_texts(system, dtype))
}
