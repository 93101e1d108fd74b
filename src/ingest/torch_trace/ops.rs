//! PyTorch operator names → perfcast operator classes, and `Input Dims` → the class's dims ([`crate::op`]).
//!
//! | class | PyTorch ops (and their autograd nodes `…Backward0`) | dims from `Input Dims` |
//! |---|---|---|
//! | linear | `linear(x[…,K], W[N,K])`, `addmm(b, x[M,K], W[K,N])`, `mm(x[M,K], W[K,N])`, `matmul(a[…,M,K], b[K,N])` | B = 1, M = rows of x (leading dims multiplied), N, K |
//! | bmm | `bmm(a[B,M,K], b[B,K,N])`, `baddbmm(c, a, b)`, `matmul` with batch dims on both sides | B (leading dims multiplied), M, N, K |
//! | layernorm / rmsnorm | `layer_norm`, `native_layer_norm`, `rms_norm(x, shape, weight, …)` | H = elements of the weight (else the last dim), B = numel / H |
//! | softmax | `softmax`, `_softmax`, `log_softmax`, `_log_softmax`, `_safe_softmax` | H = size of the softmax dim (`Concrete Inputs`, else the last), B = numel / H |
//! | gelu | `gelu(x)` | H = last dim, B = numel / H |
//! | fillmask | `masked_fill(x, mask, v)` | as gelu |
//! | elementwise | `add`, `sub`, `mul`, `div`, `pow`, `relu`, `silu`, `tanh`, `sigmoid`, `exp`, `neg`, `dropout`, `native_dropout` (and in-place `_` forms) | the largest input: H = last dim, B = numel / H; I = tensor inputs |
//! | embedding | `embedding(W[V,H], idx[…])` | T = numel of idx, V, H |
//! | cross_entropy | `cross_entropy_loss`, `nll_loss`, `nll_loss_forward`, `nll_loss_nd`, `nll_loss2d` (input [T,V] or [N,V,…]) | T, V |
//! | flash_attention | `scaled_dot_product_attention` and its `_scaled_dot_product_{flash,efficient,cudnn}_attention` (q [B,A,L,D]); `_flash_attention_forward`, `_efficient_attention_forward`, `flash_attn*` (q [B,L,A,D]) | B, L, A, D (causality is not recorded) |
//!
//! Not mapped (their cpu_ops are reported as rejected): convolutions, pooling, optimizers (`_fused_adam_`,
//! `_foreach_*`), reductions, copies, MSE and other losses, RoPE and SwiGLU (no single aten op).

use crate::hw::Precision;
use crate::op::OpClass;

/// Arguments of an op kept from the trace.
#[derive(Debug, Default)]
pub(super) struct OpArgs {
    /// Autograd sequence number (links a backward node to its forward op).
    pub seq: Option<i64>,
    /// Whether `Input Dims` was recorded at all.
    pub has_dims: bool,
    /// Shape of each input; `None` for non-tensors and tensor lists.
    pub dims: Vec<Option<Vec<u64>>>,
    /// `Input type` per input.
    pub types: Vec<String>,
    /// `Concrete Inputs` per input (scalars as text).
    pub concrete: Vec<String>,
    /// `Collective name` (record_param_comms, newer releases).
    pub collective: Option<String>,
    /// `In msg nelems` / `Out msg nelems` (element counts) and `Group size` (record_param_comms, newer releases).
    pub in_nelems: Option<u64>,
    pub out_nelems: Option<u64>,
    pub group_size: Option<u64>,
    /// `dtype` (record_param_comms, newer releases).
    pub dtype: Option<String>,
}

impl OpArgs {
    /// Input `i` as a tensor shape with at least one dim.
    pub fn tensor(&self, i: usize) -> Option<&[u64]> {
        self.dims.get(i).and_then(|d| d.as_deref()).filter(|d| !d.is_empty())
    }
}

/// True for autograd nodes and the engine's wrappers around them.
pub(super) fn is_backward(name: &str) -> bool {
    name.contains("Backward") || name.starts_with("autograd::engine::evaluate_function")
}

/// The op's base name: namespace, in-place suffix and leading underscore removed, autograd node names turned back
/// into the forward op's name (`NativeLayerNormBackward0` → `native_layer_norm`).
pub(super) fn base_name(name: &str) -> String {
    let n = name.trim();
    let n = n.strip_prefix("autograd::engine::evaluate_function:").map(str::trim).unwrap_or(n);
    let n = match n.rfind("Backward") {
        Some(pos) if n[pos + "Backward".len()..].bytes().all(|b| b.is_ascii_digit()) => {
            let node = &n[..pos];
            let node = node.rsplit("::").next().unwrap_or(node);
            return snake(node).trim_matches('_').to_string();
        }
        _ => n,
    };
    let n = n.rsplit("::").next().unwrap_or(n);
    n.to_ascii_lowercase().trim_end_matches('_').trim_start_matches('_').to_string()
}

fn snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    let mut prev_lower = false;
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else {
            out.push(c);
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        }
    }
    out
}

/// Class of a PyTorch op or autograd node (see the module table); `None` when perfcast does not model it.
pub fn op_class_of(name: &str) -> Option<OpClass> {
    let base = base_name(name);
    Some(match base.as_str() {
        "linear" | "addmm" | "mm" | "matmul" => OpClass::Linear,
        "bmm" | "baddbmm" => OpClass::Bmm,
        "layer_norm" | "native_layer_norm" => OpClass::LayerNorm,
        "rms_norm" | "fused_rms_norm" => OpClass::RmsNorm,
        "softmax" | "log_softmax" | "safe_softmax" => OpClass::Softmax,
        "gelu" => OpClass::Gelu,
        "embedding" => OpClass::Embedding,
        "cross_entropy_loss" | "nll_loss" | "nll_loss_forward" | "nll_loss_nd" | "nll_loss2d"
        | "nll_loss2d_forward" => OpClass::CrossEntropy,
        "scaled_dot_product_attention"
        | "scaled_dot_product_flash_attention"
        | "scaled_dot_product_efficient_attention"
        | "scaled_dot_product_cudnn_attention"
        | "flash_attention_forward"
        | "efficient_attention_forward" => OpClass::FlashAttention,
        b if b.starts_with("flash_attn") => OpClass::FlashAttention,
        "masked_fill" => OpClass::FillMask,
        "add" | "sub" | "mul" | "div" | "pow" | "relu" | "silu" | "tanh" | "sigmoid" | "exp" | "neg" | "dropout"
        | "native_dropout" => OpClass::Elementwise,
        _ => return None,
    })
}

fn numel(d: &[u64]) -> Option<u64> {
    d.iter().try_fold(1u64, |acc, &x| acc.checked_mul(x))
}

/// Splits a tensor into B rows of H = `last` elements.
fn rows(d: &[u64], h: u64) -> Result<[u64; 2], String> {
    let n = numel(d).ok_or("shape overflows")?;
    if h == 0 || n % h != 0 {
        return Err(format!("shape {d:?} does not split into rows of {h}"));
    }
    Ok([n / h, h])
}

fn last(d: &[u64]) -> u64 {
    d.last().copied().unwrap_or(0)
}

/// The class and dims of one op instance from its `Input Dims` (see the module table). `class` is the name's
/// class; `matmul` with batch dims on both sides becomes bmm.
pub(super) fn dims_for(class: OpClass, name: &str, a: &OpArgs) -> Result<(OpClass, [u64; 4]), String> {
    if !a.has_dims {
        return Err("no Input Dims recorded (profile with record_shapes=True)".into());
    }
    if (0..a.dims.len()).filter_map(|i| a.tensor(i)).any(|d| numel(d).is_none()) {
        return Err("an input's element count overflows 64 bits".into());
    }
    let base = base_name(name);
    let t = |i: usize| a.tensor(i).ok_or_else(|| format!("input {i} has no tensor shape in Input Dims"));
    let positive = |d: [u64; 4], n: usize| {
        if d[..n].iter().all(|&x| x > 0) {
            Ok(d)
        } else {
            Err(format!("a dim is 0 in {d:?}"))
        }
    };
    let out = match class {
        OpClass::Linear | OpClass::Bmm => {
            let (x, w) = match base.as_str() {
                "addmm" | "baddbmm" => (t(1)?, t(2)?),
                _ => (t(0)?, t(1)?),
            };
            match base.as_str() {
                "linear" => {
                    if w.len() != 2 || w[1] != last(x) {
                        return Err(format!("linear weight {w:?} does not match input {x:?}"));
                    }
                    let m = numel(&x[..x.len() - 1]).ok_or("shape overflows")?;
                    (OpClass::Linear, [1, m, w[0], last(x)])
                }
                "bmm" | "baddbmm" => {
                    if x.len() != 3 || w.len() != 3 || x[2] != w[1] || x[0] != w[0] {
                        return Err(format!("bmm shapes {x:?} × {w:?} do not chain"));
                    }
                    (OpClass::Bmm, [x[0], x[1], w[2], x[2]])
                }
                _ if w.len() == 2 && x.len() >= 2 => {
                    if x[x.len() - 1] != w[0] {
                        return Err(format!("matrix shapes {x:?} × {w:?} do not chain"));
                    }
                    let m = numel(&x[..x.len() - 1]).ok_or("shape overflows")?;
                    (OpClass::Linear, [1, m, w[1], w[0]])
                }
                _ if x.len() >= 3 && w.len() >= 3 => {
                    let (k, m, n) = (x[x.len() - 1], x[x.len() - 2], w[w.len() - 1]);
                    if w[w.len() - 2] != k {
                        return Err(format!("batched shapes {x:?} × {w:?} do not chain"));
                    }
                    let b = numel(&x[..x.len() - 2]).ok_or("shape overflows")?;
                    (OpClass::Bmm, [b, m, n, k])
                }
                _ => return Err(format!("matmul of shapes {x:?} × {w:?} is neither a GEMM nor a batched GEMM")),
            }
        }
        OpClass::LayerNorm | OpClass::RmsNorm => {
            let x = t(0)?;
            let h = match a.tensor(2) {
                Some(w) => numel(w).ok_or("shape overflows")?,
                None => last(x),
            };
            let [b, h] = rows(x, h)?;
            (class, [b, h, 0, 0])
        }
        OpClass::Softmax => {
            let x = t(0)?;
            let rank = x.len() as i64;
            let dim = a
                .concrete
                .get(1)
                .and_then(|c| c.trim().parse::<i64>().ok())
                .map(|d| if d < 0 { d + rank } else { d })
                .filter(|d| (0..rank).contains(d))
                .map(|d| d as usize)
                .unwrap_or(x.len() - 1);
            let [b, h] = rows(x, x[dim])?;
            (class, [b, h, 0, 0])
        }
        OpClass::Gelu | OpClass::FillMask | OpClass::FusedSoftmax | OpClass::Swiglu | OpClass::Rope => {
            let x = t(0)?;
            let [b, h] = rows(x, last(x))?;
            (class, [b, h, 0, 0])
        }
        OpClass::Elementwise => {
            let tensors: Vec<&[u64]> = (0..a.dims.len()).filter_map(|i| a.tensor(i)).collect();
            let largest =
                tensors.iter().max_by_key(|d| numel(d).unwrap_or(u64::MAX)).ok_or("no tensor input in Input Dims")?;
            let [b, h] = rows(largest, last(largest))?;
            (class, [b, h, tensors.len() as u64, 0])
        }
        OpClass::Embedding => {
            let (w, idx) = (t(0)?, t(1)?);
            if w.len() != 2 {
                return Err(format!("embedding weight {w:?} is not 2-D"));
            }
            (class, [numel(idx).ok_or("shape overflows")?, w[0], w[1], 0])
        }
        OpClass::CrossEntropy => {
            let x = t(0)?;
            let (tokens, v) = match x.len() {
                1 => (1, x[0]),
                2 => (x[0], x[1]),
                _ => (x[0].checked_mul(numel(&x[2..]).ok_or("shape overflows")?).ok_or("shape overflows")?, x[1]),
            };
            (class, [tokens, v, 0, 0])
        }
        OpClass::FlashAttention => {
            let q = t(0)?;
            if q.len() != 4 {
                return Err(format!("attention query {q:?} is not 4-D (variable-length batches are not modeled)"));
            }
            if base.contains("scaled_dot_product") {
                (class, [q[0], q[2], q[1], q[3]])
            } else {
                (class, [q[0], q[1], q[2], q[3]])
            }
        }
        OpClass::Optimizer => return Err("optimizer ops are not read from traces".into()),
        OpClass::AttentionPrefill
        | OpClass::AttentionDecode
        | OpClass::Moe
        | OpClass::Quantize
        | OpClass::QuantizeScale => return Err(format!("{class} (a serving operator) is not read from traces")),
    };
    // Traces give at most four dims (flash attention's optional fifth, G, stays 0 = A).
    let n = out.0.dim_names().len().min(4);
    Ok((out.0, positive(out.1, n)?))
}

/// Linear backward dims when the forward op is not in the trace: M, N from the gradient (`grad_out` [M, N]) and K
/// from one of the two gradient GEMMs, `[M,N]·[N,K]` (input gradient) or `[K,M]·[M,N]` (weight gradient).
pub(super) fn linear_backward_dims(grad_out: &[u64], a: &[u64], b: &[u64]) -> Option<[u64; 4]> {
    if grad_out.is_empty() || a.len() != 2 || b.len() != 2 {
        return None;
    }
    let n = last(grad_out);
    let m = numel(&grad_out[..grad_out.len() - 1])?;
    let k = if a == [m, n] && b[0] == n {
        b[1]
    } else if b == [m, n] && a[1] == m {
        a[0]
    } else {
        return None;
    };
    (m > 0 && n > 0 && k > 0).then_some([1, m, n, k])
}

/// Precision of a PyTorch type name (`float`, `c10::BFloat16`, `c10::Half`, `double`, `c10::Float8_e4m3fn`, or the
/// `ScalarType` spelling `Float`, `BFloat16`, …).
pub(super) fn precision(type_name: &str) -> Option<Precision> {
    let t = type_name.trim().trim_start_matches("c10::").to_ascii_lowercase();
    Some(match t.as_str() {
        "float" | "float32" => Precision::Fp32,
        "double" | "float64" => Precision::Fp64,
        "half" | "float16" => Precision::Fp16,
        "bfloat16" => Precision::Bf16,
        t if t.starts_with("float8") => Precision::Fp8,
        _ => return None,
    })
}

/// Bytes per element of a PyTorch type name; `None` for unknown or non-tensor types.
pub(super) fn type_bytes(type_name: &str) -> Option<u64> {
    if let Some(p) = precision(type_name) {
        return Some(p.bytes() as u64);
    }
    let t = type_name.trim().trim_start_matches("c10::").to_ascii_lowercase();
    Some(match t.as_str() {
        "long" | "long int" | "int64" | "int64_t" | "long long" | "unsigned long" => 8,
        "int" | "int32" | "unsigned int" => 4,
        "short" | "int16" => 2,
        "signed char" | "unsigned char" | "char" | "bool" | "byte" | "int8" | "uint8" => 1,
        "complex<float>" | "complexfloat" => 8,
        "complex<double>" | "complexdouble" => 16,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(dims: &[&[u64]]) -> OpArgs {
        OpArgs {
            has_dims: true,
            dims: dims.iter().map(|d| Some(d.to_vec())).collect(),
            types: vec!["c10::BFloat16".into()],
            ..Default::default()
        }
    }

    #[test]
    fn names_map_to_classes() {
        assert_eq!(base_name("autograd::engine::evaluate_function: NativeLayerNormBackward0"), "native_layer_norm");
        assert_eq!(base_name("aten::_softmax"), "softmax");
        assert_eq!(base_name("aten::add_"), "add");
        assert_eq!(base_name("FlashAttnFuncBackward"), "flash_attn_func");
        assert_eq!(op_class_of("AddmmBackward0"), Some(OpClass::Linear));
        assert_eq!(op_class_of("aten::scaled_dot_product_attention"), Some(OpClass::FlashAttention));
        assert_eq!(op_class_of("ScaledDotProductEfficientAttentionBackward0"), Some(OpClass::FlashAttention));
        assert_eq!(op_class_of("aten::nll_loss_forward"), Some(OpClass::CrossEntropy));
        assert_eq!(op_class_of("aten::relu_"), Some(OpClass::Elementwise));
        assert_eq!(op_class_of("aten::_foreach_add_"), None);
        assert_eq!(op_class_of("aten::cudnn_convolution"), None);
        assert_eq!(op_class_of("TBackward0"), None);
        assert!(is_backward("MseLossBackward0") && !is_backward("aten::mm"));
    }

    #[test]
    fn dims_per_class() {
        let lin = args(&[&[8, 512, 1024], &[4096, 1024], &[4096]]);
        assert_eq!(dims_for(OpClass::Linear, "aten::linear", &lin), Ok((OpClass::Linear, [1, 4096, 4096, 1024])));
        let addmm = args(&[&[128], &[5, 128], &[128, 64]]);
        assert_eq!(dims_for(OpClass::Linear, "aten::addmm", &addmm), Ok((OpClass::Linear, [1, 5, 64, 128])));
        let mm = args(&[&[128, 5], &[5, 128]]);
        assert_eq!(dims_for(OpClass::Linear, "aten::mm", &mm), Ok((OpClass::Linear, [1, 128, 128, 5])));
        let bmm = args(&[&[32, 2048, 128], &[32, 128, 2048]]);
        assert_eq!(dims_for(OpClass::Bmm, "aten::bmm", &bmm), Ok((OpClass::Bmm, [32, 2048, 2048, 128])));
        let mat = args(&[&[4, 8, 16, 32], &[4, 8, 32, 16]]);
        assert_eq!(dims_for(OpClass::Linear, "aten::matmul", &mat), Ok((OpClass::Bmm, [32, 16, 16, 32])));
        let ln = args(&[&[8, 512, 1024], &[], &[1024], &[1024]]);
        assert_eq!(dims_for(OpClass::LayerNorm, "aten::layer_norm", &ln), Ok((OpClass::LayerNorm, [4096, 1024, 0, 0])));
        let mut sm = args(&[&[8, 16, 512, 256], &[], &[]]);
        sm.concrete = vec!["".into(), "2".into(), "False".into()];
        assert_eq!(dims_for(OpClass::Softmax, "aten::_softmax", &sm), Ok((OpClass::Softmax, [32768, 512, 0, 0])));
        let add = args(&[&[128], &[5, 128], &[]]);
        assert_eq!(dims_for(OpClass::Elementwise, "aten::add", &add), Ok((OpClass::Elementwise, [5, 128, 2, 0])));
        let emb = args(&[&[50304, 1024], &[8, 512]]);
        assert_eq!(
            dims_for(OpClass::Embedding, "aten::embedding", &emb),
            Ok((OpClass::Embedding, [4096, 50304, 1024, 0]))
        );
        let ce = args(&[&[4096, 50304], &[4096]]);
        assert_eq!(
            dims_for(OpClass::CrossEntropy, "aten::nll_loss_nd", &ce),
            Ok((OpClass::CrossEntropy, [4096, 50304, 0, 0]))
        );
        let sdpa = args(&[&[8, 16, 2048, 64], &[8, 16, 2048, 64], &[8, 16, 2048, 64]]);
        assert_eq!(
            dims_for(OpClass::FlashAttention, "aten::scaled_dot_product_attention", &sdpa),
            Ok((OpClass::FlashAttention, [8, 2048, 16, 64]))
        );
        assert!(dims_for(OpClass::Linear, "aten::linear", &OpArgs::default()).unwrap_err().contains("record_shapes"));
        assert!(dims_for(OpClass::Linear, "aten::mm", &args(&[&[2, 3], &[4, 5]])).is_err());
        assert!(dims_for(OpClass::Gelu, "aten::gelu", &args(&[&[0, 3]])).is_err());
        assert!(dims_for(OpClass::Elementwise, "aten::mul", &args(&[&[u64::MAX, 3]])).is_err());
    }

    #[test]
    fn linear_backward_from_gradient_gemms() {
        assert_eq!(linear_backward_dims(&[2048, 2048], &[2048, 2048], &[2048, 256]), Some([1, 2048, 2048, 256]));
        assert_eq!(linear_backward_dims(&[5, 128], &[128, 5], &[5, 128]), Some([1, 5, 128, 128]));
        assert_eq!(linear_backward_dims(&[5, 128], &[3, 3], &[3, 3]), None);
        assert_eq!(precision("c10::BFloat16"), Some(Precision::Bf16));
        assert_eq!(type_bytes("signed char"), Some(1));
        assert_eq!(type_bytes("long int"), Some(8));
        assert_eq!(type_bytes("Scalar"), None);
    }
}
