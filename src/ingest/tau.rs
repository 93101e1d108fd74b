//! TAU flat profiles (`TAU_PROFILE_FORMAT=profile`): one `profile.<node>.<context>.<thread>` file per thread, each
//!
//! ```text
//! 23 templated_functions_MULTI_TIME
//! # Name Calls Subrs Excl Incl ProfileCalls # <metadata>…</metadata>
//! "MPI_Bcast()  " 1 0 218 218 0 GROUP="MPI"                          (23 timer lines)
//! 0 aggregates
//! 2 userevents
//! # eventname numevents max min mean sumsqr
//! "Message size for broadcast" 1 4 4 4 16
//! ```
//!
//! Accepted input: one profile, several (file name, bytes) pairs ([`parse_files`], for multipart uploads), or a
//! tar archive (optionally gzip'd) of them; inside an archive only files named `profile.*` or `…profile.N.C.T`
//! count, and of `MULTI__<metric>/` directories only `MULTI__TIME`. [`parse_profile`] gives the typed profile
//! (every timer with calls, subroutines, exclusive and inclusive time; every user event); the samples are read
//! from it.
//!
//! **Samples.** TAU times are µs (metric `TIME`; a profile of another metric, e.g. a PAPI counter, is rejected:
//! its values are not times). Two kinds come out of an upload:
//!
//! *Timers.* One [`TimerSample`] per flat timer (a name without ` => `; callpath entries repeat the flat timers'
//! time along each path and are left out) of each profile: name (trimmed), group = the timer's `GROUP` as written
//! (`MPI`, `TAU_USER`, `TAU_DEFAULT`, `TAU_PARAM | TAU_USER`), rank = node `N`, thread = `T` of
//! `profile.N.C.T`, calls, exclusive and inclusive µs; attributes `source_format`, `file`, `context`,
//! `subroutines` and the `Hostname` metadata. This is the per-rank MPI summary (group `MPI`: calls and time in
//! `MPI_Allreduce()`, `MPI_Init()`, …) with the application's other timers as context. A **parameter-profile**
//! timer (`<name> [ <size> = <100> ]`, TAU parameter profiling, group `TAU_PARAM | …`) is a separate timer
//! sample under its full TAU name, with `param_of` (the base timer's name), `param_name` and `param_value`
//! attributes: TAU counts its calls and time *also* in the base timer, so a per-rank breakdown sums the base
//! timers and leaves the `TAU_PARAM` ones out (they split the base timer by argument value). A timer with a
//! negative count or time is rejected (its line). Bounds: at most [`MAX_TIMERS_PER_PROFILE`] timers per
//! profile (MPI timers first, then the largest exclusive times; one rejection counts the rest) and at most
//! [`MAX_TIMER_SAMPLES`] per upload.
//!
//! *Communication.* A [`CommSample`] per rank (file) and MPI collective timer (group `MPI`, not a ` => `
//! callpath) with calls:
//! - collective: `MPI_Allreduce` → all_reduce, `MPI_Bcast` → broadcast, `MPI_Reduce` → reduce,
//!   `MPI_Allgather(v)` → all_gather, `MPI_Reduce_scatter(_block)` → reduce_scatter, `MPI_Alltoall(v)` →
//!   all_to_all;
//! - time = **exclusive** time / calls: TAU nests its collective-synchronization barrier (`MPI Collective Sync`)
//!   inside the collective's timer, so the inclusive time would count waiting for stragglers;
//! - bytes from the timer's parameter (`[ <message size> = <n> ]`, TAU parameter profiling) when present, else the
//!   mean of the user event `Message size for <broadcast|reduce|all-reduce|all-gather|reduce-scatter|all-to-all>`,
//!   converted to nccl-tests' convention: TAU records typesize·count for all-reduce, broadcast and reduce (the full
//!   vector, kept), one rank's block for `MPI_Allgather`, `MPI_Reduce_scatter` and `MPI_Alltoall` (× ranks), the
//!   whole gathered vector for `MPI_Allgatherv` (kept) and send + receive totals for `MPI_Alltoallv` (÷ 2). The
//!   event is shared by the plain and `v` variants, so a profile calling both is rejected for them. A mean over
//!   calls of different sizes is consistent with the latency–bandwidth model, which is linear in the size; the
//!   event's min and max go to attributes.
//! - ranks = the upload's `ranks`, else the number of distinct node ids among the uploaded profiles (≥ 2); nodes =
//!   distinct `Hostname` metadata values; GPUs (ranks) per node = ranks / nodes.
//!
//! Not derivable, rejected with the reason: a collective without a size event (TAU built without message
//! tracking), non-blocking collectives (the timer covers only the call that starts them), gather/scatter/scan (no
//! perfcast collective), point-to-point calls (TAU does not pair sends with receives and the call time includes
//! waiting). Other MPI calls (init, barrier, waits, communicator and I/O calls) are not communication samples (they
//! are timer samples); a profile that yields no sample at all (no flat timer) gives one rejection saying so.
//!
//! A profile's `N`, `C`, `T` come from its file name ending in `profile.N.C.T` (a prefix such as
//! `run1_profile.0.0.0` is allowed).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::text::{bytes_u64, for_each_tar_file, gunzip, is_gzip, is_tar, named, number};
use super::{utf8, Context, ParseError, Parsed};
use crate::op::Collective;
use crate::samples::{Attributes, CommSample, Rejected, Sample, TimerSample};

/// Most bytes a gzip'd archive may inflate to.
pub const MAX_ARCHIVE_BYTES: u64 = 1 << 30;

/// Most timer samples one profile file yields (a compiler-instrumented application can have thousands of tiny
/// functions; the MPI timers and the largest exclusive times are kept).
pub const MAX_TIMERS_PER_PROFILE: usize = 1024;

/// Most timer samples one upload yields, whatever the number of profiles.
pub const MAX_TIMER_SAMPLES: usize = 1 << 18;

/// One TAU profile file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TauProfile {
    /// File name as given (path inside an archive).
    pub file: String,
    /// `N`, `C`, `T` of `profile.N.C.T` (MPI rank, context, thread), when the name has them.
    pub node: Option<u32>,
    /// `C` of `profile.N.C.T`.
    pub context: Option<u32>,
    /// `T` of `profile.N.C.T`.
    pub thread: Option<u32>,
    /// The measured metric (`TIME`: values in µs).
    pub metric: String,
    /// Every timer line, flat and callpath, in file order.
    pub timers: Vec<TauTimer>,
    /// Every user (atomic) event line, in file order.
    pub user_events: Vec<TauUserEvent>,
    /// The `<metadata>` attributes (`Hostname`, `TAU Version`, …).
    pub metadata: BTreeMap<String, String>,
}

/// One timer line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TauTimer {
    /// Timer name, trimmed (`MPI_Bcast()`, `.TAU application => MPI_Init()`).
    pub name: String,
    /// `GROUP` (`MPI`, `TAU_USER`, `TAU_CALLPATH|MPI`).
    pub group: String,
    /// Number of calls.
    pub calls: f64,
    /// Number of timed calls made from inside this timer.
    pub subroutines: f64,
    /// Exclusive value in the profile's metric (µs for TIME).
    pub exclusive: f64,
    /// Inclusive value in the profile's metric (µs for TIME).
    pub inclusive: f64,
    /// 1-based line in the file.
    pub line: u64,
}

impl TauTimer {
    /// True for callpath entries (`a => b`).
    pub fn is_callpath(&self) -> bool {
        self.name.contains(" => ")
    }

    /// True for MPI timers (group contains `MPI`).
    pub fn is_mpi(&self) -> bool {
        self.group.split(['|', ' ']).any(|g| g.trim() == "MPI")
    }
}

/// One user event (atomic event) line: counts and statistics of a recorded value (message sizes in bytes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TauUserEvent {
    /// Event name (`Message size for all-reduce`).
    pub name: String,
    /// Number of recorded values.
    pub count: f64,
    /// Largest, smallest and mean recorded value (bytes for message sizes).
    pub max: f64,
    pub min: f64,
    pub mean: f64,
    /// Sum of the squared values.
    pub sum_squares: f64,
    /// 1-based line in the file.
    pub line: u64,
}

impl TauProfile {
    /// The flat (non-callpath) MPI timers: the per-rank MPI summary.
    pub fn mpi_timers(&self) -> impl Iterator<Item = &TauTimer> {
        self.timers.iter().filter(|t| t.is_mpi() && !t.is_callpath())
    }

    /// True when the values are times in µs.
    pub fn is_time(&self) -> bool {
        self.metric.to_ascii_uppercase().contains("TIME")
    }
}

/// Parses one TAU profile file. `file` is its name (`profile.3.0.0`: rank 3) or path; it may be empty.
///
/// Errors: a header that is not `<n> templated_functions…`, a timer or event line that cannot be read, a file that
/// ends before the counts it announces (all with their line).
pub fn parse_profile(file: &str, bytes: &[u8]) -> Result<TauProfile, ParseError> {
    let text = utf8(bytes)?;
    let mut lines = text.lines().enumerate().map(|(i, l)| (i as u64 + 1, l));
    let (_, first) = lines.next().ok_or_else(|| ParseError::whole("empty TAU profile"))?;
    let (count, kind) = count_line(first)
        .ok_or_else(|| ParseError::at(1, "not a TAU profile: the first line must be '<n> templated_functions…'"))?;
    if !kind.starts_with("templated_functions") {
        return Err(ParseError::at(1, "not a TAU profile: the first line must be '<n> templated_functions…'"));
    }
    let mut metadata = BTreeMap::new();
    let mut timers = Vec::new();
    let mut user_events = Vec::new();
    let mut last_line = 1;
    let mut pending_timers = count;
    while pending_timers > 0 {
        let Some((n, l)) = lines.next() else {
            return Err(ParseError::at(last_line, format!("the file ends before its {count} timers")));
        };
        last_line = n;
        if l.trim_start().starts_with('#') {
            if let Some(p) = l.find("<metadata>") {
                metadata = metadata_of(&l[p..]);
            }
            continue;
        }
        timers.push(timer_line(l, n)?);
        pending_timers -= 1;
    }
    let mut metric = kind.strip_prefix("templated_functions_MULTI_").unwrap_or("").to_string();
    if metric.is_empty() {
        metric = metadata.get("Metric Name").cloned().unwrap_or_else(|| "TIME".into());
    }
    // "<a> aggregates" and its lines, then optionally "<u> userevents", a "# eventname …" header and u lines.
    let mut skip = 0u64;
    let mut events = 0u64;
    for (n, l) in lines {
        last_line = n;
        if skip > 0 {
            skip -= 1;
            continue;
        }
        if events > 0 {
            if l.trim_start().starts_with('#') {
                continue;
            }
            user_events.push(event_line(l, n)?);
            events -= 1;
            continue;
        }
        match count_line(l) {
            Some((a, "aggregates")) => skip = a,
            Some((u, "userevents")) => events = u,
            _ if l.trim().is_empty() => {}
            _ => return Err(ParseError::at(n, "expected '<n> aggregates' or '<n> userevents'")),
        }
    }
    if events > 0 {
        return Err(ParseError::at(last_line, format!("the file ends {events} user events early")));
    }
    let [node, context, thread] = profile_ids(file).map_or([None; 3], |ids| ids.map(Some));
    Ok(TauProfile { file: file.to_string(), node, context, thread, metric, timers, user_events, metadata })
}

/// `N`, `C`, `T` of a file name (or path) ending in `profile.N.C.T`, with any prefix (`run_profile.3.0.1`).
pub fn profile_ids(file: &str) -> Option<[u32; 3]> {
    let base = file.rsplit(['/', '\\']).next().unwrap_or(file);
    let rest = &base[base.rfind("profile.")? + "profile.".len()..];
    let mut parts = rest.split('.').map(|p| p.parse::<u32>().ok());
    let ids = [parts.next()??, parts.next()??, parts.next()??];
    parts.next().is_none().then_some(ids)
}

/// `"23 templated_functions_MULTI_TIME"` → (23, "templated_functions_MULTI_TIME").
fn count_line(l: &str) -> Option<(u64, &str)> {
    let (n, rest) = l.trim().split_once(char::is_whitespace)?;
    Some((n.parse().ok()?, rest.trim()))
}

/// `"<name>" calls subrs excl incl profilecalls GROUP="<group>"`.
fn timer_line(l: &str, n: u64) -> Result<TauTimer, ParseError> {
    let bad = |why: &str| ParseError::at(n, format!("cannot read the timer line: {why}"));
    let (head, group) = match l.rfind("GROUP=\"") {
        Some(p) => {
            let g = &l[p + 7..];
            (&l[..p], g.split('"').next().unwrap_or("").trim().to_string())
        }
        None => (l, String::new()),
    };
    let (name, rest) = quoted(head).ok_or_else(|| bad("no quoted name"))?;
    let v: Vec<f64> =
        rest.split_whitespace().map(number).collect::<Option<_>>().ok_or_else(|| bad("a value is not a number"))?;
    let [calls, subroutines, exclusive, inclusive, ..] = v.as_slice() else {
        return Err(bad("expected calls, subroutines, exclusive and inclusive values"));
    };
    Ok(TauTimer {
        name: name.trim().to_string(),
        group,
        calls: *calls,
        subroutines: *subroutines,
        exclusive: *exclusive,
        inclusive: *inclusive,
        line: n,
    })
}

/// `"<name>" numevents max min mean sumsqr`.
fn event_line(l: &str, n: u64) -> Result<TauUserEvent, ParseError> {
    let bad = |why: &str| ParseError::at(n, format!("cannot read the user event line: {why}"));
    let (name, rest) = quoted(l).ok_or_else(|| bad("no quoted name"))?;
    let v: Vec<f64> =
        rest.split_whitespace().map(number).collect::<Option<_>>().ok_or_else(|| bad("a value is not a number"))?;
    let [count, max, min, mean, sum_squares, ..] = v.as_slice() else {
        return Err(bad("expected numevents, max, min, mean and sumsqr"));
    };
    Ok(TauUserEvent {
        name: name.trim().to_string(),
        count: *count,
        max: *max,
        min: *min,
        mean: *mean,
        sum_squares: *sum_squares,
        line: n,
    })
}

/// The text between the first and the last `"` of `s`, and what follows.
fn quoted(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start();
    let inner = s.strip_prefix('"')?;
    let end = inner.rfind('"')?;
    Some((&inner[..end], &inner[end + 1..]))
}

/// `<attribute><name>K</name><value>V</value></attribute>` pairs.
fn metadata_of(xml: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = xml;
    while let Some(p) = rest.find("<name>") {
        rest = &rest[p + 6..];
        let Some(e) = rest.find("</name>") else { break };
        let key = unescape(&rest[..e]);
        rest = &rest[e + 7..];
        let value = match (rest.strip_prefix("<value>"), rest.find("</value>")) {
            (Some(v), Some(end)) if end >= 7 => unescape(&v[..end - 7]),
            _ => String::new(),
        };
        out.insert(key, value);
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&")
}

/// Parses one upload: a profile file, a tar archive of profiles, or either gzip'd (see the module doc).
pub fn parse(bytes: &[u8], ctx: &Context) -> Result<Parsed, ParseError> {
    parse_files(&[("", bytes)], ctx)
}

/// Parses several uploaded files together (multipart): each a profile (named `profile.N.C.T`), a tar archive, or
/// gzip'd; samples as the module doc describes.
pub fn parse_files(files: &[(&str, &[u8])], ctx: &Context) -> Result<Parsed, ParseError> {
    let mut profiles = Vec::new();
    for (name, bytes) in files {
        let inflated;
        let bytes: &[u8] = if is_gzip(bytes) {
            inflated = gunzip(bytes, MAX_ARCHIVE_BYTES).map_err(|e| named(e, name))?;
            &inflated
        } else {
            bytes
        };
        if is_tar(bytes) {
            read_tar(bytes, &mut profiles)?;
        } else {
            profiles.push(parse_profile(name, bytes).map_err(|e| named(e, name))?);
        }
    }
    if profiles.is_empty() {
        return Err(ParseError::whole("no TAU profile (profile.N.C.T) in the upload"));
    }
    let mut out = comm_samples(&profiles, ctx);
    let timers = timer_samples(&profiles);
    out.rejected.extend(timers.rejected);
    for p in profiles.iter().filter(|p| p.is_time() && p.timers.iter().all(TauTimer::is_callpath)) {
        out.rejected.push(Rejected {
            line: 1,
            reason: format!("{}: no flat timer among its {} timers: nothing to measure", who(p), p.timers.len()),
        });
    }
    out.samples.extend(timers.samples);
    Ok(out)
}

fn who(p: &TauProfile) -> String {
    if p.file.is_empty() {
        "profile".to_string()
    } else {
        p.file.clone()
    }
}

fn read_tar(bytes: &[u8], profiles: &mut Vec<TauProfile>) -> Result<(), ParseError> {
    let keep = |path: &str| {
        let base = path.rsplit('/').next().unwrap_or(path);
        let other_metric = path.split('/').any(|c| c.starts_with("MULTI__") && c != "MULTI__TIME");
        (base.starts_with("profile.") || profile_ids(base).is_some()) && !other_metric
    };
    for_each_tar_file(bytes, keep, |path, content| {
        profiles.push(parse_profile(path, content).map_err(|e| named(e, path))?);
        Ok(())
    })
}

/// A TAU profile's first line (`<n> templated_functions…`).
pub fn looks_like(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    text.lines().next().and_then(count_line).is_some_and(|(_, kind)| kind.starts_with("templated_functions"))
}

/// How TAU's size event relates to nccl-tests' byte count.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scale {
    Same,
    TimesRanks,
    Half,
}

/// Collective, event name and scale of an MPI timer's base name; `Err` for calls that are rejected, `Ok(None)` for
/// calls that are not communication samples.
fn mpi_call(base: &str) -> Result<Option<(Collective, &'static str, Scale)>, &'static str> {
    Ok(Some(match base {
        "MPI_Allreduce" => (Collective::AllReduce, "all-reduce", Scale::Same),
        "MPI_Bcast" => (Collective::Broadcast, "broadcast", Scale::Same),
        "MPI_Reduce" => (Collective::Reduce, "reduce", Scale::Same),
        "MPI_Allgather" => (Collective::AllGather, "all-gather", Scale::TimesRanks),
        "MPI_Allgatherv" => (Collective::AllGather, "all-gather", Scale::Same),
        "MPI_Reduce_scatter" | "MPI_Reduce_scatter_block" => {
            (Collective::ReduceScatter, "reduce-scatter", Scale::TimesRanks)
        }
        "MPI_Alltoall" => (Collective::AllToAll, "all-to-all", Scale::TimesRanks),
        "MPI_Alltoallv" => (Collective::AllToAll, "all-to-all", Scale::Half),
        "MPI_Iallreduce"
        | "MPI_Ibcast"
        | "MPI_Ireduce"
        | "MPI_Iallgather"
        | "MPI_Iallgatherv"
        | "MPI_Ialltoall"
        | "MPI_Ialltoallv"
        | "MPI_Ireduce_scatter" => {
            return Err("non-blocking collective: the timer covers only the call that starts it")
        }
        "MPI_Gather" | "MPI_Gatherv" | "MPI_Scatter" | "MPI_Scatterv" | "MPI_Scan" | "MPI_Exscan" => {
            return Err("no perfcast collective for this MPI call")
        }
        "MPI_Send"
        | "MPI_Recv"
        | "MPI_Isend"
        | "MPI_Irecv"
        | "MPI_Ssend"
        | "MPI_Bsend"
        | "MPI_Rsend"
        | "MPI_Sendrecv"
        | "MPI_Sendrecv_replace" => {
            return Err("point-to-point: TAU does not pair sends with receives, and the call time includes waiting")
        }
        _ => return Ok(None),
    }))
}

/// `"MPI_Bcast()   [ <message size> = <1024> ]"` → (`MPI_Bcast`, Some(1024)).
fn timer_base(name: &str) -> (&str, Option<f64>) {
    let (head, param) = match name.find('[') {
        Some(p) => (&name[..p], Some(&name[p..])),
        None => (name, None),
    };
    let base = head.trim().trim_end_matches("()").trim();
    let size = param.and_then(|p| {
        let (key, value) = p.split_once('=')?;
        if !key.to_ascii_lowercase().contains("size") {
            return None;
        }
        number(value.trim().trim_end_matches(']').trim().trim_start_matches('<').trim_end_matches('>'))
    });
    (base, size)
}

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

/// Communication samples of a set of profiles of one run (see the module doc).
pub fn comm_samples(profiles: &[TauProfile], ctx: &Context) -> Parsed {
    let mut out = Parsed::default();
    let node_ids: BTreeSet<u32> = profiles.iter().filter_map(|p| p.node).collect();
    let file_ranks = (node_ids.len() >= 2).then(|| u32::try_from(node_ids.len()).ok()).flatten();
    let ranks = ctx.ranks.filter(|r| *r > 0).or(file_ranks);
    let mut hosts_by_node: BTreeMap<u32, &str> = BTreeMap::new();
    for p in profiles {
        if let (Some(n), Some(h)) = (p.node, p.metadata.get("Hostname").or_else(|| p.metadata.get("Node Name"))) {
            hosts_by_node.insert(n, h.as_str());
        }
    }
    let hosts: BTreeSet<&str> = hosts_by_node.values().copied().collect();
    let derived_nodes = (ctx.ranks.is_none() && !hosts.is_empty() && hosts_by_node.len() == node_ids.len())
        .then_some(hosts.len() as u32);
    let nodes = ctx.nodes.or(derived_nodes);
    let gpus_per_node = ctx.gpus_per_node.or(match (ranks, derived_nodes) {
        (Some(r), Some(n)) if n > 0 && r % n == 0 => Some(r / n),
        _ => None,
    });
    for p in profiles {
        let who = who(p);
        if !p.is_time() {
            out.rejected.push(Rejected { line: 1, reason: format!("{who}: metric {} is not a time", p.metric) });
            continue;
        }
        let called = |b: &str| p.mpi_timers().any(|t| timer_base(&t.name).0 == b && t.calls > 0.0);
        for t in p.mpi_timers() {
            let (base, param_size) = timer_base(&t.name);
            let reject = |out: &mut Parsed, why: String| {
                out.rejected.push(Rejected { line: t.line, reason: format!("{who}: {}: {why}", t.name) })
            };
            let (collective, event, scale) = match mpi_call(base) {
                Ok(Some(c)) => c,
                Ok(None) => continue,
                Err(why) => {
                    if t.calls > 0.0 {
                        reject(&mut out, why.into());
                    }
                    continue;
                }
            };
            if t.calls <= 0.0 {
                continue;
            }
            let mixed = match base {
                "MPI_Allgather" | "MPI_Allgatherv" => called("MPI_Allgather") && called("MPI_Allgatherv"),
                "MPI_Alltoall" | "MPI_Alltoallv" => called("MPI_Alltoall") && called("MPI_Alltoallv"),
                _ => false,
            };
            if mixed && param_size.is_none() {
                reject(&mut out, "the plain and v variants share one size event: sizes cannot be told apart".into());
                continue;
            }
            let Some(ranks) = ranks else {
                reject(&mut out, "the rank count is unknown: upload every rank's profile or give ranks".into());
                continue;
            };
            let event_name = format!("Message size for {event}");
            let ev = p.user_events.iter().find(|e| e.name == event_name && e.count > 0.0);
            let Some(size) = param_size.or(ev.map(|e| e.mean)) else {
                reject(&mut out, format!("no '{event_name}' user event (TAU without MPI message tracking)"));
                continue;
            };
            let factor = match scale {
                Scale::Same => 1.0,
                Scale::TimesRanks => ranks as f64,
                Scale::Half => 0.5,
            };
            let Some(bytes) = bytes_u64(size * factor).filter(|b| *b > 0) else {
                reject(&mut out, format!("message size {size} is not a positive byte count"));
                continue;
            };
            let time_us = t.exclusive / t.calls;
            if !(time_us.is_finite() && time_us > 0.0) {
                reject(&mut out, "exclusive time is not positive".into());
                continue;
            }
            let mut attributes = Attributes::new();
            attributes.insert("source_format".into(), "tau".into());
            attributes.insert("timer".into(), t.name.clone());
            attributes.insert("calls".into(), t.calls.to_string());
            attributes.insert("exclusive_us".into(), t.exclusive.to_string());
            attributes.insert("inclusive_us".into(), t.inclusive.to_string());
            if !p.file.is_empty() {
                attributes.insert("file".into(), p.file.clone());
            }
            if let Some(n) = p.node {
                attributes.insert("rank".into(), n.to_string());
            }
            if let Some(h) = p.metadata.get("Hostname") {
                attributes.insert("hostname".into(), h.clone());
            }
            if let (Some(e), None) = (ev, param_size) {
                attributes.insert("size_events".into(), e.count.to_string());
                attributes.insert("min_bytes".into(), (e.min * factor).to_string());
                attributes.insert("max_bytes".into(), (e.max * factor).to_string());
            }
            if let Some(g) = &ctx.gpu {
                attributes.insert("gpu".into(), g.clone());
            }
            out.samples.push(Sample::Comm(CommSample {
                nodes,
                gpus_per_node,
                attributes,
                ..CommSample::timed(collective, bytes, ranks, time_us)
            }));
        }
    }
    out
}

#[cfg(test)]
mod tests;
