//! Provenance stamped on what the CLI writes: today's UTC date and the working tree's git commit (on the blocks
//! `perfcast eval` prints to paste into the source, and on a built bundle's manifest).

use std::path::Path;

/// Today's UTC date, YYYY-MM-DD (days since the epoch to the civil date: Hinnant's `civil_from_days`).
pub(super) fn utc_date() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The git commit of the working tree at `dir` (`git rev-parse <short> HEAD`: `--short` for git's default
/// abbreviation, `--short=12` for 12 hex digits), `-dirty` when tracked files have uncommitted changes; None
/// without git or outside a repository.
pub(super) fn git_commit(dir: &Path, short: &str) -> Option<String> {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = run(&["rev-parse", short, "HEAD"])?;
    let dirty = run(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{commit}-dirty") } else { commit })
}

/// `<YYYY-MM-DD>, commit <commit>`: the stamp of a paste block. The commit is the one the binary was built from
/// when the build was given it (`PERFCAST_GIT_COMMIT` at compile time), else the current directory's (run from
/// the checkout), else `unknown` (a binary built without it and run outside a git checkout, e.g. a copy in /tmp).
pub(super) fn paste_stamp() -> String {
    let commit = option_env!("PERFCAST_GIT_COMMIT")
        .map(str::to_string)
        .or_else(|| git_commit(Path::new("."), "--short"))
        .unwrap_or_else(|| "unknown".into());
    format!("{}, commit {commit}", utc_date())
}
