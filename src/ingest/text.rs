//! Small helpers the parsers share: locale-formatted numbers, bounded gzip inflation, CRLF-safe csv line numbers
//! and rejection tallies.

use std::collections::HashMap;
use std::io::Read;

use super::ParseError;

use crate::samples::Rejected;

/// Parses a number as profilers print it: optional thousands separators (`"1,553,918.10"`), exponent notation
/// (`"8.1097E+14"`), surrounding spaces. `None` for empty cells, `n/a`, `N/A`, `-`, text, and non-finite values.
pub(crate) fn number(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    let cleaned: std::borrow::Cow<str> =
        if t.contains(',') && looks_grouped(t) { t.replace(',', "").into() } else { t.into() };
    let v = cleaned.parse::<f64>().ok()?;
    v.is_finite().then_some(v)
}

/// `"1,234,567.5"`: digits in comma-separated groups of three after the first group.
fn looks_grouped(t: &str) -> bool {
    let t = t.strip_prefix(['-', '+']).unwrap_or(t);
    let int_part = t.split(['.', 'e', 'E']).next().unwrap_or("");
    let mut groups = int_part.split(',');
    let first_ok = groups.next().is_some_and(|g| (1..=3).contains(&g.len()) && g.bytes().all(|b| b.is_ascii_digit()));
    first_ok && groups.all(|g| g.len() == 3 && g.bytes().all(|b| b.is_ascii_digit()))
}

/// A whole non-negative number (`"1,024"`, `"1024.00"`, `"1e3"`), within `u64`.
pub(crate) fn whole(s: &str) -> Option<u64> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b',') && (!t.contains(',') || looks_grouped(t)) {
        return t.replace(',', "").parse().ok();
    }
    let v = number(s)?;
    (v >= 0.0 && v.fract() == 0.0 && v < 1.8e19).then_some(v as u64)
}

/// True when `bytes` start with the gzip magic number.
pub(crate) fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// At most `max` bytes of the decompressed start of a gzip stream (for format detection); what could be inflated
/// before an error.
pub(crate) fn gunzip_head(bytes: &[u8], max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut decoder = flate2::read::MultiGzDecoder::new(bytes).take(max as u64);
    let _ = decoder.read_to_end(&mut out);
    out
}

/// Inflates a whole gzip stream, refusing more than `limit` decompressed bytes (a small upload must not expand
/// into unbounded memory).
pub(crate) fn gunzip(bytes: &[u8], limit: u64) -> Result<Vec<u8>, ParseError> {
    let mut out = Vec::new();
    let mut decoder = flate2::read::MultiGzDecoder::new(bytes).take(limit.saturating_add(1));
    decoder.read_to_end(&mut out).map_err(|e| ParseError::whole(format!("not a valid gzip stream: {e}")))?;
    if out.len() as u64 > limit {
        return Err(ParseError::whole(format!("the gzip stream inflates to more than {limit} bytes")));
    }
    Ok(out)
}

/// A tar archive (`ustar` magic at offset 257).
pub(crate) fn is_tar(head: &[u8]) -> bool {
    head.get(257..262) == Some(b"ustar")
}

/// Calls `each(path, content)` for every regular file of the tar archive `bytes` whose path `keep` accepts, in
/// archive order; the other entries are skipped unread. Errors: an unreadable archive (`invalid tar archive: …`),
/// or the first error of `each`.
pub(crate) fn for_each_tar_file(
    bytes: &[u8],
    keep: impl Fn(&str) -> bool,
    mut each: impl FnMut(&str, &[u8]) -> Result<(), ParseError>,
) -> Result<(), ParseError> {
    let tar_error = |e: std::io::Error| ParseError::whole(format!("invalid tar archive: {e}"));
    let mut archive = tar::Archive::new(bytes);
    for entry in archive.entries().map_err(tar_error)? {
        let mut entry = entry.map_err(tar_error)?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry.path().map_err(tar_error)?.to_string_lossy().into_owned();
        if !keep(&path) {
            continue;
        }
        let mut content = Vec::new();
        entry.read_to_end(&mut content).map_err(tar_error)?;
        each(&path, &content)?;
    }
    Ok(())
}

/// `e` with its message prefixed by the file `name` it came from (`name: message`); unchanged for an empty name.
pub(crate) fn named(mut e: ParseError, name: &str) -> ParseError {
    if !name.is_empty() {
        e.message = format!("{name}: {}", e.message);
    }
    e
}

/// Collapses repeated rejections into one [`Rejected`] per key, counting them, so a large file with one recurring
/// problem yields one entry (at the line of its first occurrence) instead of thousands.
#[derive(Default)]
pub(crate) struct Tally {
    order: Vec<String>,
    seen: HashMap<String, (u64, u64)>,
}

impl Tally {
    /// Counts one occurrence of `reason` at `line`.
    pub(crate) fn add(&mut self, line: u64, reason: String) {
        match self.seen.get_mut(&reason) {
            Some(entry) => entry.0 = entry.0.saturating_add(1),
            None => {
                self.seen.insert(reason.clone(), (1, line));
                self.order.push(reason);
            }
        }
    }

    /// One [`Rejected`] per distinct reason, in first-seen order; the count is appended when above one.
    pub(crate) fn into_rejected(self) -> Vec<Rejected> {
        let Tally { order, seen } = self;
        order
            .into_iter()
            .map(|reason| {
                let (count, line) = seen.get(&reason).copied().unwrap_or((1, 0));
                let reason = if count > 1 { format!("{reason} ({count} times)") } else { reason };
                Rejected { line, reason }
            })
            .collect()
    }
}

/// 1-based line numbers of byte offsets in a text, counted incrementally (offsets are asked in increasing order;
/// an earlier one restarts the count). The csv crate's own line count is off by one on CRLF files.
pub(crate) struct Lines<'a> {
    bytes: &'a [u8],
    pos: usize,
    line: u64,
}

impl<'a> Lines<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Lines<'a> {
        Lines { bytes, pos: 0, line: 1 }
    }

    /// Line of byte offset `byte`.
    pub(crate) fn at(&mut self, byte: u64) -> u64 {
        let target = usize::try_from(byte).unwrap_or(usize::MAX).min(self.bytes.len());
        if target < self.pos {
            self.pos = 0;
            self.line = 1;
        }
        let newlines = self.bytes.get(self.pos..target).unwrap_or(&[]).iter().filter(|&&b| b == b'\n').count();
        self.line = self.line.saturating_add(newlines as u64);
        self.pos = target;
        self.line
    }

    /// Line of a csv record (its position may point at the `\n` of a preceding CRLF).
    pub(crate) fn of(&mut self, record: &csv::StringRecord) -> u64 {
        let mut byte = usize::try_from(record.position().map(|p| p.byte()).unwrap_or(0)).unwrap_or(usize::MAX);
        while self.bytes.get(byte).is_some_and(|b| matches!(b, b'\r' | b'\n')) {
            byte += 1;
        }
        self.at(byte as u64)
    }

    /// A csv error as a [`ParseError`] at its line.
    pub(crate) fn error(&mut self, e: &csv::Error) -> ParseError {
        let mut pe = super::perfcast::csv_error(e);
        pe.line = e.position().map(|p| self.at(p.byte()));
        pe
    }
}

/// Rounds a non-negative finite byte count to `u64`; `None` when negative, not finite or too large.
pub(crate) fn bytes_u64(v: f64) -> Option<u64> {
    (0.0..9.0e18).contains(&v).then(|| v.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_with_thousands_separators_and_markers() {
        assert_eq!(number("1,553,918.10"), Some(1_553_918.10));
        assert_eq!(number(" 690,974,304 "), Some(690_974_304.0));
        assert_eq!(number("8.1097E+14"), Some(8.1097e14));
        assert_eq!(number("-1"), Some(-1.0));
        assert_eq!(number("n/a"), None);
        assert_eq!(number("N/A"), None);
        assert_eq!(number("inf"), None);
        assert_eq!(number("1,55"), None, "not a thousands grouping");
        assert_eq!(whole("1,024.00"), Some(1024));
        assert_eq!(whole("2.5"), None);
        assert_eq!(whole("18446744073709551615"), Some(u64::MAX), "exact, not through f64");
        assert_eq!(whole("18446744073709551616"), None);
    }

    #[test]
    fn tally_collapses_by_reason() {
        let mut t = Tally::default();
        t.add(3, "a".into());
        t.add(9, "b".into());
        t.add(12, "a".into());
        let r = t.into_rejected();
        assert_eq!(
            r,
            vec![Rejected { line: 3, reason: "a (2 times)".into() }, Rejected { line: 9, reason: "b".into() }]
        );
    }

    #[test]
    fn lines_of_byte_offsets_with_crlf() {
        let text = b"h1,h2\r\na,b\r\nc,d\r\n";
        let mut lines = Lines::new(text);
        assert_eq!(lines.at(0), 1);
        assert_eq!(lines.at(7), 2);
        assert_eq!(lines.at(12), 3);
        assert_eq!(lines.at(7), 2, "going back restarts");
        assert_eq!(lines.at(10_000), 4);
    }

    #[test]
    fn gunzip_is_bounded() {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&vec![b'a'; 10_000]).unwrap();
        let gz = enc.finish().unwrap();
        assert!(is_gzip(&gz));
        assert_eq!(gunzip(&gz, 10_000).unwrap().len(), 10_000);
        assert!(gunzip(&gz, 9_999).is_err());
        assert_eq!(gunzip_head(&gz, 100).len(), 100);
        assert!(gunzip(b"\x1f\x8bnot gzip", 100).is_err());
    }
}
