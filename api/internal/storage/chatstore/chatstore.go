// Package chatstore holds the SQL of the api's chat record (issue #29): the operator chat
// messages the api records (chat_messages) and the grants each proved (chat_message_uses).
// api/internal/chat validates and records messages through it; the execution path reads
// and marks them inside its decisions' transactions (On the transaction's DB).
//
// Every SQL string is a named package-level constant registered in Queries.
package chatstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/api/internal/storage"
)

// Message is one recorded chat message.
type Message struct {
	ID        string    `json:"id"`
	SessionID string    `json:"session_id"`
	Text      string    `json:"text"`
	TokenName string    `json:"token_name"`
	TokenRole string    `json:"token_role"`
	CreatedAt time.Time `json:"created_at"`
}

// Use is one grant a message proved: an approval (ApprovalID) or a generation of its session's
// plan (PlanGeneration), relayed by UsedBy.
type Use struct {
	MessageID      string
	ApprovalID     string
	PlanGeneration int
	UsedBy         string
}

const (
	qInsertMessage = `INSERT INTO chat_messages (id, session_id, text, token_name, token_role)
			VALUES ($1, $2, $3, $4, $5) RETURNING created_at`
	qMessage = `SELECT id::text, session_id, text, token_name, token_role, created_at
		FROM chat_messages WHERE id = $1::uuid`
	qPreviousAt = `SELECT max(created_at) FROM chat_messages WHERE session_id = $1 AND created_at < $2`
	qInsertUse  = `INSERT INTO chat_message_uses (message_id, approval_id, plan_generation, used_by)
		VALUES ($1::uuid, $2::uuid, $3, $4) ON CONFLICT DO NOTHING`
	qMarkUsed = `UPDATE chat_messages SET used_for = $2, used_at = now() WHERE id = $1::uuid`
	qUsed     = `SELECT EXISTS (SELECT 1 FROM chat_message_uses WHERE message_id = $1::uuid
		AND (approval_id = $2::uuid OR plan_generation = $3))`
)

// Queries names every SQL constant of the package; the package test prepares each.
var Queries = map[string]string{
	"qInsertMessage": qInsertMessage,
	"qMessage":       qMessage,
	"qPreviousAt":    qPreviousAt,
	"qInsertUse":     qInsertUse,
	"qMarkUsed":      qMarkUsed,
	"qUsed":          qUsed,
}

// Store reads and writes the chat record on one DB.
type Store struct {
	db storage.DB
}

// New returns a Store on the api's pool.
func New(pool *storage.Pool) *Store { return &Store{db: pool} }

// On returns a Store on any DB (a pool or the caller's transaction).
func On(db storage.DB) *Store { return &Store{db: db} }

// InTx runs fn with a Store on one transaction and commits when fn returns nil.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	return storage.InTx(ctx, s.db, func(tx storage.DB) error { return fn(&Store{db: tx}) })
}

// DB is what the store runs on: inside InTx, the transaction, on which the caller writes
// the change's audit row and event (storage.WriteAudit, storage.AppendEvent).
func (s *Store) DB() storage.DB { return s.db }

// Insert records m (its CreatedAt is ignored) and returns when the database recorded it.
func (s *Store) Insert(ctx context.Context, m Message) (time.Time, error) {
	var at time.Time
	if err := s.db.QueryRow(ctx, qInsertMessage, m.ID, m.SessionID, m.Text, m.TokenName, m.TokenRole).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("record chat message: %w", err)
	}
	return at, nil
}

// Load reads one recorded message. An id that is not a uuid, or names no record, is
// apierr.ErrNotFound.
func (s *Store) Load(ctx context.Context, id string) (Message, error) {
	if !ids.IsUUID(id) {
		return Message{}, fmt.Errorf("%w: chat message %q", apierr.ErrNotFound, id)
	}
	var msg Message
	err := s.db.QueryRow(ctx, qMessage, id).
		Scan(&msg.ID, &msg.SessionID, &msg.Text, &msg.TokenName, &msg.TokenRole, &msg.CreatedAt)
	if storage.IsNoRows(err) {
		return Message{}, fmt.Errorf("%w: chat message %q", apierr.ErrNotFound, id)
	}
	if err != nil {
		return Message{}, fmt.Errorf("read chat message %s: %w", id, err)
	}
	return msg, nil
}

// PreviousAt is when the session's chat message before msg was recorded (zero when msg is the
// first).
func (s *Store) PreviousAt(ctx context.Context, msg Message) (time.Time, error) {
	var at *time.Time
	if err := s.db.QueryRow(ctx, qPreviousAt, msg.SessionID, msg.CreatedAt).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("previous chat message of %s: %w", msg.SessionID, err)
	}
	if at == nil {
		return time.Time{}, nil
	}
	return *at, nil
}

// MarkUsed records a grant and reports false, recording nothing, when the message already
// proved that same grant: each (message, approval) and each (message, plan generation)
// counts once, whoever relays it, even under a race (the unique indexes decide).
func (s *Store) MarkUsed(ctx context.Context, u Use) (fresh bool, err error) {
	var approval *string
	var gen *int
	var usedFor string
	switch {
	case u.ApprovalID != "" && u.PlanGeneration == 0:
		approval, usedFor = &u.ApprovalID, "approval:"+u.ApprovalID
	case u.ApprovalID == "" && u.PlanGeneration > 0:
		gen, usedFor = &u.PlanGeneration, "plan:"+strconv.Itoa(u.PlanGeneration)
	default:
		return false, errors.New("chat: a use names one approval or one plan generation")
	}
	tag, err := s.db.Exec(ctx, qInsertUse, u.MessageID, approval, gen, u.UsedBy)
	if err != nil {
		return false, fmt.Errorf("record use of chat message %s: %w", u.MessageID, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if _, err := s.db.Exec(ctx, qMarkUsed, u.MessageID, usedFor); err != nil {
		return false, fmt.Errorf("mark chat message %s used: %w", u.MessageID, err)
	}
	return true, nil
}

// Used reports whether the message already proved the grant u names.
func (s *Store) Used(ctx context.Context, u Use) (bool, error) {
	var used bool
	err := s.db.QueryRow(ctx, qUsed, u.MessageID, nilIfEmpty(u.ApprovalID), nilIfZero(u.PlanGeneration)).Scan(&used)
	if err != nil {
		return false, fmt.Errorf("read uses of chat message %s: %w", u.MessageID, err)
	}
	return used, nil
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nilIfZero(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}
