-- The part of River's schema agentry's own queries read (River's migrations create the real
-- table; this file only tells sqlc its shape).
CREATE TABLE river_job (
    id           bigint PRIMARY KEY,
    state        text NOT NULL,
    attempted_at timestamptz,
    attempted_by text[]
);
