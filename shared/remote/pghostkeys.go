package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
)

// PGHostKeys uses the ssh_host_keys table that migrations/sql/00003_executions.sql
// creates (the migrations module owns it; this package keeps no copy of its DDL):
// address is the dialled "ip:port", key_type e.g. ssh-ed25519, public_key the SSH
// wire encoding, fingerprint SHA256:… as ssh-keygen -l prints it, and first_seen
// and last_seen when the key was pinned and last presented. Its tests run against
// the migrated schema (testkit/pgtest).

// DB is the part of pgx that PGHostKeys uses; *pgxpool.Pool, *pgx.Conn and
// pgx.Tx all satisfy it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PGHostKeys pins host keys in Postgres so every scheduler replica, and every
// restart, trusts the same keys.
type PGHostKeys struct {
	db         DB
	onMismatch func(ctx context.Context, addr, want, got string)
	log        zerolog.Logger
}

// NewPGHostKeys builds the store. onMismatch receives the address and the
// pinned and offered fingerprints; the caller turns it into a signal, which
// keeps this package independent of the signals schema. It may be nil only
// in tools that have no signals; the mismatch is logged either way.
func NewPGHostKeys(db DB, onMismatch func(ctx context.Context, addr, want, got string), log zerolog.Logger) *PGHostKeys {
	return &PGHostKeys{db: db, onMismatch: onMismatch, log: log}
}

const (
	sqlHostKeyTouch = `UPDATE ssh_host_keys SET last_seen = now() WHERE address = $1 RETURNING public_key`
	sqlHostKeyPin   = `INSERT INTO ssh_host_keys (address, key_type, public_key, fingerprint, last_seen)
VALUES ($1, $2, $3, $4, now())
ON CONFLICT (address) DO NOTHING`
	sqlHostKeyGet = `SELECT public_key FROM ssh_host_keys WHERE address = $1`
)

// Get returns the pinned key and stamps last_seen, so the table also shows
// when each host was last reached.
func (s *PGHostKeys) Get(ctx context.Context, addr string) ([]byte, bool, error) {
	var key []byte
	err := s.db.QueryRow(ctx, sqlHostKeyTouch, addr).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read ssh_host_keys for %s: %w", addr, err)
	}
	return key, true, nil
}

// Put pins key for addr. Two processes meeting a new host at once both try to
// pin; the insert is first-wins and the loser compares against the winner, so
// a man in the middle cannot slip in through the race.
func (s *PGHostKeys) Put(ctx context.Context, addr string, key []byte) error {
	pub, err := ssh.ParsePublicKey(key)
	if err != nil {
		return fmt.Errorf("pin host key for %s: parse key: %w", addr, err)
	}
	tag, err := s.db.Exec(ctx, sqlHostKeyPin, addr, pub.Type(), key, Fingerprint(key))
	if err != nil {
		return fmt.Errorf("insert ssh_host_keys for %s: %w", addr, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var existing []byte
	if err := s.db.QueryRow(ctx, sqlHostKeyGet, addr).Scan(&existing); err != nil {
		return fmt.Errorf("re-read ssh_host_keys for %s: %w", addr, err)
	}
	if bytes.Equal(existing, key) {
		return nil
	}
	return &HostKeyChangedError{Addr: addr, Want: existing, Got: key}
}

// Mismatch logs the refusal and hands it to the signal callback.
func (s *PGHostKeys) Mismatch(ctx context.Context, addr string, want, got []byte) {
	wantFP, gotFP := Fingerprint(want), Fingerprint(got)
	s.log.Error().Str("addr", addr).Str("pinned", wantFP).Str("offered", gotFP).
		Msg("ssh host key mismatch")
	if s.onMismatch != nil {
		s.onMismatch(ctx, addr, wantFP, gotFP)
	}
}
