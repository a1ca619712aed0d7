package upgrade

import (
	"io/fs"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/migrations"
)

// latestMigration is the newest migration's version in the embedded set.
func latestMigration(t *testing.T) int64 {
	t.Helper()
	names, err := fs.Glob(migrations.FS, migrations.Dir+"/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("migrations: %v", err)
	}
	var latest int64
	for _, n := range names {
		v, err := strconv.ParseInt(strings.SplitN(path.Base(n), "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", n, err)
		}
		latest = max(latest, v)
	}
	return latest
}
