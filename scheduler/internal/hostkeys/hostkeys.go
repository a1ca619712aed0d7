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
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/pg"
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
func New(pool *pgxpool.Pool, log zerolog.Logger) *remote.PGHostKeys {
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
func Raise(ctx context.Context, db pg.TxBeginner, addr, want, got string) (string, error) {
	var id string
	err := pg.InTx(ctx, db, func(tx pgx.Tx) error {
		machine, err := machineAt(ctx, tx, addr)
		if err != nil {
			return err
		}
		r, err := signals.New(nil).Raise(ctx, tx, signals.Signal{
			Kind: SignalKind, DedupKey: DedupKey(addr), EntityID: machine, Severity: SignalSeverity,
			Summary: fmt.Sprintf("SSH host key of %s changed (pinned %s, offered %s); connections are refused until the key is verified and re-pinned", addr, want, got),
			Details: map[string]any{"address": addr, "pinned": want, "offered": got},
		})
		id = r.ID
		return err
	})
	if err != nil {
		return "", fmt.Errorf("raise host_key_changed for %s: %w", addr, err)
	}
	return id, nil
}

// machineAt finds the one entity reached at addr (an address attribute equal to its ip and
// ssh_port equal to its port, 22 when unset), so the signal lands on the machine's page. It
// returns "" for no match, or several: the signal is then left unattached rather than
// pinned on a guess.
func machineAt(ctx context.Context, q pg.Querier, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil
	}
	rows, err := q.Query(ctx, `
SELECT id::text FROM entities
WHERE state <> 'destroyed'
  AND $1 IN (attributes->>'public_ipv4', attributes->>'mesh_ipv4', attributes->>'lan_ipv4')
  AND coalesce(attributes->>'ssh_port', '22') = $2
LIMIT 2`, host, port)
	if err != nil {
		return "", fmt.Errorf("find machine at %s: %w", addr, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("find machine at %s: %w", addr, err)
	}
	if len(ids) != 1 {
		return "", nil
	}
	return ids[0], nil
}
