//! The shared curve reader: rows grouped and sorted, bad rows skipped, interpolation and the stand-in order worked
//! by hand.

use serde::Deserialize;

use super::*;

/// A table of the test's own: `kind,device,x,us`.
#[derive(Deserialize)]
struct Row {
    kind: String,
    device: String,
    x: f64,
    us: f64,
}

impl CurveRow for Row {
    type Key = String;
    fn point(self) -> Option<CurvePoint<String>> {
        (self.kind != "unknown").then_some(CurvePoint { key: self.kind, device: self.device, x: self.x, y: self.us })
    }
}

const TABLE: &str = "kind,device,x,us
a,NVIDIA B200,4,16
a,NVIDIA B200,1,1
b,NVIDIA B200,1,2
a,NVIDIA H100 80GB HBM3,1,3
unknown,NVIDIA B200,2,2
a,No Such GPU,2,2
a,NVIDIA B200,0,5
a,NVIDIA B200,two,5
a,NVIDIA B200,2
";

#[test]
fn rows_group_into_sorted_curves_and_bad_rows_are_skipped() {
    // Kept: (a, B200) from rows 1-2 sorted to (1,1),(4,16); (b, B200); (a, H100). Skipped: the unknown kind, the
    // device not in the catalog, x = 0, an x that is no number, a row of three fields.
    let c = read_curves::<Row>(TABLE);
    let keys: Vec<(&str, &str)> = c.iter().map(|c| (c.key.as_str(), c.gpu.as_str())).collect();
    assert_eq!(keys, [("a", "B200"), ("b", "B200"), ("a", "H100-SXM5-80GB")]);
    assert_eq!(c[0].points, [(1.0, 1.0), (4.0, 16.0)]);
    // B200's catalog entry: compute capability 10.0, 8,000 GB/s (datasheet).
    assert_eq!((c[0].cc.as_deref(), c[0].cc_major, c[0].memory_bandwidth_gbs), (Some("10.0"), Some(10), 8000.0));
}

#[test]
fn log_log_interpolation_by_hand() {
    // Points (1, 1) and (4, 16): x = 2 is halfway in ln x (w = ln 2 / ln 4 = 0.5), so
    // y = exp(ln 1 + 0.5 · ln 16) = √16 = 4; x = 0.5 (below the table) the floor 1; x = 4 its own 16; x = 4.5
    // (above the table) nothing; no points, nothing.
    let p = [(1.0, 1.0), (4.0, 16.0)];
    let cases = [(2.0, Some(4.0)), (0.5, Some(1.0)), (4.0, Some(16.0)), (4.5, None)];
    for (x, want) in cases {
        let got = interpolate(&p, x);
        assert_eq!(got.is_some(), want.is_some(), "x = {x}");
        assert!(got.zip(want).is_none_or(|(g, w)| (g - w).abs() < 1e-12), "x = {x}: {got:?}");
    }
    assert_eq!(interpolate(&[], 1.0), None);
}

#[test]
fn stand_ins_are_the_same_generation_same_cc_first_then_nearest_bandwidth() {
    // Measured: H100 (cc 9.0, 3,350 GB/s), B200 and GB200 (10.0, 8,000), B300 (10.3, 8,000), A100 (8.0).
    let table = "kind,device,x,us
a,NVIDIA H100 80GB HBM3,1,1
a,NVIDIA GB200,1,1
b,NVIDIA GB200,1,1
a,NVIDIA B200,1,1
a,NVIDIA B300 SXM6 AC,1,1
a,NVIDIA A100-SXM4-80GB,1,1
";
    let c = read_curves::<Row>(table);
    let spec = |n: &str| lookup(n).unwrap().spec.clone();
    // GB300 (10.3, 8,000): B300 shares its cc; B200 and GB200 (10.0) are both 0 GB/s from its 8,000, so by name; GB200's
    // two curves count once; H100 and A100 are other generations.
    assert_eq!(stand_ins(&c, &spec("GB300")), ["B300", "B200", "GB200"]);
    // H200 (9.0, 4,800): H100 only.
    assert_eq!(stand_ins(&c, &spec("H200")), ["H100-SXM5-80GB"]);
    // B200 (10.0, 8,000): GB200 shares its cc, B300 (10.3) after it.
    assert_eq!(stand_ins(&c, &spec("B200")), ["GB200", "B300"]);
}
