-- +goose Up
-- Notifications (api/internal/notify): channels an operator subscribes by URL, rules that say
-- which notifications go to a channel, and the deliveries the api makes from the events
-- outbox, each attempt recorded. Only the api writes these tables.

-- A channel's URL and signing secret are never stored in the channel row (E5): url_ref and
-- secret_ref are references, `env:NAME` and `file:/path` read at send time, or `stored:<id>`
-- for a value an operator sent inline, kept in notification_secrets, which no endpoint
-- returns. url_redacted is what the api shows instead: the scheme and the host.
CREATE TABLE notification_secrets (
    id          uuid PRIMARY KEY,
    value       text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE notification_channels (
    id            uuid PRIMARY KEY,
    name          text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 64),
    kind          text NOT NULL CHECK (kind IN ('shoutrrr', 'webhook')),
    url_ref       text NOT NULL CHECK (url_ref ~ '^(env|file|stored):.+'),
    url_redacted  text NOT NULL DEFAULT '',
    secret_ref    text CHECK (secret_ref ~ '^(env|file|stored):.+'),
    -- Quiet hours, local to timezone; a window may cross midnight (22:00-07:00).
    quiet_start   time,
    quiet_end     time,
    timezone      text NOT NULL DEFAULT 'UTC',
    enabled       boolean NOT NULL DEFAULT true,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    last_ok_at    timestamptz,
    -- Redacted: never the URL's userinfo, path or query.
    last_error    text,
    CHECK ((quiet_start IS NULL) = (quiet_end IS NULL)),
    CHECK (kind <> 'webhook' OR secret_ref IS NOT NULL)
);

CREATE TABLE notification_rules (
    id            uuid PRIMARY KEY,
    channel_id    uuid NOT NULL REFERENCES notification_channels (id) ON DELETE CASCADE,
    kinds         text[] NOT NULL CHECK (cardinality(kinds) > 0),
    min_severity  text NOT NULL DEFAULT 'info' CHECK (min_severity IN ('info', 'warning', 'critical')),
    -- Empty: any type, any tag.
    entity_types  text[] NOT NULL DEFAULT '{}',
    tags          text[] NOT NULL DEFAULT '{}',
    enabled       boolean NOT NULL DEFAULT true,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notification_rules_channel_idx ON notification_rules (channel_id);

-- How far the api has read the outbox for notifications: a restart resumes here, so nothing
-- is lost, and the deliveries' idempotency keys make a re-read add nothing.
CREATE TABLE notification_cursor (
    name           text PRIMARY KEY,
    last_event_id  bigint NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- One notification of one event to one channel. idempotency_key is "<event id>:<channel id>".
-- status: pending (due at next_attempt_at; a claimed one is leased by pushing it forward),
-- sent, failed (every attempt failed), suppressed (recorded, not sent: a muted incident, a
-- disabled channel; last_error says why).
CREATE TABLE notification_deliveries (
    id               uuid PRIMARY KEY,
    idempotency_key  text NOT NULL UNIQUE,
    channel_id       uuid NOT NULL REFERENCES notification_channels (id) ON DELETE CASCADE,
    rule_id          uuid REFERENCES notification_rules (id) ON DELETE SET NULL,
    event_id         bigint NOT NULL,
    event_type       text NOT NULL,
    event_at         timestamptz NOT NULL,
    entity_id        uuid,
    kind             text NOT NULL,
    severity         text NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    title            text NOT NULL,
    body             text NOT NULL,
    link             text NOT NULL DEFAULT '',
    payload          jsonb NOT NULL DEFAULT '{}'::jsonb,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed', 'suppressed')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    sent_at          timestamptz,
    last_error       text
);
CREATE INDEX notification_deliveries_due_idx ON notification_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX notification_deliveries_channel_idx ON notification_deliveries (channel_id, id DESC);

CREATE TABLE notification_attempts (
    id           bigserial PRIMARY KEY,
    delivery_id  uuid NOT NULL REFERENCES notification_deliveries (id) ON DELETE CASCADE,
    at           timestamptz NOT NULL,
    ok           boolean NOT NULL,
    status_code  integer,
    error        text,
    duration_ms  integer NOT NULL
);
CREATE INDEX notification_attempts_delivery_idx ON notification_attempts (delivery_id, id);

-- +goose Down
DROP TABLE notification_attempts;
DROP TABLE notification_deliveries;
DROP TABLE notification_cursor;
DROP TABLE notification_rules;
DROP TABLE notification_channels;
DROP TABLE notification_secrets;
