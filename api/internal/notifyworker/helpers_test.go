package notifyworker_test

import (
	"os"
	"testing"

	"github.com/oikos-hq/oikos/api/internal/notifytest"
	"github.com/oikos-hq/oikos/api/internal/notifyworker"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// The shared test support, under the names these tests use.
const (
	wait       = notifytest.Wait
	hookSecret = notifytest.HookSecret
)

var (
	newEnv      = notifytest.NewEnv
	newReceiver = notifytest.NewReceiver
	incident    = notifytest.Incident
	of          = notifytest.Of
	decode      = notifytest.Decode
	op          = notifytest.Op
)

func mustDispatcher(t *testing.T, o notifyworker.DispatcherOptions) *notifyworker.Dispatcher {
	t.Helper()
	d, err := notifyworker.NewDispatcher(o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
