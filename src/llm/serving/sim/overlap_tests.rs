//! TensorRT-LLM's overlap scheduler ([`super::overlap`]): when tokens reach the client, worked by hand.

use super::instance::Role;
use super::steps::StepTimer;
use super::tests::{close, same, same_both_ways, settings, varied};
use super::*;
use crate::llm::serving::request::Engine;
use crate::llm::serving::step::StepLoad;

/// Steps of fixed durations (`ConstantSteps`' 50 ms prefill, 10 ms decode) whose prefill steps run eagerly and
/// take the host `prefill_launch_s` to enqueue; decode steps replay a CUDA graph (no launch time).
struct LaunchSteps {
    prefill_launch_s: f64,
}

impl StepTimer for LaunchSteps {
    fn step_s(&mut self, l: &StepLoad) -> Result<f64, ConfigError> {
        Ok(if l.prefill_tokens > 0 { 0.050 } else { 0.010 })
    }
    fn launch_s(&mut self, l: &StepLoad) -> Result<f64, ConfigError> {
        Ok(if l.prefill_tokens > 0 { self.prefill_launch_s } else { 0.0 })
    }
}

fn trtllm(overlap: bool) -> InstanceSettings {
    let mut s = settings(Engine::Trtllm, 8192, 16, 1000);
    (s.chunked_prefill, s.overlap_scheduler) = (false, overlap);
    s
}

#[test]
fn a_token_shows_once_the_next_step_is_enqueued() {
    // TensorRT-LLM, A (100 prompt tokens, 3 output) sent at 0, B (100, 3) at 30 ms; prefill steps 50 ms whose
    // eager launch takes the host 30 ms, decode steps 10 ms (graph replay, no launch).
    // Steps (both ways): [0, 50] prefill A; [50, 100] decode A + prefill B (B arrived at 30); [100, 110] decode
    // A, B (A's 3rd token); [110, 120] decode B (its 3rd).
    // Without the overlap loop a token shows at its step's end: A 50, 100, 110; B 100, 110, 120.
    //   A: TTFT 50, e2e 110, TPOT (110 − 50)/2 = 30; B: TTFT 100 − 30 = 70, e2e 120 − 30 = 90, TPOT 10.
    // With it, step N's tokens show once step N + 1 is enqueued: the host launches step 1 over [0, 30], then
    // step 2 over [30, 60] while the GPU still runs step 1 (to 50), so
    //   A's 1st (step [0, 50]) shows at max(50, 30 + 30) = 60 = 50 + max(0, 30 + 30 − 50) (TTFT 60, not 50); its
    //   2nd (step ending 100) at 100 + max(0, 30 + 0 − 50) = 100 (step 3 replays a graph); its 3rd at 110.
    //   A: TTFT 60, e2e 110, TPOT (110 − 60)/2 = 25; ITL 100 − 60 = 40 and 10.
    //   B's 1st (step ending 100) at 100; 2nd at 110; 3rd (step [110, 120], nothing follows) at 120:
    //   TTFT 70, e2e 90, TPOT 10; ITL 10, 10.
    let reqs =
        [SimRequest { input: 100, output: 3, arrival_s: 0.0 }, SimRequest { input: 100, output: 3, arrival_s: 0.03 }];
    for (overlap, ttft, e2e, tpot) in
        [(false, [0.05, 0.07], [0.11, 0.09], [0.03, 0.01]), (true, [0.06, 0.07], [0.11, 0.09], [0.025, 0.01])]
    {
        for trace_steps in [1000, 0] {
            let mut timer = LaunchSteps { prefill_launch_s: 0.03 };
            let mut pools = [Pool { settings: trtllm(overlap), workers: 1, timer: &mut timer }];
            let opts = SimOptions { max_steps: 1000, trace_steps, frontend_s: 0.0 };
            let o = simulate(&mut pools, &reqs, None, &|_| 0.0, opts).unwrap();
            close(&o.ttft_s, &ttft);
            close(&o.e2e_s, &e2e);
            close(&o.tpot_s, &tpot);
            assert_eq!(o.steps, 4);
            // ITL: without overlap 50, 10 (A) and 10, 10 (B): mean 20 ms; with it 40, 10, 10, 10: mean 17.5 ms.
            let itl = o.itl_s.stats(1e3);
            assert_eq!(itl.count, 4);
            let mean = if overlap { 17.5 } else { 20.0 };
            assert!((itl.mean_ms - mean).abs() < 1e-9, "{itl:?}");
        }
    }
}

#[test]
fn a_closed_loop_client_sends_after_the_last_token_shows() {
    // One client, two requests of 100 prompt tokens and 2 output tokens; prefill 50 ms with a 30 ms launch.
    // [0, 50] prefill R1; [50, 60] decode R1 (graph): R1's 1st token shows at 50 (TTFT 50), its 2nd — its last —
    // at 60 (nothing follows: the instance is idle). The client sends R2 at 60: [60, 110] prefill R2, [110, 120]
    // decode: TTFT 50, e2e 60 each, both ways — a graph step after each prefill hides nothing.
    // With 3 output tokens and two clients sending at 0 and 5 ms instead: [0, 50] prefill R1; [50, 100] decode R1
    // + prefill R2 (eager): R1's 1st token shows at 50 + max(0, 30 + 30 − 50) = 60 (TTFT 60, not 50); R2's at
    // 100 + max(0, 30 + 0 − 50) = 100 (TTFT 95). Host-bound prefills (a 50 ms launch, the whole step): R1's at
    // 50 + (50 + 50 − 50) = 100 (TTFT 100: the whole next launch), R2's still at 100.
    let mut timer = LaunchSteps { prefill_launch_s: 0.03 };
    let mut pools = [Pool { settings: trtllm(true), workers: 1, timer: &mut timer }];
    let o = simulate(&mut pools, &same(2, 100, 2), Some(1), &|_| 0.0, SimOptions { trace_steps: 0, ..opts() }).unwrap();
    close(&o.ttft_s, &[0.05, 0.05]);
    close(&o.e2e_s, &[0.06, 0.06]);
    assert!((o.duration_s - 0.12).abs() < 1e-12);
    let reqs =
        [SimRequest { input: 100, output: 3, arrival_s: 0.0 }, SimRequest { input: 100, output: 3, arrival_s: 0.005 }];
    let mut timer = LaunchSteps { prefill_launch_s: 0.03 };
    let mut pools = [Pool { settings: trtllm(true), workers: 1, timer: &mut timer }];
    let o = simulate(&mut pools, &reqs, Some(2), &|_| 0.0, opts()).unwrap();
    close(&o.ttft_s, &[0.06, 0.095]);
    let mut timer = LaunchSteps { prefill_launch_s: 0.05 };
    let mut pools = [Pool { settings: trtllm(true), workers: 1, timer: &mut timer }];
    let o = simulate(&mut pools, &reqs, Some(2), &|_| 0.0, opts()).unwrap();
    close(&o.ttft_s, &[0.1, 0.095]);
}

fn opts() -> SimOptions {
    SimOptions { max_steps: 100_000, trace_steps: 1000, frontend_s: 0.0 }
}

#[test]
fn decode_runs_change_nothing_under_the_overlap_scheduler() {
    // The held tokens, their ITLs and the clients' sends are the same to the bit with decode runs advanced at once
    // (the shaped timer launches prefill steps and odd decode batches eagerly).
    for (block, blocks) in [(16, 100_000), (16, 120), (1, 3000)] {
        let mut s = trtllm(true);
        (s.block_tokens, s.kv_blocks, s.token_budget, s.max_num_seqs) = (block, blocks, 1024, 12);
        same_both_ways(&[(s.clone(), 1)], &varied(60, 400, 150, 0.0, 7), Some(20), 0.0);
        same_both_ways(&[(s.clone(), 1)], &varied(60, 400, 150, 0.05, 11), None, 0.001);
        same_both_ways(&[(s.clone(), 3)], &same(40, 200, 90), Some(24), 0.0);
        let mut g = s.clone();
        (g.dp, g.graph_sizes) = (2, vec![1, 2, 4, 8]);
        same_both_ways(&[(g, 2)], &varied(50, 300, 120, 0.01, 5), Some(30), 0.0);
        let (mut p, mut d) = (s.clone(), s);
        (p.role, p.overlap_scheduler, d.role) = (Role::Prefill, false, Role::Decode);
        same_both_ways(&[(p, 2), (d, 3)], &varied(50, 300, 120, 0.0, 3), Some(16), 0.0);
    }
}
