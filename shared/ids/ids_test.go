package ids

import (
	"testing"

	"github.com/google/uuid"
)

func TestIsUUID(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"0190a000-0000-7000-8000-000000000001":          true,
		"0190A000-ABCD-7000-8000-00000000DEAD":          true,
		"lxc:web":                                       false,
		"":                                              false,
		"0190a000-0000-7000-8000-00000000000":           false,
		"0190a000-0000-7000-8000-0000000000011":         false,
		"0190a000x0000-7000-8000-000000000001":          false,
		"0190a000-0000-7000-8000-00000000000g":          false,
		"0190a0000000700080000000000000001":             false,
		"{0190a000-0000-7000-8000-000000000001}":        false,
		"urn:uuid:0190a000-0000-7000-8000-000000000001": false,
	} {
		if got := IsUUID(s); got != want {
			t.Errorf("IsUUID(%q) = %v", s, got)
		}
		// Agrees with the uuid package on the canonical form.
		if _, err := uuid.Parse(s); want && err != nil {
			t.Errorf("%q: uuid.Parse: %v", s, err)
		}
	}
	if id := uuid.Must(uuid.NewV7()).String(); !IsUUID(id) {
		t.Errorf("a new v7 id %q is not a uuid", id)
	}
}
