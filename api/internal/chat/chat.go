// Package chat is the api's record of chat messages (chat_messages, migration 00007) and of
// the grants each proved (chat_message_uses): docs/behaviours.md A5, "the api records each
// operator chat message itself and accepts an agent's relay only for that record".
//
// POST /api/v1/chat records the message here, in its own transaction with its audit row and
// its chat.message event, before the turn is forwarded to the agent; the execution service
// reads the record back (Load) when an agent relays an operator's assent, and marks it used
// (MarkUsed) in the transaction of the decision it proved. Nothing here trusts the agent: a
// record says who sent the message (the token's name and role as the api verified them), in
// which session, when, and what it said.
package chat

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/chatstore"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// MaxMessageBytes bounds a chat message (16 KiB).
const MaxMessageBytes = 16 << 10

// sessionRe is what a session id may be: the correlation id's alphabet, 1 to 128 characters
// (agent_sessions.id and chat_messages.session_id hold the same).
var sessionRe = regexp.MustCompile(`^[A-Za-z0-9._:@/-]{1,128}$`)

// ValidSessionID reports whether s may name a session.
func ValidSessionID(s string) bool { return sessionRe.MatchString(s) }

// Meta is who sends the message and through what request.
type Meta struct {
	Actor, Role   string
	Method, Path  string
	CorrelationID string
}

// Message is one recorded chat message.
type Message = chatstore.Message

// Store records and reads chat messages.
type Store struct {
	store *chatstore.Store
}

// NewStore returns a store over pool.
func NewStore(pool *storage.Pool) *Store { return &Store{store: chatstore.New(pool)} }

// Validate checks a message before it is recorded and returns the session it belongs to: the
// one named (1-128 of A-Za-z0-9._:@/-), or a new uuid v7 when none is named. The text must
// hold more than white space, at most MaxMessageBytes, and no NUL.
func Validate(sessionID, text string) (string, error) {
	var errs []error
	switch {
	case strings.TrimSpace(text) == "":
		errs = append(errs, apierr.Invalid("message", "is required and must hold more than white space"))
	case len(text) > MaxMessageBytes:
		errs = append(errs, apierr.Invalid("message", "is %d bytes; a chat message is at most %d", len(text), MaxMessageBytes))
	case strings.ContainsRune(text, 0) || !utf8.ValidString(text):
		errs = append(errs, apierr.Invalid("message", "must be UTF-8 text without NUL characters"))
	}
	if sessionID != "" && !ValidSessionID(sessionID) {
		errs = append(errs, apierr.Invalid("session_id", "must be 1 to 128 characters of A-Z a-z 0-9 . _ : @ / - (or left out for a new session)"))
	}
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	if sessionID == "" {
		return ids.New()
	}
	return sessionID, nil
}

// recordedPayload is the chat.message event's payload and the audit row's after: the record
// without its text in the event (every reader of the stream sees events), with it in the audit
// row.
type recordedPayload struct {
	MessageID string  `json:"message_id"`
	SessionID string  `json:"session_id"`
	TokenName string  `json:"token_name"`
	TokenRole string  `json:"token_role"`
	Bytes     int     `json:"bytes"`
	Text      *string `json:"text,omitempty"`
}

// Record validates the message and records it, with its audit row (chat.message, the text
// included) and its chat.message event (correlation id: the session), in one transaction of
// its own. It returns the record, whose id the agent is given with the turn.
func (s *Store) Record(ctx context.Context, m Meta, sessionID, text string) (Message, error) {
	if m.Actor == "" || m.Role == "" {
		return Message{}, errors.New("chat: Meta.Actor and Meta.Role are required (the record names who sent it)")
	}
	sessionID, err := Validate(sessionID, text)
	if err != nil {
		return Message{}, err
	}
	id, err := ids.New()
	if err != nil {
		return Message{}, err
	}
	msg := Message{ID: id, SessionID: sessionID, Text: text, TokenName: m.Actor, TokenRole: m.Role}
	err = s.store.InTx(ctx, func(tx *chatstore.Store) error {
		if msg.CreatedAt, err = tx.Insert(ctx, msg); err != nil {
			return err
		}
		p := recordedPayload{MessageID: id, SessionID: sessionID, TokenName: m.Actor, TokenRole: m.Role, Bytes: len(text)}
		withText := p
		withText.Text = &msg.Text
		if err := storage.WriteAudit(ctx, tx.DB(), audit.Row{Actor: m.Actor, Action: "chat.message", Method: m.Method, Path: m.Path,
			CorrelationID: sessionID, After: withText}); err != nil {
			return err
		}
		if _, err := storage.AppendEvent(ctx, tx.DB(), eventbus.Event{Type: "chat.message", CorrelationID: sessionID, Actor: m.Actor}, p); err != nil {
			return fmt.Errorf("event chat.message: %w", err)
		}
		return nil
	})
	if err != nil {
		return Message{}, err
	}
	return msg, nil
}

// Load reads one recorded message on db (the caller's transaction). An id that is not a
// uuid, or names no record, is apierr.ErrNotFound.
func Load(ctx context.Context, db storage.DB, id string) (Message, error) {
	return chatstore.On(db).Load(ctx, id)
}

// PreviousAt is when the session's chat message before msg was recorded (zero when msg is the
// first). An assent answers only the turn between the two: what Nomos asked after the
// previous message (docs/behaviours.md A5, "the immediately preceding assistant turn").
func PreviousAt(ctx context.Context, db storage.DB, msg Message) (time.Time, error) {
	return chatstore.On(db).PreviousAt(ctx, msg)
}

// Use is one grant a message proved: an approval (ApprovalID) or a generation of its session's
// plan (PlanGeneration), relayed by UsedBy.
type Use = chatstore.Use

// MarkUsed records a grant on db (the transaction of the decision it proved) and reports
// false, recording nothing, when the message already proved that same grant: each (message,
// approval) and each (message, plan generation) counts once, whoever relays it, even under a
// race (the unique indexes decide).
func MarkUsed(ctx context.Context, db storage.DB, u Use) (fresh bool, err error) {
	return chatstore.On(db).MarkUsed(ctx, u)
}

// Used reports whether the message already proved the grant u names (read on db). The
// decision path asks before it decides, so a replay is refused as a replay; MarkUsed then
// settles a race.
func Used(ctx context.Context, db storage.DB, u Use) (bool, error) {
	return chatstore.On(db).Used(ctx, u)
}
