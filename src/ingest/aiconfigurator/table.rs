//! One aiconfigurator table as the row mapping reads it, whatever the container (Parquet or CSV): its columns by
//! name, the kind of table they make, and one row's cells with typed accessors that name the column on error.

use std::borrow::Cow;
use std::collections::HashMap;

use super::super::text::{number, whole};
use super::super::ParseError;

/// The tables of aiconfigurator's performance database (`data/aiconfigurator/SOURCE.txt`), told apart by their
/// columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableKind {
    /// `gemm_perf`: `gemm_dtype, m, n, k`.
    Gemm,
    /// `context_attention_perf` and `generation_attention_perf` (same columns; `op_name` says which).
    Attention,
    /// `moe_perf`: `moe_dtype, num_tokens, hidden_size, inter_size, topk, num_experts, moe_tp_size, moe_ep_size`.
    Moe,
    /// `nccl_perf`: `nccl_dtype, num_gpus, message_size`.
    Nccl,
    /// `custom_allreduce_perf`: `allreduce_dtype, num_gpus, message_size`.
    CustomAllReduce,
    /// `scale_matrix_perf` and `computescale_perf` (TensorRT-LLM's and SGLang's folders): `quant_dtype, m, k`
    /// (`op_name` `scale_matrix` or `compute_scale` says which).
    Quantize,
}

/// Columns every table needs besides its own.
const COMMON: [&str; 2] = ["latency", "op_name"];

impl TableKind {
    /// The columns a table of this kind must have.
    pub fn required(self) -> &'static [&'static str] {
        match self {
            TableKind::Gemm => &["gemm_dtype", "m", "n", "k"],
            TableKind::Attention => {
                &["batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "kv_cache_dtype", "step"]
            }
            TableKind::Moe => &[
                "moe_dtype",
                "num_tokens",
                "hidden_size",
                "inter_size",
                "topk",
                "num_experts",
                "moe_tp_size",
                "moe_ep_size",
            ],
            TableKind::Nccl => &["nccl_dtype", "num_gpus", "message_size"],
            TableKind::CustomAllReduce => &["allreduce_dtype", "num_gpus", "message_size"],
            TableKind::Quantize => &["quant_dtype", "m", "k"],
        }
    }

    /// The kind of table whose signature column is among `names` (`gemm_dtype`, `kv_cache_dtype`, `moe_dtype`,
    /// `nccl_dtype`, `allreduce_dtype`, `quant_dtype`), with `latency` present; `None` otherwise.
    pub fn detect<S: AsRef<str>>(names: &[S]) -> Option<TableKind> {
        let has = |n: &str| names.iter().any(|h| h.as_ref() == n);
        if !has("latency") {
            return None;
        }
        [
            ("gemm_dtype", TableKind::Gemm),
            ("kv_cache_dtype", TableKind::Attention),
            ("moe_dtype", TableKind::Moe),
            ("nccl_dtype", TableKind::Nccl),
            ("allreduce_dtype", TableKind::CustomAllReduce),
            ("quant_dtype", TableKind::Quantize),
        ]
        .into_iter()
        .find(|(col, _)| has(col))
        .map(|(_, kind)| kind)
    }
}

/// A table's columns, by name.
#[derive(Debug, Clone)]
pub struct Columns {
    names: Vec<String>,
    index: HashMap<String, usize>,
    pub kind: TableKind,
}

impl Columns {
    /// The columns `names` (header or schema order). Errors: no aiconfigurator table has these columns, or one
    /// its kind needs is missing (named).
    pub fn new(names: Vec<String>) -> Result<Columns, ParseError> {
        let kind = TableKind::detect(&names).ok_or_else(|| {
            ParseError::at(
                1,
                "not an aiconfigurator table: no latency column with gemm_dtype, kv_cache_dtype, moe_dtype, \
                 nccl_dtype, allreduce_dtype or quant_dtype",
            )
        })?;
        let index: HashMap<String, usize> = names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect();
        if let Some(missing) = COMMON.iter().chain(kind.required()).find(|c| !index.contains_key(**c)) {
            return Err(ParseError::at(1, format!("the {kind:?} table has no {missing} column")));
        }
        Ok(Columns { names, index, kind })
    }

    /// Number of columns.
    pub fn count(&self) -> usize {
        self.names.len()
    }

    /// Position of column `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }
}

/// One cell as the container typed it (CSV cells are all text).
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
}

/// One row: its cells in column order and where it is, for errors and rejections.
#[derive(Debug)]
pub struct Row<'a> {
    pub columns: &'a Columns,
    pub cells: Vec<Cell>,
    /// 1-based: the CSV line, or the Parquet row within the file.
    pub line: u64,
    /// Where the row is beyond its number (`Parquet row group 0`), empty for CSV.
    pub place: String,
}

impl Row<'_> {
    fn error(&self, column: usize, name: &str, problem: &str) -> ParseError {
        let place = if self.place.is_empty() { String::new() } else { format!(" ({})", self.place) };
        ParseError {
            line: Some(self.line),
            column: Some(column as u64 + 1),
            message: format!("column {name}{place}: {problem}"),
        }
    }

    fn cell(&self, name: &str) -> Option<(usize, &Cell)> {
        let i = self.columns.position(name)?;
        self.cells.get(i).map(|c| (i, c))
    }

    /// Text of column `name`, `None` when the column is absent or the cell empty (numbers are written out).
    pub fn opt_text(&self, name: &str) -> Option<Cow<'_, str>> {
        match self.cell(name)?.1 {
            Cell::Null => None,
            Cell::Int(v) => Some(Cow::Owned(v.to_string())),
            Cell::Float(v) => Some(Cow::Owned(v.to_string())),
            Cell::Text(s) if s.trim().is_empty() => None,
            Cell::Text(s) => Some(Cow::Borrowed(s.trim())),
        }
    }

    /// Text of column `name`. Errors: the column is absent or the cell empty.
    pub fn text(&self, name: &str) -> Result<Cow<'_, str>, ParseError> {
        let i = self.columns.position(name).unwrap_or(0);
        self.opt_text(name).ok_or_else(|| self.error(i, name, "empty; a value is required"))
    }

    /// A whole non-negative number in column `name`, `None` when the column is absent or the cell empty. Errors:
    /// anything else than a whole number ≥ 0.
    pub fn opt_uint(&self, name: &str) -> Result<Option<u64>, ParseError> {
        let Some((i, cell)) = self.cell(name) else { return Ok(None) };
        let v = match cell {
            Cell::Null => return Ok(None),
            Cell::Int(v) => u64::try_from(*v).ok(),
            Cell::Float(v) => (v.is_finite() && *v >= 0.0 && v.fract() == 0.0 && *v < 1.8e19).then_some(*v as u64),
            Cell::Text(s) if s.trim().is_empty() => return Ok(None),
            Cell::Text(s) => whole(s),
        };
        v.map(Some).ok_or_else(|| self.error(i, name, &format!("{} is not a whole number ≥ 0", show(cell))))
    }

    /// A whole non-negative number in column `name`. Errors: absent, empty or not a whole number ≥ 0.
    pub fn uint(&self, name: &str) -> Result<u64, ParseError> {
        let i = self.columns.position(name).unwrap_or(0);
        self.opt_uint(name)?.ok_or_else(|| self.error(i, name, "empty; a whole number is required"))
    }

    /// A finite number in column `name`. Errors: absent, empty or not a finite number.
    pub fn float(&self, name: &str) -> Result<f64, ParseError> {
        let i = self.columns.position(name).unwrap_or(0);
        let cell = self.cell(name).map(|c| c.1).unwrap_or(&Cell::Null);
        let v = match cell {
            Cell::Null => None,
            Cell::Int(v) => Some(*v as f64),
            Cell::Float(v) => v.is_finite().then_some(*v),
            Cell::Text(s) => number(s),
        };
        v.ok_or_else(|| self.error(i, name, &format!("{} is not a finite number", show(cell))))
    }
}

fn show(cell: &Cell) -> String {
    match cell {
        Cell::Null => "an empty cell".into(),
        Cell::Int(v) => v.to_string(),
        Cell::Float(v) => v.to_string(),
        Cell::Text(s) => format!("{:?}", s.chars().take(40).collect::<String>()),
    }
}
