//! The run: its ledger of uploads, what it observed, and the invariants checked after every kill and restart.

use super::*;

// The run: its ledger of uploads and what it observed.

pub struct Run {
    pub seed: u64,
    pub rt: tokio::runtime::Runtime,
    pub db: Database,
    /// Every upload sent, by id.
    pub sent: HashMap<String, Upload>,
    /// Acknowledged uploads, by id.
    pub acked: BTreeMap<String, Upload>,
    /// Sent but not acknowledged (the kill came first): retried by the next server.
    pub pending: VecDeque<Upload>,
    /// Jobs a kill interrupted: id → attempts when killed.
    pub interrupted: BTreeMap<i64, i64>,
    pub kills: usize,
    pub kills_mid_upload: usize,
    pub kills_mid_job: BTreeMap<String, usize>,
    pub retried_duplicates: usize,
}

impl Run {
    pub fn fail(&self, server: Option<&Server>, msg: String) -> ! {
        let log = server.map(|s| format!("\n--- server log (tail) ---\n{}", s.log_tail())).unwrap_or_default();
        let engine = self.db.name();
        panic!("{engine}: {msg}\n(seed {seed}: rerun with PERFCAST_CRASH_SEED={seed}){log}", seed = self.seed);
    }

    pub fn check(&self, ok: bool, server: Option<&Server>, msg: impl FnOnce() -> String) {
        if !ok {
            self.fail(server, msg());
        }
    }

    /// Whether a job of `kind` is running now (read beside the live server, which readers do not disturb).
    pub fn running(&self, kind: &str) -> bool {
        self.rt
            .block_on(async {
                let mut c = AnyConnection::connect(&self.db.read_url).await.ok()?;
                let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE state = 'running' AND kind = $1")
                    .bind(kind)
                    .fetch_one(&mut c)
                    .await
                    .ok()?;
                c.close().await.ok()?;
                Some(n > 0)
            })
            .unwrap_or(false)
    }

    pub fn snapshot(&self) -> Snapshot {
        self.rt.block_on(snapshot(&self.db)).unwrap_or_else(|e| self.fail(None, format!("cannot read the db: {e}")))
    }

    /// Records an upload's answer: an acknowledgement must name the expected id and sample count.
    pub fn record(&mut self, u: Upload, reply: std::io::Result<Reply>, server: &Server) {
        match reply {
            Ok(r) if r.status == 201 || r.status == 200 => {
                let body = r.json();
                self.check(body["id"] == u.id.as_str(), Some(server), || format!("upload {} answered {body}", u.id));
                self.check(body["samples"] == u.samples(), Some(server), || {
                    format!("upload {} of {} samples answered {body}", u.id, u.samples())
                });
                self.check(body["duplicate"] == (r.status == 200), Some(server), || format!("{}: {body}", r.status));
                if r.status == 201 {
                    let kinds = &body["samples_by_kind"];
                    self.check(kinds["op"] == u.ops && kinds["comm"] == u.comms, Some(server), || format!("{body}"));
                } else {
                    self.check(self.sent.contains_key(&u.id), Some(server), || format!("unexpected duplicate {body}"));
                    self.retried_duplicates += 1;
                }
                self.acked.insert(u.id.clone(), u);
            }
            Ok(r) => self.fail(
                Some(server),
                format!("upload {} answered {}: {}", u.id, r.status, String::from_utf8_lossy(&r.body)),
            ),
            Err(_) => self.pending.push_back(u),
        }
    }

    /// The database as a kill left it.
    pub fn check_offline(&self, s: &Snapshot, when: &str) {
        if let Some(integrity) = &s.integrity {
            self.check(integrity == &["ok"], None, || format!("{when}: integrity_check: {integrity:?}"));
        }
        self.check(s.orphans.is_empty(), None, || format!("{when}: rows without their parent: {:?}", s.orphans));
        for (id, u) in &self.acked {
            let stored = s.profiles.get(id);
            self.check(stored == Some(&(u.samples(), u.samples(), u.ops, u.comms)), None, || {
                format!(
                    "{when}: LOST acknowledged upload {id} ({} op + {} comm samples): stored {stored:?}",
                    u.ops, u.comms
                )
            });
        }
        for (id, &(column, rows, ops, comms)) in &s.profiles {
            let u = self.sent.get(id);
            self.check(u.is_some(), None, || format!("{when}: profile {id} was never sent"));
            let u = u.unwrap();
            self.check((column, rows, ops, comms) == (u.samples(), u.samples(), u.ops, u.comms), None, || {
                format!(
                    "{when}: partial profile {id}: samples column {column}, {rows} rows ({ops} op, {comms} comm); \
                     sent {} op + {} comm",
                    u.ops, u.comms
                )
            });
        }
        self.check(s.multi_active.is_empty(), None, || {
            format!("{when}: several active versions: {:?}", s.multi_active)
        });
        self.check(s.empty_models == 0, None, || format!("{when}: {} versions without model text", s.empty_models));
        // The bundle: every part stored is whole (its samples column = its rows), and its version is recorded only
        // with every part (the models come first, then one transaction per part, then the version's row).
        let manifest = perfcast::bundle::Bundle::embedded().unwrap().manifest;
        let expected: u64 = manifest.parts.iter().map(|p| p.samples).sum();
        let stored: u64 = s.bundled_profiles.iter().map(|p| p.1).sum();
        let parts_whole = s.bundled_profiles.iter().all(|(column, rows)| column == rows)
            && s.bundled_profiles.len() <= manifest.parts.len();
        let recorded = s.bundles == [manifest.version.clone()];
        let whole = s.bundled_profiles.len() == manifest.parts.len() && stored == expected;
        self.check(parts_whole && (s.bundles.is_empty() || (recorded && whole)), None, || {
            format!(
                "{when}: partial bundle: versions {:?}, {} profiles with {stored} samples (expected {} with {expected}; \
                 samples column vs rows {:?})",
                s.bundles,
                s.bundled_profiles.len(),
                manifest.parts.len(),
                s.bundled_profiles
            )
        });
        // Communication samples are calibrated, or a calibration of their system is pending.
        self.check(s.calibrated == Some(s.comm_samples) || s.comm_samples == 0 || s.calibration_pending(), None, || {
            format!(
                "{when}: {} communication samples on {SYSTEM}, calibrated on {:?}, and no calibration job pending: {:?}",
                s.comm_samples, s.calibrated, s.jobs
            )
        });
    }

    /// What a restarted server answers: ready with every active model loaded, the interrupted jobs queued again,
    /// recent acknowledged uploads readable with their samples, estimates served by the active model.
    pub fn check_restarted(&self, server: &Server, before: &Snapshot, rng: &mut Rng) {
        let port = server.port;
        // Every active model loads: the registry holds as many models as the store marks active (a retrain that
        // commits meanwhile changes both: retry until two reads agree).
        let mut agreed = None;
        for _ in 0..50 {
            let ready = get(port, "/readyz").unwrap().json();
            let list = get(port, "/v1/regressors").unwrap().json();
            let active: Vec<(String, i64)> = list
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["active"] == true)
                .map(|r| (r["key"].as_str().unwrap().to_string(), r["version"].as_i64().unwrap()))
                .collect();
            if ready["active_models"] == active.len() && get(port, "/readyz").unwrap().json() == ready {
                agreed = Some(active);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let active = agreed.unwrap_or_else(|| {
            self.fail(Some(server), "the loaded models never matched the active versions (one does not load)".into())
        });
        for (key, version) in &before.active {
            self.check(active.iter().any(|(k, v)| k == key && v >= version), Some(server), || {
                format!("active {key}@v{version} before the restart, after it: {active:?}")
            });
        }
        if let Some((_, v)) = active.iter().find(|(k, _)| k == "linear.fwd.fp16") {
            let e = post_json(
                port,
                "/v1/estimates/operator",
                &json!({"gpu": "H100-SXM5-80GB", "op": "linear", "dtype": "fp16", "dims": {"M": 4096, "N": 4096, "K": 4096}}),
            )
            .unwrap();
            self.check(e.status == 200, Some(server), || String::from_utf8_lossy(&e.body).into_owned());
            let source = e.json()["source"].as_str().unwrap_or_default().to_string();
            // The fp16 model answers when it was trained on H100 rows (this run's uploads); the bundled one (DeepBench's
            // P100/T4/V100) yields to the H100's own bf16 model, which runs at the same tensor-core rate.
            let detail = get(port, "/v1/regressors/linear.fwd.fp16").unwrap().json();
            let newest_active = detail["active_version"] == detail["versions"][0]["version"];
            let knows_h100 = detail["training_set"]["gpus"].get("H100-SXM5-80GB").is_some();
            let ok = source.starts_with("regressor:linear.fwd.fp16@v")
                || (!(newest_active && knows_h100) && source.starts_with("regressor:linear.fwd.bf16.H100-SXM5-80GB@v"));
            self.check(ok, Some(server), || {
                format!("active linear.fwd.fp16@v{v} (trained on H100 rows: {knows_h100}) but the estimate's source is {source:?}")
            });
        }
        // Jobs left running are queued again (or already re-run).
        let deadline = Instant::now() + Duration::from_secs(15);
        for &(id, _, _, attempts, _) in before.jobs_in(&["running"]) {
            loop {
                let j = get(port, &format!("/v1/jobs/{id}")).unwrap().json();
                if j["state"] != "running" || j["attempts"].as_i64() > Some(attempts) {
                    break;
                }
                self.check(Instant::now() < deadline, Some(server), || format!("job {id} still running: {j}"));
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // Acknowledged uploads through the API: a sample of them (the read-only check covers every one).
        let ids: Vec<&String> = self.acked.keys().collect();
        for _ in 0..ids.len().min(8) {
            let id = *rng.pick(&ids);
            let u = &self.acked[id];
            let p = get(port, &format!("/v1/profiles/{id}")).unwrap();
            self.check(p.status == 200 && p.json()["samples"] == u.samples(), Some(server), || {
                format!("GET /v1/profiles/{id}: {} {}", p.status, String::from_utf8_lossy(&p.body))
            });
            let page = get(port, &format!("/v1/profiles/{id}/samples?limit=1")).unwrap().json();
            self.check(page["total"] == u.samples(), Some(server), || format!("samples of {id}: {page}"));
        }
    }
}
