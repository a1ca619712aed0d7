// Package ids is how the api tells an id from a slug, and makes ids. Entities, relationships,
// signals, executions and approvals are keyed by uuids (v7, time-ordered); an entity is also
// named by its slug "<type>:<name>", which always holds a colon, so the two never collide.
package ids

import (
	"fmt"

	"github.com/google/uuid"

	sharedids "github.com/oikos-hq/oikos/shared/ids"
)

// IsUUID reports whether s is a uuid in its canonical 36-character form: an id rather than
// a slug. It is shared/ids.IsUUID, the one check every daemon uses (see there).
func IsUUID(s string) bool { return sharedids.IsUUID(s) }

// New returns a fresh uuid v7 as a string.
func New() (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("generate id: %w", err)
	}
	return u.String(), nil
}
