-- +goose Up

-- A message's token_estimate is what the context window counts it as (contextwin's
-- EstimateMessage: about 4 bytes per token of its text, a tool call's name and arguments and
-- a tool result's content, 1,000 per image; agentry's own notes and messages without parts by
-- their content), stored with the message so that a turn never re-reads the parts of its
-- window to count them. Rows written before were counted by their text alone.
UPDATE messages m SET token_estimate = CASE
    WHEN m.role = 'SYSTEM' OR jsonb_typeof(m.parts) <> 'array' OR jsonb_array_length(m.parts) = 0
        THEN (octet_length(m.content) + 3) / 4
    ELSE (SELECT coalesce(sum(CASE b->>'type'
            WHEN 'image' THEN 1000
            WHEN 'tool_use' THEN (octet_length(coalesce(b->>'name', '')) + 3) / 4
                               + (octet_length(coalesce((b->'input')::text, '')) + 3) / 4
            WHEN 'tool_result' THEN (octet_length(coalesce(b->>'content', '')) + 3) / 4
            ELSE (octet_length(coalesce(b->>'text', '')) + 3) / 4 END), 0)::integer
          FROM jsonb_array_elements(m.parts) AS b)
END;

-- +goose Down
SELECT 1;
