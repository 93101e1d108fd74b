use super::*;
use crate::hw::lookup;

/// The paper's worked example machine (MODELS.md §2.2): 16 SMs at 1 GHz, 80 GB/s, Mem_LD 420,
/// departure delays 4 (coalesced) and 10 (uncoalesced), 4 issue cycles.
fn paper_machine() -> HongKimMachine {
    HongKimMachine {
        sm_count: 16,
        clock_ghz: 1.0,
        memory_bandwidth_gbs: 80.0,
        dram_latency_cycles: 420.0,
        departure_delay_coal_cycles: 4.0,
        departure_delay_uncoal_cycles: 10.0,
        issue_cycles: 4.0,
        warp_size: 32,
        l1_latency_cycles: None,
        l2_latency_cycles: None,
        l2_bandwidth_gbs: None,
    }
}

fn paper_kernel() -> HongKimKernel {
    HongKimKernel {
        comp_insts: 27.0,
        coal_mem_insts: 0.0,
        uncoal_mem_insts: 6.0,
        synch_insts: 6.0,
        threads_per_block: 128,
        blocks: 80,
        active_blocks_per_sm: 5,
        uncoal_per_mw: Some(32.0),
        load_bytes_per_warp: Some(128.0),
        l1_hit_rate: None,
        l2_hit_rate: None,
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn paper_worked_example() {
    // By hand: N = 4 warps × 5 blocks = 20; Mem_L = 420 + 31·10 = 730; Departure_delay = 10·32 = 320;
    // MWP_Without_BW = 730/320 = 2.28125; BW_per_warp = 128/730 = 0.17534 GB/s;
    // MWP_peak_BW = 80/(0.17534·16) = 28.516; MWP = 2.28125; Comp = 4·33 = 132; Mem = 730·6 = 4380;
    // CWP = min(4512/132 = 34.18, 20) = 20; #Rep = 80/(5·16) = 1; case 2:
    // Exec = 4380·20/2.28125 + 132/6·1.28125 = 38,400 + 28.1875 = 38,428.1875;
    // Synch = 320·1.28125·6·5·1 = 12,300; total 50,728.1875 cycles (the paper quotes ≈ 50,738).
    let e = estimate(&paper_machine(), &paper_kernel()).unwrap();
    assert_eq!(e.n_warps, 20.0);
    assert_eq!(e.mem_l_cycles, 730.0);
    assert_eq!(e.departure_delay_cycles, 320.0);
    assert_eq!(e.mwp, 2.28125);
    assert_eq!(e.mwp_limit, "departure_delay");
    assert!(close(e.bw_per_warp_gbs, 0.175_342, 1e-6));
    assert!(close(e.mwp_peak_bw.unwrap(), 28.515_625, 1e-9));
    assert_eq!(e.cwp, 20.0);
    assert_eq!(e.case, HongKimCase::Case2);
    assert_eq!(e.rep, 1.0);
    assert!(close(e.exec_cycles, 38_428.19, 0.01));
    assert!(close(e.synch_cost_cycles, 12_300.0, 1e-9));
    assert!((e.cycles - 50_728.0).abs() / 50_728.0 < 0.01);
    assert!(close(e.cycles, 50_728.1875, 1e-6));
    // 1 GHz: one cycle per ns.
    assert!(close(e.time_us, 50.728_187_5, 1e-9));
    assert!(e.verdict.starts_with("memory-bound"));
}

#[test]
fn request_json_of_the_worked_example() {
    let req: HongKimRequest = serde_json::from_str(
        r#"{"gpu": {"sm_count": 16, "clock_ghz": 1.0, "memory_bandwidth_gbs": 80, "dram_latency_cycles": 420,
                    "departure_delay_coal_cycles": 4, "departure_delay_uncoal_cycles": 10, "issue_cycles": 4},
            "kernel": {"comp_insts": 27, "coal_mem_insts": 0, "uncoal_mem_insts": 6, "synch_insts": 6,
                       "threads_per_block": 128, "blocks": 80, "active_blocks_per_sm": 5, "uncoal_per_mw": 32,
                       "load_bytes_per_warp": 128}}"#,
    )
    .unwrap();
    let e = req.estimate_with_catalog().unwrap();
    assert!(close(e.cycles, 50_728.1875, 1e-6));
    assert_eq!(e.defaults_used, vec!["warp_size: default 32".to_string()]);
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["case"], "case2");
    assert_eq!(json["mwp"], 2.28125);
    // Unknown fields are refused.
    assert!(serde_json::from_str::<HongKimRequest>(r#"{"gpu": {"sms": 1}, "kernel": {}}"#).is_err());
}

#[test]
fn case1_when_mwp_and_cwp_reach_n() {
    // 64 threads × 1 block = N = 2 warps; 1 coalesced load, 10 comp; Mem_L = 420, departure 4:
    // MWP_Without_BW = min(105, 2) = 2; MWP_peak_BW = 80/((128/420)·16) = 16.4; MWP = 2;
    // Comp = 4·11 = 44, Mem = 420, CWP = min(464/44 = 10.5, 2) = 2 → case 1;
    // #Rep = 16/(1·16) = 1; Exec = 420 + 44 + 44/1·(2−1) = 508; no synch.
    let k = HongKimKernel {
        comp_insts: 10.0,
        coal_mem_insts: 1.0,
        uncoal_mem_insts: 0.0,
        synch_insts: 0.0,
        threads_per_block: 64,
        blocks: 16,
        active_blocks_per_sm: 1,
        uncoal_per_mw: None,
        load_bytes_per_warp: Some(128.0),
        l1_hit_rate: None,
        l2_hit_rate: None,
    };
    let e = estimate(&paper_machine(), &k).unwrap();
    assert_eq!(e.case, HongKimCase::Case1);
    assert_eq!((e.mwp, e.cwp, e.n_warps), (2.0, 2.0, 2.0));
    assert_eq!(e.mwp_limit, "warps");
    assert_eq!(e.cycles, 508.0);
}

#[test]
fn case3_when_computation_dominates() {
    // 256 threads × 4 blocks = N = 32; coalesced, Mem_LD 200, departure 1 → MWP_Without_BW = min(200, 32) = 32;
    // 10,000 GB/s: MWP_peak_BW = 10000/((128/200)·16) = 976.6; MWP = 32.
    // 49 comp + 1 mem: Comp = 4·50 = 200, Mem = 200 → CWP = 400/200 = 2 < MWP and Comp = Mem → case 3;
    // #Rep = 64/(4·16) = 1; Exec = 200 + 200·32 = 6,600 cycles = 6.6 µs at 1 GHz.
    let m = HongKimMachine {
        dram_latency_cycles: 200.0,
        departure_delay_coal_cycles: 1.0,
        memory_bandwidth_gbs: 10_000.0,
        ..paper_machine()
    };
    let k = HongKimKernel {
        comp_insts: 49.0,
        coal_mem_insts: 1.0,
        uncoal_mem_insts: 0.0,
        synch_insts: 0.0,
        threads_per_block: 256,
        blocks: 64,
        active_blocks_per_sm: 4,
        uncoal_per_mw: None,
        load_bytes_per_warp: None,
        l1_hit_rate: None,
        l2_hit_rate: None,
    };
    let e = estimate(&m, &k).unwrap();
    assert_eq!(e.case, HongKimCase::Case3);
    assert_eq!((e.mwp, e.cwp), (32.0, 2.0));
    assert!(close(e.mwp_peak_bw.unwrap(), 976.5625, 1e-9));
    assert_eq!(e.cycles, 6_600.0);
    assert!(close(e.time_us, 6.6, 1e-12));
    assert!(e.verdict.starts_with("compute-bound"));
}

#[test]
fn cache_extension_by_hand() {
    // Worked example with h1 = h2 = 0.5, L1 20, L2 200 cycles, L2 at 20 GB/s, departure_uncoal 1:
    // AMAT = 0.5·20 + 0.5·(0.5·200 + 0.5·420) = 10 + 155 = 165; Mem_L = 165 + 31·1 = 196; departure = 32;
    // MWP_Without_BW = 196/32 = 6.125; DRAM bytes/warp 0.25·128 = 32 → MWP_peak_BW = 80·196/(32·16) = 30.625;
    // L2 bytes/warp 0.5·128 = 64 → MWP_peak_BW_L2 = 20·196/(64·16) = 3.828125 → MWP = 3.828125 (L2 bound);
    // Comp 132, Mem = 196·6 = 1176, CWP = min(1308/132 = 9.91, 20) ≥ MWP → case 2;
    // Exec = 1176·20/3.828125 + 22·2.828125 = 6144 + 62.21875 = 6206.21875;
    // Synch = 32·2.828125·6·5 = 2715; total 8921.21875.
    let m = HongKimMachine {
        departure_delay_uncoal_cycles: 1.0,
        l1_latency_cycles: Some(20.0),
        l2_latency_cycles: Some(200.0),
        l2_bandwidth_gbs: Some(20.0),
        ..paper_machine()
    };
    let k = HongKimKernel { l1_hit_rate: Some(0.5), l2_hit_rate: Some(0.5), ..paper_kernel() };
    let e = estimate(&m, &k).unwrap();
    assert_eq!(e.amat_cycles, Some(165.0));
    assert_eq!(e.mem_l_cycles, 196.0);
    assert_eq!(e.mwp_without_bw, 6.125);
    assert!(close(e.mwp_peak_bw.unwrap(), 30.625, 1e-9));
    assert!(close(e.mwp_peak_bw_l2.unwrap(), 3.828125, 1e-12));
    assert_eq!(e.mwp_limit, "l2_bandwidth");
    assert_eq!(e.case, HongKimCase::Case2);
    assert!(close(e.exec_cycles, 6206.21875, 1e-9));
    assert!(close(e.synch_cost_cycles, 2715.0, 1e-9));
    assert!(close(e.cycles, 8921.21875, 1e-9));
    // Hit rates of 0 give back the paper's model exactly.
    let k0 = HongKimKernel { l1_hit_rate: Some(0.0), l2_hit_rate: Some(0.0), ..paper_kernel() };
    let e0 = estimate(&paper_machine(), &k0).unwrap();
    assert!(close(e0.cycles, 50_728.1875, 1e-6));
    // A hit rate needs its level's latency.
    let err = estimate(&paper_machine(), &HongKimKernel { l1_hit_rate: Some(0.3), ..paper_kernel() });
    assert_eq!(err.unwrap_err().field, "gpu.l1_latency_cycles");
}

#[test]
fn guards() {
    // No memory instructions: Exec = Comp·N·#Rep = (4·10)·(4·2)·(32/(2·16)) = 40·8·1 = 320.
    let k = HongKimKernel {
        comp_insts: 10.0,
        coal_mem_insts: 0.0,
        uncoal_mem_insts: 0.0,
        synch_insts: 3.0,
        threads_per_block: 128,
        blocks: 32,
        active_blocks_per_sm: 2,
        uncoal_per_mw: None,
        load_bytes_per_warp: None,
        l1_hit_rate: None,
        l2_hit_rate: None,
    };
    let e = estimate(&paper_machine(), &k).unwrap();
    assert_eq!((e.case, e.cycles, e.synch_cost_cycles), (HongKimCase::NoMemory, 320.0, 0.0));
    // A grid smaller than the GPU: 8 blocks on 16 SMs → 8 active SMs with one block each, #Rep = 1.
    let small = HongKimKernel { blocks: 8, ..paper_kernel() };
    let e = estimate(&paper_machine(), &small).unwrap();
    assert_eq!((e.active_sms, e.active_blocks_per_sm, e.rep, e.n_warps), (8, 1, 1.0, 4.0));
    // Bad inputs name their field.
    let bad = |k: HongKimKernel| estimate(&paper_machine(), &k).unwrap_err().field;
    assert_eq!(bad(HongKimKernel { blocks: 0, ..paper_kernel() }), "kernel.blocks");
    assert_eq!(bad(HongKimKernel { uncoal_per_mw: None, ..paper_kernel() }), "kernel.uncoal_per_mw");
    assert_eq!(bad(HongKimKernel { comp_insts: -1.0, ..paper_kernel() }), "kernel.comp_insts");
    assert_eq!(bad(HongKimKernel { l2_hit_rate: Some(1.5), ..paper_kernel() }), "kernel.l2_hit_rate");
    assert_eq!(bad(HongKimKernel { comp_insts: 0.0, uncoal_mem_insts: 0.0, ..paper_kernel() }), "kernel.comp_insts");
    let m = HongKimMachine { issue_cycles: 0.0, ..paper_machine() };
    assert_eq!(estimate(&m, &paper_kernel()).unwrap_err().field, "gpu.issue_cycles");
}

#[test]
fn machine_from_a_catalog_gpu() {
    // A100-SXM4-40GB: Mem_LD = 450·1.41 = 634.5; issue = 32/64.0268 = 0.49979;
    // departure_coal = 128·108·1.41/1555 = 19,491.84/1555 = 12.53495; departure_uncoal = 4,872.96/1555 = 3.13374.
    let a100 = lookup("A100-SXM4-40GB").unwrap().spec.clone();
    let m = HongKimMachine::from_gpu(&a100);
    assert!(close(m.dram_latency_cycles, 634.5, 1e-9));
    assert!(close(m.issue_cycles, 0.49979, 1e-5));
    assert!(close(m.departure_delay_coal_cycles, 12.53495, 1e-5));
    assert!(close(m.departure_delay_uncoal_cycles, 3.13374, 1e-5));
    assert_eq!(m.l2_bandwidth_gbs, Some(3110.0));
    // A request naming the GPU and overriding one number: the override wins, the rest is noted.
    let req = HongKimRequest {
        gpu: HongKimMachineInput {
            name: Some("NVIDIA A100-SXM4-40GB".into()),
            dram_latency_cycles: Some(640.0),
            ..Default::default()
        },
        kernel: HongKimKernel { blocks: 1080, active_blocks_per_sm: 2, ..paper_kernel() },
    };
    let e = req.estimate_with_catalog().unwrap();
    assert_eq!(e.machine.dram_latency_cycles, 640.0);
    assert!(e.defaults_used.iter().any(|d| d.starts_with("issue_cycles")));
    assert!(!e.defaults_used.iter().any(|d| d.starts_with("dram_latency_cycles")));
    // #Rep = 1080/(2·108) = 5.
    assert_eq!(e.rep, 5.0);
    assert!(e.time_us > 0.0);
    // Unknown names and missing numbers are errors, not guesses.
    let unknown = HongKimRequest {
        gpu: HongKimMachineInput { name: Some("no-such-gpu".into()), ..Default::default() },
        kernel: paper_kernel(),
    };
    assert_eq!(unknown.estimate_with_catalog().unwrap_err().field, "gpu.name");
    let partial = HongKimRequest {
        gpu: HongKimMachineInput { sm_count: Some(16), clock_ghz: Some(1.0), ..Default::default() },
        kernel: paper_kernel(),
    };
    assert_eq!(partial.estimate_with_catalog().unwrap_err().field, "gpu.memory_bandwidth_gbs");
}
