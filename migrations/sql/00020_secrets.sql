-- +goose Up
-- Secrets set with `oikos secret set` (issue #31): each value sealed with AES-256-GCM under
-- OIKOS_SECRETS_KEY, a key the daemons hold and the database never sees, so a dump or a
-- backup of this table alone reveals nothing. The name is the AEAD's associated data: a
-- ciphertext copied onto another name does not open. key_id (the first bytes of the key's
-- SHA-256) tells a daemon started with another key apart from a corrupt row. The api writes
-- (audited, name only); the agent and the scheduler read at the point of use.
CREATE TABLE secrets (
    name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9_-][a-z0-9_.-]{0,127}$'),
    ciphertext bytea NOT NULL,
    key_id     text NOT NULL,
    set_at     timestamptz NOT NULL DEFAULT now(),
    set_by     text NOT NULL
);

-- A notification channel's URL or signing secret may name one: secret:NAME.
ALTER TABLE notification_channels DROP CONSTRAINT notification_channels_url_ref_check,
    ADD CONSTRAINT notification_channels_url_ref_check CHECK (url_ref ~ '^(env|file|stored|secret):.+'),
    DROP CONSTRAINT notification_channels_secret_ref_check,
    ADD CONSTRAINT notification_channels_secret_ref_check CHECK (secret_ref ~ '^(env|file|stored|secret):.+');

-- +goose Down
ALTER TABLE notification_channels DROP CONSTRAINT notification_channels_url_ref_check,
    ADD CONSTRAINT notification_channels_url_ref_check CHECK (url_ref ~ '^(env|file|stored):.+'),
    DROP CONSTRAINT notification_channels_secret_ref_check,
    ADD CONSTRAINT notification_channels_secret_ref_check CHECK (secret_ref ~ '^(env|file|stored):.+');
DROP TABLE secrets;
