package storage

import (
	"strconv"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/testkit/pgtest"
	"github.com/oikos-hq/oikos/testkit/sqlcheck"
)

// TestQueriesPrepare prepares every registered query against the migrated schema, so a
// renamed column or table fails here rather than at run time.
func TestQueriesPrepare(t *testing.T) { sqlcheck.Prepare(t, pgtest.New(t).Pool, Queries) }

// TestQueriesRegistered parses the package's own source: every constant that starts like a
// statement must be in Queries, and no statement may be written outside a constant.
func TestQueriesRegistered(t *testing.T) { sqlcheck.Registered(t, ".", Queries) }

// TestFirstTextLength: the SQL cut of a message's text is the titlePrefix the Go cut uses.
func TestFirstTextLength(t *testing.T) {
	if !strings.HasSuffix(firstTextSQL, ", "+strconv.Itoa(titlePrefix)+")") {
		t.Errorf("firstTextSQL %q does not cut at titlePrefix %d", firstTextSQL, titlePrefix)
	}
}
