//! A seeded random number generator and the uploads it makes: perfcast JSON-lines files of distinct content with
//! known sample counts.

use super::*;

// ---------------------------------------------------------------------------------------------------------------
// A seeded random number generator (SplitMix64): the whole schedule of a run follows from its seed.

#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }

    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() as u64) as usize]
    }
}

pub fn post_json(port: u16, path: &str, body: &Value) -> std::io::Result<Reply> {
    support::post_json(port, KEY, path, body)
}

// ---------------------------------------------------------------------------------------------------------------
// Uploads: perfcast JSON-lines files of distinct content with known sample counts.

#[derive(Debug, Clone)]
pub struct Upload {
    /// The profile id the server must give it: the first 16 hex digits of the SHA-256 of the decoded bytes.
    pub id: String,
    /// What is sent (gzip-compressed when `gzip`).
    pub wire: Vec<u8>,
    pub gzip: bool,
    pub query: String,
    pub ops: u64,
    pub comms: u64,
}

impl Upload {
    pub fn samples(&self) -> u64 {
        self.ops + self.comms
    }
}

/// An operator sample near what the GPU would measure (roofline with a plausible efficiency and noise).
pub fn op_line(rng: &mut Rng, serial: u64) -> String {
    let (gpu, tflops, gbs) = *rng.pick(&[("H100-SXM5-80GB", 989.0, 3350.0), ("A100-SXM4-80GB", 312.0, 2039.0)]);
    let noise = 1.0 + (rng.range(0, 2001) as f64 - 1000.0) / 10_000.0;
    if rng.chance(0.6) {
        let (m, n, k) = (64 * rng.range(1, 128), 64 * rng.range(1, 128), 64 * rng.range(1, 128));
        let t = (2.0 * (m * n * k) as f64 / (tflops * 0.6e6) + 4.0) * noise;
        format!(
            r#"{{"op": "linear", "phase": "fwd", "dtype": "fp16", "gpu": "{gpu}", "dims": {{"M": {m}, "N": {n}, "K": {k}}}, "time_us": {t:.4}, "attributes": {{"upload": {serial}}}}}"#
        )
    } else {
        let (b, h) = (256 * rng.range(1, 64), 256 * rng.range(1, 32));
        let t = (4.0 * (b * h) as f64 / (gbs * 0.7e3) + 3.0) * noise;
        format!(
            r#"{{"op": "layernorm", "phase": "fwd", "dtype": "bf16", "gpu": "{gpu}", "dims": {{"B": {b}, "H": {h}}}, "time_us": {t:.4}, "attributes": {{"upload": {serial}}}}}"#
        )
    }
}

/// A communication sample on [`SYSTEM`] (NVSwitch within a node, NDR across nodes).
pub fn comm_line(rng: &mut Rng, serial: u64) -> String {
    let noise = 1.0 + (rng.range(0, 2001) as f64 - 1000.0) / 10_000.0;
    let bytes = 1u64 << rng.range(10, 31);
    let (collective, ranks, nodes, lat, gbs, factor) = *rng.pick(&[
        ("all_reduce", 8, 1, 8.0, 450.0, 1.75),
        ("all_reduce", 16, 2, 15.0, 50.0, 1.875),
        ("send_recv", 2, 1, 2.5, 450.0, 1.0),
        ("send_recv", 2, 2, 6.0, 50.0, 1.0),
    ]);
    let t = (lat + factor * bytes as f64 / (gbs * 1e3)) * noise;
    format!(
        r#"{{"kind": "comm", "collective": "{collective}", "bytes": {bytes}, "ranks": {ranks}, "nodes": {nodes}, "gpus_per_node": {}, "time_us": {t:.4}, "attributes": {{"upload": {serial}}}}}"#,
        ranks / nodes
    )
}

pub fn new_upload(rng: &mut Rng, serial: u64) -> Upload {
    let comm = rng.chance(0.3);
    let (n_ops, n_comms) = if comm { (rng.range(0, 100), rng.range(100, 300)) } else { (rng.range(200, 500), 0) };
    let mut lines: Vec<String> = (0..n_ops).map(|_| op_line(rng, serial)).collect();
    lines.extend((0..n_comms).map(|_| comm_line(rng, serial)));
    let raw = (lines.join("\n") + "\n").into_bytes();
    let id = hex::encode(Sha256::digest(&raw))[..16].to_string();
    let gzip = rng.chance(0.4);
    let wire = if gzip {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&raw).unwrap();
        enc.finish().unwrap()
    } else {
        raw
    };
    let query = if comm {
        format!("/v1/profiles?system={SYSTEM}&ci_run={serial}")
    } else {
        format!("/v1/profiles?format=perfcast_jsonl&ci_run={serial}")
    };
    Upload { id, wire, gzip, query, ops: n_ops, comms: n_comms }
}

pub fn send_upload(port: u16, u: &Upload) -> std::io::Result<Reply> {
    let auth = format!("Bearer {KEY}");
    let mut headers = vec![("Authorization", auth.as_str()), ("Content-Type", "application/x-ndjson")];
    if u.gzip {
        headers.push(("Content-Encoding", "gzip"));
    }
    http(port, "POST", &u.query, &headers, &u.wire)
}

// ---------------------------------------------------------------------------------------------------------------
