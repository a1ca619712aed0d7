package ruleset

import (
	"strings"
	"unicode"
)

// ReadOnlySQL reports whether SQL text (the value of psql -c or mysql -e) only
// reads: every statement of the list is a query (SELECT, SHOW, EXPLAIN without
// ANALYZE, TABLE, VALUES, DESCRIBE, a WITH that only selects) or a transaction
// bracket, and no query calls a function known to change state or writes a
// file. A psql meta-command is read-only when it only describes (\d…, \l,
// \dt …). Anything the scanner cannot follow (an unterminated quote, a
// meta-command it does not know) is not read-only, so the rule that asks
// falls back to config_mutation and a destructive rule still sees the text.
func ReadOnlySQL(text string) bool {
	t := strings.TrimSpace(text)
	if t == "" {
		return false
	}
	if t[0] == '\\' {
		return readOnlyMeta(t)
	}
	stmts, ok := splitSQL(t)
	if !ok || len(stmts) == 0 {
		return false
	}
	for _, words := range stmts {
		if !readOnlyStatement(words) {
			return false
		}
	}
	return true
}

// readOnlyMeta: psql describes with \d and friends; \! runs a shell, \o and \g
// write files, \i runs a file, \copy writes or reads tables: none of those.
func readOnlyMeta(t string) bool {
	if strings.ContainsAny(t, "\n;|") {
		return false
	}
	cmd, _, _ := strings.Cut(t[1:], " ")
	switch strings.TrimRight(cmd, "+S") {
	case "d", "da", "db", "dc", "dC", "dd", "dD", "ddp", "dE", "di", "dm", "ds", "dt", "dv", "des", "det", "deu", "dew",
		"df", "dF", "dFd", "dFp", "dFt", "dg", "dl", "dL", "dn", "do", "dO", "dp", "dP", "drds", "dRp", "dRs", "dT",
		"du", "dx", "dy", "l", "lo_list", "conninfo", "encoding", "sf", "sv", "z", "copyright", "version":
		return true
	}
	return false
}

// sqlWritingFunctions are functions a SELECT may call that change state:
// sessions, replication, sequences, large objects, files, configuration.
var sqlWritingFunctions = []string{"pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile",
	"pg_switch_wal", "pg_create_", "pg_drop_", "pg_promote", "pg_replication_origin_", "pg_logical_emit_message",
	"pg_file_write", "pg_file_unlink", "pg_file_rename", "pg_advisory", "pg_try_advisory", "setval", "nextval",
	"lo_import", "lo_export", "lo_unlink", "lo_create", "lo_from_bytea", "lo_put", "dblink", "set_config",
	"pg_import_system_collations", "pg_stat_reset", "pg_wal_replay_", "pg_start_backup", "pg_stop_backup",
	"pg_backup_start", "pg_backup_stop", "pg_sequence_", "sleep", "benchmark", "load_file", "sys_exec", "sys_eval"}

// readOnlyStatement judges one statement from its lower-cased words.
func readOnlyStatement(words []string) bool {
	if len(words) == 0 {
		return true // an empty statement (;;) does nothing
	}
	for _, w := range words {
		switch w {
		case "insert", "update", "delete", "merge", "into", "outfile", "dumpfile", "copy", "create", "drop",
			"alter", "truncate", "grant", "revoke", "lock", "call", "do", "execute", "vacuum", "cluster",
			"reindex", "refresh", "comment", "security", "nowait", "share":
			return false
		}
		for _, fn := range sqlWritingFunctions {
			if strings.HasPrefix(w, fn) {
				return false
			}
		}
	}
	switch words[0] {
	case "select", "show", "table", "values", "with", "describe", "desc":
		return true
	case "explain":
		return !containsWord(words, "analyze") && !containsWord(words, "analyse")
	case "begin", "commit", "rollback", "end", "start", "abort":
		return true
	}
	return false
}

func containsWord(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}

// splitSQL splits SQL into statements of lower-cased bare words, dropping
// string literals, quoted identifiers, dollar-quoted bodies and comments (their
// text cannot act). ok is false when a quote or comment is not closed.
func splitSQL(s string) (stmts [][]string, ok bool) {
	var cur []string
	var word strings.Builder
	flush := func() {
		if word.Len() > 0 {
			cur = append(cur, strings.ToLower(word.String()))
			word.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\'' || ch == '"' || ch == '`':
			flush()
			j := i + 1
			for ; j < len(s); j++ {
				if s[j] == ch {
					if j+1 < len(s) && s[j+1] == ch { // doubled quote
						j++
						continue
					}
					break
				}
				if s[j] == '\\' && ch != '"' {
					j++
				}
			}
			if j >= len(s) {
				return nil, false
			}
			i = j
		case ch == '-' && i+1 < len(s) && s[i+1] == '-', ch == '#':
			flush()
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				i = len(s)
			} else {
				i += j
			}
		case ch == '/' && i+1 < len(s) && s[i+1] == '*':
			flush()
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return nil, false
			}
			i += j + 3
		case ch == '$':
			// $tag$ … $tag$ (PostgreSQL), else a parameter such as $1.
			end := strings.IndexByte(s[i+1:], '$')
			tag := ""
			if end >= 0 {
				tag = s[i : i+end+2]
			}
			if end >= 0 && validDollarTag(tag) {
				flush()
				j := strings.Index(s[i+len(tag):], tag)
				if j < 0 {
					return nil, false
				}
				i += len(tag) + j + len(tag) - 1
				continue
			}
			word.WriteByte(ch)
		case ch == ';':
			flush()
			stmts = append(stmts, cur)
			cur = nil
		case ch == '\\':
			return nil, false // a meta-command inside a list: not followed
		case ch == '_' || ch < 0x80 && (unicode.IsLetter(rune(ch)) || unicode.IsDigit(rune(ch))):
			word.WriteByte(ch)
		default:
			flush()
		}
	}
	flush()
	if len(cur) > 0 {
		stmts = append(stmts, cur)
	}
	return stmts, true
}

func validDollarTag(tag string) bool {
	if len(tag) < 2 || tag[0] != '$' || tag[len(tag)-1] != '$' {
		return false
	}
	for i := 1; i < len(tag)-1; i++ {
		c := tag[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 1 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
