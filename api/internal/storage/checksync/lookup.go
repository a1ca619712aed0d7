package checksync

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
)

// Relationship and entity types the lookups walk.
const (
	relHosts     = "hosts"
	relBacksUpTo = "backs-up-to"
	proxmoxHost  = "proxmox-host"
	attrHost     = "host"
)

// errNoRows marks a lookup that found nothing (as opposed to one that failed).
var errNoRows = errors.New("no rows")

// txLookup answers derivation's graph questions with reads in the caller's transaction.
// Each read runs in a savepoint: in PostgreSQL a failed statement aborts the whole
// transaction, and a monitoring gap must never fail the entity write that triggered it.
// Answers are remembered for the lifetime of the lookup (one sync): derivation asks the same
// question once per check (a guest's four checks all need its host), and one read answering
// all of them is cheaper and more consistent than four (under READ COMMITTED, separate reads
// could give one guest's checks different hosts if an edge changed in between).
type txLookup struct {
	ctx  context.Context
	q    pg.Querier
	o    *ontology.Ontology
	log  zerolog.Logger
	memo map[lookupKey]lookupAnswer
}

// lookupKey is everything an answer depends on: the question, the entity and the host
// attribute (the only attribute a lookup reads).
type lookupKey struct {
	what, id, host string
}

type lookupAnswer struct {
	t  checks.Target
	ok bool
}

func (s *Syncer) lookup(ctx context.Context, q pg.Querier, o *ontology.Ontology) *txLookup {
	return &txLookup{ctx: ctx, q: q, o: o, log: s.log, memo: map[lookupKey]lookupAnswer{}}
}

const targetColumns = `e.id::text, e.slug, e.type, e.name, e.state, e.attributes`

// The graph lookups of derivation: a host by slug ($1) or by name ($1) among the types $2;
// the source of a current edge of type $2 into $1 (hosts, backs-up-to); and, for a whole
// snapshot, every proxmox host (types $1) and every current hosts ($1) and backs-up-to ($2)
// edge.
const (
	qHostBySlug = `SELECT ` + targetColumns + ` FROM entities e WHERE e.slug = $1 AND e.type = ANY($2)`
	qHostByName = `SELECT ` + targetColumns + ` FROM entities e WHERE e.name = $1 AND e.type = ANY($2)
				ORDER BY (e.state = 'destroyed'), e.slug LIMIT 1`
	qEdgeSource = `SELECT ` + targetColumns + ` FROM relationships r JOIN entities e ON e.id = r.source_id
		WHERE r.target_id = $1 AND r.type = $2 AND r.valid_to IS NULL
		ORDER BY (e.state = 'destroyed'), e.slug LIMIT 1`
	qProxmoxHosts = `SELECT ` + targetColumns + ` FROM entities e WHERE e.type = ANY($1)
		ORDER BY (e.state = 'destroyed') DESC, e.slug DESC`
	qHostEdges = `SELECT r.type, r.target_id::text, ` + targetColumns + `
		FROM relationships r JOIN entities e ON e.id = r.source_id
		WHERE r.valid_to IS NULL AND r.type IN ($1, $2)
		ORDER BY (e.state = 'destroyed') DESC, e.slug DESC`
)

func scanTarget(row pgx.Row) (checks.Target, error) {
	var t checks.Target
	err := row.Scan(&t.ID, &t.Slug, &t.Type, &t.Name, &t.State, &t.Attributes)
	return t, err
}

// lookupSavepoint names the savepoint a lookup runs in; lookups never nest. It is a constant
// identifier, never input, so it is safe to write into the statement.
const lookupSavepoint = "oikos_checksync_lookup"

// The savepoint's statements.
const (
	qSavepoint         = `SAVEPOINT ` + lookupSavepoint
	qReleaseSavepoint  = `RELEASE SAVEPOINT ` + lookupSavepoint
	qRollbackSavepoint = `ROLLBACK TO SAVEPOINT ` + lookupSavepoint + `; RELEASE SAVEPOINT ` + lookupSavepoint
)

// one runs a single-row query in a savepoint. SAVEPOINT goes first on its own: a query the
// connection has not prepared yet is parsed (and its tables locked) before anything else in
// its batch runs, so a failure there must already be inside the savepoint. The query and
// RELEASE then share a round trip; if the query fails, the server skips RELEASE and one more
// round trip rolls back to the savepoint. errNoRows means nothing matched.
func (l *txLookup) one(what string, sql string, args ...any) (checks.Target, error) {
	if _, err := l.q.Exec(l.ctx, qSavepoint); err != nil {
		return checks.Target{}, fmt.Errorf("%s: savepoint: %w", what, err)
	}
	var t checks.Target
	found := false
	b := &pgx.Batch{}
	b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
		var err error
		t, err = scanTarget(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	b.Queue(qReleaseSavepoint)
	if err := l.q.SendBatch(l.ctx, b).Close(); err != nil {
		if _, uerr := l.q.Exec(l.ctx, qRollbackSavepoint); uerr != nil {
			return checks.Target{}, fmt.Errorf("%s: %w (and rolling back its savepoint: %v)", what, err, uerr)
		}
		return checks.Target{}, fmt.Errorf("%s: %w", what, err)
	}
	if !found {
		return checks.Target{}, errNoRows
	}
	return t, nil
}

// remembered returns the answer to k, asking ask once.
func (l *txLookup) remembered(k lookupKey, ask func() (checks.Target, bool)) (checks.Target, bool) {
	if a, ok := l.memo[k]; ok {
		return a.t, a.ok
	}
	t, ok := ask()
	l.memo[k] = lookupAnswer{t: t, ok: ok}
	return t, ok
}

func (l *txLookup) warn(t checks.Target, what string, err error) {
	l.log.Warn().Err(err).Str("entity", t.Slug).Str("lookup", what).
		Msg("graph read for check derivation failed; the check is skipped until the entity changes again")
}

// HostOf implements checks.Lookup: the `host` attribute (a bare name among proxmox-host
// entities, or a full slug), else the source of a current hosts edge into the guest.
func (l *txLookup) HostOf(t checks.Target) (checks.Target, bool) {
	return l.remembered(lookupKey{what: "host", id: t.ID, host: hostAttr(t)}, func() (checks.Target, bool) { return l.hostOf(t) })
}

func (l *txLookup) hostOf(t checks.Target) (checks.Target, bool) {
	if ref := hostAttr(t); ref != "" {
		slug, name := hostRef(ref)
		var h checks.Target
		var err error
		if slug != "" {
			h, err = l.one("host by slug", qHostBySlug,
				slug, l.o.Descendants(proxmoxHost))
		} else {
			h, err = l.one("host by name", qHostByName, name, l.o.Descendants(proxmoxHost))
		}
		switch {
		case err == nil:
			return h, true
		case !errors.Is(err, errNoRows):
			l.warn(t, "host attribute", err)
		}
	}
	h, err := l.one("hosts edge", qEdgeSource, t.ID, relHosts)
	if err != nil {
		if !errors.Is(err, errNoRows) {
			l.warn(t, "hosts edge", err)
		}
		return checks.Target{}, false
	}
	return h, true
}

// BackupHolder implements checks.Lookup: the source of a current backs-up-to edge into t.
func (l *txLookup) BackupHolder(t checks.Target) (checks.Target, bool) {
	return l.remembered(lookupKey{what: "holder", id: t.ID}, func() (checks.Target, bool) { return l.backupHolder(t) })
}

func (l *txLookup) backupHolder(t checks.Target) (checks.Target, bool) {
	h, err := l.one("backs-up-to edge", qEdgeSource, t.ID, relBacksUpTo)
	if err != nil {
		if !errors.Is(err, errNoRows) {
			l.warn(t, "backs-up-to edge", err)
		}
		return checks.Target{}, false
	}
	return h, true
}

func hostAttr(t checks.Target) string {
	s, _ := t.Attributes[attrHost].(string)
	return strings.TrimSpace(s)
}

// hostRef splits a host attribute into a full slug or a bare name: "proxmox-host:atlas"
// and "atlas" both name the same host (the original looked the name up without its prefix).
func hostRef(ref string) (slug, name string) {
	if strings.Contains(ref, ":") {
		return ref, ""
	}
	return "", ref
}

// snapshot answers derivation's graph questions from one read of every Proxmox host and
// every current hosts / backs-up-to edge, for a bulk sync of thousands of entities.
type snapshot struct {
	hostsBySlug map[string]checks.Target
	hostsByName map[string]checks.Target
	hostsEdge   map[string]checks.Target // guest id -> host
	holderEdge  map[string]checks.Target // backup-target id -> holder
}

func loadSnapshot(ctx context.Context, tx pg.Querier, o *ontology.Ontology) (*snapshot, error) {
	s := &snapshot{hostsBySlug: map[string]checks.Target{}, hostsByName: map[string]checks.Target{},
		hostsEdge: map[string]checks.Target{}, holderEdge: map[string]checks.Target{}}
	rows, err := tx.Query(ctx, qProxmoxHosts, o.Descendants(proxmoxHost))
	if err != nil {
		return nil, fmt.Errorf("read proxmox hosts: %w", err)
	}
	hosts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (checks.Target, error) { return scanTarget(r) })
	if err != nil {
		return nil, fmt.Errorf("read proxmox hosts: %w", err)
	}
	// Rows come worst-first, so the preferred host (live, lowest slug) is written last.
	for _, h := range hosts {
		s.hostsBySlug[h.Slug] = h
		s.hostsByName[h.Name] = h
	}
	rows, err = tx.Query(ctx, qHostEdges, relHosts, relBacksUpTo)
	if err != nil {
		return nil, fmt.Errorf("read hosts and backs-up-to edges: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var typ, target string
		var t checks.Target
		if err := rows.Scan(&typ, &target, &t.ID, &t.Slug, &t.Type, &t.Name, &t.State, &t.Attributes); err != nil {
			return nil, fmt.Errorf("read hosts and backs-up-to edges: %w", err)
		}
		if typ == relHosts {
			s.hostsEdge[target] = t
		} else {
			s.holderEdge[target] = t
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read hosts and backs-up-to edges: %w", err)
	}
	return s, nil
}

// HostOf implements checks.Lookup with the same rules as txLookup.HostOf.
func (s *snapshot) HostOf(t checks.Target) (checks.Target, bool) {
	if ref := hostAttr(t); ref != "" {
		slug, name := hostRef(ref)
		if slug != "" {
			if h, ok := s.hostsBySlug[slug]; ok {
				return h, true
			}
		} else if h, ok := s.hostsByName[name]; ok {
			return h, true
		}
	}
	h, ok := s.hostsEdge[t.ID]
	return h, ok
}

// BackupHolder implements checks.Lookup with the same rules as txLookup.BackupHolder.
func (s *snapshot) BackupHolder(t checks.Target) (checks.Target, bool) {
	h, ok := s.holderEdge[t.ID]
	return h, ok
}
