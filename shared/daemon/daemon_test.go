package daemon

import (
	"context"
	"errors"
	"testing"
)

type fakeDB struct{ err error }

func (d fakeDB) Ping(context.Context) error { return d.err }

type fakeListener struct{ up bool }

func (l fakeListener) Connected() bool { return l.up }

func TestAddDatabaseChecks(t *testing.T) {
	h := NewHealth()
	h.AddDatabaseChecks(fakeDB{}, fakeListener{up: true})
	if failed := h.Ready(context.Background()); len(failed) != 0 {
		t.Fatalf("ready: %v", failed)
	}
	h = NewHealth()
	h.AddDatabaseChecks(fakeDB{err: errors.New("down")}, fakeListener{})
	failed := h.Ready(context.Background())
	if failed["database"] != "down" || failed["listener"] != "event listener is not connected" {
		t.Fatalf("failed: %v", failed)
	}
}
