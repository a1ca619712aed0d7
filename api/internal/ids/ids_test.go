package ids

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

// IsUUID is shared/ids.IsUUID (tested there); New makes lower-case v7 ids it accepts.
func TestNewIsAUUIDv7(t *testing.T) {
	t.Parallel()
	if IsUUID("lxc:web") || !IsUUID("0190A000-ABCD-7000-8000-00000000DEAD") {
		t.Error("IsUUID does not tell an id from a slug")
	}
	id, err := New()
	if err != nil || !IsUUID(id) || strings.ToLower(id) != id {
		t.Errorf("New() = %q, %v", id, err)
	}
	if u, _ := uuid.Parse(id); u.Version() != 7 {
		t.Errorf("New() is version %d", u.Version())
	}
}
