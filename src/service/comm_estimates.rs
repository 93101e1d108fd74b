//! Communication estimates (`POST /v1/estimates/comm`) and calibration (`POST /v1/systems/{name}/calibrate`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Service, ServiceError};
use crate::comm::calibrated::{CalibrationUse, SystemCalibration};
use crate::comm::{self, CommEstimate, Group, GroupLinks};
use crate::cost::CostBackend;
use crate::jobs::calibrate::{calibrate_system, load_calibration};
use crate::learn::backend::LearnedBackend;
use crate::op::Collective;

/// `POST /v1/estimates/comm`: one collective on a system.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"system": "dgx-h100", "collective": "all_reduce", "bytes": 1073741824, "nodes": 1,
    "gpus_per_node": 8, "dtype": "bf16"}))]
pub struct CommEstimateRequest {
    /// A stored system.
    pub system: String,
    /// `all_reduce`, `all_gather`, `reduce_scatter`, `broadcast`, `reduce`, `all_to_all`, `send_recv` (or `p2p`).
    pub collective: Collective,
    /// Size as nccl-tests counts it (all-gather: the gathered total), bytes.
    pub bytes: u64,
    /// Nodes taking part. Default 1.
    #[serde(default = "one")]
    pub nodes: u32,
    /// GPUs (ranks) per node taking part. Default: all of the system's.
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    /// Element type (recorded; the models are in bytes).
    #[serde(default)]
    pub dtype: Option<String>,
}

fn one() -> u32 {
    1
}

/// The calibrated estimate and how it was made.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct CalibratedEstimate {
    pub estimate: CommEstimate,
    /// `measured_group` or `calibrated_links`.
    pub how: CalibrationUse,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct CommEstimateResponse {
    pub system: String,
    pub collective: Collective,
    pub bytes: u64,
    pub ranks: u32,
    pub nodes: u32,
    pub gpus_per_node: u32,
    /// The answer (corrected where a regressor is active, else calibrated, else analytic), µs.
    pub time_us: f64,
    /// bytes / time, GB/s (nccl-tests algbw).
    pub algbw_gbs: f64,
    /// algbw × the collective's bus factor, GB/s (nccl-tests busbw).
    pub busbw_gbs: f64,
    /// Where `time_us` came from: `analytic`, `calibrated:<system>` or `regressor:<key>@v<n>`.
    pub source: String,
    /// The α–β algorithms over the system's declared links (every algorithm, the fastest chosen).
    pub analytic: CommEstimate,
    /// Over the system's calibrated links or its measured group, when calibrated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibrated: Option<CalibratedEstimate>,
    /// The learned correction's time, when a communication regressor is active, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected_us: Option<f64>,
}

impl Service {
    /// The system's stored calibration, if any.
    pub async fn calibration(&self, system: &str) -> Result<Option<Arc<SystemCalibration>>, ServiceError> {
        Ok(load_calibration(&self.store, system).await?)
    }

    /// Calibrates `system` now from its stored samples. Errors: unknown system.
    pub async fn calibrate(&self, system: &str) -> Result<SystemCalibration, ServiceError> {
        let (_, cal) = calibrate_system(&self.store, system).await?;
        Ok(cal)
    }

    /// Estimates one collective. Errors: unknown system (`system`), placement larger than the system (`nodes`,
    /// `gpus_per_node`), fewer than two ranks for a collective that moves data.
    pub async fn estimate_comm(&self, req: &CommEstimateRequest) -> Result<CommEstimateResponse, ServiceError> {
        let context = self.system_context(&req.system, "system").await?;
        let system = &context.system;
        let gpn = req.gpus_per_node.unwrap_or(system.gpus_per_node);
        if req.nodes == 0 || req.nodes > system.nodes {
            return Err(ServiceError::invalid("nodes", format!("must be 1–{} (the system's nodes)", system.nodes)));
        }
        if gpn == 0 || gpn > system.gpus_per_node {
            return Err(ServiceError::invalid(
                "gpus_per_node",
                format!("must be 1–{} (the system's GPUs per node)", system.gpus_per_node),
            ));
        }
        let ranks = req.nodes * gpn;
        if ranks < 2 {
            return Err(ServiceError::invalid("nodes", "a collective needs at least 2 ranks (nodes × gpus_per_node)"));
        }
        let group = Group { ranks, nodes: req.nodes, ranks_per_node: gpn };
        let bytes = req.bytes as f64;
        let links = GroupLinks::on(system, gpn);
        let analytic = comm::estimate(req.collective, bytes, group, &links);
        let cal = context.calibration.clone();
        let calibrated = cal
            .as_ref()
            .and_then(|c| c.estimate(req.collective, bytes, group, &links))
            .map(|(estimate, how)| CalibratedEstimate { estimate, how });
        let backend = LearnedBackend::new(system.clone(), self.registry.load_full()).with_calibration(cal);
        let timed = backend.collective(req.collective, bytes, group, gpn);
        let corrected_us = timed.source.to_string().starts_with("regressor:").then_some(timed.time_us);
        let algbw = bytes / (timed.time_us * 1e3);
        Ok(CommEstimateResponse {
            system: system.name.clone(),
            collective: req.collective,
            bytes: req.bytes,
            ranks,
            nodes: req.nodes,
            gpus_per_node: gpn,
            time_us: timed.time_us,
            algbw_gbs: algbw,
            busbw_gbs: algbw * req.collective.busbw_factor(ranks),
            source: timed.source.to_string(),
            analytic,
            calibrated,
            corrected_us,
        })
    }
}
