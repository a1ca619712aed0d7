package graph

import (
	"encoding/json"
	"testing"
	"time"
)

// The audited view of an entity is its core fields alone, in the store's order: no health
// (the scheduler's) and no timestamps, whatever the entity read carried.
func TestSnapshotIsTheCoreFields(t *testing.T) {
	t.Parallel()
	now := time.Now()
	e := Entity{ID: "0190a3b4-0000-7000-8000-000000000001", Slug: "lxc:web", Type: "lxc", Name: "web", State: "running",
		Attributes: map[string]any{"vmid": float64(101)}, Version: 3, CreatedAt: now, UpdatedAt: now,
		Health: "up", HealthReason: "ok", LastCheckAt: &now}
	b, err := json.Marshal(snap(e))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"0190a3b4-0000-7000-8000-000000000001","slug":"lxc:web","type":"lxc","name":"web","state":"running",` +
		`"attributes":{"vmid":101},"version":3}`
	if string(b) != want {
		t.Errorf("snapshot JSON\n got %s\nwant %s", b, want)
	}
}
