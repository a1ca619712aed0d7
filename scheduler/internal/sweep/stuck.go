package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"
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
	err := s.locked(ctx, lockStuck, func(tx *storage.Store) error {
		found, err := tx.FailingResults(ctx)
		if err != nil {
			return fmt.Errorf("stuck: read results: %w", err)
		}
		var stuck, bad []signals.Signal
		for _, x := range found {
			if x.Class == "resolution" || x.Class == "config" {
				bad = append(bad, signals.Signal{
					Kind: KindCheckMisconfigured, DedupKey: KindCheckMisconfigured + ":" + x.CheckID,
					EntityID: x.TargetID, CheckID: x.CheckID, Severity: signals.SeverityWarning,
					Summary: fmt.Sprintf("%s cannot run (configuration, not an outage): %s", x.CheckSlug, x.Reason),
					Details: map[string]any{"check": x.CheckSlug, "target": x.TargetSlug, "error_class": x.Class,
						"remediation": "runbook:check-misconfigured"},
				})
				rep.Misconfigured = append(rep.Misconfigured, x.CheckSlug)
				continue
			}
			if now.Sub(x.Since) < s.opts.StuckAfter {
				continue
			}
			sev := signals.SeverityWarning
			if x.Health == "down" {
				sev = signals.SeverityCritical
			}
			stuck = append(stuck, signals.Signal{
				Kind: KindProbeStuck, DedupKey: KindProbeStuck + ":" + x.CheckID,
				EntityID: x.TargetID, CheckID: x.CheckID, Severity: sev,
				Summary: fmt.Sprintf("%s has been %s since %s: %s", x.CheckSlug, x.Health, x.Since.UTC().Format(time.RFC3339), x.Reason),
				Details: map[string]any{"check": x.CheckSlug, "target": x.TargetSlug, "health": x.Health,
					"since": x.Since.UTC(), "error_class": x.Class, "remediation": "runbook:probe-stuck"},
			})
			rep.Stuck = append(rep.Stuck, x.CheckSlug)
		}
		if _, _, _, err := tx.SyncSignals(ctx, s.sig, KindProbeStuck, stuck, "the check reports its target up (or degraded) again"); err != nil {
			return fmt.Errorf("stuck: %w", err)
		}
		if _, _, _, err := tx.SyncSignals(ctx, s.sig, KindCheckMisconfigured, bad, "the check runs again"); err != nil {
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
