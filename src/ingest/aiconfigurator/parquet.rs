//! Reading an aiconfigurator table from Apache Parquet with the `parquet` crate's row API (no Arrow): the schema
//! names the columns, each row group is read row by row after [`super::guard`] has bounded the sizes its footer
//! and page headers declare.

use bytes::Bytes;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;

use super::super::ParseError;
use super::guard;
use super::table::{Cell, Columns, Row};

/// True when `bytes` are framed as a Parquet file (`PAR1` at both ends).
pub fn is_parquet(bytes: &[u8]) -> bool {
    bytes.len() >= 12 && bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1")
}

/// Reads every row of the Parquet table in `bytes`, calling `each` with it; `each` returns an error to stop.
///
/// Errors: not Parquet or a damaged footer (whole file), sizes beyond what the file's length allows (naming row
/// group and column), a page that does not decode (naming the row and row group), columns that are no
/// aiconfigurator table.
///
/// The `parquet` crate still asserts on some damaged pages [`guard`] cannot foresee (random byte flips find
/// them): such a panic inside the decoder is caught here and reported as a damaged file, so hostile input
/// never takes the service down. Nothing is shared across the boundary but the rows already handed to `each`,
/// which the caller drops with the error.
pub fn for_each_row(bytes: &[u8], each: &mut dyn FnMut(&Row<'_>) -> Result<(), ParseError>) -> Result<(), ParseError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read_rows(bytes, each))).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(ParseError::whole(format!("damaged Parquet file: the decoder failed ({why})")))
    })
}

fn read_rows(bytes: &[u8], each: &mut dyn FnMut(&Row<'_>) -> Result<(), ParseError>) -> Result<(), ParseError> {
    let reader = SerializedFileReader::new(Bytes::copy_from_slice(bytes))
        .map_err(|e| ParseError::whole(format!("not a readable Parquet file: {e}")))?;
    let meta = reader.metadata();
    guard::check(bytes, meta).map_err(|e| ParseError::whole(format!("Parquet: {e}")))?;
    let schema = meta.file_metadata().schema_descr();
    let names: Vec<String> = schema.columns().iter().map(|c| c.name().to_string()).collect();
    let columns = Columns::new(names).map_err(|e| ParseError::whole(format!("Parquet schema: {}", e.message)))?;
    let mut line = 0u64;
    for g in 0..reader.num_row_groups() {
        let group = reader.get_row_group(g).map_err(|e| ParseError::whole(format!("Parquet row group {g}: {e}")))?;
        let rows = group.get_row_iter(None).map_err(|e| ParseError::whole(format!("Parquet row group {g}: {e}")))?;
        for row in rows {
            line += 1;
            let row = row.map_err(|e| ParseError::at(line, format!("Parquet row group {g}: {e}")))?;
            let mut cells = vec![Cell::Null; columns.count()];
            for (name, field) in row.get_column_iter() {
                if let Some(i) = columns.position(name) {
                    cells[i] = cell(field);
                }
            }
            each(&Row { columns: &columns, cells, line, place: format!("Parquet row group {g}") })?;
        }
    }
    Ok(())
}

fn cell(f: &Field) -> Cell {
    match f {
        Field::Null => Cell::Null,
        Field::Bool(b) => Cell::Int(i64::from(*b)),
        Field::Byte(v) => Cell::Int(i64::from(*v)),
        Field::Short(v) => Cell::Int(i64::from(*v)),
        Field::Int(v) => Cell::Int(i64::from(*v)),
        Field::Long(v) => Cell::Int(*v),
        Field::UByte(v) => Cell::Int(i64::from(*v)),
        Field::UShort(v) => Cell::Int(i64::from(*v)),
        Field::UInt(v) => Cell::Int(i64::from(*v)),
        Field::ULong(v) => i64::try_from(*v).map_or(Cell::Float(*v as f64), Cell::Int),
        Field::Float16(v) => Cell::Float(f64::from(*v)),
        Field::Float(v) => Cell::Float(f64::from(*v)),
        Field::Double(v) => Cell::Float(*v),
        Field::Str(s) => Cell::Text(s.clone()),
        other => Cell::Text(other.to_string()),
    }
}
