-- +goose Up
-- The agent's own tables (docs/architecture.md "Three daemons, one database": written only by
-- oikos-agent). A session is one task an operator or an external agent works on; its id is a
-- string a client may choose (a chat client's id, an MCP session id).

CREATE TABLE agent_sessions (
    id          text PRIMARY KEY CHECK (id <> '' AND length(id) <= 128),
    -- actor: the token name that opened it; source: chat (Nomos's loop) or mcp.
    actor       text NOT NULL DEFAULT '',
    source      text NOT NULL DEFAULT 'chat' CHECK (source IN ('chat', 'mcp')),
    title       text NOT NULL DEFAULT '',
    goal        text NOT NULL DEFAULT '',
    -- task: the slug of the graph's task entity for the current goal ('' before set_goal).
    task        text NOT NULL DEFAULT '',
    status      text NOT NULL DEFAULT 'executing'
                CHECK (status IN ('executing', 'awaiting_input', 'completed', 'failed', 'abandoned')),
    -- awaiting: what an awaiting_input task waits on: an approval (only the api's decision
    -- moves it on, and the idle sweep never closes it) or an answer to a question.
    awaiting    text NOT NULL DEFAULT '' CHECK (awaiting IN ('', 'approval', 'question')),
    outcome     text NOT NULL DEFAULT '' CHECK (outcome IN ('', 'success', 'partial', 'failed')),
    summary     text NOT NULL DEFAULT '',
    blocker     text NOT NULL DEFAULT '',
    -- plan_generation: the current plan's generation (0: no plan proposed yet).
    plan_generation int NOT NULL DEFAULT 0,
    -- plan_proposed_at: when the current generation was proposed (the api proves a chat
    -- assent to the plan is newer than it).
    plan_proposed_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    closed_at   timestamptz
);
CREATE INDEX agent_sessions_status_idx ON agent_sessions (status, updated_at);
CREATE INDEX agent_sessions_closed_idx ON agent_sessions (closed_at) WHERE closed_at IS NOT NULL;

CREATE TABLE session_messages (
    id          bigserial PRIMARY KEY,
    session_id  text NOT NULL REFERENCES agent_sessions(id) ON DELETE CASCADE,
    role        text NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'note')),
    content     text NOT NULL DEFAULT '',
    -- api_message_id: the api's own record of an operator's chat message (chat assent).
    api_message_id text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX session_messages_session_idx ON session_messages (session_id, id);

-- One row per tool call, written when it starts and completed when it ends.
CREATE TABLE tool_calls (
    id           text PRIMARY KEY,
    session_id   text NOT NULL REFERENCES agent_sessions(id) ON DELETE CASCADE,
    turn         text NOT NULL DEFAULT '',
    name         text NOT NULL,
    arguments    jsonb NOT NULL DEFAULT '{}'::jsonb,
    result       text NOT NULL DEFAULT '',
    is_error     boolean NOT NULL DEFAULT false,
    render       text NOT NULL DEFAULT '',
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);
CREATE INDEX tool_calls_session_idx ON tool_calls (session_id, started_at);

CREATE TABLE plan_steps (
    session_id  text NOT NULL REFERENCES agent_sessions(id) ON DELETE CASCADE,
    generation  int NOT NULL CHECK (generation > 0),
    idx         int NOT NULL CHECK (idx >= 0),
    text        text NOT NULL,
    status      text NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'running', 'done', 'skipped', 'replaced')),
    note        text NOT NULL DEFAULT '',
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, generation, idx)
);

CREATE TABLE session_questions (
    id          bigserial PRIMARY KEY,
    session_id  text NOT NULL REFERENCES agent_sessions(id) ON DELETE CASCADE,
    question    text NOT NULL,
    options     jsonb NOT NULL DEFAULT '[]'::jsonb,
    answer      text NOT NULL DEFAULT '',
    asked_at    timestamptz NOT NULL DEFAULT now(),
    answered_at timestamptz
);
CREATE INDEX session_questions_session_idx ON session_questions (session_id, id);

-- What the agent did, with the entity it concerns (BEHAVIOURS A11). entity is the slug the
-- tool named; entity_id is filled when the api resolved it.
CREATE TABLE agent_activity (
    id          bigserial PRIMARY KEY,
    session_id  text NOT NULL REFERENCES agent_sessions(id) ON DELETE CASCADE,
    at          timestamptz NOT NULL DEFAULT now(),
    kind        text NOT NULL,
    summary     text NOT NULL DEFAULT '',
    entity      text NOT NULL DEFAULT '',
    entity_id   uuid
);
CREATE INDEX agent_activity_session_idx ON agent_activity (session_id, id);
CREATE INDEX agent_activity_entity_idx ON agent_activity (entity, at) WHERE entity <> '';

-- +goose Down
DROP TABLE agent_activity;
DROP TABLE session_questions;
DROP TABLE plan_steps;
DROP TABLE tool_calls;
DROP TABLE session_messages;
DROP TABLE agent_sessions;
