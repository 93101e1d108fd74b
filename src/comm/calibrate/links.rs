//! Postal fits per link class (intra-node, inter-node, unknown): S0's K-model, as the [parent module](super)
//! describes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{fit_postal, Point, PostalFit};
use crate::op::Collective;
use crate::samples::CommSample;

/// A link class of the postal model (MODELS.md §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinkClass {
    /// Both ranks on one node (NVLink, NVSwitch, xGMI, PCIe).
    IntraNode,
    /// Ranks on different nodes (InfiniBand, Slingshot, RoCE, EFA).
    InterNode,
    /// The sample does not say where its ranks were.
    Unknown,
}

/// Where a sample's ranks were: `nodes` > 1 → inter-node, `nodes` = 1 → intra-node; without `nodes`,
/// `ranks` > `gpus_per_node` → inter-node, else intra-node; with neither, [`LinkClass::Unknown`].
pub fn link_class(s: &CommSample) -> LinkClass {
    match (s.nodes, s.gpus_per_node) {
        (Some(n), _) if n > 1 => LinkClass::InterNode,
        (Some(_), _) => LinkClass::IntraNode,
        (None, Some(g)) if s.ranks > g => LinkClass::InterNode,
        (None, Some(_)) => LinkClass::IntraNode,
        (None, None) => LinkClass::Unknown,
    }
}

/// The fit of one link class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LinkClassFit {
    pub link_class: LinkClass,
    /// Send/recv samples of this class.
    pub samples: usize,
    /// The fit, when one could be made.
    pub fit: Option<PostalFit>,
    /// Why not, otherwise.
    pub error: Option<String>,
}

/// Fits α, β per link class from the send/recv samples among `samples` (other collectives are ignored).
/// One entry per class present, in the order intra-node, inter-node, unknown.
pub fn fit_link_classes(samples: &[CommSample]) -> Vec<LinkClassFit> {
    let mut groups: BTreeMap<LinkClass, Vec<Point>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.collective == Collective::SendRecv) {
        groups.entry(link_class(s)).or_default().push(Point::new(s.bytes as f64, s.time_us));
    }
    groups
        .into_iter()
        .map(|(link_class, points)| {
            let (fit, error) = match fit_postal(&points) {
                Ok(f) => (Some(f), None),
                Err(e) => (None, Some(e.to_string())),
            };
            LinkClassFit { link_class, samples: points.len(), fit, error }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::calibrate::tests::comm;

    #[test]
    fn link_classes_are_fitted_apart() {
        // Intra-node: α 2 µs, β 150 GB/s; inter-node: α 5 µs, β 25 GB/s (exact data); one all-reduce is ignored.
        let mut samples = Vec::new();
        for i in 0..20 {
            let n = 1u64 << i;
            samples.push(comm(Collective::SendRecv, n, 2, Some(1), None, 2.0 + n as f64 / 150e3));
            samples.push(comm(Collective::SendRecv, n, 2, None, Some(1), 5.0 + n as f64 / 25e3));
        }
        samples.push(comm(Collective::AllReduce, 1024, 8, Some(1), None, 30.0));
        samples.push(comm(Collective::SendRecv, 64, 2, None, None, 3.0));
        let fits = fit_link_classes(&samples);
        assert_eq!(fits.len(), 3);
        let intra = fits[0].fit.as_ref().unwrap();
        assert_eq!((fits[0].link_class, fits[0].samples), (LinkClass::IntraNode, 20));
        assert!((intra.alpha_us - 2.0).abs() < 1e-6 && (intra.beta_gbs - 150.0).abs() < 1e-4);
        let inter = fits[1].fit.as_ref().unwrap();
        assert_eq!(fits[1].link_class, LinkClass::InterNode);
        assert!((inter.alpha_us - 5.0).abs() < 1e-6 && (inter.beta_gbs - 25.0).abs() < 1e-6);
        // The unknown class has one size: no fit, a clear reason.
        assert_eq!(fits[2].link_class, LinkClass::Unknown);
        assert!(fits[2].fit.is_none() && fits[2].error.as_deref().unwrap().contains("two distinct"));
    }
}
