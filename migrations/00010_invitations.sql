-- +goose Up
-- A membership made for an invited email is pending until the invited person proves the
-- invitation with its token (signUp with invitationToken, or acceptInvitation). Pending
-- memberships grant nothing: login, refresh and API keys ignore them.
ALTER TABLE memberships ADD COLUMN invite_token_hash bytea;
CREATE UNIQUE INDEX memberships_invite_token_key ON memberships (invite_token_hash) WHERE invite_token_hash IS NOT NULL;

-- +goose Down
DROP INDEX memberships_invite_token_key;
ALTER TABLE memberships DROP COLUMN invite_token_hash;
