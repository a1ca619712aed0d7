package notifyapi_test

import (
	"os"
	"testing"

	"github.com/oikos-hq/oikos/api/internal/notifytest"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// The shared test support, under the names these tests use.
const hookSecret = notifytest.HookSecret

var (
	newEnv      = notifytest.NewEnv
	newReceiver = notifytest.NewReceiver
	of          = notifytest.Of
	decode      = notifytest.Decode
)

type env = notifytest.Env
