//! The serving engines' scheduling defaults and perfcast's serving constants.
//!
//! **Defaults** (each overridable under `engine_options`), as the engines' own code sets them:
//! - **vLLM** (V1 engine, `EngineArgs.get_batch_defaults`, OpenAI server context; vLLM ≥ 0.8): on GPUs with
//!   ≥ 70 GiB that are not A100s `max_num_batched_tokens` 8192 and `max_num_seqs` 1024, else 2048 and 256;
//!   chunked prefill always on; `gpu_memory_utilization` 0.9; CUDA graphs captured for decode batches up to 512
//!   (`max_capture_size`); async scheduling on (`SchedulerConfig.async_scheduling` is `None` by default and
//!   `VllmConfig` turns it on unless an option is incompatible with it, `vllm/config/vllm.py`; the V0 engine,
//!   `engine_options.vllm_engine: v0`, has none).
//! - **SGLang** (`server_args.py`, v0.4–0.5): `chunked_prefill_size` 2048 below 35 GiB, 4096 below 60 GiB, 8192
//!   below 160 GiB, 16384 above; `cuda_graph_max_bs` 32/160 (below 60 GiB, tp < 4 / ≥ 4), 256/512 (60–160 GiB), 512
//!   above; `mem_fraction_static` 0.88; `max_running_requests` is sized from the KV pool (perfcast caps it at
//!   4096).
//! - **TensorRT-LLM** (`trtllm-serve` and the LLM API, `TorchLlmArgs` in `tensorrt_llm/llmapi/llm_args.py`):
//!   `max_batch_size` 2048, `max_num_tokens` 8192, chunked context off (`enable_chunked_prefill` = False: a
//!   context that does not fit what is left of `max_num_tokens` waits), `kv_cache_config.free_gpu_memory_fraction`
//!   0.9 — of the memory left after weights and activations, not of the whole GPU; the overlap scheduler on
//!   (`disable_overlap_scheduler` = False: `PyExecutor._executor_loop_overlap` enqueues step N+1 before it
//!   processes step N's tokens, so host work hides behind the GPU's); CUDA graphs from the default
//!   `CudaGraphConfig()` — `max_batch_size` 0 → 128, `enable_padding` False, so `batch_sizes` = 1–31, 32, 64, 128
//!   (`_generate_cuda_graph_batch_sizes`) and a decode batch of any other size runs eagerly
//!   (`CUDAGraphRunner._round_up_batch_size`/`pad_batch` pad only with `enable_padding`). `trtllm-bench
//!   throughput` (`tensorrt_llm/bench/benchmark/utils/general.py`, `get_settings`) sets its own:
//!   `cuda_graph_config` = {padding on, `max_batch_size` = the run's `max_batch_size`}, chunking off, and
//!   `max_num_tokens` at least the longest prompt + `max_batch_size`; perfcast applies them with
//!   `engine_options.trtllm_launcher: bench`, the default of an offline workload (every request sent at once,
//!   [`crate::llm::serving::request::TrtllmLauncher`]). The C++ executor of `trtllm-build` engines
//!   (`engine_options.trtllm_backend: tensorrt`) runs without CUDA graphs unless asked
//!   (`ExtendedRuntimePerfKnobConfig.cudaGraphMode` defaults to false) and without overlap (its host cost is the
//!   one fitted on LLM-Inference-Bench's runs of it).
//!
//! **Constants** ([`ServingConstants`]): the achievable efficiencies analytic times are derated by for serving
//! kernels ([`super::derate`]), and per engine the host time every step costs per step and per sequence
//! (scheduler, input preparation, sampling, output processing — what runs on the CPU between GPU steps). The host
//! costs and the per-kernel GPU cost are fitted on LLM-Inference-Bench (the only serving rows in `../shared`, all
//! train/calibration data by DATA.md) with grouped cross-validation through the bundled learned models
//! (`perfcast eval inference --cross-validate`, group = framework × model; README for the errors). Those rows are
//! vLLM's 2024 V0 engine and TensorRT-LLM's C++ runtime; vLLM V1 and SGLang have none: they use TensorRT-LLM's
//! fitted host cost, an assumption to replace when their measurements arrive ([`ServingConstants::CALIBRATED`]).

use serde::Serialize;
use utoipa::ToSchema;

use super::request::{Engine, TrtllmBackend, VllmEngine};
use crate::cost::Efficiency;
use crate::hw::GpuSpec;

/// An engine's scheduling settings (defaults, or the request's overrides).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct EngineSettings {
    /// Most sequences running at once.
    pub max_num_seqs: u32,
    /// Most tokens per step (decodes count one each, prefill chunks their length).
    pub max_num_batched_tokens: u32,
    /// Prompts are prefilled in chunks sharing steps with decodes.
    pub chunked_prefill: bool,
    /// Fraction of GPU memory the engine uses (TensorRT-LLM: of the memory free after weights and activations).
    pub gpu_memory_utilization: f64,
    /// Decode steps replay CUDA graphs.
    pub cuda_graphs: bool,
    /// Largest decode batch with a captured graph (vLLM: the tokens of any step, its `max_cudagraph_capture_size`:
    /// min(2·`max_num_seqs`, 512) capped at `max_num_batched_tokens`, 512 at the defaults; computed by
    /// `vllm_max_capture_size` in `src/llm/serving/sim/steps.rs`).
    pub cuda_graph_max_batch: u32,
    /// A decode batch between two captured sizes is padded up to the next one and replays its graph (vLLM and
    /// SGLang always; TensorRT-LLM's `cuda_graph_config.enable_padding`); off, only a batch of exactly a captured
    /// size replays a graph and the others run eagerly ([`super::sim::steps::graph_sizes`]).
    pub cuda_graph_padding: bool,
    /// vLLM's engine generation (its host cost, [`ServingConstants::host`]); `v1` for the other engines.
    pub vllm_engine: VllmEngine,
    /// TensorRT-LLM's runtime (its CUDA-graph default and all-reduce fusion); `pytorch` for the other engines.
    pub trtllm_backend: TrtllmBackend,
    /// The host prepares the next step while the GPU runs this one: a step takes max(GPU, host).
    pub async_scheduling: bool,
    /// SGLang's `scheduler_recv_interval`: decode batches between two receptions of new requests (1: every
    /// iteration, the default of every engine; [`super::request::EngineOptions::scheduler_recv_interval`]).
    pub scheduler_recv_interval: u32,
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The defaults of `engine` on `gpu` at tensor-parallel degree `tp` (see the module doc for their sources).
pub fn defaults(engine: Engine, gpu: &GpuSpec, tp: u32) -> EngineSettings {
    let mem_gib = gpu.memory_bytes() / GIB;
    match engine {
        Engine::Vllm => {
            let large = mem_gib >= 70.0 && !gpu.name.to_ascii_uppercase().contains("A100");
            EngineSettings {
                max_num_seqs: if large { 1024 } else { 256 },
                max_num_batched_tokens: if large { 8192 } else { 2048 },
                chunked_prefill: true,
                gpu_memory_utilization: 0.9,
                cuda_graphs: true,
                cuda_graph_max_batch: 512,
                cuda_graph_padding: true,
                vllm_engine: VllmEngine::V1,
                trtllm_backend: TrtllmBackend::Pytorch,
                async_scheduling: true,
                scheduler_recv_interval: 1,
            }
        }
        Engine::Sglang => {
            let (chunk, graphs) = if mem_gib < 35.0 {
                (2048, if tp < 4 { 8 } else { 80 })
            } else if mem_gib < 60.0 {
                (4096, if tp < 4 { 32 } else { 160 })
            } else if mem_gib < 160.0 {
                (8192, if tp < 4 { 256 } else { 512 })
            } else {
                (16384, 512)
            };
            EngineSettings {
                max_num_seqs: 4096,
                max_num_batched_tokens: chunk,
                chunked_prefill: true,
                gpu_memory_utilization: 0.88,
                cuda_graphs: true,
                cuda_graph_max_batch: graphs,
                cuda_graph_padding: true,
                vllm_engine: VllmEngine::V1,
                trtllm_backend: TrtllmBackend::Pytorch,
                async_scheduling: true,
                scheduler_recv_interval: 1,
            }
        }
        Engine::Trtllm => EngineSettings {
            max_num_seqs: 2048,
            max_num_batched_tokens: 8192,
            chunked_prefill: false,
            gpu_memory_utilization: 0.9,
            cuda_graphs: true,
            cuda_graph_max_batch: 128,
            cuda_graph_padding: false,
            vllm_engine: VllmEngine::V1,
            trtllm_backend: TrtllmBackend::Pytorch,
            async_scheduling: true,
            scheduler_recv_interval: 1,
        },
    }
}

/// An engine's host (CPU) time per step, beyond the GPU's work: scheduling, input preparation, sampling
/// bookkeeping, output processing and detokenization.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct HostCost {
    /// Per step, µs.
    pub step_us: f64,
    /// Per sequence in the step, µs (Python-side per-sequence work scales with the batch).
    pub seq_us: f64,
    /// Per request, µs: the serving front end's path of a request outside the engine's steps — the HTTP request,
    /// hand-off to the engine (vLLM's API server and `AsyncLLM`, SGLang's tokenizer manager, `trtllm-serve`), and
    /// the first token's way back (detokenization, streaming), beyond tokenization (which is per prompt token,
    /// [`ServingConstants::tokenize_us_per_token`]). The simulated client sees it in every TTFT: a request reaches
    /// the engine this long after it is tokenized. Shipped at 10 ms for vLLM V1 and 0 elsewhere (no cited figure);
    /// see [`ServingConstants::CALIBRATED`].
    pub request_us: f64,
}

/// perfcast's serving constants: the efficiencies serving kernels are derated by and the engines' host costs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct ServingConstants {
    /// Achievable efficiencies of analytic operator and collective times ([`super::derate::ServingDerated`]; its
    /// `host_us` is unused: serving counts host time per step, [`HostCost`]).
    pub efficiency: Efficiency,
    /// Fraction of DRAM bandwidth memory-bound matrix kernels reach (decode GEMVs, decode attention), 0–1.
    pub stream: f64,
    /// vLLM's host time per step (V1 engine, vLLM ≥ 0.8).
    pub vllm: HostCost,
    /// vLLM's V0 engine's host time per step (vLLM < 0.8).
    pub vllm_v0: HostCost,
    /// SGLang's host time per step.
    pub sglang: HostCost,
    /// TensorRT-LLM's host time per step.
    pub trtllm: HostCost,
    /// CPU time to launch one kernel outside a CUDA graph from a compiled runtime (TensorRT-LLM's C++ executor of
    /// `trtllm-build` engines, `engine_options.trtllm_backend: tensorrt`: `cudaLaunchKernel` and the plugin's
    /// enqueue), µs; a step's GPU time is at least its kernels' launch time.
    pub eager_kernel_us: f64,
    /// Host time of one counted kernel of an eager forward run from Python, µs: the engines whose steps outside
    /// CUDA graphs (every step with prefill, and decode batches beyond `cuda_graph_max_batch`) run their model's
    /// `nn.Module`s op by op — SGLang (`ModelRunner.forward_extend`), TensorRT-LLM's PyTorch backend
    /// (`PyTorchModelEngine.forward`, CUDA graphs for generation-only batches), vLLM's V0 engine and vLLM V1 under
    /// `--enforce-eager` (`cuda_graphs: false`: optimization level `-O0`, no compilation). vLLM V1 otherwise runs
    /// its Inductor-compiled pieces ([`super::launch`]: `inductor_kernel_us`, `custom_op_us`, `piece_replay_us`).
    /// It is the per-counted-kernel host cost of an eager PyTorch pass, [`crate::cost::Efficiency::host_us`]
    /// of the training model (the Python module call, the dispatcher and launch, and the element-wise kernels the
    /// operator list folds into its neighbours), the same physical effect; see [`ServingConstants::CALIBRATED`].
    pub python_kernel_us: f64,
    /// CPU time the serving front end takes to tokenize one prompt token, µs: a request's prompt of n tokens
    /// reaches the engine n × this after the front end starts on it. Every engine's own API server tokenizes on one
    /// thread, so requests that arrive together are tokenized one after another; NVIDIA Dynamo's front end tokenizes
    /// several at once, each at this speed ([`super::frontend`], [`super::sim::SimOptions::tokenizer_threads`]).
    /// See [`ServingConstants::CALIBRATED`] for its sources.
    pub tokenize_us_per_token: f64,
    /// GPU time of one analytic kernel beyond its body when a decode step replays a CUDA graph, µs: it replaces
    /// `efficiency.kernel_us` there (a graph launches its kernels back to back from the GPU's own queue, with no
    /// host launch between them; learned and measured operator times carry their own in-graph cost and are
    /// unchanged). See [`ServingConstants::CALIBRATED`] for its source.
    pub graph_kernel_us: f64,
    /// Host time of one kernel Inductor compiled into vLLM V1's model, launched from its generated wrapper without
    /// a CUDA graph (a step of more tokens than the largest captured size), µs ([`super::launch`] for the source).
    pub inductor_kernel_us: f64,
    /// Host time of one kernel launched from a Python custom-op call in vLLM V1's compiled step — attention between
    /// the pieces; without graphs also MoE and the tensor-parallel all-reduce; the LM head and sampler — µs
    /// ([`super::launch`]).
    pub custom_op_us: f64,
    /// Host time of replaying one of vLLM V1's piecewise CUDA graphs (one graph launch), µs ([`super::launch`]).
    pub piece_replay_us: f64,
    /// Host time `cudaGraphLaunch` takes per node of the graph it launches, µs: charged where a whole-step graph's
    /// launch is not hidden behind GPU work (SGLang's spec-v1 EAGLE iteration, [`super::spec_v1`]). See
    /// [`ServingConstants::CALIBRATED`] for its source.
    pub graph_node_launch_us: f64,
}

impl ServingConstants {
    /// The shipped constants.
    ///
    /// Fixed from operator-level training data: the GEMM fractions of [`Efficiency::CALIBRATED`] (measured per GPU
    /// and precision); `network` 0.74 and `collective_us` 2 µs — vLLM's custom all-reduce on 2–8 H100s
    /// (aiconfigurator `custom_allreduce_perf`, train split) runs small messages in 4.2–5.6 µs against the α–β
    /// model's ≈ 2–4 µs and reaches 72 % of the NVLink bus bandwidth at 128 MiB; `eager_kernel_us` 5 µs [rec]
    /// (a compiled runtime's per-kernel launch; the Python engines' is `python_kernel_us`, below); `memory` 0.8
    /// [rec] for element-wise kernels (fitted freely it collapses, see `perfcast eval inference`).
    ///
    /// Fitted by `perfcast eval inference --cross-validate` on LLM-Inference-Bench with the bundled learned models
    /// a fresh install serves (2026-11-24, all 1,202 rows; the five folds and the held-out errors in the README):
    /// `kernel_us` 7.40 µs (folds 4.6–6.9 µs), vLLM V0 972 µs per step + 71.7 µs per sequence (folds 65–72 µs per
    /// sequence), TensorRT-LLM 19 µs per step + 21.7 µs per sequence (folds 13–28 µs; its per-step part is not
    /// identified apart from `kernel_us`: folds 74–428 µs). They were fitted with the NCCL model's tensor-parallel
    /// all-reduce; serving now times it by each engine's measured kernel ([`crate::comm::engine_allreduce`]). Refit
    /// with that (same command, 2026-11-27, bundle 03660e01) they move to `kernel_us` 14.60 µs, vLLM V0 523 + 73.9 µs,
    /// TensorRT-LLM 59 + 23.1 µs (today's bundle with the NCCL all-reduce: 6.46 µs, 1,129 + 70.2 µs, 312 + 19.8 µs),
    /// held-out 10.3 % (+0.3 %) against 9.0 % (−0.3 %), and the Blackwell runs' TPOT with the whole source left out
    /// goes from 44.8 % back to 54.2 % (docs/src/accuracy/serving.md): not shipped. Kept, they predict the bench in
    /// sample at 11.1 % (−5.8 %) instead of 8.4 % (−0.8 %). `stream` stays 0.8 [rec] like `memory`: with the
    /// learned models every dense matrix operator of those rows is learned, so it is not identified (fitted freely
    /// it wandered 0.20–0.81 over the folds).
    ///
    /// **Engines and versions without rows, per physical effect.** The bench's vLLM is the 2024 V0 engine, whose
    /// per-sequence Python work (scheduling, input preparation, detokenization and output processing) ran between
    /// GPU steps: 71.7 µs per sequence is 18 ms per step at 256 sequences. vLLM V1 (≥ 0.8, the default here,
    /// `engine_options.vllm_engine`) keeps a persistent batch (inputs updated, not rebuilt), and moves
    /// detokenization and output processing to another process; perfcast gives it TensorRT-LLM's fitted host cost
    /// (a compiled runtime's: 19 µs + 21.7 µs per sequence), as SGLang, an assumption until V1 or SGLang rows
    /// exist. With `engine_options.async_scheduling` (SGLang's default overlap scheduler; vLLM's
    /// `--async-scheduling`) that host time overlaps the GPU's: a step takes max(GPU, host). CUDA graphs
    /// (`engine_options.cuda_graphs`) remove the eager per-kernel launch cost `eager_kernel_us` from decode steps up
    /// to `cuda_graph_max_batch`.
    ///
    /// **A kernel inside a CUDA graph.** `kernel_us` (fitted on the bench's 2024 engines, whose TensorRT-LLM C++
    /// runtime launched every kernel from the host) is what a kernel costs the GPU beyond its body outside a graph.
    /// A graph replay launches its kernels from the GPU's queue back to back: `graph_kernel_us` 1.75 µs, the
    /// smallest single element-wise kernel aiconfigurator's collector times under CUDA graph replay
    /// (`collector/helper.py` `benchmark_with_power`; TensorRT-LLM's `static_quantize_e4m3_per_tensor` of a few
    /// rows, `<gpu>/trtllm/scale_matrix_perf.csv.gz`, train split): 1.27 µs on H100, 1.36 µs B300, 1.75 µs B200,
    /// 1.76 µs GB200, 2.56 µs L40S — the median of the five GPUs' minima. SGLang's table corroborates it: its
    /// version of the same scaling is four PyTorch kernels (divide, clamp, cast, copy) and takes 5.0–5.7 µs, 1.3–1.4
    /// µs each. Measured from operator tables, not fitted on serving rows.
    ///
    /// **An eager step run from Python.** SGLang, TensorRT-LLM's PyTorch backend and vLLM's V0 engine replay CUDA
    /// graphs only for decode batches; a step with prefill runs the model's modules op by op from Python, and each counted
    /// kernel then costs the host `python_kernel_us` = [`crate::cost::Efficiency::host_us`] (69.3 µs), the training
    /// model's host time per counted kernel of an eager PyTorch pass (fitted on the training sources' train rows,
    /// folds 64.6–69.4 µs: the Python module call, PyTorch's dispatch and launch, and the element-wise kernels the
    /// operator list folds into its neighbours) — one constant for one effect, not fitted on serving rows. A
    /// bare eager call is cheaper: aiconfigurator's custom all-reduce called eagerly (train split,
    /// `custom_allreduce_perf`, `vllm_eager` / `sglang_eager` rows up to 65,536 elements) floors at 20–23 µs per
    /// call under vLLM 0.24 and 28–30 µs under SGLang on H100, B200 and B300 hosts (4–7 µs replayed in a graph):
    /// what one custom op costs without the module around it. The step takes max(GPU, host launches): a prefill
    /// of 1,024 tokens of DeepSeek-R1 at tp 8 (≈ 2,060 counted kernels) cannot finish in less than 143 ms of
    /// host time, gpt-oss-120b's (≈ 580) in less than 40 ms. Until 2026-11-28 every engine used the C++ launch
    /// cost `eager_kernel_us` 5 µs [rec], now TensorRT-LLM's C++ executor's only.
    ///
    /// **vLLM V1's compiled step** ([`super::launch`]): V1 compiles its model with Inductor and replays piecewise
    /// CUDA graphs (attention between them) for steps up to the largest captured size; a larger step runs the
    /// compiled pieces without graphs. `inductor_kernel_us` 9.1 µs a compiled kernel (tritonbench PR #1017,
    /// `CachingAutotuner.run` of a 19-argument kernel on GB200), `custom_op_us` 20.9 µs a kernel launched from a
    /// Python custom-op call (the median floor of aiconfigurator's `vllm_eager` custom all-reduce rows, train split),
    /// `piece_replay_us` 6 µs a replayed piece (one graph launch, pytorch/pytorch PR #196413). Measured, not fitted.
    ///
    /// **Tokenization.** `tokenize_us_per_token` 1.0 µs, every engine: the maintainers' own figures for a fast
    /// (Rust) Hugging Face tokenizer on one thread — vLLM issue #19012 (simon-mo: "for concurrency=1, DGX H100's CPU
    /// can do about only about 1k tokens/ms"; `tokenizer("hi " * 10000)` 10.7 ms), vLLM PR #10635 (256K tokens in "a
    /// few hundred milliseconds"), SGLang PR #25265 (Kimi-K2.5, 80k tokens: `.encode` 47 ms, 0.59 µs a token) and
    /// huggingface/tokenizers PR #1582/#1584 (Llama-3.1's tokenizer, one thread, 1.3–4.2 MB/s, ≈ 1–3 µs a token).
    /// Not fitted. The engines tokenize on one thread: vLLM's API server on `ThreadPoolExecutor(max_workers=1)`
    /// (`serving_engine.py` `_tokenizer_executor`, quoted in vLLM issue #25301; `renderer_num_workers` 1 in later
    /// versions), SGLang's `TokenizerManager._tokenize_texts` inline on its process's asyncio loop
    /// (`tokenizer_worker_num` 1 and `enable_dynamic_batch_tokenizer` off by default; SGLang issue #6553 on its
    /// "single-core bottleneck"), `trtllm-serve` inside `LLM.generate_async` (`tensorrt_llm/llmapi/llm.py`, the
    /// `input_processor` call) on the OpenAI server's event loop. NVIDIA Dynamo's Rust front end, in front of any of
    /// them, tokenizes each request on one of its tokio worker threads instead ([`super::frontend`], the request's
    /// `frontend`).
    ///
    /// **The rest of the front end** ([`HostCost::request_us`]: HTTP, the hand-off to the engine process, streaming
    /// the first token back). vLLM V1: 10 ms — vLLM PR #54628 (benchmark: Responses API backend) compares the
    /// client's TTFT with the server's own `vllm:time_to_first_token_seconds` on the same runs: 8.4 and 12.0 ms with
    /// the completions backend (mean 10.2; chat and responses backends 10.5–12.2 ms), of which the 512-token
    /// prompt's tokenization (≈ 0.5 ms, counted apart above) is a small part; the API server → EngineCore hand-off
    /// alone is under 1 ms (vLLM PR #51349's trace), so the rest is the Python API server's HTTP and SSE path. One
    /// measurement (a laptop under WSL2, vLLM 0.28-dev, a 0.5 B model, 8 clients), not fitted. vLLM V0 (in-process
    /// engine, no ZMQ hand-off), SGLang and TensorRT-LLM: no measured figure found, 0.
    ///
    /// **Launching a whole-step CUDA graph.** `graph_node_launch_us` 0.98 µs a node: sgl-project/sglang issue
    /// #29960 profiled SGLang's EAGLE/MTP target-verify graph (DeepSeek-V4-Flash, 2× RTX PRO 6000 Blackwell, TP2, top-k
    /// 1, 2 steps): `cudaGraphLaunch` took the host 2.826 ms for its 2,876 nodes (0.983 µs a node; vLLM's verify
    /// graph in the same issue, 1.983 ms for 2,187 nodes, 0.907 µs). Measured, not fitted. perfcast counts a graph's
    /// nodes as its step's counted kernels.
    pub const CALIBRATED: ServingConstants = ServingConstants {
        efficiency: Efficiency {
            gemm_16bit: 0.8,
            gemm_fp8: 0.735,
            gemm_32bit: 0.81,
            memory: 0.8,
            kernel_us: 7.40,
            network: 0.74,
            collective_us: 2.0,
            host_us: 0.0,
            measured_gemm: true,
            // No collective is overlapped with compute in a serving step (the TP all-reduces sit between GEMMs).
            overlap_slowdown: crate::cost::derate::OVERLAP_SLOWDOWN,
            // Training-only corrections of learned times (`ServingDerated` never reads them).
            sustained_clock: 1.0,
            sustained_clock_ampere: 1.0,
            fused_fp8_quantize: false,
        },
        stream: 0.8,
        vllm: HostCost { step_us: 19.0, seq_us: 21.7, request_us: 10_000.0 },
        vllm_v0: HostCost { step_us: 972.0, seq_us: 71.7, request_us: 0.0 },
        sglang: HostCost { step_us: 19.0, seq_us: 21.7, request_us: 0.0 },
        trtllm: HostCost { step_us: 19.0, seq_us: 21.7, request_us: 0.0 },
        eager_kernel_us: 5.0,
        python_kernel_us: crate::cost::Efficiency::CALIBRATED.host_us,
        tokenize_us_per_token: 1.0,
        graph_kernel_us: 1.75,
        inductor_kernel_us: 9.1,
        custom_op_us: 20.9,
        piece_replay_us: 6.0,
        graph_node_launch_us: 0.98,
    };

    /// The bare roofline: every fraction 1, 2 µs per kernel, no host cost (the lower bound the calibrated constants
    /// are compared with).
    pub const ROOFLINE: ServingConstants = ServingConstants {
        efficiency: Efficiency::ROOFLINE,
        stream: 1.0,
        vllm: HostCost { step_us: 0.0, seq_us: 0.0, request_us: 0.0 },
        vllm_v0: HostCost { step_us: 0.0, seq_us: 0.0, request_us: 0.0 },
        sglang: HostCost { step_us: 0.0, seq_us: 0.0, request_us: 0.0 },
        trtllm: HostCost { step_us: 0.0, seq_us: 0.0, request_us: 0.0 },
        eager_kernel_us: 0.0,
        python_kernel_us: 0.0,
        tokenize_us_per_token: 0.0,
        graph_kernel_us: Efficiency::ROOFLINE.kernel_us,
        inductor_kernel_us: 0.0,
        custom_op_us: 0.0,
        piece_replay_us: 0.0,
        graph_node_launch_us: 0.0,
    };

    /// Host time to launch one kernel of a step outside a CUDA graph under `engine` and `settings`, µs: the
    /// compiled runtime's `eager_kernel_us` for TensorRT-LLM's C++ executor (`trtllm_backend: tensorrt`), else
    /// the Python forward's `python_kernel_us`.
    pub fn eager_launch_us(&self, engine: Engine, settings: &EngineSettings) -> f64 {
        match engine {
            Engine::Trtllm if settings.trtllm_backend == TrtllmBackend::Tensorrt => self.eager_kernel_us,
            _ => self.python_kernel_us,
        }
    }

    /// The host cost of `engine` under `settings` (vLLM: of its engine generation).
    pub fn host(&self, engine: Engine, settings: &EngineSettings) -> HostCost {
        match engine {
            Engine::Vllm if settings.vllm_engine == VllmEngine::V0 => self.vllm_v0,
            Engine::Vllm => self.vllm,
            Engine::Sglang => self.sglang,
            Engine::Trtllm => self.trtllm,
        }
    }
}
