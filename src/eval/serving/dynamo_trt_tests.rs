use super::*;

fn row<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> String + 'a {
    move |name: &str| pairs.iter().find(|(k, _)| *k == name).map_or(String::new(), |(_, v)| v.to_string())
}

/// A `disagg`-labelled row of the family as the export writes it: prefill tp = decode tp = the GPUs, ep 1.
fn disagg(isl: &'static str, gpus: &'static str, source: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("silicon_data_source", source),
        ("backend", "trtllm"),
        ("system", "gb200"),
        ("model_path", "deepseek-ai/DeepSeek-R1"),
        ("mode", "disagg"),
        ("isl", isl),
        ("osl", "1024"),
        ("prefill_tp_size", gpus),
        ("decode_tp_size", gpus),
        ("prefill_moe_ep_size", "1"),
    ]
}

#[test]
fn row_1112_is_eight_dep4_prefill_workers_and_a_dep32_decode_worker_with_mtp3() {
    // `…disagg_8192x1024_c538_tp64_ep1_1112`: 64 GPUs, 538 clients. The 8k/1k entry `conc-list: [538]` with
    // 8 prefill workers (8 · 4 = 32 GPUs) and one decode worker at tp 32: 32 + 32 = 64; MTP 3, batch 16 per rank
    // (16 · 32 ranks = 512 slots), 64 tokens a step (16 · (1 + 3)), memory fraction 0.7. The non-MTP [256, 538]
    // entry has 4 prefill workers: 16 + 32 = 48 GPUs, not 64.
    let r = disagg("8192", "64", "source_file=2026-04-06.csv; model=DeepSeek-R1; silicon_concurrency=538");
    let got = entry_of_row(&row(&r)).unwrap();
    assert_eq!((got.prefill_workers, got.prefill_dp_attn), (8, true));
    assert_eq!((got.decode_workers, got.decode_tp, got.decode_dp_attn), (1, 32, true));
    assert_eq!((got.decode_max_batch, got.decode_max_num_tokens, got.mtp), (16, 64, 3));
    assert_eq!(got.decode_gpu_mem_fraction, 0.7);
    assert_eq!(got.prefill_limits(), (8448, 1));
}

#[test]
fn row_1074_is_four_tep8_decode_workers_at_36_clients_each() {
    // `…disagg_1024x1024_c144_tp36_ep1_1074`: 36 GPUs, 144 clients. 1k/1k MTP TEP entry: 1 prefill worker
    // (tp 4, no attention DP) + 4 decode workers × tp 8 = 4 + 32 = 36 GPUs; `conc-list` value 36 × 4 decode
    // workers = 144. MTP 3, batch 32, 128 tokens (32 · 4). The non-MTP TEP entry's products are 4, 8, …, 64, 128,
    // 256, 564: no 144.
    let r = disagg("1024", "36", "source_file=2026-04-06.csv; model=DeepSeek-R1; silicon_concurrency=144");
    let got = entry_of_row(&row(&r)).unwrap();
    assert_eq!((got.prefill_workers, got.prefill_dp_attn), (1, false));
    assert_eq!((got.decode_workers, got.decode_tp, got.decode_dp_attn), (4, 8, false));
    assert_eq!((got.decode_max_batch, got.decode_max_num_tokens, got.mtp), (32, 128, 3));
    assert_eq!(got.prefill_limits(), (4608, 4));
    // Its request: 1 prefill worker tp 4 ep 4 without attention DP, 4 decode workers tp 8 ep 8 without it, MTP 3.
    let mut req = serde_json::json!({});
    fill_request(got, &mut req);
    assert_eq!(req["prefill"]["workers"], 1);
    assert_eq!(req["prefill"]["parallelism"]["attention_dp_size"], 1);
    assert_eq!(req["prefill"]["engine_options"]["max_num_batched_tokens"], 4608);
    assert_eq!(req["decode"]["workers"], 4);
    assert_eq!(req["decode"]["parallelism"]["tp"], 8);
    assert_eq!(req["decode"]["parallelism"]["ep"], 8);
    assert_eq!(req["decode"]["parallelism"]["attention_dp_size"], 1);
    assert_eq!(req["decode"]["engine_options"]["max_num_seqs"], 32);
    assert_eq!(req["speculative"]["num_speculative_tokens"], 3);
}

#[test]
fn row_1124_is_five_dep4_prefill_workers_and_a_dep8_decode_worker_without_mtp() {
    // `…disagg_8192x1024_c2150_tp28_ep1_1124`: 28 GPUs, 2,150 clients. 5 · 4 + 8 = 28: the non-MTP
    // [2150] entry with a DEP8 decode worker at batch 256 (256 · 8 = 2,048 slots), 256 tokens, fraction 0.8. The
    // other [2150] entries: non-MTP 8 · 4 + 16 = 48 GPUs, MTP 6 · 4 + 8 = 32 GPUs.
    let r = disagg("8192", "28", "source_file=2026-04-06.csv; model=DeepSeek-R1; silicon_concurrency=2150");
    let got = entry_of_row(&row(&r)).unwrap();
    assert_eq!((got.prefill_workers, got.decode_workers, got.decode_tp), (5, 1, 8));
    assert_eq!((got.decode_max_batch, got.decode_max_num_tokens, got.mtp), (256, 256, 0));
    let mut req = serde_json::json!({});
    fill_request(got, &mut req);
    assert_eq!(req["prefill"]["parallelism"]["attention_dp_size"], 4);
    assert_eq!(req["decode"]["parallelism"]["attention_dp_size"], 8);
    assert_eq!(req["decode"]["engine_options"]["gpu_memory_utilization"], 0.8);
    assert!(req.get("speculative").is_none());
}

#[test]
fn shared_tep_points_and_the_agg_label_are_not_decoded() {
    // 8k/1k, 28 GPUs, 12 clients: MTP TEP (1 · 4 + 3 · 8 = 28; 4 × 3 = 12) and non-MTP TEP (same GPUs, 4 × 3)
    // both match.
    let r = disagg("8192", "28", "source_file=2026-04-06.csv; model=DeepSeek-R1; silicon_concurrency=12");
    assert_eq!(entry_of_row(&row(&r)), Err(AMBIGUOUS));
    // 1k/1k, 20 GPUs, 1,075 clients: MTP DEP16 [512, 1075] and non-MTP DEP16 [1075], both 4 + 16.
    assert_eq!(decode(1024, 20, 1075), Err(AMBIGUOUS));
    // No entry has 40 GPUs at 1k/1k.
    assert_eq!(decode(1024, 40, 1075), Err(NO_ENTRY));
    // The agg-labelled twin of row 1112 (`…agg_8192x1024_c538_tp64_ep1_113`).
    let mut agg = disagg("8192", "64", "source_file=2026-04-06.csv; model=DeepSeek-R1; silicon_concurrency=538");
    agg[4] = ("mode", "agg");
    assert_eq!(entry_of_row(&row(&agg)), Err(AGG_TWIN));
}

#[test]
fn the_shared_files_family_decodes_to_14_plain_11_mtp_and_10_ambiguous_points() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/aiconfigurator/serving_runs_blackwell.csv");
    let mut rdr = csv::Reader::from_path(&path).expect("the shared serving runs");
    let header = rdr.headers().unwrap().clone();
    let (mut plain, mut mtp, mut ambiguous, mut other, mut twins) = (0, 0, 0, 0, 0);
    let mut points = std::collections::BTreeMap::<(String, String, String), (u32, u32)>::new();
    for rec in rdr.records() {
        let rec = rec.unwrap();
        let col = super::super::speculative::columns(&header, &rec);
        if !super::super::gpus_as_tp::gpus_as_tp(&col) {
            continue;
        }
        let gpus = if col("mode") == "agg" { col("tp_size") } else { col("prefill_tp_size") };
        let conc = super::super::rows::concurrency_of(&col("silicon_data_source")).unwrap().to_string();
        let p = points.entry((col("isl"), gpus, conc)).or_default();
        if col("mode") == "agg" {
            p.0 += 1
        } else {
            p.1 += 1
        }
        match entry_of_row(&col) {
            Ok(e) if e.mtp > 0 => mtp += 1,
            Ok(_) => plain += 1,
            Err(AMBIGUOUS) => ambiguous += 1,
            Err(AGG_TWIN) => twins += 1,
            Err(_) => other += 1,
        }
    }
    // Matched by hand against the recipe (the research's table): non-MTP 1k/1k 12/4300, 24/2048, 24/4300, 36/128,
    // 36/256, 36/564, 36/1075 and 8k/1k 28/48, 28/102, 28/2150, 40/1075, 48/256, 48/538, 48/2150 (7 + 7 = 14);
    // MTP 1k/1k 12/2252, 20/512, 24/2150, 36/144, 36/512 and 8k/1k 28/54, 32/2150, 48/1075, 52/128, 52/269, 64/538
    // (5 + 6 = 11); shared 1k/1k 36/{4, 8, 16, 32, 64}, 20/1075 and 8k/1k 28/{3, 6, 12, 24} (6 + 4 = 10).
    assert_eq!((plain, mtp, ambiguous, other), (14, 11, 10, 0));
    // Every agg-labelled row has exactly one disagg-labelled twin at the same point: 35 points, one each.
    assert_eq!(twins, 35);
    assert_eq!(points.len(), 35);
    assert!(points.values().all(|&p| p == (1, 1)), "{points:?}");
}
