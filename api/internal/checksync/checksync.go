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
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/ontology"
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

// Syncer derives and writes checks. It holds only a logger and is safe for concurrent use.
type Syncer struct {
	log zerolog.Logger
}

// New returns a Syncer logging skipped lookups and derivation warnings to log.
func New(log zerolog.Logger) *Syncer { return &Syncer{log: log} }

// Sync re-derives the checks of one entity in tx and writes what differs. The graph reads
// its Lookup needs run in savepoints, so a failed read degrades to a skip.
func (s *Syncer) Sync(ctx context.Context, tx pgx.Tx, o *ontology.Ontology, t checks.Target) (Changes, error) {
	if t.Type == CheckType {
		return Changes{}, nil // a check's own entity is never monitored
	}
	l := &txLookup{ctx: ctx, tx: tx, o: o, log: s.log}
	return s.apply(ctx, tx, o, []checks.Target{t}, l)
}

// SyncMany re-derives the checks of many entities in tx (the seed ingest), reading the graph
// facts derivation needs once up front instead of once per entity.
func (s *Syncer) SyncMany(ctx context.Context, tx pgx.Tx, o *ontology.Ontology, ts []checks.Target) (Changes, error) {
	targets := make([]checks.Target, 0, len(ts))
	for _, t := range ts {
		if t.Type != CheckType {
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		return Changes{}, nil
	}
	l, err := loadSnapshot(ctx, tx, o)
	if err != nil {
		return Changes{}, err
	}
	return s.apply(ctx, tx, o, targets, l)
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

func (s *Syncer) apply(ctx context.Context, tx pgx.Tx, o *ontology.Ontology, targets []checks.Target, l checks.Lookup) (Changes, error) {
	var ch Changes
	var want []desired
	var statusIDs []string
	targetIDs := make([]string, 0, len(targets))
	wantByTarget := map[string]map[string]bool{}
	for _, t := range targets {
		targetIDs = append(targetIDs, t.ID)
		r := checks.Derive(t, o, l)
		for _, w := range r.Warnings {
			s.log.Warn().Str("entity", t.Slug).Str("warning", w).Msg("check derivation")
		}
		if needsStatus(o, t, r) {
			statusIDs = append(statusIDs, t.ID)
		}
		set := map[string]bool{}
		wantByTarget[t.ID] = set
		for _, d := range r.Defs {
			dw, err := toDesired(t, d)
			if err != nil {
				return ch, err
			}
			set[dw.slug] = true
			want = append(want, dw)
		}
	}

	if len(statusIDs) > 0 {
		// ON CONFLICT DO NOTHING writes nothing for entities that already have a row.
		if _, err := tx.Exec(ctx, `INSERT INTO entity_status (entity_id) SELECT unnest($1::uuid[]) ON CONFLICT (entity_id) DO NOTHING`,
			statusIDs); err != nil {
			return ch, fmt.Errorf("ensure entity_status: %w", err)
		}
	}

	have, err := readExisting(ctx, tx, targetIDs)
	if err != nil {
		return ch, err
	}
	// Slugs wanted but not among the targets' defs: an orphan check entity may hold the slug
	// (reuse its id), or, by a derivation bug, another target's def (refuse).
	var missing []string
	for _, w := range want {
		if _, ok := have[w.slug]; !ok {
			missing = append(missing, w.slug)
		}
	}
	if len(missing) > 0 {
		if err := readBySlug(ctx, tx, missing, have); err != nil {
			return ch, err
		}
	}

	touched := map[string]bool{}
	var newEntities, newDefs [][]any
	batch := &pgx.Batch{}
	for _, w := range want {
		e, ok := have[w.slug]
		switch {
		case ok && e.hasDef && e.targetID != w.target.ID:
			return ch, fmt.Errorf("check %s derived for %s already belongs to another entity (%s): check slugs must be unique per target",
				w.slug, w.target.Slug, e.targetID)
		case ok && e.source != "" && e.source != "derived":
			continue // an operator override is never touched by derivation
		case !ok:
			entityID, err := uuid.NewV7()
			if err != nil {
				return ch, fmt.Errorf("generate check id: %w", err)
			}
			defID, err := uuid.NewV7()
			if err != nil {
				return ch, fmt.Errorf("generate check id: %w", err)
			}
			newEntities = append(newEntities, []any{entityID.String(), w.slug, CheckType, w.name, stateEnabled, w.attrsJSON})
			newDefs = append(newDefs, []any{defID.String(), w.slug, entityID.String(), w.target.ID, w.kind, w.config,
				int32(w.intervalSeconds), int32(w.timeoutSeconds)})
			ch.Added = append(ch.Added, w.slug)
			touched[w.target.Slug] = true
		default:
			entityChanged := e.entityState != stateEnabled || !reflect.DeepEqual(e.entityAttrs, w.attrsNorm)
			if entityChanged {
				batch.Queue(`UPDATE entities SET state = $2, attributes = $3, version = version + 1, updated_at = now() WHERE id = $1`,
					e.entityID, stateEnabled, w.attrsJSON)
			}
			if !e.hasDef {
				defID, err := uuid.NewV7()
				if err != nil {
					return ch, fmt.Errorf("generate check id: %w", err)
				}
				newDefs = append(newDefs, []any{defID.String(), w.slug, e.entityID, w.target.ID, w.kind, w.config,
					int32(w.intervalSeconds), int32(w.timeoutSeconds)})
				ch.Added = append(ch.Added, w.slug)
				touched[w.target.Slug] = true
				continue
			}
			defChanged := !e.enabled || e.kind != w.kind || e.interval != w.intervalSeconds || e.timeout != w.timeoutSeconds ||
				!reflect.DeepEqual(e.config, w.configNorm)
			if defChanged {
				batch.Queue(`UPDATE check_defs SET kind = $2, config = $3, interval_seconds = $4, timeout_seconds = $5,
					enabled = true, updated_at = now() WHERE id = $1`,
					e.defID, w.kind, w.config, w.intervalSeconds, w.timeoutSeconds)
			}
			if defChanged || entityChanged {
				ch.Updated = append(ch.Updated, w.slug)
				touched[w.target.Slug] = true
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
		batch.Queue(`UPDATE check_defs SET enabled = false, updated_at = now() WHERE id = $1 AND enabled`, e.defID)
		batch.Queue(`UPDATE entities SET state = $2, version = version + 1, updated_at = now() WHERE id = $1 AND state <> $2`,
			e.entityID, stateDisabled)
		ch.Disabled = append(ch.Disabled, e.slug)
		touched[slugOfTarget[e.targetID]] = true
	}

	if len(newEntities) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"entities"},
			[]string{"id", "slug", "type", "name", "state", "attributes"}, pgx.CopyFromRows(newEntities)); err != nil {
			return ch, fmt.Errorf("insert check entities: %w", err)
		}
	}
	if len(newDefs) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"check_defs"},
			[]string{"id", "slug", "entity_id", "target_id", "kind", "config", "interval_seconds", "timeout_seconds"},
			pgx.CopyFromRows(newDefs)); err != nil {
			return ch, fmt.Errorf("insert check definitions: %w", err)
		}
	}
	if batch.Len() > 0 {
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return ch, fmt.Errorf("update check definitions: %w", err)
		}
	}
	for slug := range touched {
		ch.Targets = append(ch.Targets, slug)
	}
	sort.Strings(ch.Targets)
	return ch, nil
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
func readExisting(ctx context.Context, tx pgx.Tx, targetIDs []string) (map[string]*existing, error) {
	out := map[string]*existing{}
	rows, err := tx.Query(ctx, `SELECT `+existingColumns+` FROM check_defs d JOIN entities e ON e.id = d.entity_id
		WHERE d.target_id = ANY($1::uuid[])`, targetIDs)
	if err != nil {
		return nil, fmt.Errorf("read check definitions: %w", err)
	}
	return out, scanExisting(rows, out)
}

// readBySlug adds check entities (with their definition, if any) holding one of slugs.
func readBySlug(ctx context.Context, tx pgx.Tx, slugs []string, into map[string]*existing) error {
	rows, err := tx.Query(ctx, `SELECT `+existingColumns+` FROM check_defs d JOIN entities e ON e.id = d.entity_id
		WHERE d.slug = ANY($1)`, slugs)
	if err != nil {
		return fmt.Errorf("read check definitions: %w", err)
	}
	if err := scanExisting(rows, into); err != nil {
		return err
	}
	rows, err = tx.Query(ctx, `SELECT e.id::text, e.slug, e.state, e.attributes FROM entities e
		WHERE e.slug = ANY($1) AND NOT EXISTS (SELECT 1 FROM check_defs d WHERE d.entity_id = e.id)`, slugs)
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
