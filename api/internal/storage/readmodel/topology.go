package readmodel

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The reads of the api's in-memory dependency index (api/internal/topology): the count of
// relationship changes topology_version keeps, the relationship events after a cursor, and a
// snapshot of the current dependency edges.

const (
	// qTopologyEvents reads the count and, in the same statement (one snapshot), up to $3
	// events of the types $2 after the id $1.
	qTopologyEvents = `SELECT v.changes, e.id, e.type, e.payload
		FROM topology_version v LEFT JOIN LATERAL (
			SELECT id, type, payload FROM events WHERE type = ANY($2) AND id > $1 ORDER BY id LIMIT $3
		) e ON true ORDER BY e.id`
	// qTopologyCursor reads the count and the outbox's newest id.
	qTopologyCursor = `SELECT (SELECT changes FROM topology_version), (SELECT coalesce(max(id), 0) FROM events)`
	// qTopologyEdges reads up to $2 current edges of the types $1.
	qTopologyEdges = `SELECT id, type, source_id, target_id FROM relationships
		WHERE valid_to IS NULL AND type = ANY($1) LIMIT $2`
)

// TopologyVersion returns topology_version.changes.
func (r *Reader) TopologyVersion(ctx context.Context) (int64, error) {
	var changes int64
	err := r.db.QueryRow(ctx, qTopologyVersion).Scan(&changes)
	return changes, err
}

// TopologyEvent is a relationship event of the outbox, its payload undecoded.
type TopologyEvent struct {
	ID      int64
	Type    string
	Payload []byte
}

// TopologyEvents returns topology_version.changes and up to limit events of the types after
// the event id after, oldest first, read in one statement.
func (r *Reader) TopologyEvents(ctx context.Context, after int64, types []string, limit int) (int64, []TopologyEvent, error) {
	rows, err := r.db.Query(ctx, qTopologyEvents, after, types, limit)
	if err != nil {
		return 0, nil, err
	}
	var changes int64
	var evs []TopologyEvent
	var id *int64
	var typ *string
	var payload []byte
	_, err = pgx.ForEachRow(rows, []any{&changes, &id, &typ, &payload}, func() error {
		if id == nil {
			return nil
		}
		evs = append(evs, TopologyEvent{ID: *id, Type: *typ, Payload: payload})
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return changes, evs, nil
}

// TopologyEdge is a current relationship of a dependency type: its id and ends.
type TopologyEdge struct {
	ID, Source, Target [16]byte
	Type               string
}

// TopologySnapshot reads, from one repeatable-read snapshot, topology_version.changes, the
// outbox's newest event id and up to limit current edges of the types, calling each for
// every edge (an error of each stops the read). The Reader must run on the pool.
func (r *Reader) TopologySnapshot(ctx context.Context, types []string, limit int, each func(TopologyEdge) error) (changes, cursor int64, err error) {
	tx, err := r.snapshot(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := tx.QueryRow(ctx, qTopologyCursor).Scan(&changes, &cursor); err != nil {
		return 0, 0, fmt.Errorf("read version: %w", err)
	}
	rows, err := tx.Query(ctx, qTopologyEdges, types, limit)
	if err != nil {
		return 0, 0, fmt.Errorf("read edges: %w", err)
	}
	var e TopologyEdge
	var eachErr error
	_, err = pgx.ForEachRow(rows, []any{&e.ID, &e.Type, &e.Source, &e.Target}, func() error {
		if eachErr == nil {
			eachErr = each(e)
		}
		return nil
	})
	if err == nil {
		err = eachErr
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read edges: %w", err)
	}
	return changes, cursor, nil
}
