-- The part of River's schema agentry's own queries use (River's migrations create the real
-- table; this file only tells sqlc its shape).
CREATE TABLE river_job (
    id           bigint PRIMARY KEY,
    args         jsonb NOT NULL,
    kind         text NOT NULL,
    max_attempts smallint NOT NULL,
    metadata     jsonb NOT NULL,
    priority     smallint NOT NULL,
    queue        text NOT NULL,
    state        text NOT NULL,
    scheduled_at timestamptz NOT NULL,
    tags         varchar(255)[] NOT NULL,
    attempted_at timestamptz,
    attempted_by text[]
);

CREATE SEQUENCE river_job_id_seq OWNED BY river_job.id;
