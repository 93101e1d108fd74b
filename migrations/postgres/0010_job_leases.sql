-- PostgreSQL form of migrations/sqlite/0010_job_leases.sql: the replica running a job (`owner`) and until when its
-- claim holds (`lease_until`, RFC 3339 UTC), renewed by the runner's heartbeat; an expired lease is claimed again.
ALTER TABLE jobs ADD COLUMN owner TEXT;
ALTER TABLE jobs ADD COLUMN lease_until TEXT;
