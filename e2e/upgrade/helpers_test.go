package upgrade

import (
	"testing"

	"github.com/oikos-hq/oikos/migrations"
)

// latestMigration is the newest migration's version in the embedded set.
func latestMigration(t *testing.T) int64 {
	t.Helper()
	v, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
