//! When a token reaches the client under TensorRT-LLM's overlap scheduler (PyTorch backend,
//! `disable_overlap_scheduler` = False, the default; [`super::instance::InstanceSettings::overlap_scheduler`]).
//!
//! **The loop** (`tensorrt_llm/_torch/pyexecutor/py_executor.py`, `PyExecutor._executor_loop_overlap`), iteration
//! N + 1: `_prepare_and_schedule_batch` picks batch N + 1; `_forward_step` enqueues its forward, passing step N's
//! sampled tokens as device tensors (`previous_tensors_device`), so a request whose prompt finished in step N is a
//! generation request of step N + 1 — its first decode is not delayed (`_update_request_states` moved it to
//! `GENERATION_IN_PROGRESS` right after step N's `_sample_async`); only then `_update_requests(previous_batch.
//! sample_state)` waits for step N's sampler event and writes its tokens into the requests, `_sample_async` enqueues
//! step N + 1's sampling, and `_process_previous_batch` → `_handle_responses` sends step N's tokens — the first
//! token of a request prefilled in step N included — to the client. So (a) step N's tokens are visible at the later
//! of step N's end and the end of step N + 1's enqueue: when step N + 1 replays a CUDA graph the enqueue is a few
//! microseconds and nothing changes; when it runs eagerly (every step with a context request, and, without
//! `cuda_graph_config.enable_padding`, a generation batch of an uncaptured size) the host launches its kernels one
//! by one first. perfcast's step model starts a step's eager launch with the step (it lasts max(GPU, launch)), and
//! the loop launches step N + 1 as soon as step N's launch is done, so step N's tokens reach the client
//! max(0, L(N) + L(N + 1) − dt(N)) after step N's end ([`delay_s`], launch times from
//! [`super::steps::StepTimer::launch_s`]): the whole next launch after a host-bound step, less after a GPU-bound
//! one. (b) A request whose last token was
//! sampled in step N is still `GENERATION_IN_PROGRESS` when batch N + 1 is scheduled (it is found finished in
//! `_update_requests`, after step N + 1's forward was enqueued): it is scheduled once more and its extra token is
//! dropped (`TorchSampler.update_requests` skips `GENERATION_COMPLETE` requests; `ModelDrafter._prepare_draft_batch`,
//! `tensorrt_llm/_torch/speculative/model_drafter.py`: "Skip generation complete requests. This could happen when
//! enabling overlap scheduler."), and its KV blocks are freed in `_handle_responses` → `_terminate_request`, one
//! iteration late. That extra row and the late release are not modelled (a one-token row in a batch; a slot a
//! closed-loop client only refills after the token arrives anyway). (c) A context request's first generation step
//! is not delayed (see (a)).
//!
//! A disaggregated context (prefill) worker is not delayed: `_send_disagg_ctx_cache` starts a finished context's KV
//! transfer in the same iteration, before step N + 1 is scheduled. vLLM's and SGLang's async scheduling keep their
//! token at the step's end (not changed here).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::instance::Req;
use super::{SimOutcome, Time};

/// How long after step N's end its tokens reach the client, s: `launch_s` and `dt_s` are step N's host launch and
/// duration, `next_launch_s` step N+1's launch. The step model starts a step's launch with the step and the loop
/// launches N+1 right after N (it does not wait for N's GPU work), so N+1's launch ends at N's start +
/// `launch_s` + `next_launch_s`: after N's end by max(0, `launch_s` + `next_launch_s` − `dt_s`). Host-bound
/// steps (`dt_s` = `launch_s`) delay the tokens by the whole next launch; a GPU-bound step hides part of it; a
/// CUDA-graph step N+1 (no launch) none.
pub fn delay_s(launch_s: f64, dt_s: f64, next_launch_s: f64) -> f64 {
    (launch_s + next_launch_s - dt_s).max(0.0)
}

/// The bookkeeping of a request whose last token reached the client (`q.done_s` set): its TTFT, TPOT and
/// end-to-end latency into `out`, and its client's slot freed at `q.done_s` (closed loop).
pub fn complete(q: &Req, out: &mut SimOutcome, slots: &mut BinaryHeap<Reverse<Time>>, closed_loop: bool) {
    out.completed += 1;
    out.input_tokens += q.input as u64;
    out.output_tokens += q.generated as u64;
    let (ttft, e2e) = (q.first_s - q.sent_s, q.done_s - q.sent_s);
    out.ttft_s.push(ttft);
    out.e2e_s.push(e2e);
    let tpot = if q.generated > 1 { (e2e - ttft) / (q.generated - 1) as f64 } else { 0.0 };
    if q.generated > 1 {
        out.tpot_s.push(tpot);
    }
    out.tpot_or_zero_s.push(tpot);
    out.outputs.push(q.generated);
    out.duration_s = out.duration_s.max(q.done_s);
    if closed_loop {
        slots.push(Reverse(Time(q.done_s)));
    }
}

/// Shows the client the tokens of `held` (requests that sampled one in an instance's last step) at `t`, s: the
/// first token sets the TTFT, a later one adds an ITL since the previous shown one, the last one completes the
/// request ([`complete`]). `ahead`: tokens each request has sampled since the held one (a decode run advanced at
/// once, [`super::decode_run`]; else 0). Returns the requests completed.
pub fn release(
    held: &[u32],
    t: f64,
    ahead: u32,
    reqs: &mut [Req],
    out: &mut SimOutcome,
    slots: &mut BinaryHeap<Reverse<Time>>,
    closed_loop: bool,
) -> usize {
    let mut completed = 0;
    for &r in held {
        let q = &mut reqs[r as usize];
        let generated = q.generated - ahead;
        if generated == 1 {
            q.first_s = t;
        } else {
            out.itl_s.push(t - q.shown_s, 1);
        }
        q.shown_s = t;
        if generated >= q.output {
            q.done_s = t;
            complete(q, out, slots, closed_loop);
            completed += 1;
        }
    }
    completed
}
