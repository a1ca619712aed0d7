package migrations

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// migration is one file: its version, its Up and Down sections, and whether goose runs it
// outside a transaction (CREATE INDEX CONCURRENTLY needs that).
type migration struct {
	name          string
	version       int64
	up, down      string
	noTransaction bool
}

func load(t *testing.T) []migration {
	t.Helper()
	names, err := fs.Glob(FS, Dir+"/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	var out []migration
	for _, n := range names {
		b, err := fs.ReadFile(FS, n)
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseInt(strings.SplitN(path.Base(n), "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("%s: the name does not start with a version: %v", n, err)
		}
		text := string(b)
		m := migration{name: path.Base(n), version: v, noTransaction: strings.Contains(text, "-- +goose NO TRANSACTION")}
		up, down, ok := strings.Cut(text, "-- +goose Down")
		if !ok {
			t.Errorf("%s: no -- +goose Down section", m.name)
		}
		_, m.up, _ = strings.Cut(up, "-- +goose Up")
		m.down = down
		out = append(out, m)
	}
	return out
}

// statements are the SQL statements of a section: comments dropped, split at semicolons
// outside dollar-quoted bodies, white space folded, upper-cased for matching.
func statements(sql string) []string {
	var lines []string
	for _, l := range strings.Split(sql, "\n") {
		if i := strings.Index(l, "--"); i >= 0 {
			l = l[:i]
		}
		lines = append(lines, l)
	}
	body := strings.Join(lines, "\n")
	var out []string
	var cur strings.Builder
	inDollar := false
	for i := 0; i < len(body); i++ {
		if strings.HasPrefix(body[i:], "$$") {
			inDollar = !inDollar
			cur.WriteString("$$")
			i++
			continue
		}
		if body[i] == ';' && !inDollar {
			if s := strings.Join(strings.Fields(cur.String()), " "); s != "" {
				out = append(out, strings.ToUpper(s))
			}
			cur.Reset()
			continue
		}
		cur.WriteByte(body[i])
	}
	if s := strings.Join(strings.Fields(cur.String()), " "); s != "" {
		out = append(out, strings.ToUpper(s))
	}
	return out
}

// TestEveryMigrationIsReversible: each file has a Down section that undoes it, or says why it
// cannot (a line "-- irreversible: <why>" in the Down section, with the statements that
// undo what can be undone).
func TestEveryMigrationIsReversible(t *testing.T) {
	for _, m := range load(t) {
		if len(statements(m.down)) == 0 && !strings.Contains(m.down, "-- irreversible:") {
			t.Errorf("%s: the Down section is empty; undo the migration or write why it cannot be undone (-- irreversible: …)", m.name)
		}
		if len(statements(m.up)) == 0 {
			t.Errorf("%s: the Up section is empty", m.name)
		}
	}
}

// TestVersionsAreUnique: two branches that each added "the next" migration collide in the
// version; goose would refuse to start.
func TestVersionsAreUnique(t *testing.T) {
	seen := map[int64]string{}
	for _, m := range load(t) {
		if other, ok := seen[m.version]; ok {
			t.Errorf("%s and %s share version %d: renumber the newer one", other, m.name, m.version)
		}
		seen[m.version] = m.name
	}
}

// TestNewMigrationsSpareBigTables: a migration after PreviousRelease runs on an install's
// data. On the tables that grow (BigTables) it must not hold an exclusive lock for the time
// of a rewrite or a scan: indexes are built CONCURRENTLY (in a NO TRANSACTION file);
// constraints are added NOT VALID (and validated in a later statement, which does not block
// writes); no column changes type or becomes NOT NULL in place; no column is added with a
// volatile default (which rewrites the table); no UPDATE or DELETE rewrites it in one
// statement (backfills run in batches, from the daemon or a later release).
func TestNewMigrationsSpareBigTables(t *testing.T) {
	for _, m := range load(t) {
		if m.version <= PreviousRelease {
			continue
		}
		for _, f := range bigTableFindings(m.up, m.noTransaction) {
			t.Errorf("%s: %s", m.name, f)
		}
	}
}

// bigTableFindings are the statements of an Up section that break the rules above.
func bigTableFindings(up string, noTransaction bool) []string {
	big := strings.ToUpper(strings.Join(BigTables, "|"))
	onBig := regexp.MustCompile(`\b(?:ON|TABLE|UPDATE|FROM|INTO)\s+(?:ONLY\s+)?(?:PUBLIC\.)?(` + big + `)\b`)
	rules := []struct {
		bad  *regexp.Regexp
		why  string
		good *regexp.Regexp // when it matches too, the statement is fine
	}{
		{regexp.MustCompile(`^CREATE (UNIQUE )?INDEX`), "build the index CONCURRENTLY (in a -- +goose NO TRANSACTION file)", regexp.MustCompile(`^CREATE (UNIQUE )?INDEX CONCURRENTLY`)},
		{regexp.MustCompile(`ALTER COLUMN \S+ (SET DATA )?TYPE`), "a type change rewrites the table under an exclusive lock; add a new column and backfill it in batches", nil},
		{regexp.MustCompile(`ALTER COLUMN \S+ SET NOT NULL`), "SET NOT NULL scans the table under an exclusive lock; add a CHECK (col IS NOT NULL) NOT VALID and validate it", nil},
		{regexp.MustCompile(`ADD (CONSTRAINT \S+ )?(CHECK|FOREIGN KEY|REFERENCES)`), "add the constraint NOT VALID, then VALIDATE CONSTRAINT (which does not block writes)", regexp.MustCompile(`NOT VALID`)},
		{regexp.MustCompile(`ADD COLUMN .*DEFAULT .*(GEN_RANDOM_UUID|RANDOM|CLOCK_TIMESTAMP|NEXTVAL|TIMEOFDAY)\(`), "a volatile default rewrites the table; add the column without it and backfill in batches", nil},
		{regexp.MustCompile(`^(UPDATE|DELETE)\b`), "one UPDATE or DELETE over a big table locks its rows for minutes and bloats it; backfill in batches", nil},
		{regexp.MustCompile(`^(VACUUM FULL|CLUSTER)\b`), "VACUUM FULL and CLUSTER rewrite the table under an exclusive lock", nil},
	}
	var out []string
	for _, s := range statements(up) {
		if !onBig.MatchString(s) {
			continue
		}
		for _, r := range rules {
			if r.bad.MatchString(s) && (r.good == nil || !r.good.MatchString(s)) {
				out = append(out, fmt.Sprintf("%q: %s", s, r.why))
			}
		}
		if strings.Contains(s, "CONCURRENTLY") && !noTransaction {
			out = append(out, fmt.Sprintf("%q: CONCURRENTLY cannot run in a transaction: mark the file -- +goose NO TRANSACTION", s))
		}
	}
	return out
}

// TestBigTableRulesCatchTheirCases keeps the rules honest: each bad statement is caught, each
// good one passes.
func TestBigTableRulesCatchTheirCases(t *testing.T) {
	bad := []string{
		"CREATE INDEX x ON metric_samples (name)",
		"ALTER TABLE events ALTER COLUMN payload TYPE json",
		"ALTER TABLE audit_log ALTER COLUMN actor SET NOT NULL",
		"ALTER TABLE events ADD CONSTRAINT c CHECK (id > 0)",
		"ALTER TABLE audit_log ADD COLUMN k uuid DEFAULT gen_random_uuid()",
		"UPDATE metric_samples SET value = 0",
		"DELETE FROM events WHERE id < 10",
	}
	good := []string{
		"CREATE INDEX CONCURRENTLY x ON metric_samples (name)",
		"ALTER TABLE events ADD COLUMN note text NOT NULL DEFAULT ''",
		"ALTER TABLE events ADD CONSTRAINT c CHECK (id > 0) NOT VALID",
		"CREATE INDEX x ON entities (name)",
		"UPDATE entities SET name = 'x'",
	}
	check := func(sql string) bool { return len(bigTableFindings(sql+";", true)) > 0 }
	for _, s := range bad {
		if !check(s) {
			t.Errorf("not caught: %s", s)
		}
	}
	if len(bigTableFindings("CREATE INDEX CONCURRENTLY x ON events (type);", false)) == 0 {
		t.Error("CONCURRENTLY in a transaction not caught")
	}
	for _, s := range good {
		if check(s) {
			t.Errorf("refused: %s", s)
		}
	}
}
