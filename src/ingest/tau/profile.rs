//! The TAU flat-profile file format ([`TauProfile`]): its timers ([`TauTimer`]) and user events
//! ([`TauUserEvent`]), the parser of one file ([`parse_profile`]), the rank, context and thread of its name
//! ([`profile_ids`]) and the first-line check that recognizes one ([`looks_like`]).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::ingest::text::number;
use crate::ingest::{utf8, ParseError};

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

pub(super) fn who(p: &TauProfile) -> String {
    if p.file.is_empty() {
        "profile".to_string()
    } else {
        p.file.clone()
    }
}

/// A TAU profile's first line (`<n> templated_functions…`).
pub fn looks_like(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    text.lines().next().and_then(count_line).is_some_and(|(_, kind)| kind.starts_with("templated_functions"))
}
