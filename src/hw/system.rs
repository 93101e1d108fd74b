//! A system: nodes of identical GPUs joined by an intra-node and an inter-node link class.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use utoipa::ToSchema;

use super::gpu::GpuSpec;

/// One link class of a system, the postal (Hockney) model's parameters: a message of n bytes takes
/// `latency_us + n / (bandwidth_gbs · 10⁹)` seconds (S0's K-model; MODELS.md §3.1).
///
/// `bandwidth_gbs` is **unidirectional** GB/s (10⁹ B/s): per GPU for `intra_node` (the aggregate of its
/// NVLink/xGMI/PCIe links), per node (all NICs together) for `inter_node`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"kind": "nvswitch", "bandwidth_gbs": 300, "latency_us": 2.0}))]
pub struct Link {
    /// Free-form technology name, e.g. `nvlink3`, `nvswitch`, `pcie4`, `infiniband-ndr`, `slingshot-10`.
    pub kind: String,
    /// Unidirectional bandwidth, GB/s (10⁹ B/s): per GPU intra-node, per node inter-node.
    pub bandwidth_gbs: f64,
    /// Per-message latency α, µs.
    pub latency_us: f64,
    /// NICs per node (inter-node link only). One GPU drives at most one NIC, so a GPU's share of the node's
    /// bandwidth is capped at `bandwidth_gbs / nics`; `null` = no cap (one NIC shared by the node's GPUs, or
    /// unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nics: Option<u32>,
    /// `bandwidth_gbs` is what NCCL achieves on this link (nccl-tests bus bandwidth measured on the machine), not
    /// a datasheet figure: collectives over it are not derated by the network efficiency. Default `false`
    /// (datasheet).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub achieved: bool,
}

impl Link {
    /// A datasheet link without a NIC count.
    pub fn new(kind: &str, bandwidth_gbs: f64, latency_us: f64) -> Link {
        Link { kind: kind.to_string(), bandwidth_gbs, latency_us, nics: None, achieved: false }
    }

    /// Checks the numbers; returns `(field, message)` for the first bad one.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !(self.bandwidth_gbs.is_finite() && self.bandwidth_gbs > 0.0) {
            return Err(("bandwidth_gbs".into(), format!("must be a positive number, got {}", self.bandwidth_gbs)));
        }
        if !(self.latency_us.is_finite() && self.latency_us >= 0.0) {
            return Err(("latency_us".into(), format!("must be a non-negative number, got {}", self.latency_us)));
        }
        if self.nics == Some(0) {
            return Err(("nics".into(), "must be at least 1".into()));
        }
        Ok(())
    }
}

/// How a system names its GPU: a catalog name (or alias), or a complete inline description.
///
/// On the wire this is either a string (`"A100-SXM4-80GB"`) or a [`GpuSpec`] object.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuRef {
    /// A name to resolve in the catalog (canonical name or alias).
    Name(String),
    /// A full description given inline.
    Spec(Box<GpuSpec>),
}

impl Serialize for GpuRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            GpuRef::Name(n) => s.serialize_str(n),
            GpuRef::Spec(spec) => spec.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for GpuRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = GpuRef;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a catalog GPU name (string) or a GPU description (object)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<GpuRef, E> {
                Ok(GpuRef::Name(v.to_string()))
            }
            fn visit_map<M: de::MapAccess<'de>>(self, map: M) -> Result<GpuRef, M::Error> {
                GpuSpec::deserialize(de::value::MapAccessDeserializer::new(map)).map(|s| GpuRef::Spec(Box::new(s)))
            }
        }
        d.deserialize_any(V)
    }
}

impl utoipa::PartialSchema for GpuRef {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some("Catalog GPU name or alias (see GET /v1/gpus), e.g. `A100-SXM4-80GB`"))
                    .examples([serde_json::json!("A100-SXM4-80GB")]),
            )
            .item(utoipa::openapi::Ref::from_schema_name("GpuSpec"))
            .description(Some("A catalog GPU name, or a complete GPU description"))
            .into()
    }
}

impl utoipa::ToSchema for GpuRef {
    fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
        schemas.push((GpuSpec::name().into(), <GpuSpec as utoipa::PartialSchema>::schema()));
        <GpuSpec as utoipa::ToSchema>::schemas(schemas);
    }
}

/// A cluster of identical nodes (S1's "system"): `nodes` × `gpus_per_node` GPUs of one kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "name": "my-a100-cluster", "gpu": "A100-SXM4-80GB", "gpus_per_node": 8, "nodes": 64,
    "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 300, "latency_us": 2.0},
    "inter_node": {"kind": "infiniband-hdr", "bandwidth_gbs": 100, "latency_us": 5.0}
}))]
pub struct SystemSpec {
    /// Unique name: 1–64 characters from `a-z A-Z 0-9 . _ -`.
    pub name: String,
    /// The GPU: a catalog name or an inline description.
    pub gpu: GpuRef,
    /// GPUs in one node.
    pub gpus_per_node: u32,
    /// Nodes in the system.
    pub nodes: u32,
    /// Link between GPUs of one node; bandwidth per GPU, unidirectional.
    pub intra_node: Link,
    /// Link between nodes; bandwidth per node (all NICs), unidirectional.
    pub inter_node: Link,
    /// Free text shown in listings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A system whose GPU has been resolved to a full description: what the models consume.
#[derive(Debug, Clone, PartialEq)]
pub struct System {
    pub name: String,
    pub gpu: GpuSpec,
    pub gpus_per_node: u32,
    pub nodes: u32,
    pub intra_node: Link,
    pub inter_node: Link,
}

impl System {
    /// One GPU alone (`name` "-", one node of one GPU): what carries the GPU into a cost backend that times one
    /// operator. Both links are a placeholder (`none`, 1 GB/s, 0 µs) that nothing reads, since one GPU has no peer
    /// to talk to.
    pub fn single_gpu(gpu: GpuSpec) -> System {
        let link = Link::new("none", 1.0, 0.0);
        System { name: "-".into(), gpu, gpus_per_node: 1, nodes: 1, intra_node: link.clone(), inter_node: link }
    }

    /// All GPUs of the system.
    pub fn total_gpus(&self) -> u64 {
        self.gpus_per_node as u64 * self.nodes as u64
    }
}

/// Why a system description is not usable: the offending field path (relative to the system object) and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SystemError {
    pub field: String,
    pub message: String,
}

impl SystemSpec {
    /// Validates the description and resolves the GPU against the catalog.
    ///
    /// Errors: an unknown catalog name (`gpu`), a bad name, zero counts, or non-positive link numbers, each
    /// naming its field.
    pub fn resolve(&self) -> Result<System, SystemError> {
        self.resolve_with(&super::GpuDirectory::default())
    }

    /// [`SystemSpec::resolve`] against a directory that also knows imported GPUs.
    pub fn resolve_with(&self, gpus: &super::GpuDirectory) -> Result<System, SystemError> {
        let err = |field: &str, message: String| SystemError { field: field.to_string(), message };
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self.name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !name_ok {
            return Err(err("name", "must be 1–64 characters from a-z A-Z 0-9 . _ -".into()));
        }
        if self.gpus_per_node == 0 {
            return Err(err("gpus_per_node", "must be at least 1".into()));
        }
        if self.nodes == 0 {
            return Err(err("nodes", "must be at least 1".into()));
        }
        self.intra_node.validate().map_err(|(f, m)| err(&format!("intra_node.{f}"), m))?;
        self.inter_node.validate().map_err(|(f, m)| err(&format!("inter_node.{f}"), m))?;
        let gpu = match &self.gpu {
            GpuRef::Name(n) => gpus
                .spec(n)
                .ok_or_else(|| err("gpu", format!("unknown GPU {n:?}: not in the catalog (GET /v1/gpus lists it)")))?,
            GpuRef::Spec(spec) => {
                spec.validate().map_err(|(f, m)| err(&format!("gpu.{f}"), m))?;
                (**spec).clone()
            }
        };
        Ok(System {
            name: self.name.clone(),
            gpu,
            gpus_per_node: self.gpus_per_node,
            nodes: self.nodes,
            intra_node: self.intra_node.clone(),
            inter_node: self.inter_node.clone(),
        })
    }
}

fn preset(
    name: &str,
    gpu: &str,
    gpus_per_node: u32,
    nodes: u32,
    intra: (&str, f64, f64),
    inter: (&str, f64, f64, u32),
    description: &str,
) -> SystemSpec {
    SystemSpec {
        name: name.into(),
        gpu: GpuRef::Name(gpu.into()),
        gpus_per_node,
        nodes,
        intra_node: Link::new(intra.0, intra.1, intra.2),
        inter_node: Link { nics: Some(inter.3), ..Link::new(inter.0, inter.1, inter.2) },
        description: Some(description.into()),
    }
}

/// `spec` with its intra-node bandwidth marked as NCCL's achieved one ([`Link::achieved`]).
fn achieved_intra(mut spec: SystemSpec) -> SystemSpec {
    spec.intra_node.achieved = true;
    spec
}

/// The systems every new database starts with.
///
/// A link whose achieved NCCL bandwidth on that machine is published carries it ([`Link::achieved`], cited at
/// the preset); the others carry the datasheet, derated by the generic network efficiency, and predictions on
/// them warn that the network is uncalibrated until the system's own nccl-tests or OSU results are uploaded.
///
/// Bandwidths are unidirectional GB/s. NVLink 3 (A100): 12 links × 25 GB/s = 300 GB/s per GPU; NVLink 4 (H100,
/// H200): 18 links × 25 GB/s = 450 GB/s per GPU (NVIDIA A100/H100/H200 datasheets: 600 / 900 GB/s bidirectional);
/// NVLink 5 (B200): 18 links × 50 GB/s = 900 GB/s per GPU (DGX B200 datasheet: 14.4 TB/s aggregate over 8 GPUs =
/// 1.8 TB/s bidirectional each). NICs: a 200 Gb/s HDR port is 25 GB/s, a 400 Gb/s NDR port 50 GB/s, a 50 Gb/s
/// Slingshot-10 port 6.25 GB/s. Latencies are typical per-message α values (NVLink ≈ 2 µs, InfiniBand ≈ 5 µs
/// through NCCL); calibration from OSU / nccl-tests samples replaces them.
pub fn presets() -> Vec<SystemSpec> {
    vec![
        preset(
            "perlmutter-a100-40g",
            "A100-SXM4-40GB",
            4,
            1536,
            ("nvlink3", 300.0, 2.0),
            ("slingshot-10", 25.0, 5.0, 4),
            "NERSC Perlmutter GPU partition: 1,536 nodes of 4× A100-SXM4-40GB (NVLink 3 all-to-all), \
             HPE Slingshot-10 with 4×50 Gb/s NICs per node (S1's Perlmutter setup)",
        ),
        preset(
            "vista-gh200",
            "GH200",
            1,
            600,
            ("nvlink-c2c", 450.0, 1.0),
            ("infiniband-ndr", 50.0, 5.0, 1),
            "TACC Vista GH200 partition: 600 nodes of 1× GH200 96 GB, NDR InfiniBand 400 Gb/s per node \
             (S1's Vista setup); the intra-node link is unused with one GPU per node",
        ),
        // Intra-node: what NCCL achieves on an HGX A100 NVSwitch baseboard, 230 GB/s bus bandwidth: SuperBench
        // v0.4.0's Azure NDv4 (8× A100 on NVSwitch) fleet baseline, nccl-bw all-reduce busbw 229.9 GB/s at 1 GiB
        // (235.0 at 8 GiB), and vTrain's DGX A100 NCCL all-reduce table, 229 GB/s on 8 GPUs (DATA.md train data).
        achieved_intra(preset(
            "dgx-a100-80g",
            "A100-SXM4-80GB",
            8,
            140,
            ("nvswitch", 230.0, 2.0),
            ("infiniband-hdr", 200.0, 5.0, 8),
            "NVIDIA DGX A100 SuperPOD: 140 nodes of 8× A100-SXM4-80GB on NVSwitch (230 GB/s: NCCL's achieved \
             bus bandwidth), 8× HDR 200 Gb/s per node (datasheet)",
        )),
        // Intra-node: what NCCL achieves on 8 H100 on NVSwitch, 350 GB/s bus bandwidth: the single-node 8× H100
        // nccl-tests of xxrjun/nccl-tests-cluster (DATA.md train rows) reach all-gather 351, reduce-scatter 349,
        // send/recv 364 GB/s (medians, 256 MiB – 16 GiB). All-reduce is faster there (476 GB/s; 480 in the DGX
        // H100 sample output of NVIDIA/dgxc-benchmarking's nccl README): NCCL's NVLink SHARP reduces in the
        // switch, which the α–β ring of one link bandwidth does not represent — the all-gathers and
        // reduce-scatters of sequence parallelism and the distributed optimizer are what training sends.
        achieved_intra(preset(
            "dgx-h100",
            "H100-SXM5-80GB",
            8,
            128,
            ("nvswitch", 350.0, 2.0),
            ("infiniband-ndr", 400.0, 5.0, 8),
            "NVIDIA DGX H100 SuperPOD-scale: 128 nodes of 8× H100-SXM5-80GB on NVSwitch (NVLink 4; 350 GB/s: \
             NCCL's achieved bus bandwidth), 8× NDR 400 Gb/s per node (datasheet)",
        )),
        // DGX H200 datasheet (https://www.nvidia.com/en-us/data-center/dgx-h200/): 8× H200 141 GB, NVLink 4 at
        // 900 GB/s bidirectional per GPU, 4 OSFP ports serving 8 single-port ConnectX-7 VPI at up to 400 Gb/s
        // InfiniBand (the storage/management BlueField-3 DPUs are not the compute fabric): 8 × 400 / 8 = 400 GB/s.
        preset(
            "dgx-h200",
            "H200",
            8,
            128,
            ("nvswitch", 450.0, 2.0),
            ("infiniband-ndr", 400.0, 5.0, 8),
            "NVIDIA DGX H200 SuperPOD-scale: 128 nodes of 8× H200 141 GB on NVSwitch (NVLink 4), \
             8× ConnectX-7 NDR 400 Gb/s per node",
        ),
        // DGX B200 datasheet (https://www.nvidia.com/en-us/data-center/dgx-b200/) and user guide
        // (https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html): 8× B200, two NVLink 5
        // switches with 14.4 TB/s aggregate (1.8 TB/s bidirectional, 900 GB/s per direction per GPU), 4 OSFP ports
        // serving 8 single-port ConnectX-7 at up to 400 Gb/s InfiniBand: 8 × 400 / 8 = 400 GB/s per node.
        preset(
            "dgx-b200",
            "B200",
            8,
            128,
            ("nvswitch", 900.0, 2.0),
            ("infiniband-ndr", 400.0, 5.0, 8),
            "NVIDIA DGX B200 SuperPOD-scale: 128 nodes of 8× B200 on NVSwitch (NVLink 5), \
             8× ConnectX-7 NDR 400 Gb/s per node",
        ),
        // DGX B300 datasheet (https://www.nvidia.com/en-us/data-center/dgx-b300/): 8× B300, NVLink 5 at 1.8 TB/s
        // bidirectional per GPU (900 GB/s per direction), 8 OSFP ports serving 8× ConnectX-8 VPI SuperNICs at up to
        // 800 Gb/s: 8 × 800 / 8 = 800 GB/s per node. 64 nodes: one scalable unit of the DGX SuperPOD with DGX B300
        // reference architecture (https://docs.nvidia.com/dgx-superpod/reference-architecture/
        // scalable-infrastructure-b300/latest/dgx-superpod-architecture.html, Table 3: 1 SU = 64 nodes, 512 GPUs).
        preset(
            "dgx-b300",
            "B300",
            8,
            64,
            ("nvswitch", 900.0, 2.0),
            ("infiniband-xdr", 800.0, 5.0, 8),
            "NVIDIA DGX B300 SuperPOD scalable unit: 64 nodes of 8× B300 on NVSwitch (NVLink 5), \
             8× ConnectX-8 SuperNIC 800 Gb/s per node",
        ),
        // GB200 NVL72 datasheet (https://www.nvidia.com/en-us/data-center/gb200-nvl72/): one NVLink 5 domain of 72
        // Blackwell GPUs through the rack's NVLink switch trays (130 TB/s aggregate = 1.8 TB/s bidirectional, 900
        // GB/s per direction, per GPU); 18 compute trays of 2 GB200 superchips (4 GPUs), each tray with 4 single-port
        // ConnectX-7 at 400 Gb/s InfiniBand, one per GPU (DGX GB200 user guide, https://docs.nvidia.com/dgx/
        // dgxgb200-user-guide/hardware.html): 72 × 400 / 8 = 3,600 GB/s per rack. perfcast's node is the NVLink
        // domain, the rack, so that a collective among its 72 GPUs runs at NVLink speed; `nics` 72 caps each GPU at
        // its own NIC (50 GB/s). 8 racks (576 GPUs): one scalable unit of the DGX SuperPOD with DGX GB200 reference
        // architecture (https://docs.nvidia.com/dgx-superpod/reference-architecture-scalable-infrastructure-gb200/
        // latest/abstract.html: "each SU contains 8 DGX GB200 systems").
        preset(
            "gb200-nvl72",
            "GB200",
            72,
            8,
            ("nvlink5-nvl72", 900.0, 2.0),
            ("infiniband-ndr", 3600.0, 5.0, 72),
            "NVIDIA GB200 NVL72 SuperPOD scalable unit: 8 racks, each one NVLink 5 domain of 72 GB200 GPUs \
             (18 compute trays × 4 GPUs) and 72× ConnectX-7 NDR 400 Gb/s (one per GPU)",
        ),
        // GB300 NVL72 datasheet (https://www.nvidia.com/en-us/data-center/gb300-nvl72/): the NVL72 rack of GB200 with
        // Blackwell Ultra GPUs, NVLink 5 (1.8 TB/s bidirectional per GPU), and one ConnectX-8 SuperNIC at 800 Gb/s per
        // GPU — 4 ConnectX-8 per 4-GPU compute tray (NVIDIA's GB300 NVL72 enterprise reference architecture,
        // https://docs.nvidia.com/enterprise-reference-architectures/nvl72-ai-factory/latest/components.html):
        // 72 × 800 / 8 = 7,200 GB/s per rack. 8 racks as for GB200 (the SuperPOD's scalable unit).
        preset(
            "gb300-nvl72",
            "GB300",
            72,
            8,
            ("nvlink5-nvl72", 900.0, 2.0),
            ("infiniband-xdr", 7200.0, 5.0, 72),
            "NVIDIA GB300 NVL72 SuperPOD scalable unit: 8 racks, each one NVLink 5 domain of 72 GB300 GPUs \
             (18 compute trays × 4 GPUs) and 72× ConnectX-8 SuperNIC 800 Gb/s (one per GPU)",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_gpu_system_is_one_gpu_of_the_given_kind() {
        let gpu = crate::hw::lookup("H100-SXM5-80GB").expect("catalog GPU").spec.clone();
        let s = System::single_gpu(gpu.clone());
        // One node of one GPU: 1 × 1 = 1 GPU, and the GPU passed in, unchanged.
        assert_eq!((s.total_gpus(), s.gpus_per_node, s.nodes, s.name.as_str()), (1, 1, 1, "-"));
        assert_eq!(s.gpu, gpu);
        assert_eq!((s.intra_node.bandwidth_gbs, s.inter_node.latency_us), (1.0, 0.0));
    }

    #[test]
    fn presets_resolve_with_the_stated_hardware() {
        let systems: Vec<System> = presets().iter().map(|p| p.resolve().expect("preset resolves")).collect();
        let find = |n: &str| systems.iter().find(|s| s.name == n).unwrap();
        let perlmutter = find("perlmutter-a100-40g");
        assert_eq!((perlmutter.gpus_per_node, perlmutter.gpu.name.as_str()), (4, "A100-SXM4-40GB"));
        // 4 NICs × 50 Gb/s = 200 Gb/s = 25 GB/s per node.
        assert_eq!(perlmutter.inter_node.bandwidth_gbs, 4.0 * 50.0 / 8.0);
        let vista = find("vista-gh200");
        assert_eq!((vista.gpus_per_node, vista.gpu.memory_gib), (1, 96.0));
        assert_eq!(vista.inter_node.bandwidth_gbs, 400.0 / 8.0);
        assert_eq!(find("dgx-a100-80g").inter_node.bandwidth_gbs, 8.0 * 200.0 / 8.0);
        assert_eq!(find("dgx-h100").inter_node.bandwidth_gbs, 8.0 * 400.0 / 8.0);
        // Published NCCL bus bandwidths within a node (cited at the presets), datasheets elsewhere.
        assert_eq!(
            (find("dgx-a100-80g").intra_node.bandwidth_gbs, find("dgx-a100-80g").intra_node.achieved),
            (230.0, true)
        );
        assert_eq!((find("dgx-h100").intra_node.bandwidth_gbs, find("dgx-h100").intra_node.achieved), (350.0, true));
        assert!(systems.iter().all(|s| !s.inter_node.achieved));
        assert!(!perlmutter.intra_node.achieved && !find("dgx-b200").intra_node.achieved);
        assert_eq!(find("dgx-h100").total_gpus(), 1024);

        // DGX H200: 8× H200 (141 GB HBM3e each), NVLink 4 900 GB/s bidirectional = 450 per direction,
        // 8 ConnectX-7 at 400 Gb/s.
        let h200 = find("dgx-h200");
        assert_eq!((h200.gpus_per_node, h200.gpu.name.as_str(), h200.gpu.memory_gib), (8, "H200", 141.0));
        assert_eq!(h200.intra_node.bandwidth_gbs, 900.0 / 2.0);
        assert_eq!((h200.inter_node.bandwidth_gbs, h200.inter_node.nics), (8.0 * 400.0 / 8.0, Some(8)));
        // DGX B200: 1,440 GB over 8 GPUs = 180 GB each; 14.4 TB/s NVLink aggregate / 8 GPUs / 2 directions.
        let b200 = find("dgx-b200");
        assert_eq!((b200.gpus_per_node, b200.gpu.name.as_str(), b200.gpu.memory_gib), (8, "B200", 1440.0 / 8.0));
        assert_eq!(b200.intra_node.bandwidth_gbs, 14_400.0 / 8.0 / 2.0);
        assert_eq!((b200.inter_node.bandwidth_gbs, b200.inter_node.nics), (8.0 * 400.0 / 8.0, Some(8)));
        assert_eq!(b200.total_gpus(), 128 * 8);
        // DGX B300: 8× B300 (2,304 GB / 8 = 288 GB each), NVLink 5 1.8 TB/s bidirectional = 900 per direction,
        // 8 ConnectX-8 at 800 Gb/s = 100 GB/s each; one SuperPOD scalable unit, 64 nodes = 512 GPUs.
        let b300 = find("dgx-b300");
        assert_eq!((b300.gpus_per_node, b300.gpu.name.as_str(), b300.gpu.memory_gib), (8, "B300", 2304.0 / 8.0));
        assert_eq!(b300.intra_node.bandwidth_gbs, 1800.0 / 2.0);
        assert_eq!((b300.inter_node.bandwidth_gbs, b300.inter_node.nics), (8.0 * 800.0 / 8.0, Some(8)));
        assert_eq!(b300.total_gpus(), 512);
        // NVL72 racks: one NVLink domain of 18 trays × 4 GPUs = 72 per node; 8 racks = 576 GPUs. GB200: 72 ConnectX-7
        // at 400 Gb/s = 72 × 50 = 3,600 GB/s per rack; GB300: 72 ConnectX-8 at 800 Gb/s = 72 × 100 = 7,200 GB/s.
        for (name, gpu, nic_gbs) in [("gb200-nvl72", "GB200", 400.0 / 8.0), ("gb300-nvl72", "GB300", 800.0 / 8.0)] {
            let s = find(name);
            assert_eq!((s.gpus_per_node, s.gpu.name.as_str(), s.total_gpus()), (18 * 4, gpu, 576));
            assert_eq!(s.intra_node.bandwidth_gbs, 1800.0 / 2.0);
            assert_eq!((s.inter_node.bandwidth_gbs, s.inter_node.nics), (72.0 * nic_gbs, Some(72)));
        }
    }

    #[test]
    fn gpu_is_a_name_or_an_object_with_precise_errors() {
        let by_name: SystemSpec = serde_json::from_value(serde_json::json!({
            "name": "x", "gpu": "NVIDIA H100 80GB HBM3", "gpus_per_node": 8, "nodes": 2,
            "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 450, "latency_us": 2},
            "inter_node": {"kind": "ib", "bandwidth_gbs": 400, "latency_us": 5, "nics": 8}}))
        .unwrap();
        assert_eq!(by_name.inter_node.nics, Some(8));
        assert_eq!(by_name.resolve().unwrap().gpu.name, "H100-SXM5-80GB");

        let bad: Result<SystemSpec, _> = serde_json::from_value(serde_json::json!({
            "name": "x", "gpu": {"name": "g", "sm_count": "many"}, "gpus_per_node": 8, "nodes": 2,
            "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 450, "latency_us": 2},
            "inter_node": {"kind": "ib", "bandwidth_gbs": 400, "latency_us": 5}}));
        assert!(bad.unwrap_err().to_string().contains("invalid type: string \"many\""));

        let unknown = SystemSpec { gpu: GpuRef::Name("RTX 9090".into()), ..by_name.clone() };
        assert_eq!(unknown.resolve().unwrap_err().field, "gpu");
        let zero = SystemSpec { nodes: 0, ..by_name };
        assert_eq!(zero.resolve().unwrap_err().field, "nodes");
    }
}
