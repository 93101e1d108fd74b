-- Jobs across replicas: the replica running a job (`owner`) and until when its claim holds (`lease_until`, RFC 3339
-- UTC), renewed by the runner's heartbeat. A running job whose lease expired was abandoned (its replica died) and is
-- claimed again by another replica.
ALTER TABLE jobs ADD COLUMN owner TEXT;
ALTER TABLE jobs ADD COLUMN lease_until TEXT;
