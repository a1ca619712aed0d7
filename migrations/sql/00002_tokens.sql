-- +goose Up
-- Bearer tokens of the api. Only a SHA-256 of each token is stored: a leaked table does not
-- leak a usable token. A token is revoked by setting revoked_at, never deleted, so the audit
-- log's actor names stay resolvable.
CREATE TABLE api_tokens (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name          text NOT NULL UNIQUE CHECK (name <> ''),
    role          text NOT NULL CHECK (role IN ('operator', 'agent', 'readonly')),
    -- hex sha256 of the whole token string ("oik_" + 43 base64url characters).
    token_hash    text NOT NULL UNIQUE CHECK (length(token_hash) = 64),
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz
);

-- +goose Down
DROP TABLE api_tokens;
