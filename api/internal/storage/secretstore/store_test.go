package secretstore

import (
	"os"
	"testing"

	"github.com/oikos-hq/oikos/testkit/pgtest"
	"github.com/oikos-hq/oikos/testkit/sqlcheck"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestQueriesPrepare prepares every registered query against the migrated schema.
func TestQueriesPrepare(t *testing.T) { sqlcheck.Prepare(t, pgtest.New(t).Pool, Queries) }

// TestQueriesRegistered: every statement constant of the package is in Queries.
func TestQueriesRegistered(t *testing.T) { sqlcheck.Registered(t, ".", Queries) }
