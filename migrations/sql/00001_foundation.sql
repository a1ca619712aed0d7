-- +goose Up
-- The foundation schema: the ontology, the graph, health, signals, knowledge, the event outbox,
-- the audit log and idempotency records. Later migrations add tables; this file is never edited
-- once applied.

CREATE TABLE entity_types (
    name             text PRIMARY KEY,
    parent           text REFERENCES entity_types(name) DEFERRABLE INITIALLY DEFERRED,
    abstract         boolean NOT NULL DEFAULT false,
    description      text NOT NULL DEFAULT '',
    -- The attribute schema as declared in ontology.yaml under `attributes` (resolved through is-a).
    attribute_schema jsonb NOT NULL DEFAULT '{}'::jsonb,
    required         text[] NOT NULL DEFAULT '{}',
    states           text[] NOT NULL DEFAULT '{}',
    default_state    text NOT NULL DEFAULT '',
    transitions      jsonb NOT NULL DEFAULT '[]'::jsonb,
    -- Resolved monitoring specs; monitoring_none marks a type that declares it needs none.
    monitoring       jsonb NOT NULL DEFAULT '[]'::jsonb,
    monitoring_none  boolean NOT NULL DEFAULT false,
    updated_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE relationship_types (
    name        text PRIMARY KEY,
    description text NOT NULL DEFAULT '',
    sources     text[] NOT NULL,
    targets     text[] NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE entities (
    id          uuid PRIMARY KEY,
    slug        text NOT NULL UNIQUE,
    type        text NOT NULL REFERENCES entity_types(name),
    name        text NOT NULL,
    state       text NOT NULL,
    attributes  jsonb NOT NULL DEFAULT '{}'::jsonb,
    version     bigint NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT entities_slug_shape CHECK (slug = type || ':' || name)
);
CREATE INDEX entities_type_idx ON entities (type, slug);
CREATE INDEX entities_state_idx ON entities (state);
CREATE INDEX entities_attributes_idx ON entities USING gin (attributes jsonb_path_ops);
CREATE INDEX entities_name_trgm_idx ON entities (lower(name) text_pattern_ops);

CREATE TABLE relationships (
    id          uuid PRIMARY KEY,
    type        text NOT NULL REFERENCES relationship_types(name),
    source_id   uuid NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    target_id   uuid NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    attributes  jsonb NOT NULL DEFAULT '{}'::jsonb,
    valid_from  timestamptz NOT NULL DEFAULT now(),
    valid_to    timestamptz,
    CONSTRAINT relationships_interval CHECK (valid_to IS NULL OR valid_to >= valid_from)
);
-- One current edge per (source, type, target): creation is idempotent.
CREATE UNIQUE INDEX relationships_current_uniq ON relationships (source_id, type, target_id) WHERE valid_to IS NULL;
CREATE INDEX relationships_target_idx ON relationships (target_id, type) WHERE valid_to IS NULL;
CREATE INDEX relationships_source_idx ON relationships (source_id, type) WHERE valid_to IS NULL;

-- Health of monitored entities; written only by the scheduler, keyed by the monitored entity
-- (never by a check's own bookkeeping entity).
CREATE TABLE entity_status (
    entity_id      uuid PRIMARY KEY REFERENCES entities(id) ON DELETE CASCADE,
    health         text NOT NULL DEFAULT 'unknown'
                   CHECK (health IN ('up', 'degraded', 'down', 'unknown', 'stale')),
    reason         text NOT NULL DEFAULT '',
    summary        jsonb NOT NULL DEFAULT '{}'::jsonb,
    last_check_at  timestamptz,
    changed_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX entity_status_health_idx ON entity_status (health);

CREATE TABLE check_defs (
    id                uuid PRIMARY KEY,
    slug              text NOT NULL UNIQUE,
    -- entity_id is the check's own bookkeeping entity (type check); target_id is what it observes.
    entity_id         uuid NOT NULL UNIQUE REFERENCES entities(id) ON DELETE CASCADE,
    target_id         uuid NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    kind              text NOT NULL
                      CHECK (kind IN ('ssh-script', 'http', 'tcp', 'backup-freshness', 'proxmox-guest')),
    config            jsonb NOT NULL DEFAULT '{}'::jsonb,
    interval_seconds  integer NOT NULL CHECK (interval_seconds > 0),
    timeout_seconds   integer NOT NULL CHECK (timeout_seconds > 0),
    enabled           boolean NOT NULL DEFAULT true,
    source            text NOT NULL DEFAULT 'derived' CHECK (source IN ('derived', 'override')),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX check_defs_target_idx ON check_defs (target_id);

CREATE TABLE metric_samples (
    target_id  uuid NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    check_id   uuid REFERENCES check_defs(id) ON DELETE SET NULL,
    name       text NOT NULL,
    value      double precision NOT NULL,
    at         timestamptz NOT NULL
);
CREATE INDEX metric_samples_lookup_idx ON metric_samples (target_id, name, at);
CREATE INDEX metric_samples_at_idx ON metric_samples (at);

CREATE TABLE signals (
    id               uuid PRIMARY KEY,
    kind             text NOT NULL,
    entity_id        uuid REFERENCES entities(id) ON DELETE CASCADE,
    check_id         uuid REFERENCES check_defs(id) ON DELETE SET NULL,
    -- dedup_key identifies the cause; at most one unresolved signal per cause.
    dedup_key        text NOT NULL,
    severity         text NOT NULL DEFAULT 'warning' CHECK (severity IN ('info', 'warning', 'critical')),
    status           text NOT NULL DEFAULT 'open'
                     CHECK (status IN ('open', 'acknowledged', 'muted', 'resolved')),
    summary          text NOT NULL DEFAULT '',
    details          jsonb NOT NULL DEFAULT '{}'::jsonb,
    occurrences      bigint NOT NULL DEFAULT 1,
    first_seen       timestamptz NOT NULL DEFAULT now(),
    last_seen        timestamptz NOT NULL DEFAULT now(),
    muted_until      timestamptz,
    acknowledged_by  text,
    acknowledged_at  timestamptz,
    resolved_at      timestamptz,
    resolved_by      text
);
CREATE UNIQUE INDEX signals_active_uniq ON signals (dedup_key) WHERE status <> 'resolved';
CREATE INDEX signals_entity_idx ON signals (entity_id, status);
CREATE INDEX signals_status_idx ON signals (status, last_seen DESC);

-- array_to_string is only STABLE; tags are plain text, so joining them is immutable in fact and
-- may feed a generated column.
-- +goose StatementBegin
CREATE FUNCTION oikos_join_tags(tags text[]) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_to_string(tags, ' ')
$$;
-- +goose StatementEnd

-- Documents, investigations and runbooks are entities; their text lives here.
CREATE TABLE knowledge_entities (
    entity_id   uuid PRIMARY KEY REFERENCES entities(id) ON DELETE CASCADE,
    kind        text NOT NULL CHECK (kind IN ('document', 'investigation', 'runbook')),
    title       text NOT NULL,
    body        text NOT NULL DEFAULT '',
    tags        text[] NOT NULL DEFAULT '{}',
    updated_at  timestamptz NOT NULL DEFAULT now(),
    search      tsvector GENERATED ALWAYS AS (
                    setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
                    setweight(to_tsvector('english', oikos_join_tags(tags)), 'B') ||
                    setweight(to_tsvector('english', coalesce(body, '')), 'C')
                ) STORED
);
CREATE INDEX knowledge_search_idx ON knowledge_entities USING gin (search);

-- The outbox. Every daemon appends here in the transaction of the change it reports.
CREATE TABLE events (
    id              bigserial PRIMARY KEY,
    at              timestamptz NOT NULL DEFAULT now(),
    type            text NOT NULL,
    entity_id       uuid,
    correlation_id  text NOT NULL DEFAULT '',
    actor           text NOT NULL DEFAULT '',
    payload         jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX events_entity_idx ON events (entity_id, id);
CREATE INDEX events_type_idx ON events (type, id);

-- +goose StatementBegin
CREATE FUNCTION oikos_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A tiny hint only; receivers read the row by id. NOTIFY is transactional, so nothing
    -- uncommitted is announced.
    PERFORM pg_notify('oikos_events', json_build_object('id', NEW.id, 'type', NEW.type)::text);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION oikos_events_notify();

CREATE TABLE audit_log (
    id              bigserial PRIMARY KEY,
    at              timestamptz NOT NULL DEFAULT now(),
    actor           text NOT NULL,
    action          text NOT NULL,
    method          text NOT NULL DEFAULT '',
    path            text NOT NULL DEFAULT '',
    correlation_id  text NOT NULL DEFAULT '',
    entity_id       uuid,
    before          jsonb,
    after           jsonb
);
CREATE INDEX audit_log_entity_idx ON audit_log (entity_id, id);

CREATE TABLE idempotency_keys (
    key           text NOT NULL,
    scope         text NOT NULL,
    request_hash  text NOT NULL,
    status_code   integer NOT NULL,
    response      jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE audit_log;
DROP TRIGGER events_notify ON events;
DROP FUNCTION oikos_events_notify();
DROP TABLE events;
DROP TABLE knowledge_entities;
DROP FUNCTION oikos_join_tags(text[]);
DROP TABLE signals;
DROP TABLE metric_samples;
DROP TABLE check_defs;
DROP TABLE entity_status;
DROP TABLE relationships;
DROP TABLE entities;
DROP TABLE relationship_types;
DROP TABLE entity_types;
