-- Whose kernels measured an operator sample (src/op/kernels.rs): `engine` is vllm, sglang or trtllm — the sample's
-- `backend` attribute (aiconfigurator's column), else its `framework` attribute (the collector's label) — or '' for
-- an engine-neutral sample; `kernel_source` the kernel or code path that ran it (aiconfigurator's `kernel_source`,
-- '' when unknown); `compute_dtype` the precision the kernel computed in when the sample's `dtype` names another
-- (attention: `attn_dtype`, the sample's dtype being the KV cache's), '' otherwise. Models are trained per engine
-- (their keys carry it) and, where one shape was measured by several kernels, on the kernel the engine runs.
ALTER TABLE op_samples ADD COLUMN engine TEXT NOT NULL DEFAULT '';
ALTER TABLE op_samples ADD COLUMN kernel_source TEXT NOT NULL DEFAULT '';
ALTER TABLE op_samples ADD COLUMN compute_dtype TEXT NOT NULL DEFAULT '';
UPDATE op_samples SET
    engine = CASE
        WHEN lower(json_extract(attributes, '$.backend')) IN ('vllm', 'sglang', 'trtllm')
            THEN lower(json_extract(attributes, '$.backend'))
        WHEN lower(json_extract(attributes, '$.backend')) IN ('tensorrt-llm', 'tensorrt_llm', 'trt-llm', 'trt_llm')
            THEN 'trtllm'
        WHEN lower(json_extract(attributes, '$.framework')) IN ('vllm', 'sglang', 'trtllm')
            THEN lower(json_extract(attributes, '$.framework'))
        ELSE '' END,
    kernel_source = COALESCE(json_extract(attributes, '$.kernel_source'), ''),
    compute_dtype = CASE lower(COALESCE(json_extract(attributes, '$.attn_dtype'), ''))
        WHEN 'bfloat16' THEN 'bf16' WHEN 'bf16' THEN 'bf16'
        WHEN 'float16' THEN 'fp16' WHEN 'fp16' THEN 'fp16' WHEN 'half' THEN 'fp16'
        WHEN 'fp8' THEN 'fp8' WHEN 'float8' THEN 'fp8' WHEN 'e4m3' THEN 'fp8'
        ELSE '' END;
DROP INDEX op_samples_by_key;
CREATE INDEX op_samples_by_key ON op_samples (op, phase, dtype, engine, gpu);
