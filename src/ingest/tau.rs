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
//!
//! [`TimerSample`]: crate::samples::TimerSample
//! [`CommSample`]: crate::samples::CommSample
//!
//! One concept per module: [`profile`] (the file format and its parser), [`timers`] (timer samples) and [`comms`]
//! (communication samples); this module reads an upload (single files, multipart, tar archives, gzip) and holds its
//! bounds. Every item is re-exported here, so `crate::ingest::tau::X` names it.

pub mod comms;
pub mod profile;
pub mod timers;

pub use comms::comm_samples;
use profile::who;
pub use profile::{looks_like, parse_profile, profile_ids, TauProfile, TauTimer, TauUserEvent};
pub use timers::{param_of, timer_samples};

use super::text::{for_each_tar_file, gunzip, is_gzip, is_tar, named};
use super::{Context, ParseError, Parsed};
use crate::samples::Rejected;

/// Most bytes a gzip'd archive may inflate to.
pub const MAX_ARCHIVE_BYTES: u64 = 1 << 30;

/// Most timer samples one profile file yields (a compiler-instrumented application can have thousands of tiny
/// functions; the MPI timers and the largest exclusive times are kept).
pub const MAX_TIMERS_PER_PROFILE: usize = 1024;

/// Most timer samples one upload yields, whatever the number of profiles.
pub const MAX_TIMER_SAMPLES: usize = 1 << 18;

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

#[cfg(test)]
mod tests;
