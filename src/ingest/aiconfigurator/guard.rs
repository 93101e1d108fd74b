//! Size checks of a Parquet file before the decoder allocates: the footer's row counts, and every page header's
//! declared sizes, against caps derived from the file's own length.
//!
//! The `parquet` crate allocates a page's declared uncompressed size before decompressing it (snappy even zeroes
//! it), so a small hostile file declaring 2 GiB pages would take that much memory per column. The page headers
//! (Thrift compact protocol, parquet-format's `PageHeader`) are read here without allocating: fields 2 and 3
//! (uncompressed and compressed page size) and `num_values` (field 1) of the data / dictionary page header.

use parquet::file::metadata::ParquetMetaData;

/// Rows per byte of file allowed: aiconfigurator's densest table (upstream inventory) holds 0.36 rows per byte,
/// a CSV at least 0.5 bytes per row; 1 row per byte leaves room without letting a tiny file claim billions.
pub const ROWS_PER_BYTE: u64 = 1;

/// Uncompressed bytes per byte of file allowed, over all pages (aiconfigurator's tables: 1.4), plus [`SLACK`].
pub const INFLATION: u64 = 64;

/// Uncompressed bytes every file may use whatever its size, 1 MiB.
pub const SLACK: u64 = 1 << 20;

/// Nesting depth of Thrift structs read before giving up (a page header nests two).
const MAX_DEPTH: u32 = 16;

/// Checks the row counts and page sizes of a file of `file_len` bytes whose footer is `meta`. Errors name the
/// row group and column (and byte offset of a bad page header).
pub fn check(bytes: &[u8], meta: &ParquetMetaData) -> Result<(), String> {
    let file_len = bytes.len() as u64;
    check_within(bytes, meta, file_len.saturating_mul(ROWS_PER_BYTE), file_len.saturating_mul(INFLATION) + SLACK)
}

/// [`check`] with explicit caps: at most `max_rows` rows and `budget` uncompressed page bytes in all.
fn check_within(bytes: &[u8], meta: &ParquetMetaData, max_rows: u64, mut budget: u64) -> Result<(), String> {
    let file_len = bytes.len() as u64;
    let mut rows = 0u64;
    for (g, group) in meta.row_groups().iter().enumerate() {
        let n = u64::try_from(group.num_rows()).map_err(|_| format!("row group {g}: negative row count"))?;
        rows = rows.saturating_add(n);
        if rows > max_rows {
            return Err(format!(
                "row group {g}: the footer declares {rows} rows or more in a {file_len}-byte file (at most {max_rows})"
            ));
        }
        for column in group.columns() {
            let name = column.column_path().string();
            // Not `byte_range()`: it panics on the negative offsets a damaged footer declares (the crate's own
            // readers call it too, which is why this check runs first).
            let start = column.dictionary_page_offset().unwrap_or_else(|| column.data_page_offset());
            let (start, len) = match (u64::try_from(start), u64::try_from(column.compressed_size())) {
                (Ok(s), Ok(l)) => (s, l),
                _ => return Err(format!("row group {g}, column {name}: negative page offset or size")),
            };
            let end = start.checked_add(len).filter(|&e| e <= file_len).ok_or_else(|| {
                format!("row group {g}, column {name}: its pages ({start}+{len}) lie outside the {file_len}-byte file")
            })?;
            let mut pos = start;
            let mut dictionary = false;
            while pos < end {
                let page = page_header(&bytes[pos as usize..end as usize])
                    .map_err(|e| format!("row group {g}, column {name}: page header at byte {pos}: {e}"))?;
                if page.uncompressed > budget || page.values > max_rows.max(1) {
                    return Err(format!(
                        "row group {g}, column {name}: page at byte {pos} declares {} bytes / {} values, more than \
                         this {file_len}-byte file may hold",
                        page.uncompressed, page.values
                    ));
                }
                // The crate expects a dictionary page before any dictionary-encoded data page (it panics otherwise).
                dictionary |= page.kind == DICTIONARY_PAGE;
                if matches!(page.encoding, PLAIN_DICTIONARY | RLE_DICTIONARY) && !dictionary {
                    return Err(format!(
                        "row group {g}, column {name}: page at byte {pos} is dictionary-encoded without a dictionary"
                    ));
                }
                budget -= page.uncompressed;
                pos = pos.saturating_add(page.header_len).saturating_add(page.compressed);
            }
        }
    }
    Ok(())
}

/// parquet-format's `PageType::DICTIONARY_PAGE`.
const DICTIONARY_PAGE: i64 = 2;
/// parquet-format's `Encoding::PLAIN_DICTIONARY` and `Encoding::RLE_DICTIONARY`.
const PLAIN_DICTIONARY: i64 = 2;
const RLE_DICTIONARY: i64 = 8;

/// What the checks need from one page header.
#[derive(Debug, Default, PartialEq)]
struct PageSizes {
    header_len: u64,
    /// `PageHeader.type` (0 data, 2 dictionary, 3 data v2).
    kind: i64,
    uncompressed: u64,
    compressed: u64,
    values: u64,
    /// The data page's value encoding (-1 when the header has none).
    encoding: i64,
}

/// Reads one Thrift-compact `PageHeader` at the start of `b`.
fn page_header(b: &[u8]) -> Result<PageSizes, String> {
    let mut r = Reader { b, pos: 0 };
    let mut out = PageSizes { encoding: -1, ..PageSizes::default() };
    let mut last = 0i64;
    while let Some((id, ty)) = r.field_header(&mut last)? {
        match (id, ty) {
            (1, 5) => out.kind = r.zigzag()?,
            (2 | 3, 5) => {
                let v = u64::try_from(r.zigzag()?).map_err(|_| "negative page size")?;
                if id == 2 {
                    out.uncompressed = v;
                } else {
                    out.compressed = v;
                }
            }
            // data_page_header, dictionary_page_header, data_page_header_v2: field 1 is num_values.
            (5 | 7 | 8, 12) => {
                let mut inner_last = 0i64;
                while let Some((inner, t)) = r.field_header(&mut inner_last)? {
                    // DataPageHeader.encoding is field 2, DataPageHeaderV2.encoding field 4.
                    let encoding_field = if id == 8 { 4 } else { 2 };
                    if inner == 1 && t == 5 {
                        out.values = u64::try_from(r.zigzag()?).map_err(|_| "negative num_values")?;
                    } else if id != 7 && inner == encoding_field && t == 5 {
                        out.encoding = r.zigzag()?;
                    } else {
                        r.skip(t, 1)?;
                    }
                }
            }
            _ => r.skip(ty, 0)?,
        }
    }
    out.header_len = r.pos as u64;
    Ok(out)
}

/// A Thrift compact-protocol reader that never allocates.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, String> {
        let v = *self.b.get(self.pos).ok_or("truncated")?;
        self.pos += 1;
        Ok(v)
    }

    fn advance(&mut self, n: u64) -> Result<(), String> {
        let n = usize::try_from(n).map_err(|_| "length overflows")?;
        if n > self.b.len() - self.pos {
            return Err("truncated".into());
        }
        self.pos += n;
        Ok(())
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint longer than 10 bytes".into())
    }

    fn zigzag(&mut self) -> Result<i64, String> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// The next field's (id, type), `None` at the struct's stop byte.
    fn field_header(&mut self, last: &mut i64) -> Result<Option<(i64, u8)>, String> {
        let h = self.byte()?;
        if h == 0 {
            return Ok(None);
        }
        let (delta, ty) = (h >> 4, h & 0x0f);
        let id = if delta == 0 { self.zigzag()? } else { *last + i64::from(delta) };
        *last = id;
        Ok(Some((id, ty)))
    }

    /// Skips a value of compact type `ty` (in a struct: booleans carry their value in the type).
    fn skip(&mut self, ty: u8, depth: u32) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("structs nested too deeply".into());
        }
        match ty {
            1 | 2 => Ok(()),
            3 => self.advance(1),
            4..=6 => self.varint().map(|_| ()),
            7 => self.advance(8),
            8 => {
                let n = self.varint()?;
                self.advance(n)
            }
            9 | 10 => {
                let h = self.byte()?;
                let n = if h >> 4 == 15 { self.varint()? } else { u64::from(h >> 4) };
                self.elements(n, h & 0x0f, depth)
            }
            11 => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let kv = self.byte()?;
                for _ in 0..n.min(self.remaining()) {
                    self.element(kv >> 4, depth)?;
                    self.element(kv & 0x0f, depth)?;
                }
                Ok(())
            }
            12 => {
                let mut last = 0i64;
                while let Some((_, t)) = self.field_header(&mut last)? {
                    self.skip(t, depth + 1)?;
                }
                Ok(())
            }
            other => Err(format!("unknown Thrift type {other}")),
        }
    }

    fn remaining(&self) -> u64 {
        (self.b.len() - self.pos) as u64
    }

    /// Skips `n` list elements of type `ty`; every element takes a byte at least, so `n` beyond the remaining bytes
    /// is truncation.
    fn elements(&mut self, n: u64, ty: u8, depth: u32) -> Result<(), String> {
        if n > self.remaining() {
            return Err("truncated".into());
        }
        for _ in 0..n {
            self.element(ty, depth)?;
        }
        Ok(())
    }

    /// A list, set or map element: booleans take one byte there.
    fn element(&mut self, ty: u8, depth: u32) -> Result<(), String> {
        if matches!(ty, 1 | 2) {
            self.advance(1)
        } else {
            self.skip(ty, depth + 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_data_page_header() {
        // Field 1 (delta 1, i32) type 0; field 2 i32 zigzag(1000) = 2000 = 0xd0 0x0f; field 3 i32 zigzag(300) =
        // 600 = 0xd8 0x04; field 5 (delta 2, struct) { field 1 i32 zigzag(42) = 84 = 0x54; stop }; stop.
        let b = [0x15, 0x00, 0x15, 0xd0, 0x0f, 0x15, 0xd8, 0x04, 0x2c, 0x15, 0x54, 0x00, 0x00, 0xff];
        let p = page_header(&b).unwrap();
        assert_eq!(
            p,
            PageSizes { header_len: 13, kind: 0, uncompressed: 1000, compressed: 300, values: 42, encoding: -1 }
        );
        assert!(page_header(&b[..7]).is_err());
        // A list declaring more elements than bytes left is truncation, not a long loop.
        assert!(page_header(&[0x19, 0xf5, 0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
    }

    /// The real pages of a fixture (dictionary and data pages, zstd) pass the file's own caps and fail smaller
    /// ones, naming the column.
    #[test]
    fn fixture_pages_fit_the_caps_and_smaller_caps_are_refused() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/fixtures/aiconfigurator/a100_sxm_vllm_gemm_vllm_0.14.0_gemm_perf.parquet"
        );
        let bytes = std::fs::read(path).unwrap();
        let reader = SerializedFileReader::new(bytes::Bytes::from(bytes.clone())).unwrap();
        check(&bytes, reader.metadata()).unwrap();
        // 9,240 rows (pyarrow's metadata): 9,239 allowed is too few.
        let e = check_within(&bytes, reader.metadata(), 9_239, u64::MAX).unwrap_err();
        assert!(e.contains("9240 rows"), "{e}");
        let e = check_within(&bytes, reader.metadata(), 9_240, 0).unwrap_err();
        assert!(e.contains("row group 0, column framework: page at byte 4"), "{e}");
    }
}
