//! Which rows are InferenceX's speculative-decoding (MTP) runs: a hand-built file and the shared one.

use std::path::Path;

use super::*;

fn read(csv_text: &str) -> (csv::StringRecord, Vec<csv::StringRecord>) {
    let mut rdr = csv::Reader::from_reader(csv_text.as_bytes());
    let header = rdr.headers().unwrap().clone();
    (header, rdr.records().map(Result::unwrap).collect())
}

#[test]
fn hand_built_rows_are_flagged_by_image_date_and_db_dump_copy() {
    // Columns the rule reads. SGLang DeepSeek-R1 fp8 on B200 at tp 8, ep 1, 1k/8k, 4 clients:
    // - `db`: the db-dump's non-MTP config, TPOT 10.13 ms;
    // - `copy`: the 2026-03-25 export's copy of that measurement (same TTFT and TPOT): the non-MTP series, kept;
    // - `mtp`: the same cell, same run, TPOT 4.37 ms: flagged;
    // - `tp4`: the same run at tp 4 (the MTP config is tp 8 only): kept;
    // - `later`: the same cell measured 2026-04-01 (another date): kept.
    // TensorRT-LLM: `post3` (image `nvcr.io#…post3`) and `post3b` (`nvcr.io/…post3`) flagged; `post2` (the
    // non-MTP image, measured 2026-01-29) kept; `jan` (post2 image, DeepSeek-R1 agg on B200, measured 2026-01-14)
    // flagged; `jan_gb200` (the same date on GB200) kept.
    let text = "\
id,backend,system,model_path,precision,mode,isl,osl,tp_size,attention_dp_size,moe_ep_size,silicon_ttft_ms,silicon_tpot_ms,silicon_data_source
db,sglang,b200_sxm,deepseek-ai/DeepSeek-V3,fp8,agg,1024,8192,8,1,1,193.0,10.13,db-dump/2026-04-27; config_id=87; silicon_concurrency=4; measured=2026-03-01T00:00:00.000Z; lmsysorg/sglang:v0.5.9-cu130
copy,sglang,b200_sxm,deepseek-ai/DeepSeek-R1,fp8,agg,1024,8192,8,1,1,193.0,10.13,source_file=2026-03-25.csv; silicon_concurrency=4; measured=2026-03-25T16:34:14Z; image=lmsysorg/sglang:v0.5.9-cu130
mtp,sglang,b200_sxm,deepseek-ai/DeepSeek-R1,fp8,agg,1024,8192,8,1,1,195.0,4.37,source_file=2026-03-25.csv; silicon_concurrency=4; measured=2026-03-25T17:00:00Z; image=lmsysorg/sglang:v0.5.9-cu130
tp4,sglang,b200_sxm,deepseek-ai/DeepSeek-R1,fp8,agg,1024,8192,4,1,1,195.0,6.0,source_file=2026-03-25.csv; silicon_concurrency=4; measured=2026-03-25T17:00:00Z; image=lmsysorg/sglang:v0.5.9-cu130
later,sglang,b200_sxm,deepseek-ai/DeepSeek-R1,fp8,agg,1024,8192,8,1,1,190.0,10.5,source_file=2026-04-06.csv; silicon_concurrency=4; measured=2026-04-01T00:00:00Z; image=lmsysorg/sglang:v0.5.9-cu130
post3,trtllm,b200_sxm,deepseek-ai/DeepSeek-R1,fp8,agg,1024,8192,8,1,1,195.0,4.37,source_file=2026-03-25.csv; silicon_concurrency=4; measured=2026-02-05T00:00:00Z; image=nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3
post3b,trtllm,b200_sxm,deepseek-ai/DeepSeek-R1,fp4,agg,1024,1024,8,1,8,100.0,5.0,source_file=2026-04-06.csv; silicon_concurrency=32; measured=2026-02-06T00:00:00Z; image=nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post3
post2,trtllm,b200_sxm,deepseek-ai/DeepSeek-R1,fp8,agg,1024,8192,8,1,1,193.0,10.13,source_file=2026-03-25.csv; silicon_concurrency=4; measured=2026-01-29T00:00:00Z; image=nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post2
jan,trtllm,b200_sxm,deepseek-ai/DeepSeek-R1,fp4,agg,1024,1024,4,1,4,90.0,6.0,source_file=2026-03-25.csv; silicon_concurrency=16; measured=2026-01-14T22:26:21Z; image=nvcr.io#nvidia/tensorrt-llm/release:1.1.0rc2.post2
jan_gb200,trtllm,gb200,deepseek-ai/DeepSeek-R1,fp4,agg,1024,1024,4,1,4,90.0,6.0,source_file=2026-03-25.csv; silicon_concurrency=16; measured=2026-01-14T22:26:21Z; image=nvcr.io#nvidia/tensorrt-llm/release:1.1.0rc2.post2
";
    let (header, records) = read(text);
    assert_eq!(speculative_ids(&header, &records), ["mtp", "post3", "post3b", "jan"]);
}

#[test]
fn the_shared_file_flags_163_rows_88_of_them_on_the_post3_image() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/aiconfigurator/serving_runs_blackwell.csv");
    let mut rdr = csv::Reader::from_path(&path).unwrap();
    let header = rdr.headers().unwrap().clone();
    let records: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    let ids: HashSet<String> = speculative_ids(&header, &records).into_iter().collect();
    // The research's rule (pairing with the db-dump, sweep, run, copies; /tmp/mtpcheck/rule2.py, 2026-11-29) flags
    // 163 rows: 88 on the post3 image, 32 TensorRT-LLM rows measured 2026-01-14, 43 SGLang rows of 2026-03-25.
    assert_eq!(ids.len(), 88 + 32 + 43);
    let flagged: Vec<_> = records.iter().map(|r| columns(&header, r)).filter(|c| ids.contains(&c("id"))).collect();
    let post3 = flagged.iter().filter(|c| c("silicon_data_source").contains(MTP_TRTLLM_IMAGE_TAG)).count();
    assert_eq!(post3, 88);
    let sglang = flagged.iter().filter(|c| c("backend") == "sglang").count();
    assert_eq!(sglang, 43);
    // All DeepSeek-R1 aggregated on B200; none a db-dump row.
    assert!(flagged.iter().all(|c| c("model_path") == "deepseek-ai/DeepSeek-R1"
        && c("mode") == "agg"
        && c("system") == "b200_sxm"
        && !c("silicon_data_source").starts_with("db-dump")));
    // The report's example: TensorRT-LLM fp8 tp8 ep1 at 128 clients on post3 is flagged.
    assert!(ids.iter().any(|id| id.contains("trtllm_fp8_agg") && id.ends_with("_c128_tp8_ep1_1562")));
}
