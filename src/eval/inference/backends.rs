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

impl Cached {
    /// A cache over the learned backend of `system`, answering with `engine`'s measured kernels where they exist
    /// (as the service's serving backend does).
    fn new(system: System, engine: Engine, models: &Arc<Registry>) -> Cached {
        Cached {
            inner: LearnedBackend::new(system, models.clone()).with_kernels(KernelChoice::Engine(engine.kernels())),
            compute: Mutex::new(HashMap::new()),
            collective: Mutex::new(HashMap::new()),
        }
    }
}

/// The cached backends of the rows' (system, engine) pairs.
pub struct Backends(HashMap<(String, Engine), Cached>);

impl Backends {
    /// A cached backend per (system, engine) of `rows` over the learned `models` (an empty registry: every operator
    /// and collective analytic), each answering with its engine's measured kernels where they exist, as the
    /// service's serving backend does. No communication calibration: a fresh install has none until one is run.
    pub fn new(rows: &[BenchRow], models: &Arc<Registry>) -> Backends {
        let mut m = HashMap::new();
        for p in presets() {
            for r in rows.iter().filter(|r| r.system == p.name) {
                m.entry((p.name.clone(), r.framework))
                    .or_insert_with(|| Cached::new(p.resolve().expect("presets resolve"), r.framework, models));
            }
        }
        Backends(m)
    }

    /// A cached backend per system of `systems` (keyed by name) and engine over the learned `models`.
    pub fn for_systems(systems: Vec<System>, models: &Arc<Registry>) -> Backends {
        let mut m = HashMap::new();
        for s in systems {
            for e in Engine::ALL {
                m.insert((s.name.clone(), e), Cached::new(s.clone(), e, models));
            }
        }
        Backends(m)
    }

    /// The cached backend of system `name` (one of those given) with `engine`'s kernels.
    pub fn backend(&self, name: &str, engine: Engine) -> Option<&Cached> {
        self.0.get(&(name.to_string(), engine))
    }

    /// The system of preset `name` (one of the rows' systems). Panics for another name (a programming error: the
    /// rows name only the presets [`Backends::new`] was given them for).
    pub fn system(&self, name: &str) -> &System {
        self.0.iter().find(|((n, _), _)| n == name).map(|(_, c)| c.system()).expect("a row's system")
    }

    /// The predicted seconds and waves of `row` under `consts` (`None` when the predictor refuses it).
    pub fn predict(&self, row: &BenchRow, consts: &ServingConstants) -> Option<StaticBatch> {
        let backend = ServingDerated::new(&self.0[&(row.system.clone(), row.framework)], *consts);
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
