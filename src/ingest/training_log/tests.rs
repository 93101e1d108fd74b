//! Each format on a small hand-written log: the steps, the warm-up dropped and the median worked out by hand.

use super::*;

const SCALE: RunScale = RunScale { global_batch: 64, seq_len: 4096, gpus: 16 };

#[test]
fn megatron_steps_drop_the_warm_up_and_take_the_median() {
    let log = "\
 [2025-04-13 23:41:00] training ...
 [2025-04-13 23:41:12] iteration       10/    1000 | consumed samples:          640 | elapsed time per iteration (ms): 2500.0 | learning rate: 1.0E-04 | global batch size:    64 | lm loss: 7.1E+00 | number of skipped iterations:   0 |
 iteration       20/    1000 | consumed samples:         1280 | elapsed time per iteration (ms): 1010.0 | global batch size:    64 |
time (ms) | forward-compute: 53.79 | backward-compute: 138.84
 iteration       30/    1000 | consumed samples:         1920 | elapsed time per iteration (ms): 1000.0 |
 iteration       40/    1000 | consumed samples:         2560 | elapsed time per iteration (ms): 990.0 |
 iteration       50/infinity | consumed samples:         3200 | elapsed time per iteration (ms): 1030.0 |
";
    let t = step_times(LogFormat::Megatron, log, &SCALE).unwrap();
    // 5 step lines on lines 2, 3, 5, 6, 7; warm-up ⌈0.2·5⌉ = 1 (iteration 10, 2.5 s);
    // median of {1.010, 1.000, 0.990, 1.030} = (1.000 + 1.010)/2 = 1.005 s.
    assert_eq!(
        t.steps.iter().map(|s| (s.step, s.line)).collect::<Vec<_>>(),
        [(10, 2), (20, 3), (30, 5), (40, 6), (50, 7)]
    );
    assert_eq!(t.warmup_dropped, 1);
    assert!((t.iteration_s - 1.005).abs() < 1e-12, "{}", t.iteration_s);
}

#[test]
fn torchtitan_tps_becomes_a_step_time_through_the_configuration() {
    let log = "\
[rank0]:[titan] 2025-01-01 10:00:00,000 - root - INFO - \u{1b}[31mstep:  1  \u{1b}[32mloss: 12.2500  \u{1b}[38;2;180;60;0mgrad_norm:  4.1000  \u{1b}[38;2;54;234;195mmemory: 30.12GiB(38.07%)  \u{1b}[34mtps: 1,024  \u{1b}[36mtflops: 50.00  \u{1b}[35mmfu: 5.06%\u{1b}[39m
[rank0]:[titan] 2025-01-01 10:00:10,000 - root - INFO - step: 10  loss:  9.0000  memory: 30.12GiB(38.07%)  tps: 8,192  tflops: 400.00  mfu: 40.45%
[rank0]:[titan] 2025-01-01 10:00:11,000 - root - INFO - validate step: 10  loss:  9.1000  memory: 30.12GiB(38.07%)  tps: 9,000
[rank0]:[titan] 2025-01-01 10:00:20,000 - root - INFO - step: 20  loss:  8.0000  memory: 30.12GiB(38.07%)  tps: 8,000  tflops: 390.00  mfu: 39.50%
";
    let t = step_times(LogFormat::Torchtitan, log, &SCALE).unwrap();
    // Tokens per step 64 · 4096 = 262,144 over 16 GPUs = 16,384 per GPU: tps 1,024 → 16 s, 8,192 → 2 s,
    // 8,000 → 2.048 s. The validation line is skipped. Warm-up ⌈0.2·3⌉ = 1; median of {2, 2.048} = 2.024 s.
    assert_eq!(t.steps.iter().map(|s| s.step).collect::<Vec<_>>(), [1, 10, 20]);
    assert!((t.steps[0].iteration_s - 16.0).abs() < 1e-12);
    assert_eq!(t.warmup_dropped, 1);
    assert!((t.iteration_s - 2.024).abs() < 1e-12, "{}", t.iteration_s);
}

#[test]
fn mllog_tracked_stats_and_train_step_time_events() {
    let log = r#":::MLLOG {"namespace": "", "time_ms": 1, "event_type": "INTERVAL_START", "key": "run_start", "value": null, "metadata": {"file": "x.py", "lineno": 1}}
:::MLLOG {"namespace": "", "time_ms": 2, "event_type": "POINT_IN_TIME", "key": "tracked_stats", "value": {"train_step_time": 3.0, "reduced_train_loss": 9.1}, "metadata": {"file": "x.py", "lineno": 2, "samples_count": 640}}
:::MLLOG {"namespace": "", "time_ms": 3, "event_type": "POINT_IN_TIME", "key": "tracked_stats", "value": {"train_step_time": 1.5, "reduced_train_loss": 8.2}, "metadata": {"samples_count": 1280}}
:::MLLOG {"namespace": "", "time_ms": 4, "event_type": "POINT_IN_TIME", "key": "train_step_time", "value": 1.25, "metadata": {"step": 30}}
:::MLLOG {"namespace": "", "time_ms": 5, "event_type": "POINT_IN_TIME", "key": "tracked_stats", "value": {"train_step_time": 1.75}, "metadata": {"samples_count": 2560}}
:::MLLOG {"namespace": "", "time_ms": 6, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", "value": 3.3, "metadata": {"samples_count": 2560}}
"#;
    let t = step_times(LogFormat::Mllog, log, &SCALE).unwrap();
    // Steps from samples_count / 64 (640 → 10, 1280 → 20, 2560 → 40) or metadata.step (30). Warm-up ⌈0.2·4⌉ = 1
    // (3.0 s); median of {1.5, 1.25, 1.75} = 1.5 s.
    assert_eq!(t.steps.iter().map(|s| (s.step, s.line)).collect::<Vec<_>>(), [(10, 2), (20, 3), (30, 4), (40, 5)]);
    assert_eq!(t.warmup_dropped, 1);
    assert_eq!(t.iteration_s, 1.5);
}

#[test]
fn deepspeed_throughput_timer_and_pipeline_lines() {
    let log = "\
[2025-01-01 10:00:00,000] [INFO] [timer.py:264:stop] epoch=0/micro_step=40/global_step=10, RunningAvgSamplesPerSec=20.0, CurrSamplesPerSec=16.0, MemAllocated=10.1GB, MaxMemAllocated=20.2GB
[2025-01-01 10:00:10,000] [INFO] [timer.py:264:stop] epoch=0/micro_step=80/global_step=20, RunningAvgSamplesPerSec=30.0, CurrSamplesPerSec=32.0, MemAllocated=10.1GB, MaxMemAllocated=20.2GB
steps: 30 loss: 2.3456 iter time (s): 2.500 samples/sec: 25.600
";
    let t = step_times(LogFormat::Deepspeed, log, &SCALE).unwrap();
    // global batch 64: 64/16 = 4 s, 64/32 = 2 s; the pipeline line 2.5 s. Warm-up ⌈0.2·3⌉ = 1; median of
    // {2, 2.5} = 2.25 s.
    assert_eq!(t.steps.iter().map(|s| s.step).collect::<Vec<_>>(), [10, 20, 30]);
    assert_eq!(t.steps[0].iteration_s, 4.0);
    assert_eq!(t.iteration_s, 2.25);
}

#[test]
fn a_step_line_that_does_not_parse_names_its_line() {
    let log = " iteration 10/100 | elapsed time per iteration (ms): 1000.0 |\nnoise\n iteration 20/100 | elapsed time per iteration (ms): fast |\n";
    let e = step_times(LogFormat::Megatron, log, &SCALE).unwrap_err();
    assert_eq!(e.line, 3);
    assert!(e.to_string().starts_with("line 3: the elapsed time per iteration (ms) `fast` is not a number"), "{e}");

    let e = parse(LogFormat::Mllog, "x\n:::MLLOG {\"key\": \"tracked_stats\", \n", &SCALE).unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.message.contains("not JSON"), "{e}");

    let e = parse(LogFormat::Torchtitan, "step: 5  loss: 1.0  tps: -3  mfu: 1%\n", &SCALE).unwrap_err();
    assert_eq!((e.line, e.message.as_str()), (1, "tps `` is not a number"));

    let e = parse(LogFormat::Deepspeed, "a\nb\nepoch=0/micro_step=1/global_step=1, CurrSamplesPerSec=0.0\n", &SCALE)
        .unwrap_err();
    assert_eq!((e.line, e.message.as_str()), (3, "CurrSamplesPerSec 0 is not positive"));

    let e =
        parse(LogFormat::Megatron, " iteration 1/9 | elapsed time per iteration (ms): 0.0 |\n", &SCALE).unwrap_err();
    assert_eq!((e.line, e.message.as_str()), (1, "the step time 0 s is not a positive number"));
}

#[test]
fn a_log_needs_two_step_lines() {
    let e = step_times(LogFormat::Megatron, "hello\n iteration 1/9 | elapsed time per iteration (ms): 5.0 |\n", &SCALE)
        .unwrap_err();
    assert_eq!(e.line, 0);
    assert!(e.message.contains("has 1 megatron step line"), "{e}");
}

#[test]
fn the_warm_up_rule() {
    // ⌈0.2·n⌉, at least 1, leaving at least 1.
    assert_eq!([2, 3, 5, 6, 10, 11].map(warmup_steps), [1, 1, 1, 2, 2, 3]);
}
