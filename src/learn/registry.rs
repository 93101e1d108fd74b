//! The in-memory registry of active models: what predictions read, hot-swapped as a whole by the worker
//! (readers take an `Arc` snapshot and never see a half-updated set).

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::lgbm::Model;
use crate::hw::{GpuSpec, Precision};
use crate::op::{KernelFamily, OpClass, Phase};

/// Model families: what a regressor corrects.
pub mod family {
    /// Operator regressors (S1): `<class>.<phase>.<dtype>[.<engine>][.<gpu>]` ([`super::op_key`]).
    pub const OP: &str = "op";
    /// Communication corrections (S0): `comm.<collective>`.
    pub const COMM: &str = "comm";
    /// Kernel corrections (S0, S2 features): `kernel`.
    pub const KERNEL: &str = "kernel";
}

/// The feature list this build computes for a model family (`None` for an unknown family): a stored model trained
/// on another list (a database from an older release) must not be served.
pub fn current_features(family_name: &str) -> Option<&'static [&'static str]> {
    match family_name {
        family::OP => Some(&super::features::OP_FEATURES),
        family::COMM => Some(&super::comm_features::COMM_FEATURES),
        family::KERNEL => Some(&crate::kernel::pipes::PipeFeatures::NAMES),
        _ => None,
    }
}

/// True when a model of `family_name` was trained on `feature_names` other than this build computes.
pub fn is_stale(family_name: &str, feature_names: &[String]) -> bool {
    current_features(family_name).is_some_and(|f| !f.iter().eq(feature_names.iter()))
}

/// One active model.
#[derive(Debug)]
pub struct ActiveRegressor {
    /// Full key, e.g. `linear.fwd.fp32` or `linear.fwd.fp32.H100-SXM5-80GB`.
    pub key: String,
    pub version: i64,
    pub model: Model,
    /// The feature names the model was trained on, in order.
    pub feature_names: Vec<String>,
    /// Validation MAPE recorded at training.
    pub validation_mape: f64,
    /// What the model was trained on (rows per GPU, dims or placement ranges): its domain of validity.
    pub summary: serde_json::Value,
}

impl ActiveRegressor {
    /// The largest value of `field` (e.g. `max_nodes`) in the training set, when recorded.
    pub fn trained_max(&self, field: &str) -> Option<f64> {
        self.summary.get(field).and_then(|v| v.as_f64())
    }

    /// The largest extent of shape dimension `dim` (an index into the operator's dims, e.g. 1 = M of a GEMM's
    /// B, M, N, K) in the training set, when recorded: `dims_max[dim]` of its
    /// [`crate::learn::op_data::SetSummary`]. `None` for models whose summary has no `dims_max` (collectives,
    /// end-to-end models) or fewer dims.
    pub fn trained_dim_max(&self, dim: usize) -> Option<u64> {
        dim_max(&self.summary, dim)
    }

    /// `regressor:<key>@v<n>`.
    pub fn source(&self) -> crate::cost::Source {
        crate::cost::Source::Regressor { key: self.key.clone(), version: self.version, instead_of: None }
    }
}

/// `dims_max[dim]` of a training summary ([`ActiveRegressor::trained_dim_max`]).
fn dim_max(summary: &serde_json::Value, dim: usize) -> Option<u64> {
    summary.get("dims_max")?.get(dim)?.as_u64()
}

/// The set of active models by key.
#[derive(Debug)]
pub struct Registry {
    by_key: HashMap<String, Arc<ActiveRegressor>>,
    /// Unique per registry built in this process: caches of predictions key on it, so a swap invalidates them.
    generation: u64,
    /// The fingerprint of the stored active versions it was built from (highest active version id, how many), when
    /// it was loaded from a database: a replica whose registry already has the database's fingerprint skips the
    /// reload.
    fingerprint: Option<(i64, i64)>,
}

static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn next_generation() -> u64 {
    GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Default for Registry {
    fn default() -> Self {
        Registry { by_key: HashMap::new(), generation: next_generation(), fingerprint: None }
    }
}

/// The registry shared between the worker (writer) and every request (readers).
pub type SharedRegistry = Arc<ArcSwap<Registry>>;

/// A fresh, empty shared registry.
pub fn shared() -> SharedRegistry {
    Arc::new(ArcSwap::from_pointee(Registry::default()))
}

/// Key of the operator regressor for (class, phase, dtype) measured by `family`'s kernels, all GPUs (`gpu` = None)
/// or one GPU (catalog name): `<class>.<phase>.<dtype>[.<engine>][.<gpu>]`, the engine segment only for the engines
/// that have one ([`KernelFamily::key_segment`]: SGLang's and TensorRT-LLM's; vLLM's measurements train the models
/// without one, with the engine-neutral samples). `linear.fwd.fp8`, `linear.fwd.fp8.trtllm.H100-SXM5-80GB`.
pub fn op_key(
    class: OpClass,
    phase: Phase,
    dtype: Precision,
    family: Option<KernelFamily>,
    gpu: Option<&str>,
) -> String {
    let mut key = format!("{class}.{}.{dtype}", phase.as_str());
    if let Some(segment) = family.and_then(KernelFamily::key_segment) {
        key.push('.');
        key.push_str(segment);
    }
    if let Some(g) = gpu {
        key.push('.');
        key.push_str(g);
    }
    key
}

impl Registry {
    /// A registry holding `models`.
    pub fn new(models: impl IntoIterator<Item = ActiveRegressor>) -> Registry {
        Registry {
            by_key: models.into_iter().map(|m| (m.key.clone(), Arc::new(m))).collect(),
            generation: next_generation(),
            fingerprint: None,
        }
    }

    /// This registry, marked as built from the stored active versions whose fingerprint is `fingerprint`
    /// (highest active version id, how many).
    pub fn with_fingerprint(mut self, fingerprint: (i64, i64)) -> Registry {
        self.fingerprint = Some(fingerprint);
        self
    }

    /// The fingerprint of the stored active versions this registry was built from (highest active version id, how
    /// many); None when it was not loaded from a database.
    pub fn fingerprint(&self) -> Option<(i64, i64)> {
        self.fingerprint
    }

    /// This registry's generation (unique in the process).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The active model of `key`.
    pub fn get(&self, key: &str) -> Option<&Arc<ActiveRegressor>> {
        self.by_key.get(key)
    }

    /// The operator model for `gpu`: its per-GPU model where one is active, else the cross-GPU one (engine-neutral
    /// and vLLM measurements).
    pub fn op(&self, class: OpClass, phase: Phase, dtype: Precision, gpu: &str) -> Option<&Arc<ActiveRegressor>> {
        self.get(&op_key(class, phase, dtype, None, Some(gpu)))
            .or_else(|| self.get(&op_key(class, phase, dtype, None, None)))
    }

    /// [`Registry::op_on_family`] of the engine-neutral (and vLLM) models.
    pub fn op_on(
        &self,
        class: OpClass,
        phase: Phase,
        dtype: Precision,
        gpu: &GpuSpec,
    ) -> Option<&Arc<ActiveRegressor>> {
        self.op_on_family(class, phase, dtype, None, gpu)
    }

    /// The operator model of `family`'s measurements (None or vLLM: the models without an engine segment) for
    /// `gpu`: its per-GPU model where one is active, else — fp16 on a GPU whose fp16 and bf16 matrix peaks are
    /// equal (the same tensor cores at the same rate: Ampere and later) — the GPU's own bf16 model before any
    /// cross-GPU fp16 one (a model measured on this GPU at the same rate knows it better than one of other GPUs: the
    /// bundled `linear.fwd.fp16` comes from DeepBench's P100, T4 and V100; its features are the same for both
    /// precisions, 2 bytes per element and the same peak), else the cross-GPU model. A cross-GPU fp16 model whose
    /// training set holds rows of this GPU (`summary.gpus`, e.g. after a user uploaded fp16 measurements of it)
    /// still comes first: it was measured here at the asked precision. A GPU without a model of its own (and without
    /// rows in the cross-GPU model) then takes the per-GPU model of a catalog GPU of the same die ([`same_die`])
    /// before the cross-GPU one — for training, the engine-neutral operator answers and the serving engines alike
    /// (GB300, which aiconfigurator did not measure, is timed by DGX B300's models at its own peaks).
    pub fn op_on_family(
        &self,
        class: OpClass,
        phase: Phase,
        dtype: Precision,
        family: Option<KernelFamily>,
        gpu: &GpuSpec,
    ) -> Option<&Arc<ActiveRegressor>> {
        let own = |p: Precision| self.get(&op_key(class, phase, p, family, Some(&gpu.name)));
        let same_rate = |a: Precision, b: Precision| {
            gpu.peak_matmul_flops(a).is_some() && gpu.peak_matmul_flops(a) == gpu.peak_matmul_flops(b)
        };
        let cross = self.get(&op_key(class, phase, dtype, family, None));
        let cross_knows_gpu = cross.is_some_and(|m| m.summary.get("gpus").and_then(|g| g.get(&gpu.name)).is_some());
        own(dtype)
            .or_else(|| cross.filter(|_| cross_knows_gpu))
            .or_else(|| {
                (dtype == Precision::Fp16 && same_rate(Precision::Fp16, Precision::Bf16))
                    .then(|| own(Precision::Bf16))
                    .flatten()
            })
            .or_else(|| same_die(gpu).find_map(|o| self.get(&op_key(class, phase, dtype, family, Some(&o.name)))))
            .or(cross)
    }

    /// Number of active models.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// True without models.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Active (key, version) pairs, sorted.
    pub fn versions(&self) -> Vec<(String, i64)> {
        let mut v: Vec<(String, i64)> = self.by_key.values().map(|m| (m.key.clone(), m.version)).collect();
        v.sort();
        v
    }
}

/// The same-die GPU ([`same_die`]) whose measurements `model` answers `gpu` with: None when the model's rows
/// (`summary.gpus`, canonical catalog names) hold `gpu` itself or name no GPU, else the first catalog GPU of the
/// same die among them. A learned operator model predicts r̂ = ln(t_measured / t_roofline) from features that include
/// the roofline's absolute times; asked at the features of a GPU it never saw, it answers for a GPU of another speed,
/// not for this die. Asked at the sibling's features, r̂ is the efficiency the die measured for the shape, and
/// t = t_roofline(`gpu`) · exp(r̂) carries it to this board's peaks — the rule [`Registry::op_on_family`]'s sibling
/// models follow, now also for a cross-GPU model that holds the sibling's rows but not this GPU's (GB300's
/// engine-neutral NVFP4 GEMMs: `linear.fwd.nvfp4` holds B200, GB200 and B300 rows, and B300's own model lost
/// promotion to it; asked at GB300's features it ran GB300's GEMMs only 1.04× faster than B300's, against the
/// 15,000 / 13,500 = 1.11× of their dense FP4 peaks).
pub fn measured_sibling(model: &ActiveRegressor, gpu: &GpuSpec) -> Option<&'static GpuSpec> {
    let gpus = model.summary.get("gpus")?.as_object()?;
    if gpus.contains_key(&gpu.name) {
        return None;
    }
    same_die(gpu).find(|o| gpus.contains_key(&o.name))
}

/// The catalog GPUs built from the same die with the same memory as `gpu` (same vendor, compute capability, SM
/// count, L2 and DRAM bandwidth), `gpu` itself excluded, in catalog order: GB200 and B200, GB300 and B300 (also the
/// V100 boards), whose datasheets carry their power difference as a clock difference ([`power_in_the_clock`]: not
/// the 40 GB A100 PCIe and SXM4 boards). Such boards differ only in their power limit and the clock it sustains
/// (GB200 NVL72 1,200 W and GB300 1,400 W per GPU against HGX B200 1,000 W and B300 1,100 W), which their datasheets
/// state as higher peaks (dense FP8 5,000 against 4,500 TFLOP/s, FP32 80 / 83.3 against 75: `hw::catalog`). A learned operator model predicts the
/// log-ratio of the measured time to the roofline of the GPU it is asked about, so a sibling's model answers with
/// the sibling's measured kernel efficiency at this GPU's own peaks and bandwidth: on the same die the kernels are
/// the same and the fraction of the peak they reach is too, while the cross-GPU model of other dies (Hopper,
/// Ampere, Ada) knows neither the die's attention (Blackwell Ultra's doubled SFU exponential rate, NVIDIA
/// technical blog "Inside NVIDIA Blackwell Ultra", 2025) nor its GEMM efficiency. Hopper's boards (H100, H200,
/// GH200) differ in memory and are not siblings.
pub fn same_die(gpu: &GpuSpec) -> impl Iterator<Item = &'static GpuSpec> + '_ {
    crate::hw::catalog().iter().map(|c| &c.spec).filter(move |o| {
        o.name != gpu.name
            && o.vendor == gpu.vendor
            && o.compute_capability.is_some()
            && o.compute_capability == gpu.compute_capability
            && o.sm_count == gpu.sm_count
            && o.l2_mib == gpu.l2_mib
            && o.memory_bandwidth_gbs == gpu.memory_bandwidth_gbs
            && power_in_the_clock(o, gpu)
    })
}

/// Whether the datasheets of two boards of one die state their power limits' difference as a clock difference:
/// the board with the higher power limit has the higher boost clock, or both are equal. A100 PCIe 40 GB (250 W)
/// and SXM4 40 GB (400 W) share the 1.41 GHz clock and the peaks, so the PCIe board's sustained slowdown is in
/// neither roofline and its measurements would make the SXM4 board slow (NeuSight's three fp32 A100 SXM4 40 GB
/// 4-GPU rows went from +4.4 % to +8.4 % signed with the PCIe board's models, `eval training --leave-source-out`,
/// 2026-11-27). Unknown power limits count as equal.
fn power_in_the_clock(a: &GpuSpec, b: &GpuSpec) -> bool {
    let (pa, pb) = (a.tdp_watts.unwrap_or(0.0), b.tdp_watts.unwrap_or(0.0));
    let watts = pa.partial_cmp(&pb);
    let clock = a.clock_ghz.partial_cmp(&b.clock_ghz);
    a.tdp_watts.is_none() || b.tdp_watts.is_none() || watts == clock
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::lookup;
    use crate::learn::lgbm::{train, Model};

    fn model(key: &str) -> ActiveRegressor {
        let x: Vec<f64> = (0..20).map(f64::from).collect();
        let y = vec![0.1f32; 20];
        let text = train(&x, &y, 1, "objective=regression num_leaves=2 min_data_in_leaf=2", 1).unwrap();
        ActiveRegressor {
            key: key.into(),
            version: 1,
            model: Model::from_text(&text).unwrap(),
            feature_names: vec!["x".into()],
            validation_mape: 0.0,
            summary: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_models_fitted_extent_per_dimension_is_read_from_its_summary() {
        // A GEMM model's summary (`SetSummary::dims_max`: B, M, N, K, …): M = 16,384 rows, K = 8,192.
        let mut m = model("linear.fwd.bf16");
        m.summary = serde_json::json!({"dims_max": [1, 16384, 4096, 8192, 0], "max_nodes": 4});
        assert_eq!((m.trained_dim_max(1), m.trained_dim_max(3)), (Some(16_384), Some(8_192)));
        // Past the recorded dims, and a summary without dims (a collective's): unknown.
        assert_eq!((m.trained_dim_max(5), m.trained_max("max_nodes")), (None, Some(4.0)));
        assert_eq!(model("allreduce").trained_dim_max(1), None);
    }

    #[test]
    fn fp16_takes_the_gpus_own_bf16_model_before_a_cross_gpu_fp16_one() {
        let r = Registry::new([model("linear.fwd.bf16.A100-SXM4-80GB"), model("linear.fwd.fp16")]);
        let key = |gpu: &str, p: Precision| {
            r.op_on(OpClass::Linear, Phase::Fwd, p, &lookup(gpu).unwrap().spec).map(|m| m.key.clone())
        };
        // A100: fp16 and bf16 at 312 TFLOP/s — its own bf16 model.
        assert_eq!(key("A100-SXM4-80GB", Precision::Fp16).as_deref(), Some("linear.fwd.bf16.A100-SXM4-80GB"));
        // V100 has no bf16 path; H100 has no own model: the cross-GPU fp16 one.
        assert_eq!(key("V100-SXM2", Precision::Fp16).as_deref(), Some("linear.fwd.fp16"));
        assert_eq!(key("H100-SXM5-80GB", Precision::Fp16).as_deref(), Some("linear.fwd.fp16"));
        // An own fp16 model wins; bf16 questions never take an fp16 model.
        let r2 = Registry::new([model("linear.fwd.bf16.A100-SXM4-80GB"), model("linear.fwd.fp16.A100-SXM4-80GB")]);
        let a100 = &lookup("A100-SXM4-80GB").unwrap().spec;
        assert_eq!(
            r2.op_on(OpClass::Linear, Phase::Fwd, Precision::Fp16, a100).unwrap().key,
            "linear.fwd.fp16.A100-SXM4-80GB"
        );
        assert!(Registry::new([model("linear.fwd.fp16")])
            .op_on(OpClass::Linear, Phase::Fwd, Precision::Bf16, a100)
            .is_none());
    }
    #[test]
    fn the_same_die_pairs_boards_of_one_die_and_memory() {
        // Every sibling pair of the catalog: the Blackwell die (cc 10.0, 148 SMs, 126 MiB L2, 8 TB/s) on HGX B200 and
        // in GB200, the Blackwell Ultra die (cc 10.3) on HGX B300 and in GB300; GV100 (80 SMs, 6 MiB L2, 900 GB/s) on
        // the PCIe 32 GB (250 W, 1.38 GHz) and both SXM2 boards (300 W, 1.53 GHz). Not GA100 with 40 GB at 1,555 GB/s
        // on the PCIe (250 W) and SXM4 (400 W) boards: one clock, 1.41 GHz, for both power limits. Hopper's
        // boards differ in memory (H100 SXM 3,350 GB/s, H200 4,800, GH200 4,000), the 80 GB A100s (1,935 PCIe,
        // 2,039 SXM4) from each other and from the 40 GB ones.
        let mut pairs: Vec<(String, String)> = crate::hw::catalog()
            .iter()
            .flat_map(|c| same_die(&c.spec).map(move |o| (c.spec.name.clone(), o.name.clone())))
            .collect();
        pairs.sort();
        let expected = [
            ("B200", "GB200"),
            ("B300", "GB300"),
            ("GB200", "B200"),
            ("GB300", "B300"),
            ("V100-PCIE-32GB", "V100-SXM2"),
            ("V100-PCIE-32GB", "V100-SXM2-16GB"),
            ("V100-SXM2", "V100-PCIE-32GB"),
            ("V100-SXM2", "V100-SXM2-16GB"),
            ("V100-SXM2-16GB", "V100-PCIE-32GB"),
            ("V100-SXM2-16GB", "V100-SXM2"),
        ];
        assert_eq!(pairs, expected.map(|(a, b)| (a.to_string(), b.to_string())).to_vec());
    }

    #[test]
    fn a_gpu_without_a_model_takes_its_same_die_siblings_before_the_cross_gpu_one() {
        let r = Registry::new([
            model("linear.fwd.fp8"),
            model("linear.fwd.fp8.B300"),
            model("linear.fwd.fp8.H100-SXM5-80GB"),
            model("attention_prefill.fwd.bf16.sglang.GB300"),
        ]);
        let key = |gpu: &str, class: OpClass, dtype: Precision, family: Option<KernelFamily>| {
            r.op_on_family(class, Phase::Fwd, dtype, family, &lookup(gpu).unwrap().spec).map(|m| m.key.clone())
        };
        let fp8 = |gpu: &str| key(gpu, OpClass::Linear, Precision::Fp8, None);
        // GB300 has none of its own: B300's (same die) before the cross-GPU model; B300 keeps its own.
        assert_eq!(fp8("GB300").as_deref(), Some("linear.fwd.fp8.B300"));
        assert_eq!(fp8("B300").as_deref(), Some("linear.fwd.fp8.B300"));
        // H200 is not H100's sibling (other memory): the cross-GPU model; GB200 has no sibling model here.
        assert_eq!(fp8("H200").as_deref(), Some("linear.fwd.fp8"));
        assert_eq!(fp8("GB200").as_deref(), Some("linear.fwd.fp8"));
        // Siblings are looked up within the asked engine's models: B300 has no SGLang attention model, GB300 does.
        let sglang = Some(KernelFamily::Sglang);
        assert_eq!(
            key("B300", OpClass::AttentionPrefill, Precision::Bf16, sglang).as_deref(),
            Some("attention_prefill.fwd.bf16.sglang.GB300")
        );
        assert_eq!(key("B300", OpClass::AttentionPrefill, Precision::Bf16, None), None);
        // One rule for every caller: a serving engine's own models are looked up the same way (GB300 takes B300's
        // TensorRT-LLM fp8 GEMM model before the cross-GPU TensorRT-LLM one).
        let r = Registry::new([model("linear.fwd.fp8.trtllm"), model("linear.fwd.fp8.trtllm.B300")]);
        let gb300 = &lookup("GB300").unwrap().spec;
        let trtllm = r.op_on_family(OpClass::Linear, Phase::Fwd, Precision::Fp8, Some(KernelFamily::Trtllm), gb300);
        assert_eq!(trtllm.unwrap().key, "linear.fwd.fp8.trtllm.B300");
    }
}
