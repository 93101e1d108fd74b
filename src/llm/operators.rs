//! Operator decomposition of one training iteration (S1 Table I, MODELS.md §1.1), extended to Megatron-LM's
//! options: which operators one transformer layer, the first stage's embedding and the last stage's head run per
//! micro-batch, with their shapes, precisions, S1 feature vectors and call counts.
//!
//! Modeling choices beyond S1, each from its source:
//! - **GQA** (Ainslie et al. 2023): the QKV GEMM produces (h + 2·kv)·d/h columns; QKᵀ and ·V still run per query
//!   head (keys and values are broadcast to their group).
//! - **SwiGLU** (Shazeer 2020; Megatron-LM `--swiglu`): the up-projection is one GEMM of width 2·ffn (gate and up),
//!   the activation reads 2·ffn and writes ffn, the down-projection reads ffn.
//! - **Sequence parallelism** (Korthikanti et al. 2022, §4.2.2): norms run on tokens/tp rows; each tensor-parallel
//!   all-reduce becomes an all-gather plus a reduce-scatter of the same total volume. In the backward pass the
//!   extra all-gather of a column-parallel layer's input (for its weight gradient) overlaps the input-gradient
//!   GEMM and is not charged (Megatron's asynchronous gradient communication); without Transformer Engine's
//!   Userbuffers (`tp_comm_overlap` off) the column-parallel layers' input-gradient reduce-scatter runs beside their
//!   weight-gradient GEMM (`async_op=True` in TE's `_Linear` / `_LayerNormLinear` / `_LayerNormMLP` backward) and
//!   only its excess is charged ([`layer::tp_sync`]).
//! - **Context parallelism** ([`crate::llm::cp`], per `cp_comm_type`): each rank holds tokens/cp of every
//!   sequence (the load-balanced causal split of 2·cp chunks makes every rank's work equal). Megatron-Core's
//!   default `p2p` runs attention as cp FlashAttention calls of tokens/cp queries against one key/value chunk,
//!   while the next chunk's keys and values (and in the backward pass their gradients) travel to the ring
//!   neighbour; the send is hidden behind the step's attention and only its excess is charged. `all_gather`,
//!   `a2a` (Ulysses) and `a2a+p2p` communicate as [`crate::llm::cp`] says.
//! - **Recompute** (Korthikanti et al. 2022, §5): `full` re-runs every forward operator of the layer (its
//!   tensor- and context-parallel communication included) during the backward pass; `selective` re-runs the core
//!   attention (QKᵀ, softmax, its dropout, ·V, or the FlashAttention forward).
//! - **FP8** (Micikevicius et al. 2022; Transformer Engine): the four GEMMs of each layer run in fp8 (`fp8_block`
//!   under blockwise scaling, nvfp4 under fp4 training); everything else stays 16-bit. Under delayed scaling
//!   Transformer Engine fuses the fp8 casts into the neighbouring kernels (LayerNormLinear, LayerNormMLP, the GEMM
//!   epilogues), so they are not separate operators; current scaling's amax passes and MXFP8's scale writes are
//!   ([`crate::llm::recipe::scaling_ops`]).
//! - **Dropout** (Megatron-LM `--hidden-dropout`, `--attention-dropout`; Korthikanti et al.'s masks): with
//!   `model.dropout` > 0, each layer runs a dropout over the attention probabilities (b·h/tp·l² elements, unless
//!   FlashAttention fuses it) and two fused bias-dropout-add kernels on its two residual branches (reading the
//!   branch output, the bias and the residual). S1's Table I has neither (GPT-NeoX's configurations train without
//!   dropout), so the default 0 adds nothing.
//!
//! One concept per module: [`names`] (the operator inventory, [`OpName`]), [`work`] (what one operator is,
//! [`StageOp`] and [`Work`]), [`layer`] (one transformer layer's operators) and [`stage`] (the embedding, the head,
//! the pipeline send and the optimizer step). Every item is re-exported here, so `crate::llm::operators::X` names
//! it.

pub mod layer;
pub mod names;
pub mod stage;
pub mod work;

pub(crate) use layer::norm_op;
pub use layer::{fused_softmax_available, layer_ops, layer_passes};
pub use names::OpName;
pub use stage::{embedding_ops, head_ops, optimizer_work, p2p_op};
pub(crate) use work::{collective, compute, eager_ops, op};
pub use work::{comm_elem_bytes, OpPrecisions, Overlap, StageOp, Work};

#[cfg(test)]
#[path = "operators_tests.rs"]
mod tests;
