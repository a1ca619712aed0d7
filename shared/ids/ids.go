// Package ids tells an id from a slug, the one check every daemon uses. Entities,
// relationships, signals, executions and approvals are keyed by uuids (v7, time-ordered); an
// entity is also named by its slug "<type>:<name>", which always holds a colon, so the two
// never collide.
package ids

// IsUUID reports whether s is a uuid in its canonical 36-character form (any version, either
// case): an id rather than a slug. Anything else (a slug, a uuid in another spelling) is
// not, so it is looked up as a slug and answers not-found instead of reaching a ::uuid cast.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
