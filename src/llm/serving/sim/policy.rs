//! Each engine's scheduling policy: which requests the next step runs, how many tokens each gets, which are
//! admitted and which are preempted when the KV cache runs out — from the engines' own schedulers.
//!
//! - **vLLM V1** (`vllm/v1/core/sched/scheduler.py`, `Scheduler.schedule`, FCFS): first the RUNNING requests in
//!   order, each given min(tokens − computed, remaining budget) new tokens (a decode takes 1, a chunked prefill the
//!   rest of its prompt up to the budget); when `allocate_slots` cannot find the blocks, the last running request
//!   is preempted (`self.running.pop()`, recompute: its blocks freed, it returns to the front of the waiting queue)
//!   until the blocks fit or the request itself was preempted. Then, only if nothing was preempted in this step,
//!   the WAITING requests in order while budget remains and fewer than `max_num_seqs` run; without chunked
//!   prefill a prompt larger than the remaining budget waits for the next step. No watermark (V1's
//!   `KVCacheManager` has none).
//! - **SGLang** (`python/sglang/srt/managers/scheduler.py` `get_next_batch_to_run`, `schedule_policy.py`
//!   `PrefillAdder`): prefill first — whenever requests wait and the running batch is not full, the step is a
//!   prefill batch (mixed chunks are off by default, `--enable-mixed-chunk`): the request in the middle of a
//!   chunked prefill continues first, then waiting requests in order while the batch holds fewer than
//!   `chunked_prefill_size` prompt tokens (a longer prompt is cut there and continues in the next prefill batch) and
//!   `max_prefill_tokens` (16,384) — and while the KV pool can hold the request's prompt plus its output estimate
//!   (the output up to `CLIP_MAX_NEW_TOKENS_ESTIMATION` 4,096, in full for new requests and × `new_token_ratio` for
//!   the running ones' remainder). Otherwise the step decodes every running request; when the pool cannot give
//!   each a token (`check_decode_mem`), requests are retracted from the end of the batch (`retract_decode`) and
//!   the ratio returns to its initial 0.7; each decode batch decays it toward 0.098.
//! - **TensorRT-LLM** (`tensorrt_llm/_torch/pyexecutor/scheduler.py`: the capacity scheduler with its default
//!   `GUARANTEED_NO_EVICT` policy, then the micro-batch scheduler): a request is admitted, in order and below
//!   `max_batch_size`, only when the blocks of its whole prompt and output can be reserved, so nothing is ever
//!   preempted; each step runs every generation request's token, then context chunks in order within
//!   `max_num_tokens` (without chunked context a prompt that does not fit the remaining budget waits).

use super::super::request::Engine;
use super::instance::{
    Instance, Req, Role, SGLANG_DECAY_STEPS, SGLANG_INIT_NEW_TOKEN_RATIO, SGLANG_MIN_NEW_TOKEN_RATIO,
};

/// SGLang's `CLIP_MAX_NEW_TOKENS_ESTIMATION`: output tokens counted per request when reserving KV for it.
pub const SGLANG_CLIP_MAX_NEW_TOKENS: u32 = 4096;

impl Instance {
    /// Fills `self.batch` with the next step by the engine's policy (module doc); preempts where it must.
    /// First the requests the scheduler receives this iteration join the waiting queue ([`Instance::receive`]).
    pub fn schedule(&mut self, reqs: &mut [Req]) {
        self.batch.clear();
        self.receive();
        match self.settings.engine {
            Engine::Vllm => self.schedule_vllm(reqs),
            Engine::Sglang => self.schedule_sglang(reqs),
            Engine::Trtllm => self.schedule_trtllm(reqs),
        }
        // A decode batch: every request given one token after its first was sampled.
        self.last_decode =
            !self.batch.is_empty() && self.batch.iter().all(|&(r, n)| n == 1 && reqs[r as usize].generated > 0);
    }

    fn schedule_vllm(&mut self, reqs: &mut [Req]) {
        let mut budget = self.settings.token_budget;
        let mut preempted = false;
        let mut i = 0;
        while i < self.running.len() && budget > 0 {
            let r = self.running[i];
            let q = reqs[r as usize];
            let n = q.pending().min(budget);
            let mut scheduled = true;
            while !self.grow(reqs, r, q.computed + n) {
                let Some(victim) = self.running.pop() else { break };
                self.preempt(reqs, victim);
                preempted = true;
                if victim == r {
                    scheduled = false;
                    break;
                }
            }
            if !scheduled {
                break;
            }
            self.batch.push((r, n));
            budget -= n;
            i += 1;
        }
        if preempted {
            return;
        }
        while budget > 0 && (self.running.len() as u32) < self.settings.max_num_seqs {
            let Some(&r) = self.waiting.front() else { break };
            let q = reqs[r as usize];
            if !self.settings.chunked_prefill && q.pending() > budget {
                break;
            }
            let n = q.pending().min(budget);
            if !self.grow(reqs, r, q.computed + n) {
                break;
            }
            self.waiting.pop_front();
            self.running.push(r);
            self.batch.push((r, n));
            budget -= n;
        }
    }

    /// SGLang's disaggregated decode iteration takes the transferred requests as a prebuilt batch
    /// (`Scheduler.get_new_prebuilt_batch`, `python/sglang/srt/disaggregation/decode.py`: "Create a schedulebatch
    /// for fake completed prefill"): from the front of the waiting queue, up to `max_running_requests` running, each
    /// with its prompt's KV cache and the prefill server's first token; no forward runs for them, that token is
    /// streamed (`process_batch_result_prebuilt`) and they join the running batch at the next iteration
    /// (`get_next_disagg_decode_batch_to_run`, `running_batch.merge_batch`). Only requests ready so (their prompt
    /// cached, one token sampled) are prebuilt; a retracted one waits for the ordinary path.
    ///
    /// Their first token reaches the client at the iteration's start, `self.free_at` (the host's few microseconds of
    /// a prebuilt iteration are not charged); a request of one output token finishes there ([`Instance::prebuilt_done`]).
    /// With data-parallel attention each prebuilt request goes to the next rank in turn ([`Instance::rank_turn`]);
    /// a rank with a prebuilt batch runs an idle forward in that iteration while the others decode ("decode +
    /// prebuilt -> decode + idle", `get_next_disagg_decode_batch_to_run` → `maybe_prepare_mlp_sync_batch`), so its
    /// running requests skip one step. Returns a mask of the ranks that prebuilt (bit `rank mod 64`; 0: none).
    pub fn prebuild(&mut self, reqs: &mut [Req]) -> u64 {
        let (dp, max_seqs, now) = (self.settings.dp.max(1), self.settings.max_num_seqs, self.free_at);
        let mut ranks = 0u64;
        while (self.running.len() as u32) < max_seqs {
            let Some(&r) = self.waiting.front() else { break };
            let q = reqs[r as usize];
            if q.generated == 0 || q.pending() != 1 || !self.grow(reqs, r, q.computed) {
                break;
            }
            self.waiting.pop_front();
            let rank = self.rank_turn % dp;
            self.rank_turn = self.rank_turn.wrapping_add(1);
            ranks |= 1u64 << (rank % 64);
            let q = &mut reqs[r as usize];
            (q.dp_rank, q.first_s, q.shown_s, q.last_s) = (rank, now, now, now);
            if q.generated >= q.output {
                q.done_s = now;
                self.free_blocks += q.blocks as u64 + q.reserved as u64;
                (q.blocks, q.reserved) = (0, 0);
                self.prebuilt_done.push(r);
            } else {
                self.running.push(r);
            }
        }
        ranks
    }

    fn schedule_sglang(&mut self, reqs: &mut [Req]) {
        let prebuilt = if self.settings.role == Role::Decode { self.prebuild(reqs) } else { 0 };
        let s = &self.settings;
        let (chunked, max_seqs, block) = (s.chunked_prefill, s.max_num_seqs, s.block_tokens as f64);
        let mut rem_input = s.max_prefill_tokens.max(1) as i64;
        let mut rem_chunk = if chunked { s.token_budget as i64 } else { i64::MAX };
        let clip = |x: u32| x.min(SGLANG_CLIP_MAX_NEW_TOKENS) as f64;
        // Tokens the pool can still promise: free minus the running requests' estimated remaining output.
        let reserve: f64 = self
            .running
            .iter()
            .map(|&r| {
                let q = &reqs[r as usize];
                clip(q.output.saturating_sub(q.generated)) * self.new_token_ratio
            })
            .sum();
        let mut avail = self.free_blocks as f64 * block - reserve;
        // The chunked request (admitted, mid-prefill) continues first.
        for i in 0..self.running.len() {
            let r = self.running[i];
            let q = reqs[r as usize];
            if q.pending() <= 1 || rem_chunk <= 0 {
                continue;
            }
            let n = (q.pending() as i64).min(rem_chunk) as u32;
            if self.grow(reqs, r, q.computed + n) {
                self.batch.push((r, n));
                rem_chunk -= n as i64;
                rem_input -= n as i64;
            }
        }
        while (self.running.len() as u32) < max_seqs && rem_chunk > 0 && rem_input > 0 {
            let Some(&r) = self.waiting.front() else { break };
            let q = reqs[r as usize];
            if self.settings.role == Role::Decode && q.generated > 0 && q.pending() == 1 {
                // A transferred request waits to be prebuilt (no room this iteration).
                break;
            }
            let estimate = q.pending() as f64 + clip(q.output.saturating_sub(q.generated));
            if estimate >= avail {
                break;
            }
            let n = if chunked {
                (q.pending() as i64).min(rem_chunk) as u32
            } else if (q.pending() as i64) > rem_input && !self.batch.is_empty() {
                break;
            } else {
                q.pending()
            };
            if !self.grow(reqs, r, q.computed + n) {
                break;
            }
            self.waiting.pop_front();
            self.running.push(r);
            self.batch.push((r, n));
            rem_chunk -= n as i64;
            rem_input -= n as i64;
            avail -= estimate;
        }
        if !self.batch.is_empty() {
            return;
        }
        // A decode batch: one token for every running request; retract from the end while they do not fit.
        loop {
            let need: u64 = self
                .running
                .iter()
                .map(|&r| {
                    let q = &reqs[r as usize];
                    (self.blocks_for(q.computed + 1).saturating_sub(q.blocks)) as u64
                })
                .sum();
            if need <= self.free_blocks || self.running.len() <= 1 {
                break;
            }
            let victim = self.running.pop().expect("more than one running");
            self.preempt(reqs, victim);
            self.new_token_ratio = SGLANG_INIT_NEW_TOKEN_RATIO;
        }
        // Ranks that prebuilt this iteration run an idle forward ([`Instance::prebuild`]); when no rank is left to
        // decode, the prebuilt iteration ran no forward at all and the next one decodes everything.
        let dp = self.settings.dp.max(1);
        let skip = |q: &Req| prebuilt != 0 && dp > 1 && prebuilt & (1u64 << (q.dp_rank % 64)) != 0;
        let any = self.running.iter().any(|&r| !skip(&reqs[r as usize]));
        for i in 0..self.running.len() {
            let r = self.running[i];
            let q = reqs[r as usize];
            if any && skip(&q) {
                continue;
            }
            if q.pending() == 1 && self.grow(reqs, r, q.computed + 1) {
                self.batch.push((r, 1));
            }
        }
        let decay = (SGLANG_INIT_NEW_TOKEN_RATIO - SGLANG_MIN_NEW_TOKEN_RATIO) / SGLANG_DECAY_STEPS;
        self.new_token_ratio = (self.new_token_ratio - decay).max(SGLANG_MIN_NEW_TOKEN_RATIO);
    }

    fn schedule_trtllm(&mut self, reqs: &mut [Req]) {
        let s = &self.settings;
        let (max_seqs, chunked) = (s.max_num_seqs, s.chunked_prefill);
        // Capacity scheduler (GUARANTEED_NO_EVICT): reserve the whole request's blocks on admission.
        while (self.running.len() as u32) < max_seqs {
            let Some(&r) = self.waiting.front() else { break };
            let q = reqs[r as usize];
            let whole = match self.settings.role {
                Role::Prefill => q.tokens,
                _ => q.input + q.output,
            };
            let need = self.blocks_for(whole).saturating_sub(q.blocks) as u64;
            if need > self.free_blocks {
                break;
            }
            self.free_blocks -= need;
            reqs[r as usize].reserved = need as u32;
            self.waiting.pop_front();
            self.running.push(r);
        }
        // Micro-batch scheduler: generation tokens first, then context chunks, within max_num_tokens.
        let mut budget = self.settings.token_budget;
        for pass in 0..2 {
            for i in 0..self.running.len() {
                if budget == 0 {
                    return;
                }
                let r = self.running[i];
                let q = reqs[r as usize];
                let context = q.pending() > 1;
                if context != (pass == 1) {
                    continue;
                }
                let n = if !context {
                    1
                } else if chunked {
                    q.pending().min(budget)
                } else if q.pending() <= budget {
                    q.pending()
                } else {
                    continue;
                };
                if self.grow(reqs, r, q.computed + n) {
                    self.batch.push((r, n));
                    budget -= n;
                }
            }
        }
    }
}
