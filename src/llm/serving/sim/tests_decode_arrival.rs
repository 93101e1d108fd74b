//! Hand-worked disaggregated runs: what each engine's decode worker computes when a request arrives
//! ([`super::instance::decode_arrival`], [`super::instance::Instance::prebuild`]). Steps of [`STEPS`]: prefill
//! 50 ms, decode 10 ms.

use super::instance::Role;
use super::tests::{close, same, settings, OPTS, STEPS};
use super::*;
use crate::llm::serving::request::Engine;

/// One prefill and one decode worker of `engine` (decode with `dp` attention ranks), `reqs` sent by `concurrency`
/// clients, the KV transfer taking `transfer_s_per_64` s per 64 prompt tokens.
fn disagg(
    engine: Engine,
    dp: u32,
    reqs: &[SimRequest],
    concurrency: Option<u32>,
    transfer_s_per_64: f64,
) -> SimOutcome {
    let (mut pt, mut dt) = (STEPS, STEPS);
    let mut p = settings(engine, 8192, 16, 1000);
    p.role = Role::Prefill;
    let mut d = p.clone();
    (d.role, d.dp) = (Role::Decode, dp);
    let mut pools =
        [Pool { settings: p, workers: 1, timer: &mut pt }, Pool { settings: d, workers: 1, timer: &mut dt }];
    simulate(&mut pools, reqs, concurrency, &|input| transfer_s_per_64 * input as f64 / 64.0, OPTS).unwrap()
}

#[test]
fn each_engines_decode_worker_starts_where_its_code_does() {
    // One request of 64 prompt and 3 output tokens; the prefill step ends at 50 ms, the transfer takes 30 ms: it
    // reaches the decode worker at 80 ms.
    // vLLM: the decode worker computes the last prompt token and samples token 1 in [80, 90] (TTFT 90), tokens 2
    // and 3 at 100 and 110 ms: three decode-worker steps, four in all.
    let o = disagg(Engine::Vllm, 1, &same(1, 64, 3), Some(1), 0.030);
    close(&o.ttft_s, &[0.09]);
    close(&o.e2e_s, &[0.11]);
    assert_eq!((o.steps, o.output_tokens), (4, 3));
    // SGLang: token 1 came from the prefill server and is streamed when the request is prebuilt at 80 ms (TTFT 80,
    // no forward); it decodes tokens 2 and 3 in [80, 90] and [90, 100]: e2e 100 ms, TPOT (100 − 80)/2 = 10 ms,
    // two decode-worker steps, three in all.
    let o = disagg(Engine::Sglang, 1, &same(1, 64, 3), Some(1), 0.030);
    close(&o.ttft_s, &[0.08]);
    close(&o.e2e_s, &[0.10]);
    close(&o.tpot_s, &[0.01]);
    assert_eq!((o.steps, o.output_tokens), (3, 3));
    // TensorRT-LLM: the generation server starts from the context server's token 1; its first step [80, 90]
    // computes token 2, and the client gets tokens 1 and 2 at 90 ms (TTFT 90); token 3 at 100 ms: TPOT
    // (100 − 90)/2 = 5 ms; three steps in all.
    let o = disagg(Engine::Trtllm, 1, &same(1, 64, 3), Some(1), 0.030);
    close(&o.ttft_s, &[0.09]);
    close(&o.e2e_s, &[0.10]);
    close(&o.tpot_s, &[0.005]);
    assert_eq!((o.steps, o.output_tokens), (3, 3));
}

#[test]
fn an_sglang_request_of_one_output_token_finishes_when_prebuilt() {
    // 64 prompt tokens, 1 output token: prefill [0, 50], transfer 30 ms; the decode worker prebuilds it at 80 ms
    // and it finishes there (TTFT = e2e = 80 ms) without a decode step: one step in all (the prefill).
    let o = disagg(Engine::Sglang, 1, &same(1, 64, 1), Some(1), 0.030);
    close(&o.ttft_s, &[0.08]);
    close(&o.e2e_s, &[0.08]);
    assert_eq!((o.completed, o.steps, o.output_tokens), (1, 1, 1));
}

#[test]
fn an_sglang_arrival_costs_its_attention_rank_one_step() {
    // A and B (64 prompt, 10 output tokens) sent at 0, C (64, 3) at 55 ms; no transfer time. The prefill worker
    // prefills A and B in [0, 50] and C in [55, 105].
    // Decode worker with 2 attention-DP ranks: A and B are prebuilt at 50 ms (token 1, TTFT 50) on ranks 0 and 1;
    // both ranks prebuilt, so that iteration ran no forward and [50, 60] decodes both: token k at 50 + 10·(k − 1)
    // ms. C reaches it mid-step at 105 ms and is prebuilt at 110 (TTFT 110 − 55 = 55) on rank 0 (the third in
    // turn): rank 0 runs an idle forward in [110, 120], so A skips it while B decodes token 8. Then all three
    // decode: C's tokens 2 and 3 at 130 and 140 ms, B's token 10 at 140, A's (one step late) at 150.
    let reqs = [
        SimRequest { input: 64, output: 10, arrival_s: 0.0 },
        SimRequest { input: 64, output: 10, arrival_s: 0.0 },
        SimRequest { input: 64, output: 3, arrival_s: 0.055 },
    ];
    let o = disagg(Engine::Sglang, 2, &reqs, None, 0.0);
    // In order of completion: B and C (140 ms, batch order), A (150).
    close(&o.ttft_s, &[0.05, 0.055, 0.05]);
    close(&o.e2e_s, &[0.14, 0.085, 0.15]);
    // One attention rank (dp 1): C's prebuilt iteration runs no forward and [110, 120] decodes all three: C
    // finishes at 130 ms (tokens 2, 3 at 120, 130), A and B at 140.
    let o = disagg(Engine::Sglang, 1, &reqs, None, 0.0);
    close(&o.ttft_s, &[0.055, 0.05, 0.05]);
    close(&o.e2e_s, &[0.075, 0.14, 0.14]);
}
