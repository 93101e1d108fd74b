//! One simulated engine instance (a worker of tp·pp GPUs): its waiting queue, its running batch, its KV-cache
//! blocks, and what one step does to them — the engine-independent half of a step. Which requests a step takes is
//! the engine's policy ([`super::policy`]).
//!
//! A request's state follows vLLM V1's (`vllm/v1/request.py`): `tokens` = prompt + generated tokens, `computed` =
//! tokens whose keys and values are in the cache. A step gives a request n ≤ tokens − computed new tokens; when
//! computed reaches tokens the step samples its next token (the first one ends the prefill). Preemption
//! (recompute) frees the request's blocks and sets computed back to 0: it prefills its prompt and generated tokens
//! again before it samples the next.

use std::collections::VecDeque;

use super::super::request::Engine;
use super::super::step::StepLoad;
use super::stats::Weighted;
use super::steps::{bucket, padded};

/// Where an instance sits in the deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Prefill and decode on the same instance (aggregated serving).
    Both,
    /// A disaggregated prefill worker: a request leaves once its first token is sampled (its KV cache is sent to a
    /// decode worker).
    Prefill,
    /// A disaggregated decode worker: what an arriving request still needs depends on the engine
    /// ([`decode_arrival`]).
    Decode,
}

/// One request's state (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Req {
    pub input: u32,
    pub output: u32,
    /// Tokens the cache must hold before the next sample: prompt + generated.
    pub tokens: u32,
    /// Tokens whose keys and values are cached.
    pub computed: u32,
    /// Output tokens sampled (client-visible ones on this instance).
    pub generated: u32,
    /// KV blocks held.
    pub blocks: u32,
    /// Blocks held in reserve for the rest of the request (TensorRT-LLM's guaranteed-no-evict admission).
    pub reserved: u32,
    /// When the client sent it, s.
    pub sent_s: f64,
    /// First token at the client, s (NaN before).
    pub first_s: f64,
    /// When the engine sampled its last token (the end of that step), s.
    pub last_s: f64,
    /// When the client got its last token so far, s (NaN before): the previous token of the next inter-token
    /// latency. Later than `last_s` while an overlap engine has not streamed it yet ([`Instance::show`]).
    pub shown_s: f64,
    /// Last token of the request, s (NaN before).
    pub done_s: f64,
    /// Times it was preempted.
    pub preemptions: u32,
    /// The attention data-parallel rank that runs it on a disaggregated SGLang decode worker (0 otherwise;
    /// [`Instance::prebuild`]).
    pub dp_rank: u32,
}

impl Req {
    /// A request of `input` prompt tokens generating `output`, sent at `sent_s`.
    pub fn new(input: u32, output: u32, sent_s: f64) -> Req {
        Req {
            input,
            output,
            tokens: input,
            computed: 0,
            generated: 0,
            blocks: 0,
            reserved: 0,
            sent_s,
            first_s: f64::NAN,
            last_s: f64::NAN,
            shown_s: f64::NAN,
            done_s: f64::NAN,
            preemptions: 0,
            dp_rank: 0,
        }
    }

    /// Tokens still to compute before the next sample.
    pub fn pending(&self) -> u32 {
        self.tokens - self.computed
    }
}

/// Sets request `q` (prompt of `input` tokens) up as it arrives at a disaggregated decode worker of `engine`, its
/// prompt's KV cache transferred from the prefill worker:
/// - **vLLM** (and Dynamo's vLLM backend, NixlConnector): the connector loads the whole prompt
///   (`NixlConnectorScheduler.get_num_new_matched_tokens`, `vllm/distributed/kv_transfer/kv_connector/v1/
///   nixl_connector.py`: prompt length − computed tokens), but the scheduler, on a full-prompt hit, recomputes the
///   last token in order to sample (`Scheduler._update_waiting_for_remote_kv`, `vllm/v1/core/sched/scheduler.py`):
///   the decode worker computes the last prompt token and samples the first output token.
/// - **SGLang** (and Dynamo's SGLang backend, which runs SGLang's own disaggregation): the first output token comes
///   from the prefill server; the decode worker "creates a schedulebatch for fake completed prefill"
///   (`get_new_prebuilt_batch`, `python/sglang/srt/disaggregation/decode.py`), runs no forward for it, streams that
///   token (`process_batch_result_prebuilt`) and merges the request into the running batch at the next iteration
///   (`get_next_disagg_decode_batch_to_run`, `running_batch.merge_batch`): [`Instance::prebuild`].
/// - **TensorRT-LLM** (and Dynamo's TensorRT-LLM backend): the generation server starts the request from the
///   context server's first token (`PyExecutor._prepare_disagg_gen_transmission_complete`,
///   `tensorrt_llm/_torch/pyexecutor/py_executor.py`: state `GENERATION_IN_PROGRESS`, `context_current_position =
///   prompt_len`, `add_new_token(first_gen_tokens)`): its first step is an ordinary generation step that computes
///   the second output token; the client gets the first token with that step's response.
pub fn decode_arrival(engine: Engine, q: &mut Req) {
    let input = q.input;
    (q.blocks, q.reserved) = (0, 0);
    match engine {
        Engine::Vllm => (q.tokens, q.computed, q.generated) = (input, input - 1, 0),
        Engine::Sglang | Engine::Trtllm => (q.tokens, q.computed, q.generated) = (input + 1, input, 1),
    }
}

/// An instance's engine settings.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceSettings {
    pub engine: Engine,
    pub role: Role,
    /// Most requests running at once (all data-parallel attention ranks together).
    pub max_num_seqs: u32,
    /// Most tokens per step (vLLM `max_num_batched_tokens`, SGLang `chunked_prefill_size`, TensorRT-LLM
    /// `max_num_tokens`; all ranks together).
    pub token_budget: u32,
    /// Prompts are split into chunks across steps.
    pub chunked_prefill: bool,
    /// SGLang's `max_prefill_tokens` (prompt tokens one prefill batch takes, 16,384 by default).
    pub max_prefill_tokens: u32,
    /// Tokens per KV block.
    pub block_tokens: u32,
    /// KV blocks of the instance (all ranks together).
    pub kv_blocks: u64,
    /// Captured CUDA-graph decode batch sizes, ascending (empty: none).
    pub graph_sizes: Vec<u32>,
    /// A decode batch is padded up to the next captured size ([`super::steps::replays_graph`]); off, a batch of
    /// another size than a captured one runs eagerly, unpadded.
    pub graph_padding: bool,
    /// Data-parallel attention ranks: each runs its own share of the batch, so a padded graph batch is per rank.
    pub dp: u32,
    /// SGLang's `scheduler_recv_interval` (1: requests are received every iteration; [`Instance::receive`]).
    pub recv_interval: u32,
    /// The engine forms its next batch while the GPU runs the current one (the engine setting `async_scheduling`:
    /// vLLM V1's `EngineCore.step_with_batch_queue` with a batch queue of two, SGLang's `event_loop_overlap`,
    /// TensorRT-LLM's `PyExecutor._executor_loop_overlap`), so a request that reaches a busy instance after a step
    /// started joins the step after the next ([`Instance::release_held`]).
    pub overlap: bool,
    /// An overlap engine's host thread launches step k + 1 before it processes (and streams) step k's sampled
    /// tokens, so a token of step k reaches the client only when step k + 1 is launched ([`Instance::launched`],
    /// [`Instance::show`]). SGLang `Scheduler.event_loop_overlap` (`python/sglang/srt/managers/scheduler.py`:
    /// `run_batch(batch)`, then `pop_and_process()` → `process_batch_result` of the last batch); TensorRT-LLM
    /// `PyExecutor._executor_loop_overlap` (`tensorrt_llm/_torch/pyexecutor/py_executor.py`: `_forward_step`, then
    /// `_process_previous_batch` → `_handle_responses`); vLLM V1 `EngineCore.step_with_batch_queue`
    /// (`vllm/v1/engine/core.py`) only with one GPU per engine: `UniProcExecutor.collective_rpc` runs the worker's
    /// `execute_model` in the engine-core thread before it blocks on the oldest batch's future, whereas with
    /// several (`MultiprocExecutor`) the workers launch and hand step k's output to their output thread
    /// (`WorkerProc.handle_output` → `async_output_busy_loop`), which streams it while step k + 1 is launched.
    pub results_after_launch: bool,
    /// Tokens a decode step yields per sequence on average (speculative decoding's E,
    /// [`crate::llm::serving::speculative::Speculative::tokens_per_step`]; 1 without it). The simulation steps a
    /// request of O output tokens through 1 + ⌈(O − 1)/E⌉ samples ([`super::simulate`]) and charges each decode
    /// the context it has in tokens ([`InstanceSettings::decode_context`]).
    pub tokens_per_decode_step: f64,
}

impl InstanceSettings {
    /// The context a decoding request attends, tokens, when `computed` of its simulated tokens are cached and its
    /// prompt is `input` tokens long: computed + 1 (the new token), or with speculative decoding the prompt plus
    /// E tokens per simulated output token (each decode step of the simulation stands for E tokens).
    pub fn decode_context(&self, input: u32, computed: u32) -> u64 {
        if self.tokens_per_decode_step == 1.0 || computed < input {
            computed as u64 + 1
        } else {
            input as u64 + ((computed + 1 - input) as f64 * self.tokens_per_decode_step).round() as u64
        }
    }
}

/// The requests one step runs: (request, new tokens).
pub type Batch = Vec<(u32, u32)>;

/// One instance's state.
#[derive(Debug, Clone)]
pub struct Instance {
    pub settings: InstanceSettings,
    /// Requests sent to the instance that its scheduler has not received yet (SGLang with a
    /// `scheduler_recv_interval` above 1: still in its socket; [`Instance::receive`]).
    pub inbox: VecDeque<u32>,
    /// Requests waiting for admission (front first; preempted requests return to the front).
    pub waiting: VecDeque<u32>,
    /// Admitted requests, in admission order (preemption takes the last).
    pub running: Vec<u32>,
    /// Free KV blocks.
    pub free_blocks: u64,
    /// When its last step ends, s.
    pub free_at: f64,
    /// SGLang: the share of its remaining output tokens a running request is assumed to still need
    /// (`new_token_ratio`, decays from 0.7 to 0.098 over 600 decode batches, back to 0.7 after a retraction).
    pub new_token_ratio: f64,
    /// Preemptions (recomputations) so far.
    pub preemptions: u64,
    /// The step being built.
    pub batch: Batch,
    /// SGLang's `SchedulerRecvSkipper` counter: the weights of the batches run since the last reception.
    pub recv_counter: u32,
    /// The last step was a decode-only batch (SGLang's `ForwardMode.DECODE`); false after a batch with prefill
    /// or when idle.
    pub last_decode: bool,
    /// Overlap engines ([`InstanceSettings::overlap`]): requests delivered with their delivery times, s, that no
    /// batch formed so far could include (delivery order).
    pub held: VecDeque<(u32, f64)>,
    /// Start and end of the instance's last step, s (−∞ before the first): the next step follows it back to back
    /// when it starts at `last_end`, and an overlap engine formed that next batch at `last_start`.
    pub last_start: f64,
    pub last_end: f64,
    /// Engines with [`InstanceSettings::results_after_launch`]: the requests that sampled a token in the last
    /// step (at `last_end`) that the client has not got yet ([`Instance::show`]).
    pub unseen: Vec<u32>,
    /// When the host finished launching the last step, s ([`Instance::launched`]; −∞ before the first).
    pub host_s: f64,
    /// SGLang disaggregated decode: the next attention data-parallel rank a prebuilt request goes to (SGLang's data
    /// parallel controller's default round robin, `DataParallelController.round_robin_scheduler`,
    /// `python/sglang/srt/managers/data_parallel_controller.py`).
    pub rank_turn: u32,
    /// SGLang disaggregated decode: requests whose only output token came from the prefill server, finished when
    /// they were prebuilt ([`Instance::prebuild`]); the simulator completes them.
    pub prebuilt_done: Vec<u32>,
}

/// SGLang's `SchedulerRecvSkipper` weight of a batch that is not a decode (`SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_
/// DEFAULT`, 1,000, `python/sglang/srt/environ.py`): after a prefill batch the next iteration receives.
pub const SGLANG_RECV_WEIGHT_OTHER: u32 = 1000;

/// SGLang's initial `new_token_ratio` (`global_config.default_init_new_token_ratio`).
pub const SGLANG_INIT_NEW_TOKEN_RATIO: f64 = 0.7;
/// SGLang's floor: 0.7 × `default_min_new_token_ratio_factor` 0.14.
pub const SGLANG_MIN_NEW_TOKEN_RATIO: f64 = 0.7 * 0.14;
/// SGLang decays the ratio to its floor over `default_new_token_ratio_decay_steps` = 600 decode batches.
pub const SGLANG_DECAY_STEPS: f64 = 600.0;

impl Instance {
    /// An idle instance.
    pub fn new(settings: InstanceSettings) -> Instance {
        Instance {
            free_blocks: settings.kv_blocks,
            settings,
            waiting: VecDeque::new(),
            running: Vec::new(),
            free_at: 0.0,
            new_token_ratio: SGLANG_INIT_NEW_TOKEN_RATIO,
            preemptions: 0,
            batch: Vec::new(),
            inbox: VecDeque::new(),
            recv_counter: 0,
            last_decode: false,
            held: VecDeque::new(),
            last_start: f64::NEG_INFINITY,
            last_end: f64::NEG_INFINITY,
            unseen: Vec::new(),
            host_s: f64::NEG_INFINITY,
            rank_turn: 0,
            prebuilt_done: Vec::new(),
        }
    }

    /// Nothing running, waiting or received: a batch formed now would be empty.
    pub fn quiet(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty() && self.inbox.is_empty()
    }

    /// Whether an overlap engine formed the batch of the step starting at `start_s` while the previous step ran
    /// (when that one started): the step follows the previous one back to back and the batch formed then was not
    /// empty ([`Instance::release_held`]). Call it before the step's batch is scheduled.
    pub fn follows(&self, start_s: f64) -> bool {
        self.settings.overlap && start_s == self.last_end && !self.quiet()
    }

    /// The host launches the step of `wall_s` starting at `start_s` in `launch_s` (at most `wall_s`), all s;
    /// `prev_start_s`: when the previous step started; `follows`: [`Instance::follows`] before it was scheduled.
    /// Returns when the host has finished launching it, s, and keeps it in `host_s`. A step that follows is
    /// launched as soon as the host has launched the previous one and the one before that has ended (SGLang's and
    /// TensorRT-LLM's overlap loops wait for step k − 1's results after launching step k, then form and launch
    /// step k + 1: `max(host_s, prev_start_s)`, the previous step having started when step k − 1 ended); any other
    /// step when it starts.
    pub fn launched(&mut self, start_s: f64, prev_start_s: f64, follows: bool, wall_s: f64, launch_s: f64) -> f64 {
        let from = if follows { self.host_s.max(prev_start_s) } else { start_s };
        self.host_s = from + launch_s.min(wall_s);
        self.host_s
    }

    /// Streams the last step's tokens ([`Instance::show`]) when the step of `wall_s` starting at `start_s` has been
    /// launched in `launch_s` ([`Instance::launched`]) if it `follows` the last step back to back, else when the
    /// last step ended ([`InstanceSettings::results_after_launch`]). Returns that time, s.
    #[allow(clippy::too_many_arguments)]
    pub fn show_when_launched(
        &mut self,
        reqs: &mut [Req],
        start_s: f64,
        follows: bool,
        wall_s: f64,
        launch_s: f64,
        itl: &mut Weighted,
        done: &mut Vec<u32>,
    ) -> f64 {
        let launched = self.launched(start_s, self.last_start, follows, wall_s, launch_s);
        let at = if follows { launched.max(self.last_end) } else { self.last_end };
        self.show(reqs, at, itl, done);
        at
    }

    /// Streams the tokens of the last step to the client at `at_s` ([`InstanceSettings::results_after_launch`]):
    /// a request's first token sets its TTFT, any other adds an ITL; a request with all its output tokens is done
    /// (pushed to `done`). Empties `unseen`.
    pub fn show(&mut self, reqs: &mut [Req], at_s: f64, itl: &mut Weighted, done: &mut Vec<u32>) {
        for &r in &self.unseen {
            let q = &mut reqs[r as usize];
            if q.first_s.is_nan() {
                q.first_s = at_s;
            } else {
                itl.push(at_s - q.shown_s, 1);
            }
            q.shown_s = at_s;
            if q.generated >= q.output {
                q.done_s = at_s;
                done.push(r);
            }
        }
        self.unseen.clear();
    }

    /// Requests sent and not finished: held, in the inbox, waiting or running.
    pub fn outstanding(&self) -> usize {
        self.held.len() + self.inbox.len() + self.waiting.len() + self.running.len()
    }

    /// Hands request `r` to the instance at time `t_s`: on an overlap engine to the requests held until a batch
    /// formed after `t_s` ([`Instance::release_held`]), else to its scheduler ([`Instance::admit`]).
    pub fn deliver(&mut self, r: u32, t_s: f64) {
        if self.settings.overlap {
            self.held.push_back((r, t_s));
        } else {
            self.admit(r);
        }
    }

    /// An overlap engine's scheduler, forming the batch of the step that starts at `start_s`, sees the requests
    /// delivered by the time it formed it. A step that follows the previous one back to back (`start_s` =
    /// `last_end`) was formed when the previous step started: vLLM V1's `EngineCore.step_with_batch_queue`
    /// (`vllm/v1/engine/core.py`) schedules batch k + 1 as soon as batch k is submitted and then blocks on batch k's
    /// output, taking new requests from its input queue only after that (`run_busy_loop`, `_process_input_queue`);
    /// SGLang's `Scheduler.event_loop_overlap` (`managers/scheduler.py`) runs `recv_requests`,
    /// `get_next_batch_to_run` and `run_batch` for batch k + 1 before it processes batch k's results; TensorRT-LLM's
    /// `PyExecutor._executor_loop_overlap` fetches new requests and schedules batch k + 1 before waiting for batch
    /// k (`_process_previous_batch`). A request delivered while step k runs therefore joins step k + 2. A step
    /// after idle time, or one whose formed batch would have been empty (nothing running, waiting or received: the
    /// engine waits for step k's output and then schedules what arrived), takes every held request. Released
    /// requests go to the scheduler in delivery order ([`Instance::admit`]).
    pub fn release_held(&mut self, start_s: f64) {
        if self.held.is_empty() {
            return;
        }
        let formed = if self.follows(start_s) { self.last_start } else { f64::INFINITY };
        while let Some(&(r, t)) = self.held.front() {
            if t > formed {
                break;
            }
            self.held.pop_front();
            self.admit(r);
        }
    }

    /// Gives request `r` to the scheduler: to its waiting queue, or with a `recv_interval` above 1 to the inbox
    /// the scheduler takes it from ([`Instance::receive`]).
    pub fn admit(&mut self, r: u32) {
        if self.settings.recv_interval > 1 {
            self.inbox.push_back(r);
        } else {
            self.waiting.push_back(r);
        }
    }

    /// SGLang's `Scheduler.recv_requests` at the top of an event-loop iteration under `--scheduler-recv-interval`
    /// R > 1 (`python/sglang/srt/managers/scheduler_recv_skipper.py`, `SchedulerRecvSkipper.handle`): the last
    /// batch's weight — 1 for a decode batch, [`SGLANG_RECV_WEIGHT_OTHER`] for any other — is added to a counter,
    /// and when the counter reaches R it is reset and the requests in the socket join the waiting queue. A
    /// request that arrives during decoding therefore waits for the R-th decode batch since the last reception;
    /// one arriving after a prefill batch is received at once. An idle scheduler (nothing running or waiting)
    /// spins its loop with weight 1 per empty iteration, microseconds each: perfcast receives at once.
    pub fn receive(&mut self) {
        if self.settings.recv_interval <= 1 {
            self.waiting.extend(self.inbox.drain(..));
            return;
        }
        let idle = self.running.is_empty() && self.waiting.is_empty();
        let weight = if self.last_decode { 1 } else { SGLANG_RECV_WEIGHT_OTHER };
        self.recv_counter = self.recv_counter.saturating_add(weight);
        if idle || self.recv_counter >= self.settings.recv_interval {
            self.recv_counter = 0;
            self.waiting.extend(self.inbox.drain(..));
        }
    }

    /// Blocks that `tokens` cached tokens occupy.
    pub fn blocks_for(&self, tokens: u32) -> u32 {
        tokens.div_ceil(self.settings.block_tokens.max(1))
    }

    /// KV blocks in use.
    pub fn used_blocks(&self) -> u64 {
        self.settings.kv_blocks - self.free_blocks
    }

    /// Frees `r`'s blocks and sends it back to the front of the queue to be recomputed (vLLM `_preempt_request`,
    /// SGLang `retract_decode`).
    pub fn preempt(&mut self, reqs: &mut [Req], r: u32) {
        let q = &mut reqs[r as usize];
        self.free_blocks += q.blocks as u64 + q.reserved as u64;
        q.blocks = 0;
        q.reserved = 0;
        q.computed = 0;
        q.preemptions += 1;
        self.preemptions += 1;
        self.waiting.push_front(r);
    }

    /// Grows `r`'s blocks to hold `tokens` cached tokens, from its reserve first; false (nothing taken) when the
    /// pool has too few free blocks.
    pub fn grow(&mut self, reqs: &mut [Req], r: u32, tokens: u32) -> bool {
        let need = self.blocks_for(tokens);
        let q = &mut reqs[r as usize];
        if need <= q.blocks {
            return true;
        }
        let extra = need - q.blocks;
        let from_reserve = extra.min(q.reserved);
        let from_pool = (extra - from_reserve) as u64;
        if from_pool > self.free_blocks {
            return false;
        }
        self.free_blocks -= from_pool;
        q.reserved -= from_reserve;
        q.blocks = need;
        true
    }

    /// The shape of the step in `self.batch` (decodes are the requests given one token; every count quantized by
    /// [`bucket`] — exact up to 64; a decode-only batch padded to its CUDA graph's size per data-parallel rank).
    pub fn load(&self, reqs: &[Req]) -> StepLoad {
        let (mut decodes, mut ctx, mut prefill, mut sampled, mut prompt) = (0u32, 0u64, 0u32, 0u32, 0u64);
        for &(r, n) in &self.batch {
            let q = &reqs[r as usize];
            if n == 1 {
                decodes += 1;
                ctx += self.settings.decode_context(q.input, q.computed);
            } else {
                prefill += n;
                prompt += q.tokens as u64 * n as u64;
            }
            if q.computed + n == q.tokens {
                sampled += 1;
            }
        }
        let mut load = StepLoad {
            decode_seqs: bucket(decodes),
            decode_context: if decodes > 0 { bucket((ctx / decodes as u64) as u32) } else { 0 },
            prefill_tokens: bucket(prefill),
            // The prompt length prefill attention is charged against: the chunks' prompts weighted by their tokens.
            prompt_len: if prefill > 0 { bucket((prompt / prefill as u64) as u32) } else { 0 },
            sampled: bucket(sampled),
            graph_pad_tokens: 0,
            draft_tokens: 0,
        };
        if prefill == 0 && decodes > 0 && self.settings.graph_padding {
            let dp = self.settings.dp.max(1);
            if let Some(p) = padded(&self.settings.graph_sizes, decodes.div_ceil(dp)) {
                load.decode_seqs = p * dp;
                load.sampled = p * dp;
            }
        }
        load
    }
}
