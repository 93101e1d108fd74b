//! The collector's output (collect/) is perfcast's sample format: its golden file parses with the service's parser,
//! every line becomes a sample, and values survive the round trip.

use perfcast::ingest::{parse, Context, Format};
use perfcast::op::{OpClass, Phase};
use perfcast::samples::Sample;

#[test]
fn golden_collector_output_parses_completely() {
    let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/collect/tests/golden_samples.jsonl")).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    let lines = text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).count();
    let parsed = parse(Format::PerfcastJsonl, &bytes, &Context::default()).unwrap();
    assert!(parsed.rejected.is_empty(), "{:?}", parsed.rejected);
    assert_eq!(parsed.samples.len(), lines);
    // Every operator class the collector covers appears forward and backward (the optimizer: forward only; the
    // serving classes come from serving frameworks' databases, not from the collector).
    for class in OpClass::ALL {
        if class == OpClass::Elementwise || class.is_serving() {
            continue;
        }
        let has =
            |phase| parsed.samples.iter().any(|s| matches!(s, Sample::Op(o) if o.op == class && o.phase == phase));
        assert!(has(Phase::Fwd), "{class} fwd missing");
        if class != OpClass::Optimizer {
            assert!(has(Phase::Bwd), "{class} bwd missing");
        }
    }
    // The first line, read by eye: embedding fwd, T 8192, V 12672, H 6144, 12.981 µs, s1_op Embedding, mp 4.
    let Sample::Op(first) = &parsed.samples[0] else { panic!("first sample is not an operator") };
    assert_eq!(
        (first.op, first.phase, first.dims, first.time_us),
        (OpClass::Embedding, Phase::Fwd, [8192, 12672, 6144, 0, 0], 12.981)
    );
    assert_eq!(first.attributes["s1_op"], "Embedding");
    assert_eq!(first.attributes["mp"], "4");
    assert!(parsed.samples.iter().any(|s| matches!(s, Sample::Comm(_))));
}
