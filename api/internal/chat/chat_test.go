package chat_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/chat"
	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func TestValidate(t *testing.T) {
	t.Parallel()
	s, err := chat.Validate("", "hello")
	if err != nil || !ids.IsUUID(s) {
		t.Fatalf("no session: %q, %v; want a new uuid", s, err)
	}
	if s, err := chat.Validate("mcp:a.b_c@d/e-1", "hello"); err != nil || s != "mcp:a.b_c@d/e-1" {
		t.Fatalf("chosen session: %q, %v", s, err)
	}
	if _, err := chat.Validate("", strings.Repeat("x", chat.MaxMessageBytes)); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	for _, c := range []struct{ session, text, field string }{
		{"", "", "message"},
		{"", " \t\n", "message"},
		{"", strings.Repeat("x", chat.MaxMessageBytes+1), "message"},
		{"", "a\x00b", "message"},
		{"", "bad \xff utf-8", "message"},
		{"has space", "hi", "session_id"},
		{strings.Repeat("s", 129), "hi", "session_id"},
	} {
		_, err := chat.Validate(c.session, c.text)
		var fe *apierr.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, apierr.ErrInvalid) {
			t.Errorf("%q %.20q: %v, want a field error on %s", c.session, c.text, err, c.field)
		}
	}
}

// A message proves each grant once: the same (message, plan generation) twice is refused,
// another generation is a new grant; Load knows only recorded messages.
func TestRecordLoadUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	s := chat.NewStore(db.Pool)
	m, err := s.Record(ctx, chat.Meta{Actor: "op", Role: "operator"}, "s-1", "yes")
	if err != nil {
		t.Fatal(err)
	}
	got, err := chat.Load(ctx, db.Pool, m.ID)
	if err != nil || got.Text != "yes" || got.TokenName != "op" || got.TokenRole != "operator" || got.SessionID != "s-1" ||
		!got.CreatedAt.Equal(m.CreatedAt) {
		t.Fatalf("load: %+v, %v (recorded %+v)", got, err, m)
	}
	for _, id := range []string{"nope", "0190d1a4-0000-7000-8000-000000000000"} {
		if _, err := chat.Load(ctx, db.Pool, id); !errors.Is(err, apierr.ErrNotFound) {
			t.Errorf("load %q: %v, want not found", id, err)
		}
	}
	if _, err := s.Record(ctx, chat.Meta{Actor: "op"}, "s-1", "yes"); err == nil {
		t.Fatal("a record without the sender's role")
	}
	for i, want := range []bool{true, false} {
		fresh, err := chat.MarkUsed(ctx, db.Pool, chat.Use{MessageID: m.ID, PlanGeneration: 1, UsedBy: "nomos"})
		if err != nil || fresh != want {
			t.Fatalf("use %d of generation 1: fresh %v, %v; want %v", i, fresh, err, want)
		}
	}
	if used, err := chat.Used(ctx, db.Pool, chat.Use{MessageID: m.ID, PlanGeneration: 2}); err != nil || used {
		t.Fatalf("generation 2 before its use: %v %v", used, err)
	}
	if fresh, err := chat.MarkUsed(ctx, db.Pool, chat.Use{MessageID: m.ID, PlanGeneration: 2, UsedBy: "nomos"}); err != nil || !fresh {
		t.Fatalf("generation 2: %v %v", fresh, err)
	}
	var usedFor string
	if err := db.Pool.QueryRow(ctx, `SELECT used_for FROM chat_messages WHERE id = $1`, m.ID).Scan(&usedFor); err != nil || usedFor != "plan:2" {
		t.Fatalf("used_for %q (%v)", usedFor, err)
	}
	if _, err := chat.MarkUsed(ctx, db.Pool, chat.Use{MessageID: m.ID, UsedBy: "nomos"}); err == nil {
		t.Fatal("a use of nothing")
	}
}
