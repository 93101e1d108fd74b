//! Timer samples ([`timer_samples`]): one per flat timer of each profile, with TAU parameter-profile timers named
//! by their base timer ([`param_of`]); the rules are the parent module's (*Timers.*).

use super::profile::{who, TauProfile, TauTimer};
use super::{MAX_TIMERS_PER_PROFILE, MAX_TIMER_SAMPLES};
use crate::ingest::Parsed;
use crate::samples::{Attributes, Rejected, Sample, TimerSample};

/// `"f(int) C [{f.c} {3,1}]   [ <size> = <100> ]"` → (`f(int) C [{f.c} {3,1}]`, `size`, `100`): the base timer,
/// parameter name and value of a TAU parameter-profile timer; `None` for other timers (a source location in
/// brackets, `[{f.c} …]`, is not a parameter).
pub fn param_of(name: &str) -> Option<(&str, &str, &str)> {
    let open = name.rfind('[')?;
    let inner = name[open + 1..].trim_end().strip_suffix(']')?.trim();
    let (key, value) = inner.split_once('=')?;
    Some((name[..open].trim(), angled(key)?, angled(value)?))
}

/// `" <size> "` → `size`.
fn angled(s: &str) -> Option<&str> {
    s.trim().strip_prefix('<')?.strip_suffix('>').map(str::trim)
}

/// Timer samples of a set of profiles (see the module doc): one per flat timer of each TIME profile, bounded by
/// [`MAX_TIMERS_PER_PROFILE`] and [`MAX_TIMER_SAMPLES`]; rejections for negative values and for timers left out.
pub fn timer_samples(profiles: &[TauProfile]) -> Parsed {
    let mut out = Parsed::default();
    let mut room = MAX_TIMER_SAMPLES;
    for p in profiles.iter().filter(|p| p.is_time()) {
        let who = who(p);
        let mut flat: Vec<&TauTimer> = Vec::new();
        for t in p.timers.iter().filter(|t| !t.is_callpath()) {
            if t.calls < 0.0 || t.exclusive < 0.0 || t.inclusive < 0.0 {
                out.rejected
                    .push(Rejected { line: t.line, reason: format!("{who}: {}: negative calls or time", t.name) });
            } else {
                flat.push(t);
            }
        }
        let cap = MAX_TIMERS_PER_PROFILE.min(room);
        if flat.len() > cap {
            // Keep the MPI timers, then the largest exclusive times; emit the kept ones in file order.
            let mut order: Vec<usize> = (0..flat.len()).collect();
            order.sort_by(|&a, &b| {
                flat[b].is_mpi().cmp(&flat[a].is_mpi()).then(flat[b].exclusive.total_cmp(&flat[a].exclusive))
            });
            let mut keep = vec![false; flat.len()];
            for &i in &order[..cap] {
                keep[i] = true;
            }
            out.rejected.push(Rejected {
                line: 1,
                reason: format!(
                    "{who}: {} of its {} flat timers left out (at most {MAX_TIMERS_PER_PROFILE} per profile and \
                     {MAX_TIMER_SAMPLES} per upload; the MPI timers and the largest exclusive times are kept)",
                    flat.len() - cap,
                    flat.len()
                ),
            });
            flat = flat.into_iter().zip(keep).filter_map(|(t, k)| k.then_some(t)).collect();
        }
        room -= flat.len();
        for t in flat {
            let mut attributes = Attributes::new();
            attributes.insert("source_format".into(), "tau".into());
            if !p.file.is_empty() {
                attributes.insert("file".into(), p.file.clone());
            }
            if let Some(c) = p.context {
                attributes.insert("context".into(), c.to_string());
            }
            attributes.insert("subroutines".into(), t.subroutines.to_string());
            if let Some(h) = p.metadata.get("Hostname") {
                attributes.insert("hostname".into(), h.clone());
            }
            if let Some((base, key, value)) = param_of(&t.name) {
                attributes.insert("param_of".into(), base.to_string());
                attributes.insert("param_name".into(), key.to_string());
                attributes.insert("param_value".into(), value.to_string());
            }
            out.samples.push(Sample::Timer(TimerSample {
                name: t.name.clone(),
                group: t.group.clone(),
                rank: p.node,
                thread: p.thread,
                calls: t.calls,
                exclusive_us: t.exclusive,
                inclusive_us: t.inclusive,
                attributes,
            }));
        }
    }
    out
}
