package signals

import "time"

// Incidents are signals of kind IncidentKind (scheduler/internal/incidents writes them, the
// api's notifier and dashboard read their events). This is their event contract, defined
// once for both sides.
const (
	IncidentKind        = "incident"
	IncidentDedupPrefix = "incident:" // + the root entity's id

	EventIncidentOpened   = "incident.opened"
	EventIncidentUpdated  = "incident.updated"
	EventIncidentResolved = "incident.resolved"
)

// IncidentEvent is the payload of the incident.* events; the event's entity is the root.
type IncidentEvent struct {
	IncidentID    string             `json:"incident_id"` // the signal's id
	DedupKey      string             `json:"dedup_key"`
	RootID        string             `json:"root_id"`
	Root          string             `json:"root"`
	RootType      string             `json:"root_type"`
	Severity      string             `json:"severity"`
	Summary       string             `json:"summary"`
	Reason        string             `json:"reason"`
	AffectedCount int                `json:"affected_count"`
	Affected      []IncidentAffected `json:"affected"` // at most IncidentListed
	Tags          []string           `json:"tags"`
	Status        string             `json:"status"`
	OpenedAt      time.Time          `json:"opened_at"`
	ResolvedAt    *time.Time         `json:"resolved_at,omitempty"`
	// Joined and Left name the entities that came and went (incident.updated).
	Joined []string `json:"joined,omitempty"`
	Left   []string `json:"left,omitempty"`
	// Resolution says why an incident resolved (incident.resolved).
	Resolution string `json:"resolution,omitempty"`
	// Moved names the guests that left because they run on another node now (HA recovered
	// them, or they were migrated): not recovered where the root failed, but moved off it.
	Moved []IncidentMoved `json:"moved,omitempty"`
}

// IncidentMoved is a guest that left an incident by moving to another node.
type IncidentMoved struct {
	EntityID string `json:"entity_id"`
	Entity   string `json:"entity"`
	From     string `json:"from"` // the node it left (the incident's root)
	To       string `json:"to"`   // the node it runs on now
}

// IncidentListed bounds the affected entities an event carries (the api lists them all).
const IncidentListed = 50

// IncidentAffected is an entity affected through an incident's root, with its own health.
type IncidentAffected struct {
	EntityID string `json:"entity_id"`
	Entity   string `json:"entity"`
	Health   string `json:"health"`
	Reason   string `json:"reason"`
}
