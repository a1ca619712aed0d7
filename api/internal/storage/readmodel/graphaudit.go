package readmodel

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Graph audit finding kinds and the runbook that says how to remediate each. The runbooks
// are knowledge entities seeded from seeds/knowledge.yaml.
const (
	FindingOrphanCheck       = "orphan_check"
	FindingCheckOnRetired    = "check_on_retired_target"
	FindingStuckProbe        = "stuck_probe"
	FindingUnmonitored       = "unmonitored"
	FindingEdgeToDestroyed   = "edge_to_destroyed"
	RunbookOrphanCheck       = "runbook:orphan-check"
	RunbookCheckOnRetired    = "runbook:check-on-destroyed-entity"
	RunbookStuckProbe        = "runbook:stuck-probe"
	RunbookUnmonitored       = "runbook:unmonitored-type"
	RunbookEdgeToDestroyed   = "runbook:edge-to-destroyed"
	defaultStuckProbeMinimum = 24 * time.Hour
)

// FindingKinds lists every kind with its runbook, in report order.
var FindingKinds = []struct{ Kind, Runbook string }{
	{FindingOrphanCheck, RunbookOrphanCheck},
	{FindingCheckOnRetired, RunbookCheckOnRetired},
	{FindingStuckProbe, RunbookStuckProbe},
	{FindingUnmonitored, RunbookUnmonitored},
	{FindingEdgeToDestroyed, RunbookEdgeToDestroyed},
}

// Finding is one structural gap the graph audit found.
type Finding struct {
	Kind     string `json:"kind"`
	Severity string `json:"severity"`
	// Entity is the slug the finding is about.
	Entity string `json:"entity"`
	// Related is the other entity involved (a check's target, an edge's destroyed end).
	Related string `json:"related,omitempty"`
	Detail  string `json:"detail"`
	// Runbook is the slug of the runbook that says how to remediate this kind of finding.
	Runbook string `json:"runbook"`
}

// GraphAuditReport is the result of one read-only audit pass (G11).
type GraphAuditReport struct {
	GeneratedAt time.Time      `json:"generated_at"`
	Counts      map[string]int `json:"counts"`
	Findings    []Finding      `json:"findings"`
	// StuckAfter is how long a probe must have been down or unknown to be reported.
	StuckAfterSeconds int64 `json:"stuck_after_seconds"`
}

// The graph audit's queries (see GraphAudit): $1 is the check types throughout.
const (
	// qOrphanChecks: check entities with no check definition.
	qOrphanChecks = `SELECT e.slug, coalesce(e.attributes->>'target', ''), e.state FROM entities e
				WHERE e.type = ANY($1) AND e.state <> 'retired'
				AND NOT EXISTS (SELECT 1 FROM check_defs c WHERE c.entity_id = e.id) ORDER BY e.slug`
	// qChecksOnRetired: enabled checks on deprecated or destroyed entities.
	qChecksOnRetired = `SELECT ce.slug, t.slug, t.state FROM check_defs c
				JOIN entities ce ON ce.id = c.entity_id JOIN entities t ON t.id = c.target_id
				WHERE c.enabled AND t.state IN ('deprecated', 'destroyed') ORDER BY ce.slug`
	// qStuckProbes: entities down or unknown for longer than $2 seconds.
	qStuckProbes = `SELECT e.slug, s.health, to_char(s.changed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
				FROM entity_status s JOIN entities e ON e.id = s.entity_id
				WHERE s.health IN ('down', 'unknown') AND s.changed_at < now() - make_interval(secs => $2)
				AND NOT (e.type = ANY($1)) AND e.state <> 'destroyed' ORDER BY e.slug`
	// qEdgesToDestroyed: current edges into destroyed entities.
	qEdgesToDestroyed = `SELECT se.slug, te.slug, r.type FROM relationships r
				JOIN entities se ON se.id = r.source_id JOIN entities te ON te.id = r.target_id
				WHERE r.valid_to IS NULL AND te.state = 'destroyed' AND se.state <> 'destroyed'
				AND r.type NOT IN ('targets', 'about', 'involves') ORDER BY se.slug, te.slug, r.type`
	// qUnmonitored: live entities no enabled check observes (auditUnmonitored).
	qUnmonitored = `SELECT e.slug, e.type, e.attributes FROM entities e
		WHERE e.state NOT IN ('destroyed', 'deprecated', 'planned', 'retired') AND NOT (e.type = ANY($1))
		AND NOT EXISTS (SELECT 1 FROM check_defs c WHERE c.target_id = e.id AND c.enabled)
		ORDER BY e.slug`
)

// GraphAudit runs one read-only pass over the graph: orphan check entities, checks that
// target deprecated or destroyed entities, probes stuck down or unknown for longer than
// stuckAfter, entities whose type declares monitoring they lack, and current edges that
// touch destroyed entities. It runs in one repeatable-read snapshot so that the findings
// agree with each other.
//
// The Reader must run on the pool (it begins the snapshot on it).
func (r *Reader) GraphAudit(ctx context.Context, stuckAfter time.Duration) (GraphAuditReport, error) {
	if stuckAfter <= 0 {
		stuckAfter = defaultStuckProbeMinimum
	}
	rep := GraphAuditReport{GeneratedAt: time.Now().UTC(), Counts: map[string]int{}, Findings: []Finding{},
		StuckAfterSeconds: int64(stuckAfter / time.Second)}
	for _, k := range FindingKinds {
		rep.Counts[k.Kind] = 0
	}
	tx, err := r.snapshot(ctx)
	if err != nil {
		return rep, fmt.Errorf("graph audit: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	checks := r.checkTypes()
	add := func(f Finding) {
		rep.Findings = append(rep.Findings, f)
		rep.Counts[f.Kind]++
	}
	type query struct {
		sql  string
		args []any
		make func(a, b, c string) Finding
	}
	queries := []query{
		{ // A check entity with no check definition is bookkeeping left behind by a removed check.
			sql:  qOrphanChecks,
			args: []any{checks},
			make: func(slug, target, state string) Finding {
				return Finding{Kind: FindingOrphanCheck, Severity: "warning", Entity: slug, Related: target,
					Detail:  fmt.Sprintf("check entity (%s) has no check definition; retire it or re-derive its target's checks", state),
					Runbook: RunbookOrphanCheck}
			},
		},
		{ // An enabled check on a deprecated or destroyed entity probes something that is gone.
			sql: qChecksOnRetired,
			make: func(slug, target, state string) Finding {
				sev := "warning"
				if state == "destroyed" {
					sev = "critical"
				}
				return Finding{Kind: FindingCheckOnRetired, Severity: sev, Entity: slug, Related: target,
					Detail: fmt.Sprintf("enabled check targets %s, which is %s", target, state), Runbook: RunbookCheckOnRetired}
			},
		},
		{ // Down or unknown for longer than stuckAfter: a broken probe or a forgotten outage.
			sql:  qStuckProbes,
			args: []any{checks, stuckAfter.Seconds()},
			make: func(slug, health, since string) Finding {
				return Finding{Kind: FindingStuckProbe, Severity: "warning", Entity: slug,
					Detail: fmt.Sprintf("health has been %s since %s", health, since), Runbook: RunbookStuckProbe}
			},
		},
		{ // A current edge touching a destroyed entity keeps a dead thing in every walk.
			sql: qEdgesToDestroyed,
			make: func(src, dst, typ string) Finding {
				return Finding{Kind: FindingEdgeToDestroyed, Severity: "warning", Entity: src, Related: dst,
					Detail: fmt.Sprintf("current %s edge points at destroyed %s; end it", typ, dst), Runbook: RunbookEdgeToDestroyed}
			},
		},
	}
	for _, q := range queries {
		rows, err := tx.Query(ctx, q.sql, q.args...)
		if err != nil {
			return rep, fmt.Errorf("graph audit %s: %w", q.sql[:40], err)
		}
		var a, b, c string
		_, err = pgx.ForEachRow(rows, []any{&a, &b, &c}, func() error { add(q.make(a, b, c)); return nil })
		if err != nil {
			return rep, fmt.Errorf("graph audit: %w", err)
		}
	}
	if err := r.auditUnmonitored(ctx, tx, checks, add); err != nil {
		return rep, err
	}
	return rep, nil
}

// auditUnmonitored reports live entities whose type warrants monitoring that applies to
// them (MonitoringSpec.AppliesTo, so "http if it has a url" is not a gap without a url) but
// that no enabled check observes. Types that declare `monitoring: none` never appear.
func (r *Reader) auditUnmonitored(ctx context.Context, tx pgx.Tx, checks []string, add func(Finding)) error {
	rows, err := tx.Query(ctx, qUnmonitored, checks)
	if err != nil {
		return fmt.Errorf("graph audit unmonitored: %w", err)
	}
	var slug, typ string
	var attrs map[string]any
	_, err = pgx.ForEachRow(rows, []any{&slug, &typ, &attrs}, func() error {
		specs, none := r.ont().Monitoring(typ)
		if none {
			return nil
		}
		n := 0
		for _, s := range specs {
			if s.AppliesTo(attrs) {
				n++
			}
		}
		if n > 0 {
			add(Finding{Kind: FindingUnmonitored, Severity: "info", Entity: slug,
				Detail:  fmt.Sprintf("type %s declares %d check(s) for this entity but none is enabled", typ, n),
				Runbook: RunbookUnmonitored})
		}
		attrs = nil
		return nil
	})
	if err != nil {
		return fmt.Errorf("graph audit unmonitored: %w", err)
	}
	return nil
}
