package fleetstore

import (
	"os"
	"testing"

	"github.com/oikos-hq/oikos/testkit/pgtest"
	"github.com/oikos-hq/oikos/testkit/sqlcheck"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestQueriesPrepare prepares every registered query against the migrated schema, so a
// renamed column or table fails here rather than at run time.
func TestQueriesPrepare(t *testing.T) { sqlcheck.Prepare(t, pgtest.New(t).Pool, Queries) }

// TestQueriesRegistered parses the package's own source: every constant that starts like a
// statement must be in Queries, and no statement may be written outside a constant.
func TestQueriesRegistered(t *testing.T) { sqlcheck.Registered(t, ".", Queries) }
