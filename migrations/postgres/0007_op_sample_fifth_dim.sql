-- PostgreSQL form of migrations/sqlite/0007_op_sample_fifth_dim.sql: BIGINT for INTEGER, DOUBLE PRECISION for REAL, BYTEA for BLOB, identity ids, JSON checked by a jsonb cast; timestamps stay RFC 3339 UTC text.
-- A fifth operator dim: the serving classes (attention_prefill, attention_decode: B, L|C, A, G, D; moe: T, H, F,
-- E, K) need five (see src/op). Existing rows keep 0, the value of an unused dim.
ALTER TABLE op_samples ADD COLUMN d4 BIGINT NOT NULL DEFAULT 0;
