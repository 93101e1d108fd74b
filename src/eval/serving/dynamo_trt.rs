//! The deployments of the [`super::gpus_as_tp`] family, decoded from the recipe they ran: InferenceMAX's
//! disaggregated `dsr1-fp4-gb200-dynamo-trt` (InferenceMAX/InferenceMAX `.github/configs/nvidia-master.yaml`
//! @525079ad1fbd689b61201d73a20552f8a3e1a101, the entry's `seq-len-configs` 1024/1024 and 8192/1024; image
//! `ai-dynamo/tensorrtllm-runtime:0.5.1-rc0.pre3`, `disagg: true`, `multinode: true`). Each search-space entry
//! ([`RECIPE`]) is `prefill.num-worker` context workers at tp 4 ep 4 ("ctx_tp_size is hardcoded to 4 in
//! launch_gb200-nv.sh") and `decode.num-worker` generation workers at tp = ep = `decode.tp`, each side with or
//! without attention DP (`dp-attn`), with the decode worker's `DECODE_MAX_BATCH_SIZE`, `DECODE_MAX_NUM_TOKENS`,
//! `DECODE_GPU_MEM_FRACTION` and `DECODE_MTP_SIZE`.
//!
//! **How a row names its entry.** The 2026-04-06 export writes the deployment's total GPUs as `tp_size` (or
//! `prefill_tp_size` = `decode_tp_size`): 4 × prefill workers + decode workers × decode tp. Its concurrency is the
//! entry's `conc-list` value × the decode workers: every concurrency of the TEP entries (4 or 3 decode workers)
//! in the file is such a product (1k/1k 36 GPUs: 4, 8, 16, 32, 64, 128, 144, 256, 564 = 4 × {1, 2, 4, 8, 16, 32,
//! 36, 64, 141}; 8k/1k 28 GPUs: 3, 6, 12, 24, 48, 54, 102 = 3 × {1, 2, 4, 8, 16, 18, 34}) and no listed value
//! appears alone (no 36, 141, 18 or 34 clients). A row is decoded when exactly one entry of its input length has
//! its GPU count and concurrency ([`decode`]); where an MTP and a non-MTP entry share both (the low-concurrency
//! TEP points, and 1k/1k 1,075 clients on 20 GPUs) the row stays left out ([`AMBIGUOUS`]): nothing in the row tells
//! them apart, and choosing by the prediction would be fitting.

/// Every prefill worker's tensor- and expert-parallel degree: "ctx_tp_size is hardcoded to 4" (the recipe's note;
/// every entry writes `prefill: {tp: 4, ep: 4}`).
pub const PREFILL_TP: u32 = 4;

/// Why a row of the family whose recipe entry is not unique is left out (the skipped table's label).
pub const AMBIGUOUS: &str = "dsr1-fp4-gb200-dynamo-trt: an MTP and a non-MTP recipe entry share the row's GPU count \
     and concurrency (InferenceMAX nvidia-master.yaml @525079a)";

/// Why a row of the family that no recipe entry matches is left out (none in the shared file).
pub const NO_ENTRY: &str = "dsr1-fp4-gb200-dynamo-trt: no recipe entry has the row's GPU count and concurrency \
     (InferenceMAX nvidia-master.yaml @525079a)";

/// Why the `agg`-labelled copy of a family measurement is not evaluated: the deployment was disaggregated, and the
/// `disagg`-labelled copy of the same point (same GPUs, input length and concurrency) is kept.
pub const AGG_TWIN: &str = "dsr1-fp4-gb200-dynamo-trt: agg-labelled twin of a disaggregated point, kept once under \
     its disagg label";

/// One search-space entry of `dsr1-fp4-gb200-dynamo-trt` (values as the recipe writes them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Entry {
    /// The seq-len config's input length, tokens (output 1,024 in both).
    pub isl: u32,
    /// `conc-list`: clients per decode worker.
    pub conc_list: &'static [u32],
    /// `prefill.num-worker` (each [`PREFILL_TP`] GPUs).
    pub prefill_workers: u32,
    /// `prefill.dp-attn`: attention data parallel over the prefill worker's 4 GPUs.
    pub prefill_dp_attn: bool,
    /// `decode.num-worker`.
    pub decode_workers: u32,
    /// `decode.tp` (= `decode.ep`): GPUs of one decode worker.
    pub decode_tp: u32,
    /// `decode.dp-attn`.
    pub decode_dp_attn: bool,
    /// `DECODE_MAX_BATCH_SIZE`: TensorRT-LLM `max_batch_size`, requests per attention-DP rank.
    pub decode_max_batch: u32,
    /// `DECODE_MAX_NUM_TOKENS`: TensorRT-LLM `max_num_tokens` of a decode step, tokens.
    pub decode_max_num_tokens: u32,
    /// `DECODE_GPU_MEM_FRACTION`: TensorRT-LLM `free_gpu_memory_fraction` of the decode worker.
    pub decode_gpu_mem_fraction: f64,
    /// `DECODE_MTP_SIZE`: MTP draft tokens per step (`num_nextn_predict_layers`); 0 = the non-MTP entries.
    pub mtp: u32,
}

impl Entry {
    /// The deployment's GPUs: 4 × prefill workers + decode workers × decode tp (what the export writes as tp).
    pub fn gpus(&self) -> u32 {
        PREFILL_TP * self.prefill_workers + self.decode_workers * self.decode_tp
    }

    /// The clients of the runs of this entry: each `conc-list` value × the decode workers.
    pub fn clients(&self) -> impl Iterator<Item = u32> + '_ {
        self.conc_list.iter().map(|c| c * self.decode_workers)
    }

    /// The prefill worker's `max_num_tokens` and `max_batch_size` (per attention-DP rank): every entry of the
    /// 1k/1k config sets `PREFILL_MAX_NUM_TOKENS=4608`, `PREFILL_MAX_BATCH_SIZE=4`, every 8k/1k entry 8448 and 1
    /// (the recipe's comments: "For 1k/1k: prefill batch-size=4, max-num-tokens=4608", "For 8k/1k: prefill
    /// batch-size=1, max-num-tokens=8448").
    pub fn prefill_limits(&self) -> (u32, u32) {
        if self.isl <= 1024 {
            (4608, 4)
        } else {
            (8448, 1)
        }
    }
}

const fn e(
    isl: u32,
    mtp: u32,
    conc_list: &'static [u32],
    prefill: (u32, bool),
    decode: (u32, u32, bool),
    (decode_max_batch, decode_max_num_tokens, decode_gpu_mem_fraction): (u32, u32, f64),
) -> Entry {
    Entry {
        isl,
        conc_list,
        prefill_workers: prefill.0,
        prefill_dp_attn: prefill.1,
        decode_workers: decode.0,
        decode_tp: decode.1,
        decode_dp_attn: decode.2,
        decode_max_batch,
        decode_max_num_tokens,
        decode_gpu_mem_fraction,
        mtp,
    }
}

/// The search space of `dsr1-fp4-gb200-dynamo-trt` @525079a, in the recipe's order: (isl, `DECODE_MTP_SIZE`,
/// `conc-list`, (prefill workers, prefill dp-attn), (decode workers, decode tp, decode dp-attn),
/// (`DECODE_MAX_BATCH_SIZE`, `DECODE_MAX_NUM_TOKENS`, `DECODE_GPU_MEM_FRACTION`)).
pub const RECIPE: [Entry; 20] = [
    // 1k/1k, MTP.
    e(1024, 3, &[1, 2, 4, 8, 16, 36], (1, false), (4, 8, false), (32, 128, 0.9)),
    e(1024, 3, &[512, 1075], (1, true), (1, 16, true), (64, 256, 0.7)),
    e(1024, 1, &[2150], (2, true), (1, 16, true), (128, 256, 0.7)),
    e(1024, 3, &[512], (1, true), (1, 32, true), (16, 64, 0.6)),
    e(1024, 1, &[2252], (1, true), (1, 8, true), (256, 512, 0.8)),
    // 1k/1k, no MTP.
    e(1024, 0, &[1, 2, 4, 8, 16, 32, 64, 141], (1, false), (4, 8, false), (128, 128, 0.9)),
    e(1024, 0, &[1075], (1, true), (1, 32, true), (32, 32, 0.7)),
    e(1024, 0, &[1075], (1, true), (1, 16, true), (64, 64, 0.75)),
    e(1024, 0, &[2048, 4300], (2, true), (1, 16, true), (256, 256, 0.75)),
    e(1024, 0, &[4300], (1, true), (1, 8, true), (512, 512, 0.8)),
    // 8k/1k, MTP.
    e(8192, 3, &[1, 2, 4, 8, 18], (1, false), (3, 8, false), (16, 64, 0.9)),
    e(8192, 3, &[128, 269], (5, true), (1, 32, true), (8, 32, 0.7)),
    e(8192, 3, &[538], (8, true), (1, 32, true), (16, 64, 0.7)),
    e(8192, 2, &[1075], (8, true), (1, 16, true), (64, 256, 0.75)),
    e(8192, 1, &[2150], (6, true), (1, 8, true), (256, 512, 0.8)),
    // 8k/1k, no MTP.
    e(8192, 0, &[1, 2, 4, 8, 16, 34], (1, false), (3, 8, false), (32, 32, 0.9)),
    e(8192, 0, &[256, 538], (4, true), (1, 32, true), (16, 16, 0.7)),
    e(8192, 0, &[1075], (6, true), (1, 16, true), (64, 64, 0.75)),
    e(8192, 0, &[2150], (8, true), (1, 16, true), (128, 128, 0.75)),
    e(8192, 0, &[2150], (5, true), (1, 8, true), (256, 256, 0.8)),
];

/// The recipe entry a run of `isl` input tokens on `gpus` GPUs at `concurrency` clients ran, or why there is none
/// ([`AMBIGUOUS`], [`NO_ENTRY`]).
pub fn decode(isl: u32, gpus: u32, concurrency: u32) -> Result<&'static Entry, &'static str> {
    let mut matching =
        RECIPE.iter().filter(|e| e.isl == isl && e.gpus() == gpus && e.clients().any(|c| c == concurrency));
    match (matching.next(), matching.next()) {
        (Some(one), None) => Ok(one),
        (Some(_), Some(_)) => Err(AMBIGUOUS),
        (None, _) => Err(NO_ENTRY),
    }
}

/// The row's entry (`col` gives a column of a [`super::gpus_as_tp::gpus_as_tp`] row by its header name), or why it
/// is not evaluated: [`AGG_TWIN`] for the `agg` label, else [`decode`]'s reason.
pub fn entry_of_row(col: &dyn Fn(&str) -> String) -> Result<&'static Entry, &'static str> {
    if col("mode") != "disagg" {
        return Err(AGG_TWIN);
    }
    let num = |c: &str| col(c).parse::<u32>().ok();
    let conc = super::rows::concurrency_of(&col("silicon_data_source"));
    match (num("isl"), num("prefill_tp_size"), conc) {
        (Some(isl), Some(gpus), Some(conc)) => decode(isl, gpus, conc),
        _ => Err(NO_ENTRY),
    }
}

/// The disaggregated request's pools and speculative decoding for `entry`, into `req` (a request JSON whose
/// system, model, precision, engine and workload are set): `prefill` workers at tp 4 ep 4 (attention DP 4 with
/// `dp-attn`) with the recipe's token budget and batch, the overlap scheduler off as the eval starts every
/// TensorRT-LLM context server; `decode` workers at tp = ep = `decode.tp` (attention DP over all of them with
/// `dp-attn`) with the recipe's batch, token budget and memory fraction; and, for an MTP entry, MTP with
/// `DECODE_MTP_SIZE` draft tokens at perfcast's default acceptance (nothing fitted).
pub fn fill_request(entry: &Entry, req: &mut serde_json::Value) {
    use serde_json::json;
    let adp = |on: bool, tp: u32| if on { tp } else { 1 };
    let (prefill_tokens, prefill_batch) = entry.prefill_limits();
    req["mode"] = json!("disagg");
    req["prefill"] = json!({
        "workers": entry.prefill_workers,
        "parallelism": {"tp": PREFILL_TP, "pp": 1, "ep": PREFILL_TP,
            "attention_dp_size": adp(entry.prefill_dp_attn, PREFILL_TP)},
        "engine_options": {"async_scheduling": false, "max_num_batched_tokens": prefill_tokens,
            "max_num_seqs": prefill_batch},
    });
    req["decode"] = json!({
        "workers": entry.decode_workers,
        "parallelism": {"tp": entry.decode_tp, "pp": 1, "ep": entry.decode_tp,
            "attention_dp_size": adp(entry.decode_dp_attn, entry.decode_tp)},
        "engine_options": {"max_num_seqs": entry.decode_max_batch,
            "max_num_batched_tokens": entry.decode_max_num_tokens,
            "gpu_memory_utilization": entry.decode_gpu_mem_fraction},
    });
    if entry.mtp > 0 {
        req["speculative"] = json!({"method": "mtp", "num_speculative_tokens": entry.mtp});
    }
}

#[cfg(test)]
#[path = "dynamo_trt_tests.rs"]
mod tests;
