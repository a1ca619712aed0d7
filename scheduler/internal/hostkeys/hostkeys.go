// Package hostkeys pins the fleet's SSH host keys in Postgres and turns a changed key into a
// signal. remote.PGHostKeys does the pinning; this package supplies its mismatch callback,
// which raises one critical `host_key_changed` signal per address through shared/signals (a
// repeat bumps its occurrences; the opening alone appends signal.raised and its audit row), so
// the operator hears about a possible man in the middle on the dashboard and in chat, not only
// in a log line.
package hostkeys

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/shared/signals"
)

// Signal identity (docs/execution-contract.md).
const (
	SignalKind     = "host_key_changed"
	SignalSeverity = signals.SeverityCritical
)

// DedupKey is the signal's dedup key for a dialled "ip:port".
func DedupKey(addr string) string { return SignalKind + ":" + addr }

// New returns the host key store the scheduler's SSH pool uses: keys pinned in
// ssh_host_keys, mismatches raised as signals.
func New(pool *storage.Pool, log zerolog.Logger) *remote.PGHostKeys {
	log = log.With().Str("component", "hostkeys").Logger()
	return remote.NewPGHostKeys(pool, func(ctx context.Context, addr, want, got string) {
		// The handshake that noticed the mismatch may be cut short; the signal must still be
		// written, with a bound of its own.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := Raise(sctx, pool, addr, want, got); err != nil {
			log.Error().Err(err).Str("addr", addr).Msg("could not raise host_key_changed signal")
		}
	}, log)
}

// Raise records, in one transaction, that addr offered the key with fingerprint got while
// want is pinned: one signal per address, attached to the machine at addr when there is
// exactly one; a repeat bumps its occurrence count and last_seen. It returns the signal id.
func Raise(ctx context.Context, db *storage.Pool, addr, want, got string) (string, error) {
	return RaiseOn(ctx, storage.New(db), addr, want, got)
}

// RaiseOn is Raise on st, which may be a transaction: a key a cluster vouches for that
// differs from the one pinned is refused and raised with the discovery that found it.
func RaiseOn(ctx context.Context, st *storage.Store, addr, want, got string) (string, error) {
	r, err := st.RaiseAtMachine(ctx, addr, signals.Signal{
		Kind: SignalKind, DedupKey: DedupKey(addr), Severity: SignalSeverity,
		Summary: fmt.Sprintf("SSH host key of %s changed (pinned %s, offered %s); connections are refused until the key is verified and re-pinned", addr, want, got),
		Details: map[string]any{"address": addr, "pinned": want, "offered": got},
	})
	if err != nil {
		return "", fmt.Errorf("raise host_key_changed for %s: %w", addr, err)
	}
	return r.ID, nil
}
