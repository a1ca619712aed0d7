// Package ids is how the api tells an id from a slug, and makes ids. Entities, relationships,
// signals, executions and approvals are keyed by uuids (v7, time-ordered); an entity is also
// named by its slug "<type>:<name>", which always holds a colon, so the two never collide.
package ids

import (
	"fmt"

	"github.com/google/uuid"
)

// IsUUID reports whether s is a uuid in its canonical 36-character form (any version, either
// case): an id rather than a slug. Anything else (a slug, a uuid in another spelling) is
// not, so it is looked up as a slug and answers 404 instead of reaching a ::uuid cast.
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

// New returns a fresh uuid v7 as a string.
func New() (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("generate id: %w", err)
	}
	return u.String(), nil
}
