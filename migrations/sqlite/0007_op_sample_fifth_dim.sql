-- A fifth operator dim: the serving classes (attention_prefill, attention_decode: B, L|C, A, G, D; moe: T, H, F,
-- E, K) need five (see src/op). Existing rows keep 0, the value of an unused dim.
ALTER TABLE op_samples ADD COLUMN d4 INTEGER NOT NULL DEFAULT 0;
