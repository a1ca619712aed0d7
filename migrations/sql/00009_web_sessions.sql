-- +goose Up
-- The dashboard's sign-in sessions (api/internal/websession). An operator pastes a token once;
-- the api answers with an HttpOnly cookie whose secret only this table's hash can check. A
-- session stands for its token: it dies with it (ON DELETE CASCADE, and a revoked token is
-- checked on every request), at expires_at, or when signed out (revoked_at).
CREATE TABLE web_sessions (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- hex sha256 of the cookie's secret; the secret itself is never stored.
    secret_hash  text NOT NULL UNIQUE CHECK (length(secret_hash) = 64),
    token_id     uuid NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    user_agent   text NOT NULL DEFAULT ''
);
CREATE INDEX web_sessions_token_id ON web_sessions (token_id);
CREATE INDEX web_sessions_expires_at ON web_sessions (expires_at);

-- +goose Down
DROP TABLE web_sessions;
