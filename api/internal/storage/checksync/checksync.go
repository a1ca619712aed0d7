// Package checksync writes derived checks into the database inside the caller's
// transaction: for every monitored entity one `check` entity per derived definition (its
// bookkeeping node in the graph) and one check_defs row pointing at it (entity_id) and at
// the monitored entity (target_id), plus the entity_status row health will land on.
//
// Derivation itself is pure (shared/checks.Derive); this package supplies its graph Lookup
// and does the I/O. Three bugs of the original shape it:
//   - check entities are upserted by slug and their existing id is reused (ON CONFLICT ...
//     RETURNING id). The original generated a fresh uuid, no-oped the insert on re-seed and
//     then wrote a check_defs row referencing the id that was never stored, aborting every
//     re-seed;
//   - nothing is written when nothing changed, so a re-seed is a no-op and NOTIFY
//     oikos_checks fires only when definitions really changed;
//   - a failed graph read during derivation is logged and becomes a skip; it never aborts
//     the mutation that triggered it (the read runs in a savepoint).
package checksync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
)

// CheckType is the entity type of a check's bookkeeping entity.
const CheckType = "check"

// States of a check entity, mirroring check_defs.enabled.
const (
	stateEnabled  = "enabled"
	stateDisabled = "disabled"
)

// Changes lists the check slugs a sync wrote, and the targets they belong to.
type Changes struct {
	// Added are checks created (or given back their definition).
	Added []string `json:"added,omitempty"`
	// Updated are checks whose definition changed or that were enabled again.
	Updated []string `json:"updated,omitempty"`
	// Disabled are checks no longer derived; they are kept, disabled.
	Disabled []string `json:"disabled,omitempty"`
	// Targets are the slugs of the monitored entities whose checks changed.
	Targets []string `json:"targets,omitempty"`
}

// Changed reports whether any check definition was written.
func (c Changes) Changed() bool { return len(c.Added)+len(c.Updated)+len(c.Disabled) > 0 }

// Count is the number of check definitions written.
func (c Changes) Count() int { return len(c.Added) + len(c.Updated) + len(c.Disabled) }

// Merge adds the changes of o to c.
func (c *Changes) Merge(o Changes) {
	c.Added = append(c.Added, o.Added...)
	c.Updated = append(c.Updated, o.Updated...)
	c.Disabled = append(c.Disabled, o.Disabled...)
	c.Targets = append(c.Targets, o.Targets...)
}

// Syncer derives and writes checks. It holds only a logger and is safe for concurrent use.
type Syncer struct {
	log zerolog.Logger
}

// New returns a Syncer logging skipped lookups and derivation warnings to log.
func New(log zerolog.Logger) *Syncer { return &Syncer{log: log} }

// Sync re-derives the checks of one entity in the caller's transaction (q is a pgx.Tx or a
// connection inside a transaction) and writes what differs. The graph reads its Lookup needs
// run in savepoints, so a failed read degrades to a skip.
func (s *Syncer) Sync(ctx context.Context, q pg.Querier, o *ontology.Ontology, t checks.Target) (Changes, error) {
	if t.Type == CheckType {
		return Changes{}, nil // a check's own entity is never monitored
	}
	have, err := readExisting(ctx, q, []string{t.ID})
	if err != nil {
		return Changes{}, err
	}
	w, err := s.diff(ctx, q, o, []checks.Target{t}, s.lookup(ctx, q, o), have)
	if err != nil {
		return Changes{}, err
	}
	return w.ch, w.exec(ctx, q)
}

// SyncMany re-derives the checks of many entities in tx (the seed ingest), reading the graph
// facts derivation needs once up front instead of once per entity.
func (s *Syncer) SyncMany(ctx context.Context, tx pg.Querier, o *ontology.Ontology, ts []checks.Target) (Changes, error) {
	targets := make([]checks.Target, 0, len(ts))
	ids := make([]string, 0, len(ts))
	for _, t := range ts {
		if t.Type != CheckType {
			targets = append(targets, t)
			ids = append(ids, t.ID)
		}
	}
	if len(targets) == 0 {
		return Changes{}, nil
	}
	l, err := loadSnapshot(ctx, tx, o)
	if err != nil {
		return Changes{}, err
	}
	have, err := readExisting(ctx, tx, ids)
	if err != nil {
		return Changes{}, err
	}
	w, err := s.diff(ctx, tx, o, targets, l, have)
	if err != nil {
		return Changes{}, err
	}
	return w.ch, w.exec(ctx, tx)
}

// QueueLockHeld queues into b a statement that locks the entity ref names (its slug, or its
// id when byID) and the backup targets it holds, FOR NO KEY UPDATE in id order. A writer
// that may change the holder's checks.HolderAttributes queues it first: SyncHeldBackups
// then re-derives targets whose row locks it already holds (whoever re-derives an entity's
// checks holds its row lock), and taking them all in one ordered sweep, like the ends of an
// edge, leaves no order in which two writers wait for each other.
func QueueLockHeld(b *pgx.Batch, ref string, byID bool) {
	sql := qLockHeldBySlug
	if byID {
		sql = qLockHeldByID
	}
	b.Queue(sql, ref, relBacksUpTo)
}

// qLockHeld locks the holder $1 and the targets of its current edges of type $2 (holder
// names it by slug, or by id).
const (
	qLockHeldBySlug = qLockHeld + holderBySlug + qLockHeldBackups + holderBySlug + qLockHeldEnd
	qLockHeldByID   = qLockHeld + holderByID + qLockHeldBackups + holderByID + qLockHeldEnd

	qLockHeld = `SELECT e.id FROM entities e WHERE e.id IN (
			SELECT h.id FROM entities h WHERE `
	qLockHeldBackups = `
			UNION ALL
			SELECT r.target_id FROM relationships r JOIN entities h ON h.id = r.source_id
			WHERE `
	qLockHeldEnd = ` AND r.type = $2 AND r.valid_to IS NULL)
		ORDER BY e.id FOR NO KEY UPDATE OF e`
	holderBySlug = `h.slug = $1`
	holderByID   = `h.id = $1::uuid`
)

// qHeldBackups reads the targets of the current edges of type $2 from the holder $1.
const qHeldBackups = `SELECT ` + targetColumns + ` FROM relationships r JOIN entities e ON e.id = r.target_id
		WHERE r.source_id = $1 AND r.type = $2 AND r.valid_to IS NULL ORDER BY e.slug`

// SyncHeldBackups re-derives, in the caller's transaction, the checks of the backup targets
// the entity holderID holds (current backs-up-to edges from it). Derivation reads the
// holder's checks.HolderAttributes, so a change to one of them, once written in the
// transaction, calls for this; lock the targets first with QueueLockHeld.
func (s *Syncer) SyncHeldBackups(ctx context.Context, q pg.Querier, o *ontology.Ontology, holderID string) (Changes, error) {
	rows, err := q.Query(ctx, qHeldBackups, holderID, relBacksUpTo)
	if err != nil {
		return Changes{}, fmt.Errorf("read held backup targets: %w", err)
	}
	held, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (checks.Target, error) { return scanTarget(r) })
	if err != nil {
		return Changes{}, fmt.Errorf("read held backup targets: %w", err)
	}
	var all Changes
	for _, t := range held {
		ch, err := s.Sync(ctx, q, o, t)
		if err != nil {
			return Changes{}, fmt.Errorf("derive checks of %s: %w", t.Slug, err)
		}
		all.Merge(ch)
	}
	return all, nil
}

// Prefetched holds the check rows of one target, read ahead by QueuePrefetch in the batch
// that locks the target, so re-deriving its checks costs no round trip of its own.
type Prefetched struct {
	have map[string]*existing
	read bool
}

// QueuePrefetch queues into b the read of the check definitions of the entity ref names (its
// slug, or its id when byID). Queue it after the statement that locks the entity, in the
// same transaction: it then sees every check write committed before that lock was granted,
// as a read at sync time would (whoever re-derives this entity's checks holds that lock).
func QueuePrefetch(b *pgx.Batch, ref string, byID bool) *Prefetched {
	p := &Prefetched{have: map[string]*existing{}}
	sql := qPrefetchBySlug
	if byID {
		sql = qPrefetchByID
	}
	b.Queue(sql, ref).
		Query(func(rows pgx.Rows) error {
			if err := scanExisting(rows, p.have); err != nil {
				return err
			}
			p.read = true
			return nil
		})
	return p
}

// qPrefetch reads the check definitions of the target $1 (by slug, or by id).
const (
	qPrefetchBySlug = qExisting + `d.target_id = (SELECT t.id FROM entities t WHERE t.slug = $1)`
	qPrefetchByID   = qExisting + `d.target_id = $1::uuid`
)

// SyncPrefetched is Sync for a target whose check rows p has read, for a caller that sends
// its own writes in one last batch: the check writes that differ are queued into w, not
// executed. Reads derivation cannot do without (graph lookups, slugs held by check entities
// of no definition) still run on q now, before w is sent. hasStatus says whether the target
// has an entity_status row; statusCreated reports that one is inserted by w (the target is
// monitored now), so the caller can read it back in the same batch.
func (s *Syncer) SyncPrefetched(ctx context.Context, q pg.Querier, o *ontology.Ontology, t checks.Target, p *Prefetched,
	hasStatus bool, w *pgx.Batch) (ch Changes, statusCreated bool, err error) {
	if t.Type == CheckType {
		return Changes{}, false, nil
	}
	if p == nil || !p.read {
		return Changes{}, false, errors.New("checksync: the prefetched check definitions were not read")
	}
	for _, e := range p.have {
		if e.targetID != t.ID {
			return Changes{}, false, fmt.Errorf("checksync: prefetched check %s belongs to %s, not to %s", e.slug, e.targetID, t.Slug)
		}
	}
	have := make(map[string]*existing, len(p.have))
	for k, v := range p.have {
		have[k] = v
	}
	wr, err := s.diff(ctx, q, o, []checks.Target{t}, s.lookup(ctx, q, o), have)
	if err != nil {
		return Changes{}, false, err
	}
	if hasStatus {
		wr.statusIDs, wr.statusReasons = nil, nil
	}
	wr.queue(w)
	return wr.ch, len(wr.statusIDs) > 0, nil
}

// existing is a check_defs row with its check entity.
type existing struct {
	defID, slug, entityID, targetID, kind, source string
	config                                        any
	interval, timeout                             int
	enabled                                       bool
	entityState                                   string
	entityAttrs                                   any
	hasDef                                        bool
}

// desired is one derived definition in its stored shape.
type desired struct {
	target                          checks.Target
	slug, name, kind                string
	config                          []byte
	configNorm                      any
	attrs                           map[string]any
	attrsJSON                       []byte
	attrsNorm                       any
	intervalSeconds, timeoutSeconds int
}

// stmt is one parameterised write.
type stmt struct {
	sql  string
	args []any
}

// writes is everything one sync has to write, computed before anything is written, so the
// same diff is executed at once (Sync, SyncMany) or queued into a caller's batch
// (SyncPrefetched).
type writes struct {
	ch        Changes
	statusIDs []string
	// statusReasons are the statusIDs' reasons before any result (checks.PendingReason).
	statusReasons []string
	newEntities   [][]any
	newDefs       [][]any
	updates       []stmt
}

const (
	// A monitored entity's status row, with the reason its health is unknown until a check
	// reports; a row no check has reported on yet takes the new reason (the entity gained an
	// address, so a check can now be derived), and a row with results is left to the scheduler.
	qInsertStatus = `INSERT INTO entity_status (entity_id, reason) SELECT * FROM unnest($1::uuid[], $2::text[])
		ON CONFLICT (entity_id) DO UPDATE SET reason = EXCLUDED.reason
		WHERE entity_status.last_check_at IS NULL AND entity_status.health = 'unknown' AND entity_status.reason <> EXCLUDED.reason`
	qInsertEntity = `INSERT INTO entities (id, slug, type, name, state, attributes) VALUES ($1, $2, $3, $4, $5, $6)`
	qInsertDef    = `INSERT INTO check_defs (id, slug, entity_id, target_id, kind, config, interval_seconds, timeout_seconds)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

	// A check entity derived again (enabled, its attributes rewritten), a definition
	// rewritten, and a definition no longer derived with its entity (disabled).
	qEnableCheckEntity = `UPDATE entities SET state = $2, attributes = $3, version = version + 1, updated_at = now() WHERE id = $1`
	qUpdateDef         = `UPDATE check_defs SET kind = $2, config = $3, interval_seconds = $4, timeout_seconds = $5,
					enabled = true, updated_at = now() WHERE id = $1`
	qDisableDef         = `UPDATE check_defs SET enabled = false, updated_at = now() WHERE id = $1 AND enabled`
	qDisableCheckEntity = `UPDATE entities SET state = $2, version = version + 1, updated_at = now() WHERE id = $1 AND state <> $2`
)

var (
	entityCols = []string{"id", "slug", "type", "name", "state", "attributes"}
	defCols    = []string{"id", "slug", "entity_id", "target_id", "kind", "config", "interval_seconds", "timeout_seconds"}
)

// copyThreshold is the number of new rows from which COPY beats queued INSERTs (a COPY costs
// round trips of its own; a queued INSERT rides along in the batch).
const copyThreshold = 32

// queue adds the writes to b in dependency order: check entities before the definitions
// that reference them.
func (w *writes) queue(b *pgx.Batch) {
	if len(w.statusIDs) > 0 {
		// A row that exists is rewritten only while no check has reported on it.
		b.Queue(qInsertStatus, w.statusIDs, w.statusReasons)
	}
	for _, r := range w.newEntities {
		b.Queue(qInsertEntity, r...)
	}
	for _, r := range w.newDefs {
		b.Queue(qInsertDef, r...)
	}
	for _, u := range w.updates {
		b.Queue(u.sql, u.args...)
	}
}

// exec writes everything now: many new rows by COPY, the rest in one pipelined batch.
func (w *writes) exec(ctx context.Context, q pg.Querier) error {
	if len(w.newEntities)+len(w.newDefs) >= copyThreshold {
		if len(w.newEntities) > 0 {
			if _, err := q.CopyFrom(ctx, pgx.Identifier{"entities"}, entityCols, pgx.CopyFromRows(w.newEntities)); err != nil {
				return fmt.Errorf("insert check entities: %w", err)
			}
		}
		if len(w.newDefs) > 0 {
			if _, err := q.CopyFrom(ctx, pgx.Identifier{"check_defs"}, defCols, pgx.CopyFromRows(w.newDefs)); err != nil {
				return fmt.Errorf("insert check definitions: %w", err)
			}
		}
		w.newEntities, w.newDefs = nil, nil
	}
	b := &pgx.Batch{}
	w.queue(b)
	if b.Len() == 0 {
		return nil
	}
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("write check definitions: %w", err)
	}
	return nil
}

// diff derives the checks of targets (with l for graph facts) and compares them with have,
// the stored definitions of those targets, returning what to write. have gains the check
// entities found by slug.
func (s *Syncer) diff(ctx context.Context, q pg.Querier, o *ontology.Ontology, targets []checks.Target, l checks.Lookup,
	have map[string]*existing) (writes, error) {
	var w writes
	ch := &w.ch
	var want []desired
	wantByTarget := map[string]map[string]bool{}
	for _, t := range targets {
		r := checks.Derive(t, o, l)
		for _, warn := range r.Warnings {
			s.log.Warn().Str("entity", t.Slug).Str("warning", warn).Msg("check derivation")
		}
		if needsStatus(o, t, r) {
			w.statusIDs = append(w.statusIDs, t.ID)
			w.statusReasons = append(w.statusReasons, checks.PendingReason(r))
		}
		set := map[string]bool{}
		wantByTarget[t.ID] = set
		for _, d := range r.Defs {
			dw, err := toDesired(t, d)
			if err != nil {
				return w, err
			}
			set[dw.slug] = true
			want = append(want, dw)
		}
	}

	// Slugs wanted but not among the targets' defs: an orphan check entity may hold the slug
	// (reuse its id), or, by a derivation bug, another target's def (refuse).
	var missing []string
	for _, d := range want {
		if _, ok := have[d.slug]; !ok {
			missing = append(missing, d.slug)
		}
	}
	if len(missing) > 0 {
		if err := readBySlug(ctx, q, missing, have); err != nil {
			return w, err
		}
	}

	touched := map[string]bool{}
	update := func(sql string, args ...any) { w.updates = append(w.updates, stmt{sql: sql, args: args}) }
	for _, d := range want {
		e, ok := have[d.slug]
		switch {
		case ok && e.hasDef && e.targetID != d.target.ID:
			return w, fmt.Errorf("check %s derived for %s already belongs to another entity (%s): check slugs must be unique per target",
				d.slug, d.target.Slug, e.targetID)
		case ok && e.source != "" && e.source != "derived":
			continue // an operator override is never touched by derivation
		case !ok:
			entityID, err := uuid.NewV7()
			if err != nil {
				return w, fmt.Errorf("generate check id: %w", err)
			}
			defID, err := uuid.NewV7()
			if err != nil {
				return w, fmt.Errorf("generate check id: %w", err)
			}
			w.newEntities = append(w.newEntities, []any{entityID.String(), d.slug, CheckType, d.name, stateEnabled, d.attrsJSON})
			w.newDefs = append(w.newDefs, []any{defID.String(), d.slug, entityID.String(), d.target.ID, d.kind, d.config,
				int32(d.intervalSeconds), int32(d.timeoutSeconds)})
			ch.Added = append(ch.Added, d.slug)
			touched[d.target.Slug] = true
		default:
			entityChanged := e.entityState != stateEnabled || !reflect.DeepEqual(e.entityAttrs, d.attrsNorm)
			if entityChanged {
				update(qEnableCheckEntity, e.entityID, stateEnabled, d.attrsJSON)
			}
			if !e.hasDef {
				defID, err := uuid.NewV7()
				if err != nil {
					return w, fmt.Errorf("generate check id: %w", err)
				}
				w.newDefs = append(w.newDefs, []any{defID.String(), d.slug, e.entityID, d.target.ID, d.kind, d.config,
					int32(d.intervalSeconds), int32(d.timeoutSeconds)})
				ch.Added = append(ch.Added, d.slug)
				touched[d.target.Slug] = true
				continue
			}
			defChanged := !e.enabled || e.kind != d.kind || e.interval != d.intervalSeconds || e.timeout != d.timeoutSeconds ||
				!reflect.DeepEqual(e.config, d.configNorm)
			if defChanged {
				update(qUpdateDef, e.defID, d.kind, d.config, d.intervalSeconds, d.timeoutSeconds)
			}
			if defChanged || entityChanged {
				ch.Updated = append(ch.Updated, d.slug)
				touched[d.target.Slug] = true
			}
		}
	}
	// Derived checks no longer derived are disabled, not deleted: their metrics and signals
	// keep pointing at them, and a later mutation may derive them again.
	slugOfTarget := make(map[string]string, len(targets))
	for _, t := range targets {
		slugOfTarget[t.ID] = t.Slug
	}
	for _, e := range sortedExisting(have) {
		if !e.hasDef || e.source != "derived" {
			continue
		}
		set, ours := wantByTarget[e.targetID]
		if !ours || set[e.slug] {
			continue
		}
		if !e.enabled && e.entityState == stateDisabled {
			continue
		}
		update(qDisableDef, e.defID)
		update(qDisableCheckEntity, e.entityID, stateDisabled)
		ch.Disabled = append(ch.Disabled, e.slug)
		touched[slugOfTarget[e.targetID]] = true
	}
	for slug := range touched {
		ch.Targets = append(ch.Targets, slug)
	}
	sort.Strings(ch.Targets)
	return w, nil
}

// needsStatus says whether t gets an entity_status row: it is monitored (its type or its
// own attributes ask for checks). Check entities and `monitoring: none` types never do.
func needsStatus(o *ontology.Ontology, t checks.Target, r checks.Result) bool {
	if t.Type == CheckType || r.MonitoringNone {
		return false
	}
	if len(r.Defs) > 0 {
		return true
	}
	specs, none := o.Monitoring(t.Type)
	return !none && len(specs) > 0
}

func toDesired(t checks.Target, d checks.Def) (desired, error) {
	cfg, err := json.Marshal(d.Config)
	if err != nil {
		return desired{}, fmt.Errorf("check %s config: %w", d.Slug, err)
	}
	if len(cfg) == 0 || string(cfg) == "null" {
		cfg = []byte(`{}`)
	}
	attrs := map[string]any{"kind": d.Kind, "target": t.Slug, "interval": d.Interval.String()}
	if script, ok := d.Config[checks.KeyScript].(string); ok && script != "" {
		attrs["script"] = script
	}
	attrsJSON, err := json.Marshal(attrs)
	if err != nil {
		return desired{}, fmt.Errorf("check %s attributes: %w", d.Slug, err)
	}
	w := desired{
		target: t, slug: d.Slug, name: d.Name, kind: d.Kind,
		config: cfg, attrs: attrs, attrsJSON: attrsJSON,
		intervalSeconds: seconds(d.Interval), timeoutSeconds: seconds(d.Timeout),
	}
	if w.configNorm, err = normalize(cfg); err != nil {
		return desired{}, err
	}
	if w.attrsNorm, err = normalize(attrsJSON); err != nil {
		return desired{}, err
	}
	if w.timeoutSeconds > w.intervalSeconds {
		w.timeoutSeconds = w.intervalSeconds
	}
	if w.name == "" {
		w.name = d.Slug[len(checks.SlugPrefix):]
	}
	return w, nil
}

// seconds rounds a duration up to whole seconds, at least one (the columns are positive).
func seconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// normalize decodes JSON into the shapes pgx decodes jsonb into, so stored and derived
// values compare with reflect.DeepEqual whatever their key order or number types.
func normalize(b []byte) (any, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("normalize json: %w", err)
	}
	return v, nil
}

const existingColumns = `d.id::text, d.slug, d.entity_id::text, d.target_id::text, d.kind, d.config, d.interval_seconds,
	d.timeout_seconds, d.enabled, d.source, e.state, e.attributes`

// The reads of stored definitions: qExisting is their head (with the check entity), then the
// definitions of the targets $1, those holding the slugs $1, and the check entities holding
// the slugs $1 without a definition.
const (
	qExisting            = `SELECT ` + existingColumns + ` FROM check_defs d JOIN entities e ON e.id = d.entity_id WHERE `
	qExistingOf          = qExisting + `d.target_id = ANY($1::uuid[])`
	qExistingBySlug      = qExisting + `d.slug = ANY($1)`
	qCheckEntitiesBySlug = `SELECT e.id::text, e.slug, e.state, e.attributes FROM entities e
		WHERE e.slug = ANY($1) AND NOT EXISTS (SELECT 1 FROM check_defs d WHERE d.entity_id = e.id)`
)

func scanExisting(rows pgx.Rows, into map[string]*existing) error {
	defer rows.Close()
	for rows.Next() {
		var e existing
		var cfg, attrs []byte
		if err := rows.Scan(&e.defID, &e.slug, &e.entityID, &e.targetID, &e.kind, &cfg, &e.interval, &e.timeout,
			&e.enabled, &e.source, &e.entityState, &attrs); err != nil {
			return fmt.Errorf("read check definitions: %w", err)
		}
		var err error
		if e.config, err = normalize(cfg); err != nil {
			return err
		}
		if e.entityAttrs, err = normalize(attrs); err != nil {
			return err
		}
		e.hasDef = true
		into[e.slug] = &e
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read check definitions: %w", err)
	}
	return nil
}

// readExisting returns the check definitions of the targets, keyed by slug.
func readExisting(ctx context.Context, q pg.Querier, targetIDs []string) (map[string]*existing, error) {
	out := map[string]*existing{}
	rows, err := q.Query(ctx, qExistingOf, targetIDs)
	if err != nil {
		return nil, fmt.Errorf("read check definitions: %w", err)
	}
	return out, scanExisting(rows, out)
}

// readBySlug adds check entities (with their definition, if any) holding one of slugs.
func readBySlug(ctx context.Context, q pg.Querier, slugs []string, into map[string]*existing) error {
	rows, err := q.Query(ctx, qExistingBySlug, slugs)
	if err != nil {
		return fmt.Errorf("read check definitions: %w", err)
	}
	if err := scanExisting(rows, into); err != nil {
		return err
	}
	rows, err = q.Query(ctx, qCheckEntitiesBySlug, slugs)
	if err != nil {
		return fmt.Errorf("read check entities: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e existing
		var attrs []byte
		if err := rows.Scan(&e.entityID, &e.slug, &e.entityState, &attrs); err != nil {
			return fmt.Errorf("read check entities: %w", err)
		}
		if e.entityAttrs, err = normalize(attrs); err != nil {
			return err
		}
		e.source = "derived"
		into[e.slug] = &e
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read check entities: %w", err)
	}
	return nil
}

func sortedExisting(m map[string]*existing) []*existing {
	out := make([]*existing, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].slug < out[j].slug })
	return out
}
