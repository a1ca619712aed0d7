package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/signals"
)

// StuckReport says what a stuck pass found.
type StuckReport struct {
	Stuck         []string // check slugs down or unknown for longer than StuckAfter
	Misconfigured []string // check slugs that cannot run because of their configuration
}

// Stuck raises `probe_stuck` for every enabled check of a live target whose latest result
// has been down or unknown for longer than StuckAfter, and `check_misconfigured` at once for
// every check whose latest result is a resolution or configuration failure (S8: a broken
// configuration is reported as such, not left to look like an outage). Both kinds are
// resolved as soon as their cause is gone.
func (s *Sweeper) Stuck(ctx context.Context) (StuckReport, error) {
	now := s.opts.Clock()
	var rep StuckReport
	err := s.locked(ctx, lockStuck, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
SELECT cd.id::text, cd.slug, cr.target_id::text, e.slug, cr.health, cr.reason, cr.error_class, cr.since
FROM check_results cr
JOIN check_defs cd ON cd.id = cr.check_id AND cd.enabled
JOIN entities e ON e.id = cr.target_id AND e.state NOT IN ('destroyed', 'deprecated')
WHERE cr.health IN ('down', 'unknown')
ORDER BY cd.slug`)
		if err != nil {
			return fmt.Errorf("stuck: read results: %w", err)
		}
		type row struct {
			checkID, checkSlug, targetID, targetSlug, health, reason, class string
			since                                                           time.Time
		}
		found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var x row
			err := r.Scan(&x.checkID, &x.checkSlug, &x.targetID, &x.targetSlug, &x.health, &x.reason, &x.class, &x.since)
			return x, err
		})
		if err != nil {
			return fmt.Errorf("stuck: read results: %w", err)
		}
		var stuck, bad []signals.Signal
		for _, x := range found {
			if x.class == "resolution" || x.class == "config" {
				bad = append(bad, signals.Signal{
					Kind: KindCheckMisconfigured, DedupKey: KindCheckMisconfigured + ":" + x.checkID,
					EntityID: x.targetID, CheckID: x.checkID, Severity: signals.SeverityWarning,
					Summary: fmt.Sprintf("%s cannot run (configuration, not an outage): %s", x.checkSlug, x.reason),
					Details: map[string]any{"check": x.checkSlug, "target": x.targetSlug, "error_class": x.class,
						"remediation": "runbook:check-misconfigured"},
				})
				rep.Misconfigured = append(rep.Misconfigured, x.checkSlug)
				continue
			}
			if now.Sub(x.since) < s.opts.StuckAfter {
				continue
			}
			sev := signals.SeverityWarning
			if x.health == "down" {
				sev = signals.SeverityCritical
			}
			stuck = append(stuck, signals.Signal{
				Kind: KindProbeStuck, DedupKey: KindProbeStuck + ":" + x.checkID,
				EntityID: x.targetID, CheckID: x.checkID, Severity: sev,
				Summary: fmt.Sprintf("%s has been %s since %s: %s", x.checkSlug, x.health, x.since.UTC().Format(time.RFC3339), x.reason),
				Details: map[string]any{"check": x.checkSlug, "target": x.targetSlug, "health": x.health,
					"since": x.since.UTC(), "error_class": x.class, "remediation": "runbook:probe-stuck"},
			})
			rep.Stuck = append(rep.Stuck, x.checkSlug)
		}
		if _, _, _, err := s.sig.Sync(ctx, tx, KindProbeStuck, stuck, "the check reports its target up (or degraded) again"); err != nil {
			return fmt.Errorf("stuck: %w", err)
		}
		if _, _, _, err := s.sig.Sync(ctx, tx, KindCheckMisconfigured, bad, "the check runs again"); err != nil {
			return fmt.Errorf("stuck: %w", err)
		}
		return nil
	})
	if err != nil {
		return StuckReport{}, err
	}
	s.m.stuck.Set(float64(len(rep.Stuck)))
	s.m.misconfigured.Set(float64(len(rep.Misconfigured)))
	return rep, nil
}
