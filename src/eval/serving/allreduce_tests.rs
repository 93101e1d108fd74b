//! A hand-worked TensorRT-LLM tp 8 decode step's tensor-parallel all-reduce, through the bundled models a fresh
//! install serves: it takes TensorRT-LLM's measured all-reduce time ([`crate::comm::engine_allreduce`]), never less
//! than the links allow, and a training backend's (no engine) stays on the NCCL path.

use std::sync::Arc;

use serde_json::json;

use crate::comm::{link_bound_us, Group, GroupLinks};
use crate::cost::{CostBackend, KernelChoice};
use crate::hw::{presets, Link, System};
use crate::learn::backend::LearnedBackend;
use crate::llm::operators::{OpName, Work};
use crate::llm::serving::step::{stage_ops, StageRole, StepLoad};
use crate::llm::serving::{validate, InferenceRequest, ServingConstants, ServingDerated};
use crate::op::{Collective, KernelFamily};

fn b200() -> System {
    presets().into_iter().find(|p| p.name == "dgx-b200").unwrap().resolve().unwrap()
}

/// The per-layer all-reduce of a decode step of Llama-3.1-70B fp8 under TensorRT-LLM at tp 8 on `system`, 4
/// sequences: (bytes, group, GPUs of the node at once).
fn decode_allreduce(system: &System) -> (f64, Group, u32) {
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-b200", "model": "Llama-3.1-70B",
        "precision": "fp8", "engine": "trtllm", "parallelism": {"tp": 8},
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 4}}))
    .unwrap();
    let cfg = validate(&req, system).unwrap();
    let load = StepLoad::decode(4, 1536, 1024);
    let ops = stage_ops(&cfg, system, &load, StageRole { first: false, last: false }, 80, 0);
    let o = ops.iter().find(|o| o.op.name == OpName::MpAllReduce).unwrap();
    // Two per layer (after attention and after the MLP).
    assert_eq!(o.per_step, 160.0);
    let Work::Collective { collective, bytes, group, active_per_node } = o.op.work else { panic!("a collective") };
    assert_eq!(collective, Collective::AllReduce);
    (bytes, group, active_per_node)
}

fn backend(system: System, kernels: KernelChoice) -> ServingDerated<LearnedBackend> {
    let bundle = crate::bundle::Bundle::embedded().unwrap();
    let registry = Arc::new(crate::bundle::registry(&bundle).unwrap());
    ServingDerated::new(LearnedBackend::new(system, registry).with_kernels(kernels), ServingConstants::CALIBRATED)
}

#[test]
fn a_tensorrt_llm_tp8_decode_all_reduce_takes_its_measured_time_and_never_beats_the_links() {
    let system = b200();
    let (bytes, group, active) = decode_allreduce(&system);
    // T = 4 tokens × d = 8,192 × 2 B (bf16 activations) = 65,536 B over the 8 GPUs of one node.
    assert_eq!(bytes, 65536.0);
    assert_eq!((group.ranks, group.nodes), (8, 1));
    // b200_sxm/trtllm/custom_allreduce_perf.csv.gz, the row bfloat16, num_gpus 8, message_size 32,768 elements
    // (= 65,536 B): latency 0.0059855997562408446 ms = 5.9856 µs. The link bound, (8 − 1)/8 × 65,536 B over
    // 900 GB/s = 0.064 µs, is far below it.
    let t = backend(system.clone(), KernelChoice::Engine(KernelFamily::Trtllm)).collective(
        Collective::AllReduce,
        bytes,
        group,
        active,
    );
    assert!((t.time_us - 5.9856).abs() < 1e-9, "{t:?}");
    assert_eq!(t.source.to_string(), "measured:trtllm_allreduce/B200");
    // SGLang's request on a GPU it was measured on reads its own table; its engine is named, none stands in.
    let s = backend(system.clone(), KernelChoice::Engine(KernelFamily::Sglang)).collective(
        Collective::AllReduce,
        bytes,
        group,
        active,
    );
    assert_eq!(s.source.to_string(), "measured:sglang_allreduce/B200");
    // The same B200s behind a 1 GB/s intra-node link: the measured 5.99 µs would beat the link, so the link bound
    // answers: (8 − 1)/8 × 65,536 B = 57,344 B at 1 GB/s = 57.344 µs.
    let mut slow = system.clone();
    slow.intra_node = Link::new("nvswitch", 1.0, 2.0);
    let bound = link_bound_us(Collective::AllReduce, bytes, group, &GroupLinks::on(&slow, active));
    assert!((bound - 57.344).abs() < 1e-9, "{bound}");
    let t = backend(slow, KernelChoice::Engine(KernelFamily::Trtllm)).collective(
        Collective::AllReduce,
        bytes,
        group,
        active,
    );
    assert!((t.time_us - 57.344).abs() < 1e-9, "{t:?}");
    // Training's backend (no serving engine) keeps the NCCL path.
    let n = backend(system, KernelChoice::Neutral).collective(Collective::AllReduce, bytes, group, active);
    assert!(!n.source.to_string().starts_with("measured:"), "{}", n.source);
}
