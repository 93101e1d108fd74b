//! Rows of `aiconfigurator/serving_runs_blackwell.csv` whose parallelism columns hold the deployment's total GPU
//! count rather than a worker's tensor-parallel size ([`gpus_as_tp`]): their deployment is not in the row, so the
//! eval decodes it from the recipe they ran ([`super::dynamo_trt`]) and leaves out the rows it cannot decode.

/// Whether a row is one of the 2026-04-06 export's GB200 TensorRT-LLM DeepSeek-R1 rows that file InferenceMAX's
/// disaggregated `dsr1-fp4-gb200-dynamo-trt` deployments with `tp_size` (or `prefill_tp_size` = `decode_tp_size`)
/// = the deployment's total GPUs and `moe_ep_size` 1, under either label (`agg` or `disagg`; 70 rows, 35
/// measurements filed twice). InferenceMAX/InferenceMAX `.github/configs/nvidia-master.yaml` @525079a, entry
/// `dsr1-fp4-gb200-dynamo-trt` (`disagg: true`, `multinode: true`; "ctx_tp_size is hardcoded to 4 in
/// launch_gb200-nv.sh"): every row matches a search-space entry of prefill workers at DEP4 plus one wide-EP decode
/// worker, e.g. `tp64` at 538 clients = 8 prefill × 4 GPUs + a 32-GPU decode worker (MTP 3), `tp48` at 538 = 4 × 4 +
/// 32, `tp28` at 2,150 = 5 × 4 + 8 (research of 2026-11-29, the book's serving-simulated page). Read as written they
/// would be one aggregated tp 12–64 worker (most refused: the heads do not divide) or one prefill and one decode
/// worker of that tp; [`super::dynamo_trt::entry_of_row`] reads them as the recipe entry they ran. `col` gives a column of the row by its header name (`""` if empty).
pub fn gpus_as_tp(col: &dyn Fn(&str) -> String) -> bool {
    let family = col("silicon_data_source").starts_with("source_file=2026-04-06")
        && col("backend") == "trtllm"
        && col("system") == "gb200"
        && col("model_path") == "deepseek-ai/DeepSeek-R1";
    let above_a_tray = |c: &str| col(c).parse::<u32>().is_ok_and(|tp| tp > 8);
    family
        && match col("mode").as_str() {
            "agg" => above_a_tray("tp_size") && col("moe_ep_size") == "1",
            "disagg" => {
                above_a_tray("prefill_tp_size")
                    && col("prefill_tp_size") == col("decode_tp_size")
                    && col("prefill_moe_ep_size") == "1"
            }
            _ => false,
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> String + 'a {
        move |name: &str| pairs.iter().find(|(k, _)| *k == name).map_or(String::new(), |(_, v)| v.to_string())
    }

    const SRC: &str = "source_file=2026-04-06.csv; model=DeepSeek-R1; silicon_concurrency=538";

    #[test]
    fn the_total_gpu_rows_are_recognised_under_both_labels_and_nothing_else() {
        let base = [
            ("silicon_data_source", SRC),
            ("backend", "trtllm"),
            ("system", "gb200"),
            ("model_path", "deepseek-ai/DeepSeek-R1"),
        ];
        let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
            base.iter().chain(extra).copied().collect()
        };
        // The row of the research: agg, tp 64, moe 64 × 1 (8 prefill × DEP4 + one DEP32 decode worker).
        let agg = with(&[("mode", "agg"), ("tp_size", "64"), ("moe_tp_size", "64"), ("moe_ep_size", "1")]);
        assert!(gpus_as_tp(&row(&agg)));
        // Its disagg-labelled twin: prefill and decode both "tp64", ep 1.
        let twin = with(&[
            ("mode", "disagg"),
            ("prefill_tp_size", "64"),
            ("decode_tp_size", "64"),
            ("prefill_moe_ep_size", "1"),
        ]);
        assert!(gpus_as_tp(&row(&twin)));
        // A readable disagg row of the same export: prefill DEP4, decode DEP32 (ep 4 and 32 given).
        let readable = with(&[
            ("mode", "disagg"),
            ("prefill_tp_size", "4"),
            ("decode_tp_size", "32"),
            ("prefill_moe_ep_size", "4"),
        ]);
        assert!(!gpus_as_tp(&row(&readable)));
        // tp 8 fits one worker of a GB200 tray pair: read as written.
        let tp8 = with(&[("mode", "agg"), ("tp_size", "8"), ("moe_ep_size", "1")]);
        assert!(!gpus_as_tp(&row(&tp8)));
        // Another export, system or model: not this family.
        let mut other = agg.clone();
        other[0] = ("silicon_data_source", "source_file=2026-03-25.csv; silicon_concurrency=538");
        assert!(!gpus_as_tp(&row(&other)));
        let mut b200 = agg.clone();
        b200[2] = ("system", "b200_sxm");
        assert!(!gpus_as_tp(&row(&b200)));
    }

    #[test]
    fn the_shared_file_has_seventy_such_rows_thirty_five_under_each_label() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/data/aiconfigurator/serving_runs_blackwell.csv");
        let mut rdr = csv::Reader::from_path(&path).expect("the shared serving runs");
        let header = rdr.headers().unwrap().clone();
        let (mut agg, mut disagg) = (0, 0);
        for rec in rdr.records() {
            let rec = rec.unwrap();
            let col = super::super::speculative::columns(&header, &rec);
            if gpus_as_tp(&col) {
                if col("mode") == "agg" {
                    agg += 1
                } else {
                    disagg += 1
                }
            }
        }
        // Counted by hand from the file (python csv over the export's GB200 TensorRT-LLM DeepSeek-R1 rows): agg
        // tp 12, 20, 24, 28, 32, 36, 40, 48, 52, 64 → 2 + 2 + 3 + 8 + 1 + 11 + 1 + 4 + 2 + 1 = 35; the disagg labels
        // with prefill tp = decode tp of the same values, 35.
        assert_eq!((agg, disagg), (35, 35));
    }
}
