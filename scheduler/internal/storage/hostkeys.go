package storage

import (
	"context"
	"fmt"
	"net"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/signals"
)

// RaiseAtMachine raises s in one transaction, attached to the machine reached at addr when
// there is exactly one (hostkeys.Raise): a repeat bumps its occurrence count and last_seen.
func (s *Store) RaiseAtMachine(ctx context.Context, addr string, sig signals.Signal) (signals.Raised, error) {
	var r signals.Raised
	err := pg.InTx(ctx, s.db, func(tx pgx.Tx) error {
		machine, err := machineAt(ctx, tx, addr)
		if err != nil {
			return err
		}
		sig.EntityID = machine
		r, err = signals.New(nil).Raise(ctx, tx, sig)
		return err
	})
	return r, err
}

const qMachineAt = `
SELECT id::text FROM entities
WHERE state <> 'destroyed'
  AND $1 IN (attributes->>'public_ipv4', attributes->>'mesh_ipv4', attributes->>'lan_ipv4')
  AND coalesce(attributes->>'ssh_port', '22') = $2
LIMIT 2`

// machineAt finds the one entity reached at addr (an address attribute equal to its ip and
// ssh_port equal to its port, 22 when unset), so the signal lands on the machine's page. It
// returns "" for no match, or several: the signal is then left unattached rather than
// pinned on a guess.
func machineAt(ctx context.Context, q pg.Querier, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil
	}
	rows, err := q.Query(ctx, qMachineAt, host, port)
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
