//! The measured runs of `aiconfigurator/serving_runs_blackwell.csv` as serving requests (DATA.md's traps applied):
//! the 668 exact copies dropped, the client concurrency read from `silicon_data_source`, GPUs per worker =
//! `tp_size` × `attention_dp_size` × `pp_size` (but for the rows whose dump squared it, [`unsquared`]), and each
//! run's deployment, model and GPU kept for the splits. Beyond the exact copies, one measurement is often filed
//! again under other labels (another model id of the same weights, worker counts filled in or left empty, another
//! `backend_version`): such rows are kept once ([`one_per_measurement`]).
//!
//! **Replicas of an aggregated deployment.** `batch_size` is the batch of one attention-data-parallel rank of one
//! worker: in every disaggregated run that gives its decode worker count (231 of 231),
//! `silicon_concurrency` = `decode_batch_size` × `decode_attention_dp_size` × `decode_num_workers` exactly. An
//! aggregated run whose `batch_size` × `attention_dp_size` is below its concurrency therefore spread its clients
//! over concurrency / (`batch_size` × `attention_dp_size`) identical workers ([`replicas`]; 24 rows of the file, 11
//! with a stated precision: NVFP4 Qwen3-32B, DeepSeek-R1 and DeepSeek-V3.1 under TensorRT-LLM, e.g. 416 clients of a
//! tp-2 Qwen3-32B at `batch_size` 13: 32 workers). A closed loop of N clients over R identical
//! workers behind a balancing router keeps N/R clients on each, so the eval simulates one worker with N/R clients
//! (TTFT and TPOT are per request, the same on every worker).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde::Serialize;
use serde_json::json;

use super::dynamo_trt::{entry_of_row, fill_request};
use super::gpus_as_tp::gpus_as_tp;
use super::recipes::{
    runs_under_dynamo, sglang_kv_cache_dtype, sglang_recv_interval, trtllm_max_num_tokens,
    trtllm_template_graph_batch_sizes, WorkerRole,
};
use super::speculative::{columns, db_dump_measurements, inferencex_mtp, row_is_speculative};
use crate::hw::SystemSpec;
use crate::llm::serving::request::{Engine, InferenceRequest};

/// One measured run, ready to predict.
#[derive(Debug, Clone)]
pub struct RunRow {
    pub id: String,
    pub engine: Engine,
    /// `agg` or `disagg`.
    pub mode: String,
    /// aiconfigurator's system name (`b200_sxm`, `gb200`, …): the GPU.
    pub gpu: String,
    /// Hugging Face model id.
    pub model: String,
    pub precision: String,
    pub isl: u32,
    pub osl: u32,
    /// Closed-loop clients (of the whole deployment).
    pub concurrency: u32,
    /// Identical aggregated workers the clients were spread over ([`replicas`]; 1 for disaggregated runs).
    pub replicas: u32,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    /// Disaggregated worker counts were given (else one prefill and one decode worker are assumed).
    pub workers_known: bool,
    /// An InferenceX speculative-decoding (MTP) run ([`speculative`]): its request carries the run's speculative
    /// decoding ([`super::speculative::inferencex_mtp`]); reported apart.
    pub speculative: bool,
    /// The deployment: every configuration column but the concurrency and the measurements.
    pub deployment: String,
    pub request: InferenceRequest,
}

/// Requests the simulated benchmark sends per client: InferenceX's `--num-prompts` of 10 × concurrency
/// (`benchmarks/*.sh`, `--num-prompts "$((CONC * 10))"`), as genai-perf's `--request-count` in NVIDIA's published
/// benchmark scripts (the NVIDIA jobs' own count is not recorded).
pub const REQUESTS_PER_CLIENT: u32 = 10;

/// The benchmark client the runs are predicted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Client {
    /// Every run with its fixed input and output lengths (the clients of a run stay in step): the protocol the
    /// shipped interval bands were fitted on. The default.
    #[default]
    Fixed,
    /// The runs in InferenceX's shapes ([`INFERENCEX_SHAPES`]) with InferenceX's client: lengths uniform in
    /// [⌊0.8·L⌋, L] ([`INFERENCEX_MIN_LENGTH_RATIO`]); the others fixed.
    InferenceX,
}

/// The input / output lengths SemiAnalysis InferenceX benchmarks (`(ISL, OSL)` ∈ {(1024, 1024), (1024, 8192),
/// (8192, 1024)}): every run of the file in these shapes comes from its nightly runs or the gap-analysis exports
/// of them (`silicon_data_source`: `db-dump` with a `workflow_run_id`, dated exports naming the engine's image);
/// the others (4,000 / 1,000 and 15,000 / 500) are NVIDIA's own jobs (`gtl_task_id`), whose client is not known.
pub const INFERENCEX_SHAPES: [(u32, u32); 3] = [(1024, 1024), (1024, 8192), (8192, 1024)];

/// InferenceX's client draws each prompt and output length as an integer uniform in [⌊0.8·L⌋, L]:
/// `benchmarks/benchmark_lib.sh` `run_benchmark_serving` passes `--random-range-ratio $RANDOM_RANGE_RATIO` (0.8
/// in its recipes) to its copy of vLLM's `benchmark_serving.py` (`utils/bench_serving`), whose
/// `sample_random_requests` draws `np.random.randint(int(L · ratio), L + 1)`, with `--num-prompts` = 10 ×
/// concurrency ([`REQUESTS_PER_CLIENT`]) after 2 × concurrency warm-up requests that are not measured. Different
/// lengths end at different steps, so the clients fall out of step after the first wave.
pub const INFERENCEX_MIN_LENGTH_RATIO: f64 = 0.8;

/// Requests simulated for a run of `concurrency` clients generating `osl` tokens each: 10 per client, but no more
/// than 16 million generated tokens in all (at least 2 per client).
pub fn num_requests(concurrency: u32, osl: u32) -> u32 {
    let cap = (16_000_000 / osl.max(1)).max(2 * concurrency);
    (concurrency * REQUESTS_PER_CLIENT).min(cap).max(concurrency)
}

/// The perfcast systems of aiconfigurator's four Blackwell system names: the `dgx-b200`, `dgx-b300`, `gb200-nvl72`
/// and `gb300-nvl72` presets ([`crate::hw::presets`], each cited from its datasheet there).
pub fn systems() -> Vec<(&'static str, SystemSpec)> {
    let preset = |name: &str| {
        crate::hw::presets().into_iter().find(|p| p.name == name).unwrap_or_else(|| panic!("the {name} preset"))
    };
    vec![
        ("b200_sxm", preset("dgx-b200")),
        ("b300_sxm", preset("dgx-b300")),
        ("gb200", preset("gb200-nvl72")),
        ("gb300", preset("gb300-nvl72")),
    ]
}

/// The largest decode batch (per attention-DP rank) a TensorRT-LLM deployment of `batch_size` requests per rank
/// replays a CUDA graph for: aiconfigurator's generator writes `cuda_graph_config.batch_sizes` 1…512 plus
/// `max_batch_size` ± 8 for aggregated and decode workers (`src/aiconfigurator/generator/rule_plugin/trtllm.rule`,
/// `agg_decode cuda_graph_batch_sizes`, with `enable_padding`), so max(512, batch_size + 8); TensorRT-LLM's own
/// DeepSeek-R1 serving recipe likewise sets `cuda_graph_config.max_batch_size: 512`. Without it the engine's
/// default, 128, would leave larger decode batches eager, each kernel launched from Python.
pub fn trtllm_graph_max_batch(batch_size: Option<u32>) -> u32 {
    512.max(batch_size.unwrap_or(0).saturating_add(8))
}

/// Aggregated workers a run of `concurrency` clients at `batch_size` requests per attention-DP rank and
/// `attention_dp` ranks per worker ran on (see the module doc): concurrency / (batch_size · attention_dp) when that
/// divides evenly and exceeds 1, else 1 (no batch size given, or one that does not divide the clients).
pub fn replicas(concurrency: u32, batch_size: Option<u32>, attention_dp: u32) -> u32 {
    let per_worker = batch_size.unwrap_or(0) as u64 * attention_dp.max(1) as u64;
    if per_worker == 0 || per_worker >= concurrency as u64 || concurrency as u64 % per_worker != 0 {
        return 1;
    }
    (concurrency as u64 / per_worker) as u32
}

/// The (`tp_size`, `attention_dp_size`) of an aggregated run whose dump squared its GPU count, else as given.
///
/// One of the file's dumps writes a worker of W GPUs with MoE expert parallelism E as `moe_tp_size` = W,
/// `moe_ep_size` = E and `tp_size` (or `attention_dp_size`) = W × E. 224 aggregated rows on DGX B200 and B300 (8
/// GPUs a node; SGLang and TensorRT-LLM, DeepSeek) give 16 = 4 × 4 or 64 = 8 × 8 GPUs; 116 of them name the worker in
/// their id (`…_tp4_ep4_1049` at `tp_size` 16, `…_tp8_ep8_937` at `attention_dp_size` 64), and 53 measure to the
/// last digit what a row of the other dump measures under `tp_size` (or `attention_dp_size`) = W, `moe_tp_size` = 1,
/// `moe_ep_size` = E (e.g. DeepSeek NVFP4 under SGLang on B200 at 8k/1k and 4 clients: 317.14 ms / 9.15 ms as
/// `tp_size` 16, moe 4 × 4 and as `tp_size` 4, moe 1 × 4). When W × E exceeds the node (`gpus_per_node`; these
/// runs are single-node) the row is read as W GPUs — `tp_size` / E (or `attention_dp_size` / E) — and MoE EP E.
/// Rows with both `tp_size` and `attention_dp_size` above 1, or whose W × E fits the node, are kept as written
/// (the two readings cannot be told apart there).
pub fn unsquared(tp: u32, adp: u32, moe_tp: u32, moe_ep: u32, gpus_per_node: u32) -> (u32, u32) {
    let gpus = tp.max(1) * adp.max(1);
    if moe_tp <= 1 || moe_ep <= 1 || gpus != moe_tp * moe_ep || gpus <= gpus_per_node || (tp > 1 && adp > 1) {
        return (tp, adp);
    }
    if tp > 1 {
        (tp / moe_ep, adp)
    } else {
        (tp, adp / moe_ep)
    }
}

fn num(r: &csv::StringRecord, i: usize) -> Option<u32> {
    r.get(i).and_then(|s| s.trim().parse::<u32>().ok())
}

/// The client concurrency in a `silicon_data_source` string (`…; silicon_concurrency=128; …`).
pub fn concurrency_of(source: &str) -> Option<u32> {
    let rest = &source[source.find("silicon_concurrency=")? + "silicon_concurrency=".len()..];
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// Why a row is not evaluated, when it is not.
fn unsupported(model: &str, precision: &str) -> Option<String> {
    if precision.is_empty() {
        return Some("no precision stated (the weights' format is unknown)".to_string());
    }
    if precision == "int4" {
        return Some("precision int4: int4 weight-only quantization (int4_wo) is not modelled".to_string());
    }
    if model.starts_with("Qwen/Qwen3.5") {
        return Some("Qwen3.5's hybrid linear attention (Gated DeltaNet) is not modelled".to_string());
    }
    None
}

/// The rows of `path` as requests, and (reason, count) of those left out.
pub fn load(path: &Path, client: Client) -> Result<(Vec<RunRow>, BTreeMap<String, u64>), String> {
    let mut rdr = csv::Reader::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let header = rdr.headers().map_err(|e| e.to_string())?.clone();
    let col = |name: &str| header.iter().position(|h| h == name).ok_or_else(|| format!("no column {name}"));
    let c = |n: &str| col(n);
    let (id, source, backend, model_col, system_col, precision_col, mode_col) = (
        c("id")?,
        c("silicon_data_source")?,
        c("backend")?,
        c("model_path")?,
        c("system")?,
        c("precision")?,
        c("mode")?,
    );
    let (isl, osl, ttft, tpot) = (c("isl")?, c("osl")?, c("silicon_ttft_ms")?, c("silicon_tpot_ms")?);
    let batch_size = c("batch_size")?;
    let backend_version = c("backend_version")?;
    let dec_bs = c("decode_batch_size")?;
    let par = |p: &str| -> Result<[usize; 5], String> {
        Ok([
            c(&format!("{p}tp_size"))?,
            c(&format!("{p}pp_size"))?,
            c(&format!("{p}attention_dp_size"))?,
            c(&format!("{p}moe_ep_size"))?,
            c(&format!("{p}num_workers")).unwrap_or(usize::MAX),
        ])
    };
    let (agg, pre, dec) = (par("")?, par("prefill_")?, par("decode_")?);
    let moe_tp = c("moe_tp_size")?;
    let mut skipped: BTreeMap<String, u64> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let all_systems = systems();
    let records = rdr
        .records()
        .enumerate()
        .map(|(line, rec)| rec.map_err(|e| format!("{} line {}: {e}", path.display(), line + 2)))
        .collect::<Result<Vec<_>, String>>()?;
    let db_dump = db_dump_measurements(&header, &records);
    let mut rows = Vec::new();
    for rec in &records {
        let get = |i: usize| rec.get(i).unwrap_or("").trim().to_string();
        let Some(conc) = concurrency_of(&get(source)) else {
            *skipped.entry("no silicon_concurrency in silicon_data_source".into()).or_default() += 1;
            continue;
        };
        // An aggregated row whose dump squared its GPU count is read as what ran ([`unsquared`]).
        let node = all_systems.iter().find(|(n, _)| *n == get(system_col)).map_or(u32::MAX, |(_, s)| s.gpus_per_node);
        let given = |i: usize| num(rec, i).unwrap_or(1).max(1);
        let (agg_tp, agg_adp) = if get(mode_col) == "agg" {
            unsquared(given(agg[0]), given(agg[2]), given(moe_tp), given(agg[3]), node)
        } else {
            (given(agg[0]), given(agg[2]))
        };
        let squared = (agg_tp, agg_adp) != (given(agg[0]), given(agg[2]));
        // Exact copies: every column but the id and the provenance string, with the concurrency (a squared row with
        // its GPUs read back, so that it meets its copy from the other dump).
        let field = |i: usize| match i {
            _ if !squared => get(i),
            i if i == moe_tp => "1".to_string(),
            i if i == agg[0] && agg_tp != given(agg[0]) => agg_tp.to_string(),
            i if i == agg[2] && agg_adp != given(agg[2]) => agg_adp.to_string(),
            i => get(i),
        };
        let key: Vec<String> =
            (0..rec.len()).filter(|&i| i != id && i != source).map(field).chain([conc.to_string()]).collect();
        if !seen.insert(key.join("|")) {
            let why = if squared {
                "copy of another dump's row, its GPU count squared (unsquared)"
            } else {
                "exact copy of another row (DATA.md)"
            };
            *skipped.entry(why.into()).or_default() += 1;
            continue;
        }
        let (model, precision) = (get(model_col), get(precision_col));
        if let Some(why) = unsupported(&model, &precision) {
            *skipped.entry(why).or_default() += 1;
            continue;
        }
        // A row whose tp_size is its disaggregated deployment's GPU count is predicted as the recipe entry it ran
        // ([`super::dynamo_trt`]), once per measurement (its disagg label).
        let recipe = if gpus_as_tp(&columns(&header, rec)) {
            match entry_of_row(&columns(&header, rec)) {
                Ok(entry) => Some(entry),
                Err(why) => {
                    *skipped.entry(why.into()).or_default() += 1;
                    continue;
                }
            }
        } else {
            None
        };
        let engine = match get(backend).as_str() {
            "vllm" => Engine::Vllm,
            "sglang" => Engine::Sglang,
            "trtllm" => Engine::Trtllm,
            other => {
                *skipped.entry(format!("backend {other}")).or_default() += 1;
                continue;
            }
        };
        let Some((_, sys)) = all_systems.iter().find(|(n, _)| *n == get(system_col)) else {
            *skipped.entry(format!("system {}", get(system_col))).or_default() += 1;
            continue;
        };
        let (Ok(t), Ok(p)) = (get(ttft).parse::<f64>(), get(tpot).parse::<f64>()) else {
            *skipped.entry("no TTFT or TPOT".into()).or_default() += 1;
            continue;
        };
        let parallelism = |cols: &[usize; 5]| {
            let (tp, pp) = (num(rec, cols[0]).unwrap_or(1).max(1), num(rec, cols[1]).unwrap_or(1).max(1));
            let adp = num(rec, cols[2]).unwrap_or(1).max(1);
            let ep = num(rec, cols[3]).unwrap_or(1).max(1);
            let workers = if cols[4] == usize::MAX { None } else { num(rec, cols[4]) };
            // perfcast's tp is the GPUs of a stage: the attention tensor-parallel degree times its DP ranks.
            (json!({"tp": tp * adp, "pp": pp, "ep": ep, "attention_dp_size": adp}), workers)
        };
        let mode = get(mode_col);
        let replicas = if mode == "agg" { replicas(conc, num(rec, batch_size), agg_adp) } else { 1 };
        // Each replica's share of the clients (see the module doc).
        let instance_clients = conc / replicas;
        // nvfp4 GEMMs and MoE (`gemm_quant_mode`/`moe_quant_mode` nvfp4 on every fp4 row) are perfcast's `fp4`.
        let precision_req = match precision.as_str() {
            "fp8" => "fp8",
            "fp4" => "fp4",
            _ => "bf16",
        };
        let (in_len, out_len) = (num(rec, isl).unwrap_or(0), num(rec, osl).unwrap_or(0));
        let mut req = json!({
            "system": sys.name, "model": model, "precision": precision_req,
            "engine": match engine { Engine::Vllm => "vllm", Engine::Sglang => "sglang", Engine::Trtllm => "trtllm" },
            "workload": {"input_tokens": in_len, "output_tokens": out_len,
                "concurrency": instance_clients,
                "num_requests": num_requests(instance_clients, out_len.max(1))},
        });
        if let Some(kv) = sglang_kv_cache_dtype(engine, &mode, &model, &precision, (in_len, out_len)) {
            req["kv_cache_dtype"] = json!(kv);
        }
        if client == Client::InferenceX && INFERENCEX_SHAPES.contains(&(in_len, out_len)) {
            req["workload"]["min_length_ratio"] = json!(INFERENCEX_MIN_LENGTH_RATIO);
        }
        // TensorRT-LLM ≥ 1.0 serves from its PyTorch backend, whose overlap scheduler is on by default
        // (`disable_overlap_scheduler: false`), with the CUDA graphs its deployments capture, padded
        // ([`trtllm_graph_max_batch`]).
        if let Some(r) = sglang_recv_interval(engine, &mode, &model, (in_len, out_len), conc) {
            req["engine_options"] = json!({"scheduler_recv_interval": r});
        }
        if engine == Engine::Trtllm {
            let per_rank = recipe
                .map(|e| e.decode_max_batch)
                .or_else(|| num(rec, if mode == "agg" { batch_size } else { dec_bs }));
            let graphs = trtllm_graph_max_batch(per_rank);
            req["engine_options"] =
                json!({"async_scheduling": true, "cuda_graph_max_batch": graphs, "cuda_graph_padding": true});
            // The capture list of aiconfigurator's template for the run's engine version, where it has one
            // ([`trtllm_template_graph_batch_sizes`]): padding off, the template's sizes.
            if let Some(sizes) = trtllm_template_graph_batch_sizes(engine, &get(backend_version)) {
                req["engine_options"] =
                    json!({"async_scheduling": true, "cuda_graph_batch_sizes": sizes, "cuda_graph_padding": false});
            }
            // aiconfigurator's aggregated token budget where the row gives its batch size (else the engine's).
            if let (true, Some(bs)) = (mode == "agg", per_rank.filter(|&b| b > 0)) {
                req["engine_options"]["max_num_batched_tokens"] =
                    json!(trtllm_max_num_tokens(WorkerRole::Agg, in_len, bs));
            }
        }
        // NVIDIA Dynamo's front end tokenizes the requests concurrently ([`runs_under_dynamo`]).
        if runs_under_dynamo(&get(source)) {
            req["frontend"] = json!({"server": "dynamo"});
        }
        let mut workers_known = true;
        if let Some(entry) = recipe {
            fill_request(entry, &mut req);
        } else if mode == "disagg" {
            let (pp, pw) = parallelism(&pre);
            let (dp, dw) = parallelism(&dec);
            workers_known = pw.is_some() && dw.is_some();
            req["mode"] = json!("disagg");
            req["prefill"] = json!({"workers": pw.unwrap_or(1).max(1), "parallelism": pp});
            req["decode"] = json!({"workers": dw.unwrap_or(1).max(1), "parallelism": dp});
            // The row's decode batch size caps each decode worker's running requests: aiconfigurator's
            // `decode_batch_size`, requests per attention-DP rank (TensorRT-LLM's `max_batch_size` is per rank;
            // SGLang's `--max-running-requests` is the instance's, split over its dp_size ranks); the runs'
            // concurrency is workers × ranks × this. The prefill batch
            // size is left to the engine's default token budget (aiconfigurator's `prefill_batch_size` is 1 in
            // every row that gives it: its model of a prefill step, not a cap the prefill servers were started with).
            if let Some(bs) = num(rec, dec_bs).filter(|&b| b > 0) {
                req["decode"]["engine_options"] = json!({"max_num_seqs": bs});
            }
            // aiconfigurator's TensorRT-LLM workers: prefill with the overlap scheduler off
            // (`prefill disable_overlap_scheduler = true`, as TensorRT-LLM's own disaggregated examples start their
            // context servers) and `isl + 1500` tokens, decode with its batch size's budget where the row gives it
            // ([`super::recipes::trtllm_max_num_tokens`]). Without chunked context (the PyTorch backend's default) a
            // prompt longer than the engine's 8,192 tokens would never be scheduled.
            if engine == Engine::Trtllm {
                req["prefill"]["engine_options"] = json!({"async_scheduling": false,
                    "max_num_batched_tokens": trtllm_max_num_tokens(WorkerRole::Prefill, in_len, 0)});
                if let Some(bs) = num(rec, dec_bs).filter(|&b| b > 0) {
                    req["decode"]["engine_options"]["max_num_batched_tokens"] =
                        json!(trtllm_max_num_tokens(WorkerRole::Decode, in_len, bs));
                }
            }
        } else {
            req["parallelism"] = parallelism(&agg).0;
            if squared {
                req["parallelism"]["tp"] = json!(agg_tp * agg_adp);
                req["parallelism"]["attention_dp_size"] = json!(agg_adp);
            }
        }
        let request: InferenceRequest = match serde_json::from_value(req) {
            Ok(r) => r,
            Err(e) => {
                *skipped.entry(format!("not a valid request: {e}")).or_default() += 1;
                continue;
            }
        };
        let deployment: Vec<String> = (0..rec.len())
            .filter(|&i| ![id, source, ttft, tpot].contains(&i) && !header[i].ends_with("batch_size"))
            .map(get)
            .collect();
        rows.push(RunRow {
            id: get(id),
            engine,
            mode,
            gpu: get(system_col),
            model,
            precision,
            isl: num(rec, isl).unwrap_or(0),
            osl: num(rec, osl).unwrap_or(0),
            concurrency: conc,
            replicas,
            ttft_ms: t,
            tpot_ms: p,
            workers_known,
            speculative: recipe.map_or_else(|| row_is_speculative(&header, rec, &db_dump), |e| e.mtp > 0),
            deployment: deployment.join("|"),
            request,
        });
    }
    let (mut rows, relabelled) = one_per_measurement(rows);
    // The speculative runs are simulated with the speculative decoding their scripts start the engine with (after
    // the de-duplication, which may flag a row through a copy of it).
    // A row decoded from its recipe ([`super::dynamo_trt`]) already carries the recipe's MTP size.
    for r in rows.iter_mut().filter(|r| r.speculative && r.request.speculative.is_none()) {
        let p = &r.request.parallelism;
        let attention_dp = p.dp_attention || p.attention_dp_size.is_some_and(|a| a > 1);
        r.request.speculative = inferencex_mtp(r.engine, attention_dp);
        // `dsr1_fp8_b200_mtp.sh` sets `--max-running-requests 256` (SGLang's speculative default would be 48).
        if r.engine == Engine::Sglang {
            r.request.engine_options.max_num_seqs = Some(INFERENCEX_SGLANG_MTP_MAX_RUNNING_REQUESTS);
        }
    }
    if relabelled > 0 {
        *skipped.entry(SAME_MEASUREMENT.into()).or_default() += relabelled;
    }
    Ok((rows, skipped))
}

/// `--max-running-requests` of InferenceX's SGLang MTP script (`benchmarks/dsr1_fp8_b200_mtp.sh` @574bcd3,
/// `MAX_RUNNING_REQUESTS=256`, with `--cuda-graph-max-bs 256`).
pub const INFERENCEX_SGLANG_MTP_MAX_RUNNING_REQUESTS: u32 = 256;

/// Why [`one_per_measurement`] drops a row.
pub const SAME_MEASUREMENT: &str =
    "same measurement as another row under other labels (TTFT and TPOT equal to 10 significant digits at the same shape and concurrency)";

/// A measured TTFT or TPOT (ms) to 10 significant digits, as [`one_per_measurement`] compares them (the dumps print
/// 16 or 17).
pub(super) fn measured_digits(ms: f64) -> String {
    format!("{ms:.9e}")
}

/// The rows with each measurement once, and how many were dropped.
///
/// Two rows of one engine, mode, GPU, input and output length and concurrency whose TTFT and TPOT agree to 10
/// significant digits (the dumps print 16 or 17) are one run filed twice, not two runs: the file holds ~370 such
/// copies past its 668 exact ones (2026-11-28), e.g. DeepSeek-R1 runs repeated under `deepseek-ai/DeepSeek-V3` and a disaggregated run
/// with and without its worker counts. Counting them twice would weigh those deployments double in every MAPE.
/// The copy that states its disaggregated worker counts is kept (it can be predicted as it ran), else the first;
/// it is [`speculative`] if any copy is.
pub fn one_per_measurement(rows: Vec<RunRow>) -> (Vec<RunRow>, u64) {
    let mut at: HashMap<(Engine, String, String, u32, u32, u32, String, String), usize> = HashMap::new();
    let mut kept: Vec<RunRow> = Vec::with_capacity(rows.len());
    let mut dropped = 0;
    for row in rows {
        let key = (
            row.engine,
            row.mode.clone(),
            row.gpu.clone(),
            row.isl,
            row.osl,
            row.concurrency,
            measured_digits(row.ttft_ms),
            measured_digits(row.tpot_ms),
        );
        dropped += u64::from(at.contains_key(&key));
        match at.get(&key) {
            Some(&i) if row.workers_known && !kept[i].workers_known => {
                let speculative = kept[i].speculative || row.speculative;
                kept[i] = row;
                kept[i].speculative = speculative;
            }
            Some(&i) if row.speculative => kept[i].speculative = true,
            Some(_) => {}
            None => {
                at.insert(key, kept.len());
                kept.push(row);
            }
        }
    }
    (kept, dropped)
}

/// One evaluated row.
#[derive(Debug, Clone, Serialize)]
pub struct RowResult {
    pub id: String,
    pub engine: &'static str,
    pub mode: String,
    pub gpu: String,
    pub model: String,
    pub precision: String,
    pub isl: u32,
    pub osl: u32,
    pub concurrency: u32,
    /// Aggregated workers the clients were spread over (one of them simulated with concurrency / replicas).
    pub replicas: u32,
    pub workers_known: bool,
    /// An InferenceX speculative-decoding (MTP) run ([`speculative`]): simulated with its speculative decoding,
    /// reported apart from the headline.
    pub speculative: bool,
    /// The engine's memory fraction was raised to 0.95 so that the model fits perfcast's memory model.
    pub memory_fraction_raised: bool,
    /// Which split predicted it: `source` (the shipped constants, nothing fitted on these runs), `model` (constants
    /// fitted without its model) or `gpu` (without its GPU).
    pub split: &'static str,
    pub measured_ttft_ms: f64,
    pub predicted_ttft_ms: f64,
    pub measured_tpot_ms: f64,
    pub predicted_tpot_ms: f64,
    /// The shipped 10 %–90 % prediction interval of the predicted TTFT and TPOT, ms
    /// ([`crate::llm::serving::interval::interval`]: what a user asking for this run would be given).
    pub ttft_p10_ms: f64,
    pub ttft_p90_ms: f64,
    pub tpot_p10_ms: f64,
    pub tpot_p90_ms: f64,
    /// The steady state's TTFT and TPOT (the model before the simulation), ms.
    pub steady_ttft_ms: f64,
    pub steady_tpot_ms: f64,
    /// The KV cache's precision perfcast gave the run (`bf16`, `fp8`, …).
    pub kv_cache_dtype: String,
    /// Whole requests of input + output tokens the deployment's KV caches hold at once (aggregated: one instance;
    /// disaggregated: every decode worker): below `concurrency`, the simulated clients queue for the cache.
    pub kv_max_requests: u64,
}

#[cfg(test)]
mod tests;
