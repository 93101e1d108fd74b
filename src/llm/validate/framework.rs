//! What the framework that runs a validated configuration allows ([`with_framework`]).

use crate::hw::Precision;
use crate::llm::config::{bad, ConfigError, TrainingConfig};
use crate::llm::framework::{moe_under, Framework, FrameworkTraits};

/// `cfg` run by `framework` with the options it was validated with (a mixture-of-experts model's dispatcher and
/// options as [`moe_under`] resolves them). Errors: `parallelism.torch_compile` with a framework that does not
/// compile (Megatron, NeMo and DeepSpeed run Transformer Engine's or Megatron's fused kernels instead);
/// [`moe_under`]'s; `parallelism.cp_comm_type` as [`crate::llm::cp::CpComm::resolve`] refuses it (Ulysses under
/// torchtitan). The context-parallel kind becomes the framework's default where the request gave none.
pub fn with_framework(mut cfg: TrainingConfig, framework: Framework) -> Result<TrainingConfig, ConfigError> {
    if cfg.framework_options.torch_compile == Some(true) && !matches!(framework, Framework::Torchtitan | Framework::Hf)
    {
        return Err(bad(
            "parallelism.torch_compile",
            format!(
                "{} runs fused kernels without torch.compile: torch_compile applies to torchtitan and hf",
                framework.as_str()
            ),
        ));
    }
    let graphs = cfg.framework_options.cuda_graphs.unwrap_or_default();
    if graphs != crate::llm::cuda_graphs::CudaGraphs::None && !framework.has_cuda_graphs() {
        return Err(bad(
            "parallelism.cuda_graphs",
            format!(
                "{} does not capture training steps as CUDA graphs: cuda_graphs {} applies to megatron and nemo",
                framework.as_str(),
                graphs.as_str()
            ),
        ));
    }
    if cfg.fp8_param_gather && !matches!(framework, Framework::Megatron | Framework::Nemo | Framework::Torchtitan) {
        return Err(bad(
            "parallelism.fp8_param_gather",
            format!(
                "{} gathers 16-bit parameters: fp8_param_gather applies to megatron, nemo (--fp8-param-gather) and \
                 torchtitan (enable_fsdp_float8_all_gather)",
                framework.as_str()
            ),
        ));
    }
    if let Some(moe) = cfg.moe.as_mut() {
        moe_under(framework, moe, cfg.framework_options.moe_token_dispatcher)?;
    }
    if cfg.cp > 1 {
        cfg.cp_comm = cfg.cp_comm.resolve(framework)?;
    }
    cfg.framework = FrameworkTraits::of(framework, &cfg.framework_options, cfg.precision == Precision::Bf16);
    Ok(cfg)
}
