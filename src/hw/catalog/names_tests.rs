//! Tests of name resolution: tool-reported device names and aliases resolve to one catalog GPU each.

use super::*;

#[test]
fn tool_reported_names_resolve() {
    let cases = [
        ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
        ("NVIDIA_H100_80GB_HBM3", "H100-SXM5-80GB"),
        ("Tesla V100-PCIE-32GB", "V100-PCIE-32GB"),
        ("Tesla_P4", "P4"),
        ("Tesla T4", "T4"),
        ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB-PCIe"),
        ("NVIDIA_A100_80GB_PCIe", "A100-80GB-PCIe"),
        ("NVIDIA L4", "L4"),
        ("AMD Instinct MI210", "MI210"),
        ("AMD Instinct MI100", "MI100"),
        ("a100-sxm4-80gb", "A100-SXM4-80GB"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA H200", "H200"),
        ("AMD Instinct MI250X", "MI250X-GCD"),
        ("MI250X", "MI250X"),
        ("AMD Instinct MI300X", "MI300X"),
        ("gfx942", "MI300X"),
        ("AMD_Instinct_MI300X", "MI300X"),
    ];
    for (alias, canonical) in cases {
        assert_eq!(lookup(alias).map(|g| g.spec.name.as_str()), Some(canonical), "{alias}");
    }
    assert!(lookup("RTX 9090").is_none());
}

#[test]
fn names_and_aliases_are_unambiguous() {
    let mut seen = std::collections::HashMap::new();
    for g in catalog() {
        for n in std::iter::once(g.spec.name.as_str()).chain(g.aliases.iter().copied()) {
            let key = normalize_name(n);
            if let Some(prev) = seen.insert(key.clone(), g.spec.name.clone()) {
                panic!("{n} names both {prev} and {}", g.spec.name);
            }
        }
    }
}

#[test]
fn new_gpus_resolve_by_every_alias() {
    // PyTorch / nvidia-smi device names (the aiconfigurator CSVs' `device` column), aiconfigurator's folder
    // names, and short forms; case, spaces, `_` and `-` do not matter.
    let cases = [
        ("NVIDIA L40S", "L40S"),
        ("l40s", "L40S"),
        ("NVIDIA B200", "B200"),
        ("b200_sxm", "B200"),
        ("B200", "B200"),
        ("NVIDIA GB200", "GB200"),
        ("gb200", "GB200"),
        ("NVIDIA B300 SXM6 AC", "B300"),
        ("NVIDIA_B300_SXM6_AC", "B300"),
        ("b300_sxm", "B300"),
        ("NVIDIA B300", "B300"),
        ("NVIDIA GB300", "GB300"),
        ("gb300", "GB300"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000-Blackwell-Server"),
        ("rtx_pro_6000_blackwell_server", "RTX-PRO-6000-Blackwell-Server"),
        ("RTX-PRO-6000-SE", "RTX-PRO-6000-Blackwell-Server"),
        // aiconfigurator folders for GPUs that were already in the catalog.
        ("h100_sxm", "H100-SXM5-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
        // the a100_sxm data's device column says "NVIDIA A100-SXM4-80GB": the 80 GB part.
        ("a100_sxm", "A100-SXM4-80GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
    ];
    for (alias, canonical) in cases {
        assert_eq!(lookup(alias).map(|g| g.spec.name.as_str()), Some(canonical), "{alias}");
    }
    // Names that resolved before these GPUs existed still resolve as before, and near misses stay unknown
    // rather than landing on a neighbour.
    for (name, canonical) in [("A100", "A100-SXM4-40GB"), ("H100", "H100-SXM5-80GB"), ("L4", "L4"), ("H200", "H200")] {
        assert_eq!(lookup(name).map(|g| g.spec.name.as_str()), Some(canonical), "{name}");
    }
    for unknown in ["NVIDIA H200 NVL", "B100", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"] {
        assert!(lookup(unknown).is_none(), "{unknown}");
    }
}

#[test]
fn no_two_gpus_share_a_name_once_vendor_prefixes_are_stripped() {
    // `lookup`'s second pass compares names without `NVIDIA`/`Tesla`/`AMD Instinct`: a new alias must not make
    // that pass ambiguous. The one pre-existing overlap is deliberate: "AMD Instinct MI250X" is what the
    // runtime reports for one GCD (exact match, first pass), while a bare "MI250X" means the whole package.
    let mut seen: std::collections::HashMap<String, &str> = std::collections::HashMap::new();
    for g in catalog() {
        for n in std::iter::once(g.spec.name.as_str()).chain(g.aliases.iter().copied()) {
            let bare = strip_prefixes(&normalize_name(n)).to_string();
            if let Some(prev) = seen.insert(bare.clone(), g.spec.name.as_str()) {
                let pair = [prev, g.spec.name.as_str()];
                assert!(prev == g.spec.name || pair == ["MI250X", "MI250X-GCD"], "{n}: {pair:?}");
            }
        }
    }
}
