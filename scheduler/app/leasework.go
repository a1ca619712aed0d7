package app

import (
	"context"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/checkrun"
	"github.com/oikos-hq/oikos/scheduler/internal/executor"
	"github.com/oikos-hq/oikos/scheduler/internal/fleet"
	"github.com/oikos-hq/oikos/scheduler/internal/leases"
	"github.com/oikos-hq/oikos/scheduler/internal/onboard"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/shared/safego"
)

// LeaseWork is what a change of the units this scheduler holds concerns: the parts that do a
// unit's work. The lease manager is built before them (they ask it what they hold), so its
// hooks reach them through this, and a part not built yet is skipped.
type LeaseWork struct {
	Log      zerolog.Logger
	Executor *executor.Executor
	Runner   *checkrun.Runner
	Onboard  *onboard.Service
	Fleet    *fleet.Graph
	SSH      *remote.Pool
}

// OnChange is leases.Options.OnChange: units just taken have executions waiting, checks to
// continue and machines to connect; units being handed over write what they have in hand;
// a host handed over keeps one connection fleet-wide, the new holder's.
func (w *LeaseWork) OnChange(ctx context.Context, c leases.Change) {
	if w.Executor != nil {
		w.Executor.Poke()
		if len(c.Acquired) > 0 {
			w.Executor.SweepSoon() // taken from a scheduler that died? its running executions end now
		}
	}
	if w.Runner != nil {
		w.Runner.Handover(c.Releasing)
		// Units taken from a scheduler that died resume within seconds; units handed over
		// by a live one continue its schedule exactly.
		var handed []string
		for _, u := range c.Acquired {
			if !slices.Contains(c.TakenOver, u) {
				handed = append(handed, u)
			}
		}
		w.Runner.Acquired(handed)
		w.Runner.TakenOver(c.TakenOver)
	}
	if w.Onboard != nil && len(c.Acquired) > 0 {
		w.Onboard.Wake() // a machine just added waits for its unit's holder
	}
	w.retire(ctx, c.Released)
}

// Busy is leases.Options.Busy: a unit is handed over once its checks in flight ended and
// their results are written.
func (w *LeaseWork) Busy(unit string) bool {
	return w.Runner != nil && w.Runner.Busy(unit)
}

// retire retires the SSH connections of the hosts of units (remote.Pool.Retire), off the
// lease loop: resolving a host reads the graph.
func (w *LeaseWork) retire(ctx context.Context, units []string) {
	if len(units) == 0 || w.Fleet == nil || w.SSH == nil {
		return
	}
	safego.Go(w.Log, "retire-handed-over", func() {
		for _, u := range units {
			slug, ok := strings.CutPrefix(u, "host:")
			if !ok {
				continue
			}
			t, _, err := w.Fleet.Resolve(ctx, slug)
			if err != nil {
				continue // gone from the graph: nothing to keep open either way
			}
			w.SSH.Retire(t.Addr)
		}
	})
}
