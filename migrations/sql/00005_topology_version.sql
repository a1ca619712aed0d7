-- +goose Up
-- A transactional count of changes to the graph's topology, so a process that keeps the
-- current edges in memory (the api's blast-radius index) can tell, with one primary-key read,
-- whether any relationship change has committed since its copy was taken — whatever wrote
-- it: the graph service, a bulk load, a cascade, a hand-written statement.
--
-- `changes` grows by the number of relationships rows inserted, deleted, or updated in a way
-- that matters to topology (id, type, ends, or whether the edge is current); any TRUNCATE
-- counts as one. The graph service emits one relationship.created or relationship.ended event
-- per such row, so a reader can match the increase against those events and apply them;
-- any difference means something wrote relationships without an event, and the reader
-- rebuilds its copy.
--
-- Counting is split in two so that the lock on the single counter row is taken only at
-- commit: a statement-level trigger counts the statement's rows into topology_pending, and a
-- deferred constraint trigger on that table adds them to the counter when the transaction
-- commits. Taking the row lock at the relationship write instead would order it before the
-- entity row locks and the outbox lock the same transaction takes later, which could
-- deadlock against a transaction taking them in the other order.
CREATE TABLE topology_version (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    changes    bigint NOT NULL DEFAULT 0
);
INSERT INTO topology_version DEFAULT VALUES;

-- Rows exist only inside the transaction that wrote them: the deferred trigger deletes each.
CREATE TABLE topology_pending (
    id  bigserial PRIMARY KEY,
    n   bigint NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION oikos_topology_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT count(*) INTO n FROM new_rows;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT count(*) INTO n FROM old_rows;
    ELSIF TG_OP = 'UPDATE' THEN
        -- An attribute-only update leaves the topology as it was.
        SELECT count(*) INTO n FROM (
            SELECT id, type, source_id, target_id, valid_to IS NULL FROM new_rows
            EXCEPT ALL
            SELECT id, type, source_id, target_id, valid_to IS NULL FROM old_rows) d;
    ELSE
        n := 1; -- TRUNCATE: no rows to count; any non-zero change forces a rebuild.
    END IF;
    IF n > 0 THEN
        INSERT INTO topology_pending (n) VALUES (n);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION oikos_topology_flush() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE topology_version SET changes = changes + NEW.n;
    DELETE FROM topology_pending WHERE id = NEW.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER relationships_topology_insert AFTER INSERT ON relationships
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION oikos_topology_count();
CREATE TRIGGER relationships_topology_update AFTER UPDATE ON relationships
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION oikos_topology_count();
CREATE TRIGGER relationships_topology_delete AFTER DELETE ON relationships
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION oikos_topology_count();
CREATE TRIGGER relationships_topology_truncate AFTER TRUNCATE ON relationships
    FOR EACH STATEMENT EXECUTE FUNCTION oikos_topology_count();
CREATE CONSTRAINT TRIGGER topology_pending_flush AFTER INSERT ON topology_pending
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION oikos_topology_flush();

-- +goose Down
DROP TRIGGER topology_pending_flush ON topology_pending;
DROP TRIGGER relationships_topology_truncate ON relationships;
DROP TRIGGER relationships_topology_delete ON relationships;
DROP TRIGGER relationships_topology_update ON relationships;
DROP TRIGGER relationships_topology_insert ON relationships;
DROP FUNCTION oikos_topology_flush();
DROP FUNCTION oikos_topology_count();
DROP TABLE topology_pending;
DROP TABLE topology_version;
