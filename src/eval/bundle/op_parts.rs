//! The operator parts of the bundle: aiconfigurator's tables of every engine and NeuSight's, DeepBench's and XLA's
//! train split, read into one dataset each, and their thinning per regressor key (module doc of the parent).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::super::datasets;
use super::super::operators::{parse_neusight, training_files};
use super::{content_key, AIC_GPUS};
use crate::hw::{lookup, Precision};
use crate::ingest::{self, Context, Format};
use crate::learn::fit::thin_by_key;
use crate::learn::op_data::{kernel_mask, KernelView};
use crate::learn::op_key;
use crate::samples::{compute_dtype, OpSample, Sample};

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

/// [`content_key`] of an operator sample without its attributes: the rank a row had before bundled samples kept
/// their engine, so the engine-neutral and vLLM keys thin to the same rows as then.
fn op_content_key(s: &OpSample) -> u64 {
    let bare = OpSample { attributes: Default::default(), gpu: s.gpu.clone(), ..*s };
    content_key(&bare)
}

/// Operator samples of one dataset, GPUs resolved to catalog names (rows on GPUs outside the catalog dropped),
/// attributes dropped but for [`KEPT_ATTRIBUTES`].
pub(super) struct Dataset {
    pub(super) name: &'static str,
    pub(super) description: String,
    pub(super) samples: Vec<OpSample>,
    pub(super) source_rows: u64,
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

/// Every operator dataset of the bundle from `data`: aiconfigurator's and the operator eval's train files.
///
/// Errors: a file that cannot be read or parsed.
pub(super) fn operator_datasets(data: &Path, progress: &mut dyn FnMut(&str)) -> Result<Vec<Dataset>, String> {
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
pub(super) fn thin_operators(sets: &mut [Dataset], max: usize) {
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
