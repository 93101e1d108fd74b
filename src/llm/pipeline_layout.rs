//! Megatron-Core's custom pipeline layout (`--pipeline-model-parallel-layout`, the `TransformerConfig` field
//! `pipeline_model_parallel_layout`; Megatron-LM `megatron/core/transformer/pipeline_parallel_layer_layout.py`
//! `PipelineParallelLayerLayout`, docs "Custom Pipeline Model Parallel Layout"): a string that names what every
//! virtual pipeline stage builds, e.g. DeepSeek-V3 on pp 8 · vp 4 as Megatron-Bridge's `deepseek.py` `layout_map`
//! sets it, `"Et|(tt|)*30mL"`.
//!
//! Grammar ([`parse_layout`], as `parse_str_to_list`): `,` is cosmetic and removed first; then every `(…)*N`
//! (parentheses without a `)` inside) is unrolled, then every `x*N` (any one character); the result is split at
//! `|` into virtual stages, whose characters are `E` (embedding), `t` (transformer layer), `m` (MTP layer) and `L`
//! (final norm, LM head and loss). The string lists the virtual stages in order 0 … pp·vp − 1; virtual stage i is
//! model chunk i / pp of pipeline stage i mod pp (`__init__`'s `layout[vpp_rank * pp + pp_rank]`).

use super::config::{bad, ConfigError, LayerSplit, ModelSpec, ParallelSpec};

/// The request field this module validates.
pub const FIELD: &str = "parallelism.pipeline_model_parallel_layout";

/// The most characters an unrolled layout may have: far beyond any real model (DeepSeek-V3's is 66), small enough
/// that a request like `"t*999999999999"` is refused instead of exhausting memory (Megatron-Core would try).
const MAX_UNROLLED: usize = 1 << 20;

/// What one model chunk builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkLayout {
    /// Transformer (decoder) layers, `t`.
    pub layers: u32,
    /// MTP layers, `m`.
    pub mtp: u32,
    /// Holds the embedding, `E`.
    pub embedding: bool,
    /// Holds the final norm, the LM head and the loss, `L`.
    pub loss: bool,
}

/// A validated layout: what every model chunk builds, indexed `stage · v + chunk` like
/// [`crate::llm::partition::chunk_layers`] (chunk c of stage s is virtual stage c·pp + s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineLayout {
    /// Pipeline stages.
    pub pp: u32,
    /// Model chunks per stage (virtual stages).
    pub v: u32,
    /// `pp · v` chunks, indexed `stage · v + chunk`.
    pub chunks: Vec<ChunkLayout>,
}

impl PipelineLayout {
    /// What chunk `c` of stage `s` builds (an empty chunk out of range).
    pub fn chunk(&self, s: u32, c: u32) -> ChunkLayout {
        self.chunks.get((s * self.v + c) as usize).copied().unwrap_or_default()
    }

    /// Transformer layers of every chunk, indexed `stage · v + chunk`.
    pub fn layers(&self) -> Vec<u32> {
        self.chunks.iter().map(|c| c.layers).collect()
    }

    /// MTP layers on stage `s` (all its chunks).
    pub fn stage_mtp(&self, s: u32) -> u32 {
        (0..self.v).map(|c| self.chunk(s, c).mtp).sum()
    }
}

/// Unrolls `(…)*N` groups as Megatron-Core's first pattern `\(([^)]+)\)\*(\d+)` does with `re.sub`: left to
/// right, a `(`, at least one character up to the first `)`, then `*` and digits; the replacement is not scanned
/// again. Errors on a count whose unrolled text exceeds [`MAX_UNROLLED`].
fn unroll_groups(s: &[char]) -> Result<Vec<char>, ConfigError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if s[i] == '(' {
            if let Some(close) = s[i + 1..].iter().position(|&c| c == ')').map(|p| i + 1 + p) {
                if close > i + 1 {
                    if let Some((n, end)) = count_after(s, close + 1) {
                        repeat_into(&mut out, &s[i + 1..close], n)?;
                        i = end;
                        continue;
                    }
                }
            }
        }
        out.push(s[i]);
        i += 1;
    }
    Ok(out)
}

/// Unrolls `x*N` as Megatron-Core's second pattern `(.)\*(\d+)` does: any one character but a newline.
fn unroll_chars(s: &[char]) -> Result<Vec<char>, ConfigError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if s[i] != '\n' {
            if let Some((n, end)) = count_after(s, i + 1) {
                repeat_into(&mut out, &s[i..i + 1], n)?;
                i = end;
                continue;
            }
        }
        out.push(s[i]);
        i += 1;
    }
    Ok(out)
}

/// `*` then one or more ASCII digits at `at`: the count (saturating, [`repeat_into`] refuses it) and the index after
/// the digits.
fn count_after(s: &[char], at: usize) -> Option<(u64, usize)> {
    if s.get(at) != Some(&'*') {
        return None;
    }
    let digits = s[at + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let n = s[at + 1..at + 1 + digits]
        .iter()
        .fold(0u64, |n, c| n.saturating_mul(10).saturating_add(c.to_digit(10).unwrap_or(0) as u64));
    Some((n, at + 1 + digits))
}

fn repeat_into(out: &mut Vec<char>, part: &[char], n: u64) -> Result<(), ConfigError> {
    let add = (part.len() as u64).saturating_mul(n);
    if (out.len() as u64).saturating_add(add) > MAX_UNROLLED as u64 {
        return Err(bad(FIELD, format!("the layout unrolls to more than {MAX_UNROLLED} characters")));
    }
    for _ in 0..n {
        out.extend_from_slice(part);
    }
    Ok(())
}

/// The virtual stages of a layout string, in order, as Megatron-Core's `parse_str_to_list` reads them
/// (see the module doc). Errors (field [`FIELD`]): a character other than `E`, `L`, `t`, `m` after unrolling
/// (Megatron-Core: "Invalid layer character"), a layout unrolling past [`MAX_UNROLLED`] characters.
pub fn parse_layout(layout: &str) -> Result<Vec<ChunkLayout>, ConfigError> {
    stages_of(&unroll(layout)?)
}

/// `layout` with its commas removed and its repeats unrolled ([`unroll_groups`], then [`unroll_chars`]).
fn unroll(layout: &str) -> Result<Vec<char>, ConfigError> {
    let chars: Vec<char> = layout.chars().filter(|&c| c != ',').collect();
    unroll_chars(&unroll_groups(&chars)?)
}

/// The virtual stages of an unrolled layout ([`parse_layout`]'s errors for a character it does not know).
fn stages_of(unrolled: &[char]) -> Result<Vec<ChunkLayout>, ConfigError> {
    let mut stages = vec![ChunkLayout::default()];
    for &c in unrolled {
        let Some(cur) = stages.last_mut() else { continue };
        match c {
            '|' => stages.push(ChunkLayout::default()),
            't' => cur.layers += 1,
            'm' => cur.mtp += 1,
            'E' => cur.embedding = true,
            'L' => cur.loss = true,
            other => {
                return Err(bad(
                    FIELD,
                    format!(
                        "invalid layer character {other:?}: the layout knows E (embedding), t (transformer layer), \
                         m (MTP layer), L (loss), | (stage separator), (…)*N and x*N repeats, and commas"
                    ),
                ))
            }
        }
    }
    Ok(stages)
}

/// Parses `layout` ([`parse_layout`]) and checks it with Megatron-Core's rules (`PipelineParallelLayerLayout.__init__`
/// and `validate_layer_layout`) for a model of `layers` transformer layers and `mtp_layers` MTP layers on `pp`
/// stages of `v` model chunks.
///
/// Errors, all naming [`FIELD`]: the grammar's; the virtual stages not a multiple of pp ("must be divisible by
/// pipeline_model_parallel_size"), or not pp · `parallelism.virtual_stages` (Megatron-LM sets the virtual stages
/// from the layout; perfcast asks the request to state them); the first layer not `E` or the last not `L`; `E` or
/// `L` more than once; the `t` count not the model's layers or the `m` count not its MTP layers; a `t` after an
/// `m` ("decoder layers must be placed before MTP layers"); an `m` in a chunk other than a stage's last ("MTP
/// should be always in the last virtual pipeline stage of that rank"); MTP layers split over chunks ("All of the
/// MTP layers must be in the same one virtual pipeline stage").
pub fn validate_layout(
    layout: &str,
    pp: u32,
    v: u32,
    layers: u32,
    mtp_layers: u32,
) -> Result<PipelineLayout, ConfigError> {
    let unrolled = unroll(layout)?;
    let stages = stages_of(&unrolled)?;
    let pp = pp.max(1);
    let n = stages.len() as u64;
    if n % pp as u64 != 0 {
        return Err(bad(FIELD, format!("{n} virtual stages (|-separated) are not divisible by pp {pp}")));
    }
    if n != pp as u64 * v as u64 {
        return Err(bad(
            FIELD,
            format!("{n} virtual stages are pp {pp} × {} model chunks, but virtual_stages is {v}", n / pp as u64),
        ));
    }
    // The layers in order, separators dropped: Megatron-Core's `flatten_layout`.
    let flat: Vec<char> = unrolled.into_iter().filter(|&c| c != '|').collect();
    let count = |x: char| flat.iter().filter(|&&c| c == x).count();
    let (e, l) = (count('E'), count('L'));
    if e != 1 || l != 1 {
        return Err(bad(FIELD, format!("the embedding E and the loss L must each appear once (E {e}, L {l} times)")));
    }
    if flat.first() != Some(&'E') || flat.last() != Some(&'L') {
        return Err(bad(FIELD, "the first layer must be the embedding E and the last the loss L"));
    }
    let (t, m) = (count('t') as u64, count('m') as u64);
    if t != layers as u64 {
        return Err(bad(FIELD, format!("{t} transformer layers t, but the model has {layers} layers")));
    }
    if m != mtp_layers as u64 {
        return Err(bad(FIELD, format!("{m} MTP layers m, but the model has mtp_layers {mtp_layers}")));
    }
    if mtp_layers > 0 {
        let first_m = stages.iter().position(|c| c.mtp > 0).unwrap_or(0);
        let m_at = flat.iter().position(|&c| c == 'm').unwrap_or(0);
        if flat[m_at..].contains(&'t') {
            return Err(bad(FIELD, "transformer layers t must come before the MTP layers m"));
        }
        if stages[first_m].mtp != mtp_layers {
            return Err(bad(FIELD, "all MTP layers m must be in the same virtual stage"));
        }
        if (first_m as u32) < pp * (v - 1) {
            return Err(bad(
                FIELD,
                format!(
                    "MTP layers in virtual stage {first_m} (chunk {} of stage {}): Megatron-Core places them in a \
                     stage's last chunk",
                    first_m as u32 / pp,
                    first_m as u32 % pp
                ),
            ));
        }
    }
    let chunks = (0..pp * v).map(|i| stages[((i % v) * pp + i / v) as usize]).collect();
    Ok(PipelineLayout { pp, v, chunks })
}

/// Megatron-Core's custom pipeline layout of the request, validated for its model and pipeline
/// ([`validate_layout`]); `None` without one. Errors (field
/// `parallelism.pipeline_model_parallel_layout`): [`validate_layout`]'s, and the layout given with
/// `num_layers_in_first/last_pipeline_stage` or `account_for_*` (Megatron-Core's `get_num_layers_to_build` reads
/// the layout and ignores them, so a request giving both is ambiguous) or with `layer_split` `s1`.
pub fn request_layout(model: &ModelSpec, par: &ParallelSpec) -> Result<Option<PipelineLayout>, ConfigError> {
    let Some(layout) = &par.pipeline_model_parallel_layout else { return Ok(None) };
    if !par.megatron_split().is_even() {
        return Err(bad(
            FIELD,
            "the layout places every layer itself: give it without num_layers_in_first/last_pipeline_stage and \
             account_for_embedding/loss_in_pipeline_split",
        ));
    }
    if par.layer_split == Some(LayerSplit::S1) {
        return Err(bad(FIELD, "the layout is Megatron-Core's split: use layer_split uniform (or leave it out)"));
    }
    validate_layout(layout, par.pp, par.virtual_stages, model.layers, model.mtp_layers).map(Some)
}

#[cfg(test)]
#[path = "pipeline_layout_tests.rs"]
mod tests;
