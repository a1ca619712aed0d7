package app

import (
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/drift"
	"github.com/oikos-hq/oikos/scheduler/internal/executor"
	"github.com/oikos-hq/oikos/scheduler/internal/fleet"
	"github.com/oikos-hq/oikos/scheduler/internal/hostkeys"
	"github.com/oikos-hq/oikos/scheduler/internal/leases"
	"github.com/oikos-hq/oikos/scheduler/internal/onboard"
	"github.com/oikos-hq/oikos/scheduler/internal/secretref"
	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/shared/secretbox"
)

// The scheduler's parts that Run wires, exported so callers outside this module — the
// end-to-end tests, which substitute the lab simulator's dialer for the network — can build
// them exactly as the daemon does. The implementations stay internal.
type (
	// Executor claims and runs gated executions (docs/behaviours.md S9).
	Executor = executor.Executor
	// ExecutorOptions configure an Executor.
	ExecutorOptions = executor.Options
	// Fleet resolves targets over the entity graph (docs/behaviours.md S2).
	Fleet = fleet.Graph
	// FleetOptions configure a Fleet.
	FleetOptions = fleet.Options
)

// NewExecutor builds an executor; see executor.New.
func NewExecutor(opts ExecutorOptions) *Executor { return executor.New(opts) }

// NewFleet builds the graph reader and resolver; see fleet.New.
func NewFleet(pool *storage.Pool, opts FleetOptions) *Fleet { return fleet.New(pool, opts) }

// NewHostKeys builds the Postgres host key store whose mismatches raise signals; see
// hostkeys.New.
func NewHostKeys(pool *storage.Pool, log zerolog.Logger) *remote.PGHostKeys {
	return hostkeys.New(pool, log)
}

type (
	// Drift lists the Proxmox hosts' guests against the graph (docs/behaviours.md S7).
	Drift = drift.Service
	// DriftOptions configure Drift.
	DriftOptions = drift.Options
	// Onboard answers the api's requests to connect to a machine being added.
	Onboard = onboard.Service
	// OnboardOptions configure Onboard.
	OnboardOptions = onboard.Options
	// KeyGate keeps addresses being onboarded from being trusted on first use.
	KeyGate = onboard.KeyGate
)

// NewDrift builds drift discovery; see drift.New.
func NewDrift(opts DriftOptions) (*Drift, error) { return drift.New(opts) }

// NewOnboard builds the connection service; see onboard.New.
func NewOnboard(opts OnboardOptions) (*Onboard, error) { return onboard.New(opts) }

// NewKeyGate wraps a host key store for onboarding; see onboard.NewKeyGate.
func NewKeyGate(inner remote.HostKeyStore, pool *storage.Pool) *KeyGate {
	return onboard.NewKeyGate(inner, pool)
}

// PublishKey records the scheduler's public key for `oikos ssh-key`; see onboard.PublishKey.
var PublishKey = onboard.PublishKey

type (
	// Leases holds this scheduler's share of the fleet (docs/behaviours.md S9).
	Leases = leases.Manager
	// LeasesOptions configure Leases.
	LeasesOptions = leases.Options
	// LeaseChange is what a lease tick changed (LeasesOptions.OnChange).
	LeaseChange = leases.Change
)

// NewLeases builds a lease manager; see leases.New.
func NewLeases(opts LeasesOptions) (*Leases, error) { return leases.New(opts) }

// LeaseOwner is the scheduler among members that owns unit; see leases.Owner.
var LeaseOwner = leases.Owner

// HostUnit is the lease unit of everything that goes through the machine slug.
var HostUnit = leases.HostUnit

type (
	// ExecutorEnded is a run whose end was recorded (ExecutorOptions.OnEnd).
	ExecutorEnded = executor.Ended
)

// ExecCompleted is the status of an execution whose command exited 0.
const ExecCompleted = executor.StatusCompleted

// IsMigration reports whether a command moves a guest to another node; see drift.IsMigration.
func IsMigration(command string) bool { return drift.IsMigration(command) }

// Secrets resolves stored secrets for the check runner and the executor; see secretref.
type Secrets = secretref.Resolver

// NewSecrets reads pool's secrets table and opens values with box (nil: no key); see
// secretref.New.
func NewSecrets(pool *storage.Pool, box *secretbox.Box) *Secrets { return secretref.New(pool, box) }
