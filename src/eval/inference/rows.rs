//! LLM-Inference-Bench rows as serving requests on perfcast's systems, and the decode floor that excludes rows
//! measured faster than the weights can be read.

use super::*;

pub(super) fn system_of(hardware: &str) -> Option<&'static str> {
    match hardware {
        "Nvidia A100 GPU" => Some("perlmutter-a100-40g"),
        "Nvidia H100 GPU" => Some("dgx-h100"),
        "Nvidia GH200 GPU" => Some("vista-gh200"),
        _ => None,
    }
}

pub(super) fn engine_of(framework: &str) -> Option<Engine> {
    match framework {
        "vLLM" => Some(Engine::Vllm),
        "TensorRT-LLM" => Some(Engine::Trtllm),
        _ => None,
    }
}

/// The rows that can be predicted, and how many were skipped per reason.
pub fn load(data: &Path) -> Result<(Vec<BenchRow>, BTreeMap<String, u64>), String> {
    let path = data.join("llm_inference_bench/all_results.csv.gz");
    let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(file).read_to_string(&mut text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let systems: HashMap<String, System> = presets()
        .into_iter()
        .filter(|p| ["perlmutter-a100-40g", "dgx-h100", "vista-gh200"].contains(&p.name.as_str()))
        .map(|p| (p.name.clone(), p.resolve().expect("presets resolve")))
        .collect();
    let (mut rows, mut skipped) = (Vec::new(), BTreeMap::new());
    let mut skip = |why: String| *skipped.entry(why).or_insert(0u64) += 1;
    for rec in reader.records() {
        let rec = rec.map_err(|e| e.to_string())?;
        let field = |i: usize| rec.get(i).unwrap_or("").trim().to_string();
        let (hardware, framework, model) = (field(0), field(2), field(3));
        let (Some(engine), Some(system)) = (engine_of(&framework), system_of(&hardware)) else {
            skip(format!("{framework} on {hardware}: not in scope (vLLM / TensorRT-LLM on NVIDIA A100, H100, GH200)"));
            continue;
        };
        let nums = (field(1).parse::<u32>(), field(4).parse::<u32>(), field(5).parse::<u32>(), field(6).parse::<f64>());
        let (Ok(tp), Ok(length), Ok(batch), Ok(measured_s)) = nums else {
            skip("unreadable numbers".to_string());
            continue;
        };
        // The bench's engines are 2024 releases: vLLM's V0 engine, TensorRT-LLM's `trtllm-build` engines run by
        // the C++ executor.
        let options = match engine {
            Engine::Vllm => serde_json::json!({"vllm_engine": "v0"}),
            Engine::Trtllm => serde_json::json!({"trtllm_backend": "tensorrt"}),
            _ => serde_json::json!({}),
        };
        let req: InferenceRequest = match serde_json::from_value(serde_json::json!({
            "system": system, "model": model, "parallelism": {"tp": tp}, "engine": engine,
            "engine_options": options,
            "workload": {"input_tokens": length, "output_tokens": length, "concurrency": batch}}))
        {
            Ok(r) => r,
            Err(e) => {
                skip(format!("request: {e}"));
                continue;
            }
        };
        match validate(&req, &systems[system]) {
            Ok(cfg) if measured_s < decode_floor_s(&cfg, &systems[system], batch) => skip(
                "measured faster than its decode steps can read the weights at the GPU's peak bandwidth \
                      (tokens not all generated, or not 16-bit)"
                    .to_string(),
            ),
            Ok(cfg) => rows.push(BenchRow {
                hardware: hardware.trim_start_matches("Nvidia ").trim_end_matches(" GPU").to_string(),
                system: system.to_string(),
                framework: engine,
                model: cfg.model.name.clone(),
                tp,
                length,
                batch,
                measured_s,
                cfg,
            }),
            Err(e) if e.field == "model" => skip(format!("{model}: not in the catalog")),
            Err(e) => skip(format!("not representable: {e}")),
        }
    }
    Ok((rows, skipped))
}

/// The least time the L − 1 decode steps of a static batch can take: each reads the weights it multiplies by
/// ([`decode_weight_bytes`]) at the GPU's peak memory bandwidth. A measurement below it did not run what the row
/// says (it stopped early, or ran in another precision): such rows are not evaluated.
pub fn decode_floor_s(cfg: &ServingConfig, system: &System, batch: u32) -> f64 {
    let steps = cfg.output_tokens.saturating_sub(1) as f64;
    steps * decode_weight_bytes(cfg, batch) / system.gpu.memory_bandwidth_bps()
}
