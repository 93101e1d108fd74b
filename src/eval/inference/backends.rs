//! The per-system backends of the evaluation, with every learned answer cached for the fit.

use super::*;

/// A backend with every answer remembered: the fit re-derates the same shapes thousands of times (a learned
/// answer is one LightGBM evaluation; the cache makes it one lookup).
pub struct Cached {
    inner: LearnedBackend,
    compute: Mutex<HashMap<(OpShape, Precision), Timed>>,
    collective: Mutex<HashMap<(Collective, u64, Group, u32), Timed>>,
}

impl CostBackend for Cached {
    fn system(&self) -> &System {
        self.inner.system()
    }

    fn compute(&self, op: &OpShape, dtype: Precision) -> Result<Timed, UnsupportedPrecision> {
        if let Some(t) = self.compute.lock().expect("cache lock").get(&(*op, dtype)) {
            return Ok(t.clone());
        }
        let t = self.inner.compute(op, dtype)?;
        self.compute.lock().expect("cache lock").insert((*op, dtype), t.clone());
        Ok(t)
    }

    fn collective(&self, c: Collective, bytes: f64, group: Group, active_per_node: u32) -> Timed {
        let key = (c, bytes.to_bits(), group, active_per_node);
        if let Some(t) = self.collective.lock().expect("cache lock").get(&key) {
            return t.clone();
        }
        let t = self.inner.collective(c, bytes, group, active_per_node);
        self.collective.lock().expect("cache lock").insert(key, t.clone());
        t
    }
}

/// The three systems' cached backends.
pub struct Backends(HashMap<String, Cached>);

impl Backends {
    /// A cached backend per system of `rows` over the learned `models` (an empty registry: every operator and
    /// collective analytic). No communication calibration: a fresh install has none until one is run.
    pub fn new(rows: &[BenchRow], models: &Arc<Registry>) -> Backends {
        let systems = presets()
            .into_iter()
            .filter(|p| rows.iter().any(|r| r.system == p.name))
            .map(|p| p.resolve().expect("presets resolve"))
            .collect();
        Backends::for_systems(systems, models)
    }

    /// A cached backend per system of `systems` (keyed by name) over the learned `models`.
    pub fn for_systems(systems: Vec<System>, models: &Arc<Registry>) -> Backends {
        let mut m = HashMap::new();
        for s in systems {
            m.insert(
                s.name.clone(),
                Cached {
                    inner: LearnedBackend::new(s, models.clone()),
                    compute: Mutex::new(HashMap::new()),
                    collective: Mutex::new(HashMap::new()),
                },
            );
        }
        Backends(m)
    }

    /// The cached backend of system `name` (one of those given).
    pub fn backend(&self, name: &str) -> Option<&Cached> {
        self.0.get(name)
    }

    /// The system of preset `name` (one of the rows' systems). Panics for another name (a programming error: the
    /// rows name only the presets [`Backends::new`] was given them for).
    pub fn system(&self, name: &str) -> &System {
        self.0[name].system()
    }

    /// The predicted seconds and waves of `row` under `consts` (`None` when the predictor refuses it).
    pub fn predict(&self, row: &BenchRow, consts: &ServingConstants) -> Option<StaticBatch> {
        let backend = ServingDerated::new(&self.0[&row.system], *consts);
        predict_static_batch(&row.cfg, &backend, *consts, row.batch).ok()
    }
}

impl CostBackend for &Cached {
    fn system(&self) -> &System {
        (*self).system()
    }
    fn compute(&self, op: &OpShape, dtype: Precision) -> Result<Timed, UnsupportedPrecision> {
        (*self).compute(op, dtype)
    }
    fn collective(&self, c: Collective, bytes: f64, group: Group, active_per_node: u32) -> Timed {
        (*self).collective(c, bytes, group, active_per_node)
    }
}
