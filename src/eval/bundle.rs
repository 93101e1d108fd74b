//! `perfcast models bundle`: builds the bundle a fresh install serves from (`crate::bundle`) out of the train
//! split of `../shared/data` (DATA.md).
//!
//! What goes in:
//! - operators: aiconfigurator's GEMM, prefill / decode attention and MoE tables of all six GPUs as vLLM,
//!   TensorRT-LLM and SGLang measured them, and the latter two's fp8 activation quantization tables (their
//!   leave-one-GPU-out rule is for *evaluation*; a shipped model may train on all six), each sample keeping its
//!   engine, kernel and attention compute precision (the per-engine keys train on them); NeuSight's train split
//!   (`train_collect`, `train_processed`, AMD `train_processed_*`), DeepBench's GEMMs and XLA's sm_90 matmul table —
//!   the files `perfcast eval operators` trains on, plus aiconfigurator;
//! - collectives: the train rows `perfcast eval comm` calibrates on (vTrain's A100/V100 all-reduce LUT, SuperBench's
//!   NDv4/NDmv4 all-reduce, the H100 clusters' rows with at most 2 nodes), each on its own system, and
//!   aiconfigurator's one-node NCCL tables (one system per GPU). Its vLLM custom all-reduce tables are left out:
//!   they time vLLM's own kernel (NCCL only for large messages), which training frameworks do not use, and the
//!   `comm.all_reduce` model has no feature that tells the implementations apart — mixing them would teach the
//!   NCCL model vLLM's small-message times.
//!
//! Thinning: per regressor key (class, phase, dtype, engine), on the kernel the engine runs where a shape was
//! measured by several ([`kernel_mask`], as the retrain does), at most `max_rows_per_key` samples, shared out evenly over the
//! key's GPUs (a GPU with fewer rows keeps all of them, the rest go to the others), and within a GPU a uniform
//! sample by a hash of the row's content ([`thin_by_key`]: no aliasing with the tables' grid order); per
//! communication system and collective the same cap. Times keep five significant digits.
//!
//! Then the parts are installed into a fresh database by the same code a first start runs ([`bundle::install`],
//! so every split key is the one a user's database will have), the bundled systems are calibrated, the retrain job
//! trains every key exactly as the worker does (`force`, the configured grid, promotion), and the active versions
//! are exported with the manifest (without their hold-out twins).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::comm::{h100_rows, superbench_rows, systems as comm_systems, vtrain_rows};
use super::datasets;
use super::operators::{parse_neusight, training_files};
use crate::bundle::write::{comm_jsonl, compress_models, gzip, op_jsonl, tar, write_dir};
use crate::bundle::{self, Bundle, Manifest, ModelEntry, Part, ShippedModel};
use crate::hw::{lookup, GpuRef, Link, Precision, SystemSpec};
use crate::ingest::{self, Context, Format};
use crate::jobs::retrain::retrain;
use crate::jobs::{self, Job, JobKind, RetrainJob, RetrainParams, WorkerConfig};
use crate::learn::fit::thin_by_key;
use crate::learn::op_data::{kernel_mask, KernelView};
use crate::learn::{op_key, registry, Grid};
use crate::op::Collective;
use crate::samples::{compute_dtype, CommSample, OpSample, Sample};
use crate::store::Store;

/// How to build the bundle.
#[derive(Debug, Clone)]
pub struct Options {
    /// `../shared/data`.
    pub data: PathBuf,
    /// Where the bundle's files go (`models/bundled`).
    pub out: PathBuf,
    /// Most samples per regressor key (and per communication system and collective).
    pub max_rows_per_key: usize,
    /// Hyper-parameter grid of the retrain.
    pub grid: Grid,
    /// The worker settings of a default install (`per_gpu_min_samples`, `max_training_rows`).
    pub per_gpu_min_samples: u64,
    pub max_training_rows: usize,
    /// Git commit of the tree building it (`-dirty` when it has changes).
    pub commit: Option<String>,
}

/// The aiconfigurator GPU folders (DATA.md: all six are train data for a shipped model).
pub const AIC_GPUS: [&str; 6] = ["a100_sxm", "h100_sxm", "b200_sxm", "gb200", "b300_sxm", "l40s"];

/// The aiconfigurator operator tables of the vLLM folders (`<gpu>/<table>.csv.gz`).
const AIC_OP_TABLES: [&str; 4] = ["gemm_perf", "context_attention_perf", "generation_attention_perf", "moe_perf"];

/// The operator tables of the TensorRT-LLM and SGLang folders (`<gpu>/<engine>/<table>.csv.gz`, where present):
/// vLLM's four and the activation quantization kernels (`scale_matrix_perf`, `computescale_perf`).
const AIC_ENGINE_TABLES: [&str; 6] = [
    "gemm_perf",
    "context_attention_perf",
    "generation_attention_perf",
    "moe_perf",
    "scale_matrix_perf",
    "computescale_perf",
];

/// The file of `table` in `engine`'s folder of `gpu`: on B200, B300 and GB200 TensorRT-LLM's full MoE table is
/// `moe_perf_1.3.0rc20.csv.gz` (its `moe_perf.csv.gz` holds only DeepSeek-V4 shapes: DATA.md).
fn aic_engine_table(data: &Path, gpu: &str, engine: &str, table: &str) -> PathBuf {
    let dir = data.join("aiconfigurator").join(gpu).join(engine);
    let full_moe = dir.join("moe_perf_1.3.0rc20.csv.gz");
    if engine == "trtllm" && table == "moe_perf" && full_moe.exists() {
        return full_moe;
    }
    dir.join(format!("{table}.csv.gz"))
}

/// The attributes a bundled sample keeps: whose kernels measured it and which (the `engine`, `kernel_source` and
/// `compute_dtype` columns a first start stores, `crate::store::profiles::engine_columns`).
const KEPT_ATTRIBUTES: [&str; 3] = ["backend", "kernel_source", "attn_dtype"];

/// A stable hash of a sample's content (FNV-1a over its debug form): its rank when thinning.
fn content_key(s: &impl std::fmt::Debug) -> u64 {
    format!("{s:?}").bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// [`content_key`] of an operator sample without its attributes: the rank a row had before bundled samples kept
/// their engine, so the engine-neutral and vLLM keys thin to the same rows as then.
fn op_content_key(s: &OpSample) -> u64 {
    let bare = OpSample { attributes: Default::default(), gpu: s.gpu.clone(), ..*s };
    content_key(&bare)
}

/// Operator samples of one dataset, GPUs resolved to catalog names (rows on GPUs outside the catalog dropped),
/// attributes dropped but for [`KEPT_ATTRIBUTES`].
struct Dataset {
    name: &'static str,
    description: String,
    samples: Vec<OpSample>,
    source_rows: u64,
}

fn keep_known_gpus(samples: Vec<OpSample>) -> Vec<OpSample> {
    samples
        .into_iter()
        .filter_map(|mut s| {
            s.gpu = lookup(&s.gpu)?.spec.name.clone();
            s.attributes.retain(|k, _| KEPT_ATTRIBUTES.contains(&k.as_str()));
            Some(s)
        })
        .collect()
}

fn read_ops(path: &Path, progress: &mut dyn FnMut(&str)) -> Result<Vec<OpSample>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let parsed = ingest::parse(Format::Aiconfigurator, &bytes, &Context::default())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let ops: Vec<OpSample> =
        parsed.samples.into_iter().filter_map(|s| if let Sample::Op(o) = s { Some(o) } else { None }).collect();
    progress(&format!("{}: {} operator samples", path.display(), ops.len()));
    Ok(keep_known_gpus(ops))
}

/// aiconfigurator's operator tables: vLLM's folders (dataset `aiconfigurator`), TensorRT-LLM's
/// (`aiconfigurator-trtllm`) and SGLang's (`aiconfigurator-sglang`).
fn aiconfigurator_ops(data: &Path, progress: &mut dyn FnMut(&str)) -> Result<Vec<Dataset>, String> {
    let mut vllm = Vec::new();
    for gpu in AIC_GPUS {
        for table in AIC_OP_TABLES {
            vllm.extend(read_ops(&data.join("aiconfigurator").join(gpu).join(format!("{table}.csv.gz")), progress)?);
        }
    }
    let mut out = vec![Dataset {
        name: "aiconfigurator",
        description: "NVIDIA aiconfigurator's performance database (Apache-2.0), vLLM's kernels: GEMM (bf16, fp8, \
                      fp8_block, nvfp4), prefill and decode attention, fused MoE on A100-SXM, H100-SXM, B200, GB200, \
                      B300 and L40S"
            .into(),
        source_rows: vllm.len() as u64,
        samples: vllm,
    }];
    for (engine, name, label) in
        [("trtllm", "aiconfigurator-trtllm", "TensorRT-LLM's"), ("sglang", "aiconfigurator-sglang", "SGLang's")]
    {
        let mut samples = Vec::new();
        for gpu in AIC_GPUS {
            for table in AIC_ENGINE_TABLES {
                let path = aic_engine_table(data, gpu, engine, table);
                if path.exists() {
                    samples.extend(read_ops(&path, progress)?);
                }
            }
        }
        out.push(Dataset {
            name,
            description: format!(
                "NVIDIA aiconfigurator's performance database (Apache-2.0), {label} kernels: GEMM (bf16, fp8, \
                 fp8_block, nvfp4), prefill and decode attention (fp8 KV and FP8 FMHA), fused MoE, the fp8 \
                 activation quantization kernels, on the same six GPUs"
            ),
            source_rows: samples.len() as u64,
            samples,
        });
    }
    Ok(out)
}

fn operator_datasets(data: &Path, progress: &mut dyn FnMut(&str)) -> Result<Vec<Dataset>, String> {
    let mut out = aiconfigurator_ops(data, progress)?;
    let (mut neusight, mut deepbench, mut xla) = (Vec::new(), Vec::new(), Vec::new());
    for (path, kind) in training_files(data) {
        match kind {
            "deepbench" => deepbench.extend(datasets::deepbench_gemm(&path)?),
            "xla" => xla.extend(datasets::xla_matmul(&path)?),
            _ => neusight.extend(parse_neusight(&path)?),
        }
    }
    for (name, description, samples) in [
        ("neusight", "NeuSight's train split (train_collect, train_processed, AMD train_processed): FP32 GEMMs and vector ops on P4, P100, T4, V100, A100-PCIe-40GB, MI100, MI210", neusight),
        ("deepbench", "DeepBench's dense GEMM results (fp32, fp16) on older GPUs", deepbench),
        ("xla_gpu_perf_tables", "XLA's default matmul performance table, sm_90 rows read as H100-SXM5-80GB (bf16, tf32, fp8)", xla),
    ] {
        let source_rows = samples.len() as u64;
        let samples = keep_known_gpus(samples);
        progress(&format!("{name}: {} operator samples on catalog GPUs", samples.len()));
        out.push(Dataset { name, description: description.into(), samples, source_rows });
    }
    Ok(out)
}

/// Shares `budget` rows out over groups of the given sizes: every group gets an equal share, a group with fewer
/// rows keeps them all and leaves the rest to the others (water filling). Returns each group's allowance.
pub fn share_out(sizes: &[usize], budget: usize) -> Vec<usize> {
    let mut allowed = vec![0usize; sizes.len()];
    let mut open: Vec<usize> = (0..sizes.len()).collect();
    let mut left = budget;
    while !open.is_empty() && left > 0 {
        let share = (left / open.len()).max(1);
        let mut next = Vec::new();
        for &i in &open {
            let want = sizes[i] - allowed[i];
            let give = want.min(share).min(left);
            allowed[i] += give;
            left -= give;
            if allowed[i] < sizes[i] {
                next.push(i);
            }
        }
        open = next;
    }
    allowed
}

/// Thins every dataset's samples to at most `max` per key (over all datasets; the key's engine included), shared
/// out over the key's GPUs, after keeping one kernel per measured shape as training does ([`kernel_mask`]).
fn thin_operators(sets: &mut [Dataset], max: usize) {
    // key → (dtype, its rows as (dataset index, sample index)).
    let mut keys: BTreeMap<String, (Precision, Vec<(usize, usize)>)> = BTreeMap::new();
    for (d, set) in sets.iter().enumerate() {
        for (i, s) in set.samples.iter().enumerate() {
            let key = op_key(s.op, s.phase, s.dtype, s.kernel_family(), None);
            keys.entry(key).or_insert_with(|| (s.dtype, Vec::new())).1.push((d, i));
        }
    }
    let compute: Vec<Vec<&'static str>> = sets
        .iter()
        .map(|set| set.samples.iter().map(|s| compute_dtype(&s.attributes).map_or("", |p| p.as_str())).collect())
        .collect();
    let mut groups: BTreeMap<String, BTreeMap<String, Vec<(usize, usize)>>> = BTreeMap::new();
    for (key, (dtype, rows)) in keys {
        let views: Vec<KernelView> = rows
            .iter()
            .map(|&(d, i)| {
                let s = &sets[d].samples[i];
                KernelView {
                    gpu: &s.gpu,
                    dims: s.dims,
                    kernel: s.attributes.get("kernel_source").map_or("", |k| k.as_str()),
                    compute_dtype: compute[d][i],
                }
            })
            .collect();
        let keep = kernel_mask(&views, dtype);
        let by_gpu = groups.entry(key).or_default();
        for (&(d, i), _) in rows.iter().zip(keep).filter(|(_, k)| *k) {
            by_gpu.entry(sets[d].samples[i].gpu.clone()).or_default().push((d, i));
        }
    }
    let mut keep: Vec<Vec<bool>> = sets.iter().map(|s| vec![false; s.samples.len()]).collect();
    for by_gpu in groups.values() {
        let sizes: Vec<usize> = by_gpu.values().map(Vec::len).collect();
        for (rows, allowed) in by_gpu.values().zip(share_out(&sizes, max)) {
            let kept = thin_by_key(rows.clone(), allowed, |&(d, i)| op_content_key(&sets[d].samples[i]));
            for (d, i) in kept {
                keep[d][i] = true;
            }
        }
    }
    for (set, keep) in sets.iter_mut().zip(keep) {
        let samples = std::mem::take(&mut set.samples);
        set.samples = samples.into_iter().zip(keep).filter_map(|(s, k)| k.then_some(s)).collect();
    }
}

/// The name of the bundled system for a dataset's machine (prefixed so it cannot take a user's system name).
fn bundled_name(name: &str) -> String {
    format!("bundled-{name}")
}

/// One node of aiconfigurator's system `gpu` (its `systems/<gpu>.yaml`: GPUs per node, NVLink / PCIe bandwidth
/// per GPU and direction, NIC bandwidth per GPU; the NIC numbers only matter beyond one node, which its NCCL tables
/// never measure).
fn aic_system(gpu: &str) -> Option<SystemSpec> {
    // (catalog GPU, GPUs per node, intra-node link, GB/s per GPU, NIC GB/s per GPU).
    let (catalog, per_node, link, intra, nic) = match gpu {
        "a100_sxm" => ("A100-SXM4-80GB", 8, "nvswitch", 300.0, 25.0),
        "h100_sxm" => ("H100-SXM5-80GB", 8, "nvswitch", 450.0, 50.0),
        "b200_sxm" => ("B200", 8, "nvswitch", 900.0, 100.0),
        "b300_sxm" => ("B300", 8, "nvswitch", 900.0, 100.0),
        "gb200" => ("GB200", 4, "nvswitch", 900.0, 900.0),
        "l40s" => ("L40S", 8, "pcie4", 32.0, 50.0),
        _ => return None,
    };
    Some(SystemSpec {
        name: bundled_name(&format!("aic-{}", gpu.replace('_', "-"))),
        gpu: GpuRef::Name(catalog.into()),
        gpus_per_node: per_node,
        nodes: 1,
        intra_node: Link::new(link, intra, 2.0),
        inter_node: Link { nics: Some(per_node), ..Link::new("infiniband", nic * per_node as f64, 5.0) },
        description: Some(format!(
            "bundled: one node of aiconfigurator's {gpu} system (systems/{gpu}.yaml), where its NCCL tables were measured"
        )),
    })
}

/// One communication part: a system and its samples.
struct CommSet {
    system: SystemSpec,
    dataset: &'static str,
    samples: Vec<CommSample>,
    source_rows: u64,
}

fn comm_sets(data: &Path, progress: &mut dyn FnMut(&str)) -> Result<Vec<CommSet>, String> {
    let specs: BTreeMap<String, SystemSpec> = comm_systems().into_iter().map(|s| (s.name.clone(), s)).collect();
    let mut from_eval: Vec<(String, &'static str, Vec<CommSample>)> = Vec::new();
    for (system, rows) in vtrain_rows(data)? {
        from_eval.push((system, "vtrain", rows));
    }
    for (system, rows) in superbench_rows(data)? {
        from_eval.push((system, "superbench_results", rows));
    }
    let (cluster00, cluster01, _) = h100_rows(data)?;
    from_eval.push(("h100-cluster".into(), "nccl_tests_h100_cluster", cluster01));
    from_eval.push(("h100-cluster00".into(), "nccl_tests_h100_cluster", cluster00));
    let mut out = Vec::new();
    for (name, dataset, samples) in from_eval {
        let mut system = specs.get(&name).cloned().ok_or(format!("no system {name}"))?;
        system.name = bundled_name(&name);
        system.description = system.description.map(|d| format!("bundled: {d}"));
        out.push(CommSet { system, dataset, source_rows: samples.len() as u64, samples });
    }
    for gpu in AIC_GPUS {
        let path = data.join("aiconfigurator").join(gpu).join("nccl_perf.csv.gz");
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let parsed = ingest::parse(Format::Aiconfigurator, &bytes, &Context::default())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let samples: Vec<CommSample> = parsed
            .samples
            .into_iter()
            .filter_map(|s| {
                if let Sample::Comm(mut c) = s {
                    c.attributes.clear();
                    Some(c)
                } else {
                    None
                }
            })
            .collect();
        let system = aic_system(gpu).ok_or(format!("no system for {gpu}"))?;
        progress(&format!("{gpu}/nccl_perf: {} samples", samples.len()));
        out.push(CommSet { system, dataset: "aiconfigurator", source_rows: samples.len() as u64, samples });
    }
    Ok(out)
}

fn thin_comm(set: &mut CommSet, max: usize) {
    let mut by_collective: BTreeMap<Collective, Vec<CommSample>> = BTreeMap::new();
    for s in std::mem::take(&mut set.samples) {
        by_collective.entry(s.collective).or_default().push(s);
    }
    for (_, rows) in by_collective {
        set.samples.extend(thin_by_key(rows, max, content_key));
    }
}

/// Builds the bundle into `opts.out` and returns its manifest. `progress` gets human-readable steps.
pub async fn build(opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Manifest, String> {
    let started = Instant::now();
    let mut op_sets = operator_datasets(&opts.data, progress)?;
    let before: usize = op_sets.iter().map(|d| d.samples.len()).sum();
    thin_operators(&mut op_sets, opts.max_rows_per_key);
    let after: usize = op_sets.iter().map(|d| d.samples.len()).sum();
    progress(&format!("operators: {before} samples thinned to {after} (at most {} per key)", opts.max_rows_per_key));
    let mut comm = comm_sets(&opts.data, progress)?;
    for c in &mut comm {
        thin_comm(c, opts.max_rows_per_key);
    }

    let mut files = Vec::new();
    let mut parts = Vec::new();
    for d in &op_sets {
        let file = format!("{}.jsonl.gz", d.name);
        let gz = gzip(&op_jsonl(&d.samples)).map_err(|e| e.to_string())?;
        parts.push(Part {
            file: file.clone(),
            dataset: d.name.into(),
            system: None,
            description: d.description.clone(),
            samples: d.samples.len() as u64,
            source_rows: d.source_rows,
        });
        files.push((file, gz));
    }
    for c in &comm {
        let file = format!("comm-{}.jsonl.gz", c.system.name);
        let gz = gzip(&comm_jsonl(&c.samples)).map_err(|e| e.to_string())?;
        parts.push(Part {
            file: file.clone(),
            dataset: c.dataset.into(),
            system: Some(c.system.name.clone()),
            description: format!("collectives measured on {}", c.system.description.clone().unwrap_or_default()),
            samples: c.samples.len() as u64,
            source_rows: c.source_rows,
        });
        files.push((file, gz));
    }
    let samples_tar = tar(&files).map_err(|e| e.to_string())?;
    let mut manifest = Manifest {
        format: 1,
        version: String::new(),
        commit: opts.commit.clone(),
        perfcast_version: env!("CARGO_PKG_VERSION").into(),
        created_at: String::new(),
        command: bundle::REGENERATE.into(),
        max_rows_per_key: opts.max_rows_per_key,
        grid: opts.grid,
        build_seconds: 0.0,
        parts,
        systems: comm.iter().map(|c| c.system.clone()).collect(),
        models: Vec::new(),
        samples_bytes: samples_tar.len() as u64,
        models_bytes: 0,
    };
    progress(&format!("training set: {} bytes in {} parts", samples_tar.len(), manifest.parts.len()));

    // Train exactly as a database with these samples would: the first-start install, calibrations, a retrain.
    let tmp = std::env::temp_dir().join(format!("perfcast-bundle-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let store = Store::open(&tmp.join("bundle.db")).await.map_err(|e| e.to_string())?;
    let result = train(&store, opts, &mut manifest, &samples_tar, progress).await;
    store.close().await;
    let _ = std::fs::remove_dir_all(&tmp);
    let (models, created_at) = result?;
    let json = serde_json::to_vec(&models).map_err(|e| e.to_string())?;
    let models_zst = compress_models(&json).map_err(|e| e.to_string())?;
    manifest.created_at = created_at;
    manifest.build_seconds = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
    write_dir(&opts.out, manifest, &samples_tar, &models_zst).map_err(|e| format!("{}: {e}", opts.out.display()))
}

/// Installs the training set into `store`, calibrates its systems, retrains every key and returns the active
/// versions as shipped models with the time of the newest.
async fn train(
    store: &Store,
    opts: &Options,
    manifest: &mut Manifest,
    samples_tar: &[u8],
    progress: &mut dyn FnMut(&str),
) -> Result<(Vec<ShippedModel>, String), String> {
    let unversioned = Bundle { manifest: manifest.clone(), samples_tar: samples_tar.to_vec(), models_zst: Vec::new() };
    let startup = crate::service::startup::Startup::default();
    let report = bundle::install(store, &unversioned, false, &startup).await.map_err(|e| e.to_string())?;
    progress(&format!("installed {:?}", report.map(|r| (r.profiles, r.samples, r.seconds))));
    for s in &manifest.systems {
        crate::jobs::calibrate::calibrate_system(store, &s.name).await.map_err(|e| e.to_string())?;
    }
    progress("training every key (the retrain job, forced)");
    let t = Instant::now();
    let job = jobs::enqueue(store, &Job::Retrain(RetrainJob::automatic("bundle"))).await.map_err(|e| e.to_string())?;
    store.claim_job(&[JobKind::Retrain.as_str()]).await.map_err(|e| e.to_string())?;
    let cfg = WorkerConfig {
        grid: opts.grid,
        per_gpu_min_samples: opts.per_gpu_min_samples,
        max_training_rows: opts.max_training_rows,
        time_limit: std::time::Duration::from_secs(24 * 3600),
        ..WorkerConfig::default()
    };
    let params = RetrainParams { force: true, grid: Some(opts.grid), keys: None };
    let result = retrain(store, &registry::shared(), &cfg, job.id, &params).await.map_err(|e| e.to_string())?;
    progress(&format!(
        "trained {} versions, {} active, in {:.0} s",
        result.trained,
        result.activated,
        t.elapsed().as_secs_f64()
    ));
    let mut models = Vec::new();
    let mut newest = String::new();
    // The hold-out twins stay out of the bundle (half its size; see `crate::bundle`).
    for (r, _holdout) in store.active_regressors_with_holdout().await.map_err(|e| e.to_string())? {
        let model = r.model.clone().unwrap_or_default();
        manifest.models.push(ModelEntry {
            key: r.key.clone(),
            family: r.family.clone(),
            scope: r.scope.clone(),
            datasets: r.provenance.datasets.clone(),
            samples: r.fit.samples,
            train_rows: r.fit.train_rows,
            validation_rows: r.fit.validation_rows,
            features: r.feature_names.clone(),
            hyper_parameters: r.fit.candidate.clone(),
            validation_mape: r.fit.validation_mape,
            analytic_validation_mape: r.fit.analytic_validation_mape,
            model_bytes: model.len() as u64,
        });
        newest = newest.max(r.created_at.clone());
        models.push(ShippedModel {
            key: r.key,
            family: r.family,
            scope: r.scope,
            features: r.feature_names,
            fit: r.fit,
            datasets: r.provenance.datasets,
            trained_at: r.created_at,
            model,
            holdout_model: String::new(),
        });
    }
    Ok((models, newest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_shared_out_evenly_and_small_groups_keep_theirs() {
        // 100 rows over groups of 10, 50 and 80: the small group keeps 10, the other two split the 90 left.
        assert_eq!(share_out(&[10, 50, 80], 100), vec![10, 45, 45]);
        assert_eq!(share_out(&[10, 20], 100), vec![10, 20]);
        assert_eq!(share_out(&[5, 5, 5], 9), vec![3, 3, 3]);
        assert_eq!(share_out(&[], 9), Vec::<usize>::new());
    }
}
