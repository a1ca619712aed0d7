// Package labtest builds the world the scheduler's tests and benchmarks run against: a
// per-test PostgreSQL database holding the seeded ontology and an inventory (entities and
// edges), check definitions derived from it with shared/checks.Derive exactly as the api
// derives them, and a labsim fleet built from the same inventory, reached through a real
// remote.Pool over the simulator's SSH listeners.
//
// It is test support: it fails the test on any error instead of returning it.
package labtest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/scheduler/internal/fleet"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/shared/seedfile"
	"github.com/oikos-hq/oikos/testkit/labsim"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// Options configure a Lab. Zero values mean the seeded inventory and the wall clock.
type Options struct {
	// Inventory is the inventory YAML (default: seeds.Inventory()).
	Inventory []byte
	// Clock is labsim's clock (find -mmin, touch, /proc/stat).
	Clock func() time.Time
	// DB reuses a database instead of creating one (benchmarks).
	DB *pgxpool.Pool
	// NoSim builds the database only.
	NoSim bool
	// MaxSessionsPerConn for the SSH pool (default remote's).
	MaxSessionsPerConn int
	// HARecoveryDelay is labsim's (how long after a node goes down its HA guests are
	// recovered elsewhere; zero: labsim's default).
	HARecoveryDelay time.Duration
	// Control serves labsim's control API on a free loopback port (Sim.ControlAddr).
	Control bool
}

// Lab is a seeded database and the simulated fleet behind it.
type Lab struct {
	DB       *pgxpool.Pool
	Ontology *ontology.Ontology
	Sim      *labsim.Sim
	SSH      *remote.Pool
	Fleet    *fleet.Graph
	// IDs maps every entity slug to its id.
	IDs map[string]string
	// Entities are the inventory's entities as checks.Targets, by slug.
	Entities map[string]checks.Target
	inv      *seedfile.Inventory
}

// TB is the part of testing.TB the harness needs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// Ontology parses the seeded ontology.
func Ontology(t TB) *ontology.Ontology {
	t.Helper()
	o, err := ontology.Parse(seeds.Ontology())
	if err != nil {
		t.Fatalf("parse seeded ontology: %v", err)
	}
	return o
}

// New builds a Lab: database (pgtest) with the ontology and the inventory, and a running
// labsim with an SSH pool dialling it.
func New(t testing.TB, opts Options) *Lab {
	t.Helper()
	if opts.Inventory == nil {
		opts.Inventory = seeds.Inventory()
	}
	l := &Lab{Ontology: Ontology(t), IDs: map[string]string{}, Entities: map[string]checks.Target{}}
	l.DB = opts.DB
	if l.DB == nil {
		l.DB = pgtest.New(t).Pool
	}
	inv, err := seedfile.ParseInventory(opts.Inventory)
	if err != nil {
		t.Fatalf("parse inventory: %v", err)
	}
	l.inv = inv
	l.load(t)
	l.Fleet = fleet.New(l.DB, fleet.Options{Logger: zerolog.Nop()})
	if opts.NoSim {
		return l
	}
	fl, err := labsim.FleetFromInventory(opts.Inventory)
	if err != nil {
		t.Fatalf("labsim fleet: %v", err)
	}
	control := ""
	if opts.Control {
		control = "127.0.0.1:0"
	}
	sim, err := labsim.New(fl, labsim.Options{
		StateDir:        t.TempDir(),
		Listen:          func(string) string { return "127.0.0.1:0" },
		Logger:          zerolog.Nop(),
		Clock:           opts.Clock,
		HARecoveryDelay: opts.HARecoveryDelay,
		ControlAddr:     control,
	})
	if err != nil {
		t.Fatalf("labsim: %v", err)
	}
	if err := sim.Start(context.Background()); err != nil {
		t.Fatalf("labsim start: %v", err)
	}
	t.Cleanup(sim.Stop)
	l.Sim = sim
	l.SSH = remote.NewPool(remote.PoolOptions{
		Signer:             Signer(t),
		HostKeys:           remote.NewMemoryHostKeys(),
		Dial:               sim.DialContext,
		DialTimeout:        10 * time.Second,
		MaxSessionsPerConn: opts.MaxSessionsPerConn,
		Logger:             zerolog.Nop(),
	})
	t.Cleanup(l.SSH.Close)
	return l
}

// Signer is a fresh ed25519 client key.
func Signer(t TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("key: %v", err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatalf("signer: %v", err)
	}
	return s
}

func newID(t TB) string {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatalf("uuid: %v", err)
	}
	return id.String()
}

// load writes the ontology's types and the inventory into the database.
func (l *Lab) load(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	err := pg.InTx(ctx, l.DB, func(tx pgx.Tx) error {
		for _, et := range l.Ontology.Types() {
			mon, err := json.Marshal(nonNil(et.Monitoring))
			if err != nil {
				return err
			}
			var parent *string
			if et.Parent != "" {
				parent = &et.Parent
			}
			if _, err := tx.Exec(ctx, `INSERT INTO entity_types (name, parent, abstract, states, default_state, monitoring, monitoring_none)
VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (name) DO NOTHING`,
				et.Name, parent, et.Abstract, et.States, et.DefaultState, mon, et.MonitoringNone); err != nil {
				return err
			}
		}
		for _, rt := range l.Ontology.RelationshipTypes() {
			if _, err := tx.Exec(ctx, `INSERT INTO relationship_types (name, sources, targets) VALUES ($1, $2, $3)
ON CONFLICT (name) DO NOTHING`, rt.Name, rt.Sources, rt.Targets); err != nil {
				return err
			}
		}
		for _, e := range l.inv.Entities {
			state := e.State
			if state == "" {
				if et, ok := l.Ontology.Type(e.Type); ok {
					state = et.DefaultState
				}
			}
			attrs := e.Attributes
			if attrs == nil {
				attrs = map[string]any{}
			}
			raw, err := json.Marshal(attrs)
			if err != nil {
				return err
			}
			id := newID(t)
			if _, err := tx.Exec(ctx, `INSERT INTO entities (id, slug, type, name, state, attributes) VALUES ($1, $2, $3, $4, $5, $6)`,
				id, e.Slug(), e.Type, e.Name, state, raw); err != nil {
				return err
			}
			l.IDs[e.Slug()] = id
			var back map[string]any
			_ = json.Unmarshal(raw, &back)
			l.Entities[e.Slug()] = checks.Target{ID: id, Slug: e.Slug(), Type: e.Type, Name: e.Name, State: state, Attributes: back}
		}
		for _, r := range l.inv.Relationships {
			if _, err := tx.Exec(ctx, `INSERT INTO relationships (id, type, source_id, target_id) VALUES ($1, $2, $3, $4)`,
				newID(t), r.Type, l.IDs[r.Source], l.IDs[r.Target]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("load inventory: %v", err)
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// lookup answers derivation's graph questions from the inventory.
type lookup struct{ l *Lab }

// HostOf implements checks.Lookup.
func (lk lookup) HostOf(t checks.Target) (checks.Target, bool) {
	if h, _ := t.Attributes["host"].(string); h != "" {
		if !strings.Contains(h, ":") {
			h = "proxmox-host:" + h
		}
		if e, ok := lk.l.Entities[h]; ok {
			return e, true
		}
	}
	for _, r := range lk.l.inv.Relationships {
		if r.Type == "hosts" && r.Target == t.Slug {
			e, ok := lk.l.Entities[r.Source]
			return e, ok
		}
	}
	return checks.Target{}, false
}

// BackupHolder implements checks.Lookup.
func (lk lookup) BackupHolder(t checks.Target) (checks.Target, bool) {
	for _, r := range lk.l.inv.Relationships {
		if r.Type == "backs-up-to" && r.Target == t.Slug {
			e, ok := lk.l.Entities[r.Source]
			return e, ok
		}
	}
	return checks.Target{}, false
}

// Def is one stored check definition.
type Def struct {
	ID, Slug, TargetID, TargetSlug string
	checks.Def
}

// DeriveChecks derives every entity's checks and stores them (check entity + check_defs),
// as the api does. adjust, when set, may change a definition before it is stored (shorter
// intervals for a test) or drop it by returning false.
func (l *Lab) DeriveChecks(t testing.TB, adjust func(target checks.Target, d *checks.Def) bool) []Def {
	t.Helper()
	ctx := context.Background()
	slugs := make([]string, 0, len(l.Entities))
	for s := range l.Entities {
		slugs = append(slugs, s)
	}
	sort.Strings(slugs)
	var out []Def
	err := pg.InTx(ctx, l.DB, func(tx pgx.Tx) error {
		for _, slug := range slugs {
			target := l.Entities[slug]
			r := checks.Derive(target, l.Ontology, lookup{l})
			for _, d := range r.Defs {
				if adjust != nil && !adjust(target, &d) {
					continue
				}
				cfg, err := json.Marshal(d.Config)
				if err != nil {
					return err
				}
				entityID, defID := newID(t), newID(t)
				if _, err := tx.Exec(ctx, `INSERT INTO entities (id, slug, type, name, state) VALUES ($1, $2, 'check', $3, 'enabled')`,
					entityID, d.Slug, d.Name); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `INSERT INTO check_defs (id, slug, entity_id, target_id, kind, config, interval_seconds, timeout_seconds)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, defID, d.Slug, entityID, target.ID, d.Kind, cfg,
					int(d.Interval/time.Second), max(int(d.Timeout/time.Second), 1)); err != nil {
					return err
				}
				out = append(out, Def{ID: defID, Slug: d.Slug, TargetID: target.ID, TargetSlug: target.Slug, Def: d})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("store derived checks: %v", err)
	}
	return out
}

// Exec runs a command on an entity of the lab through the host-hop (test setup: creating
// backup files, reading state).
func (l *Lab) Exec(t TB, slug, cmd string) remote.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	target, _, err := l.Fleet.Resolve(ctx, slug)
	if err != nil {
		t.Fatalf("resolve %s: %v", slug, err)
	}
	res, err := l.SSH.Exec(ctx, target, cmd, nil)
	if err != nil {
		t.Fatalf("exec on %s: %v", slug, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %q on %s exited %d: %s", cmd, slug, res.ExitCode, res.Stderr)
	}
	return res
}

// StartAllGuests starts every stopped guest of the simulated fleet, so that the fleet is
// healthy end to end.
func (l *Lab) StartAllGuests(t TB) {
	t.Helper()
	for _, h := range l.Sim.Snapshot().Hosts {
		for _, g := range h.Guests {
			if g.Status != labsim.StatusRunning {
				if err := l.Sim.SetGuestStatus(h.Name, g.VMID, true); err != nil {
					t.Fatalf("start %s/%d: %v", h.Name, g.VMID, err)
				}
			}
		}
	}
}
