package sweep

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"

	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/signals"
)

// checkType is the type of a check's own bookkeeping entity; it is never monitored.
const checkType = "check"

// proxmoxHostType is the type a guest's `host` attribute names.
const proxmoxHostType = "proxmox-host"

// graphSnapshot is the part of the graph coverage needs, read once per pass.
type graphSnapshot struct {
	byID      map[string]checks.Target
	bySlug    map[string]checks.Target
	hostsEdge map[string]string // guest id → proxmox host id
	backsUp   map[string]string // backup target id → holder id
	isA       func(typ, ancestor string) bool
}

// HostOf implements checks.Lookup: the `host` attribute (a name or a slug), else the hosts edge.
func (g *graphSnapshot) HostOf(t checks.Target) (checks.Target, bool) {
	if name, _ := t.Attributes["host"].(string); strings.TrimSpace(name) != "" {
		name = strings.TrimSpace(name)
		if strings.Contains(name, ":") {
			if h, ok := g.bySlug[name]; ok && g.isA(h.Type, proxmoxHostType) {
				return h, true
			}
		} else {
			for _, h := range g.byID {
				if h.Name == name && h.State != checks.StateDestroyed && g.isA(h.Type, proxmoxHostType) {
					return h, true
				}
			}
		}
	}
	if id, ok := g.hostsEdge[t.ID]; ok {
		h, ok := g.byID[id]
		return h, ok
	}
	return checks.Target{}, false
}

// BackupHolder implements checks.Lookup: the source of a backs-up-to edge into t.
func (g *graphSnapshot) BackupHolder(t checks.Target) (checks.Target, bool) {
	id, ok := g.backsUp[t.ID]
	if !ok {
		return checks.Target{}, false
	}
	h, ok := g.byID[id]
	return h, ok
}

func (s *Sweeper) snapshot(ctx context.Context, tx *storage.Store) (*graphSnapshot, error) {
	g := &graphSnapshot{byID: map[string]checks.Target{}, bySlug: map[string]checks.Target{},
		hostsEdge: map[string]string{}, backsUp: map[string]string{}, isA: s.opts.Ontology.IsA}
	targets, err := tx.EntitiesExcept(ctx, checkType)
	if err != nil {
		return nil, fmt.Errorf("coverage: read entities: %w", err)
	}
	for _, t := range targets {
		if t.Attributes == nil {
			t.Attributes = map[string]any{}
		}
		g.byID[t.ID] = t
		g.bySlug[t.Slug] = t
	}
	edges, err := tx.HostsAndBackupEdges(ctx)
	if err != nil {
		return nil, fmt.Errorf("coverage: read edges: %w", err)
	}
	for _, e := range edges {
		if e.Type == "hosts" {
			g.hostsEdge[e.Target] = e.Source
		} else {
			g.backsUp[e.Target] = e.Source
		}
	}
	return g, nil
}

// Gap is one unmonitored entity.
type Gap struct {
	EntityID, Slug, Reason string
}

// Coverage raises an `unmonitored` signal for every live entity that lacks monitoring its
// type (or the entity) declares, and resolves the ones that no longer do. An entity is a gap
// when shared/checks.CoverageGap says so, or when derivation yields checks but none is stored
// enabled (the original system's coverage froze at its first seed because re-derivation
// silently failed). Types declaring `monitoring: none` are never gaps.
func (s *Sweeper) Coverage(ctx context.Context) ([]Gap, error) {
	var gaps []Gap
	err := s.locked(ctx, lockCoverage, func(tx *storage.Store) error {
		g, err := s.snapshot(ctx, tx)
		if err != nil {
			return err
		}
		stored, err := tx.EnabledCheckCounts(ctx)
		if err != nil {
			return fmt.Errorf("coverage: count checks: %w", err)
		}
		ids := make([]string, 0, len(g.byID))
		for id := range g.byID {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			t := g.byID[id]
			if t.State == checks.StateDestroyed || t.State == checks.StateDeprecated {
				continue
			}
			if _, known := s.opts.Ontology.Type(t.Type); !known {
				continue
			}
			r := checks.Derive(t, s.opts.Ontology, g)
			if stored[id] > 0 {
				continue
			}
			if gap, reason := checks.CoverageGap(t, s.opts.Ontology, r); gap {
				gaps = append(gaps, Gap{EntityID: id, Slug: t.Slug, Reason: reason})
				continue
			}
			if len(r.Defs) > 0 {
				names := make([]string, 0, len(r.Defs))
				for _, d := range r.Defs {
					names = append(names, d.Slug)
				}
				gaps = append(gaps, Gap{EntityID: id, Slug: t.Slug, Reason: fmt.Sprintf(
					"%s should have %d check(s) (%s) but none is stored enabled: its checks were never derived or were disabled; update the entity or re-seed to re-derive",
					t.Slug, len(r.Defs), strings.Join(names, ", "))})
			}
		}
		want := make([]signals.Signal, 0, len(gaps))
		for _, gp := range gaps {
			want = append(want, signals.Signal{
				Kind: KindUnmonitored, DedupKey: KindUnmonitored + ":" + gp.EntityID, EntityID: gp.EntityID,
				Severity: signals.SeverityWarning, Summary: gp.Reason,
				Details: map[string]any{"entity": gp.Slug, "remediation": "runbook:monitoring-coverage-gap"},
			})
		}
		_, created, resolved, err := tx.SyncSignals(ctx, s.sig, KindUnmonitored, want, "the entity is monitored now, or no longer needs to be")
		if err != nil {
			return fmt.Errorf("coverage: %w", err)
		}
		s.m.unmonitored.Set(float64(len(gaps)))
		if created > 0 || resolved > 0 {
			s.log.Info().Int("gaps", len(gaps)).Int("new", created).Int("resolved", resolved).Msg("coverage pass")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return gaps, nil
}
