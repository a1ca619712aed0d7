package notify

import (
	"encoding/json"
	"strings"

	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/signals"
)

// Kinds of notification a rule subscribes to.
const (
	KindIncidentOpened    = signals.EventIncidentOpened
	KindIncidentUpdated   = signals.EventIncidentUpdated
	KindIncidentResolved  = signals.EventIncidentResolved
	KindApprovalRequested = "approval.requested"
	KindDriftFound        = "drift.found"
	KindHostKeyChanged    = "host_key.changed"
	// KindTest is the kind of a test message (POST /notifications/test); no rule has it.
	KindTest = "test"
)

// Kinds lists what a rule may subscribe to.
var Kinds = []string{KindIncidentOpened, KindIncidentUpdated, KindIncidentResolved, KindApprovalRequested,
	KindDriftFound, KindHostKeyChanged}

// DefaultKinds is what a channel gets when its rule names no kind (the CLI's --on default).
var DefaultKinds = []string{KindIncidentOpened, KindIncidentResolved, KindApprovalRequested, KindDriftFound,
	KindHostKeyChanged}

// Severities, from least to most urgent.
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// Severities lists them in order.
var Severities = []string{SeverityInfo, SeverityWarning, SeverityCritical}

// rank orders severities; an unknown one ranks as info.
func rank(s string) int {
	switch s {
	case SeverityCritical:
		return 2
	case SeverityWarning:
		return 1
	}
	return 0
}

// Event types the dispatcher reads from the outbox.
const (
	eventIncidentOpened    = signals.EventIncidentOpened
	eventIncidentUpdated   = signals.EventIncidentUpdated
	eventIncidentResolved  = signals.EventIncidentResolved
	eventApprovalRequested = "approval.requested"
	eventDriftReported     = "drift.reported"
	eventSignalRaised      = "signal.raised"
)

var sourceEvents = []string{eventIncidentOpened, eventIncidentUpdated, eventIncidentResolved, eventApprovalRequested,
	eventDriftReported, eventSignalRaised}

// hostKeySignal is the signal kind the scheduler raises for a changed SSH host key
// (scheduler/internal/hostkeys).
const hostKeySignal = "host_key_changed"

// Notification is what one event says to the people subscribed to it: the parts rules match
// on, and the message every channel renders.
type Notification struct {
	Kind     string
	Severity string
	Title    string
	Body     string
	Link     string
	// EntityType is matched against a rule's entity_types: an incident's root type, an
	// approval target's type (its slug's prefix), a host's type; "" when there is none.
	EntityType string
	// Tags are an incident root's tags, matched against a rule's tags.
	Tags []string
	// IncidentID is the incident's signal id, looked up at send time for a mute.
	IncidentID string
}

// approval is the approval.requested payload, as the gate writes it.
type approval = execution.ApprovalRequested

// drift is the drift.reported payload (scheduler/internal/drift).
type drift struct {
	ReportID         string `json:"report_id"`
	Trigger          string `json:"trigger"`
	Missing          int    `json:"missing"`
	Ghost            int    `json:"ghost"`
	Unchecked        int    `json:"unchecked"`
	HostsUnreachable int    `json:"hosts_unreachable"`
}

// raised is the signal.raised payload (shared/signals).
type raised struct {
	SignalID    string `json:"signal_id"`
	Kind        string `json:"kind"`
	DedupKey    string `json:"dedup_key"`
	Severity    string `json:"severity"`
	Summary     string `json:"summary"`
	EntityID    string `json:"entity_id"`
	Occurrences int64  `json:"occurrences"`
	Reopened    bool   `json:"reopened"`
}

// FromEvent turns an outbox event into its notification; ok is false for an event nobody is
// notified of (a drift report that found nothing, a signal that is not a host key change, a
// payload that does not parse). publicURL is where the dashboard is, for links. entityType
// is the type of the event's entity when the caller knows it (a host key's machine).
func FromEvent(e eventbus.Event, publicURL, entityType string) (Notification, bool) {
	base := strings.TrimRight(publicURL, "/")
	switch e.Type {
	case eventIncidentOpened, eventIncidentUpdated, eventIncidentResolved:
		var p signals.IncidentEvent
		if json.Unmarshal(e.Payload, &p) != nil {
			return Notification{}, false
		}
		n := renderIncident(e.Type, p, base)
		n.Kind, n.EntityType, n.Tags, n.IncidentID = e.Type, p.RootType, p.Tags, p.IncidentID
		n.Severity = SeverityWarning
		if p.Severity == SeverityCritical || p.Severity == SeverityInfo {
			n.Severity = p.Severity
		}
		return n, true
	case eventApprovalRequested:
		var p approval
		if json.Unmarshal(e.Payload, &p) != nil || p.ApprovalID == "" {
			return Notification{}, false
		}
		n := renderApproval(p, base)
		n.Kind, n.Severity = KindApprovalRequested, SeverityWarning
		if p.RiskClass == "destructive" {
			n.Severity = SeverityCritical
		}
		if typ, _, ok := strings.Cut(p.Target, ":"); ok {
			n.EntityType = typ
		}
		return n, true
	case eventDriftReported:
		var p drift
		if json.Unmarshal(e.Payload, &p) != nil || p.Missing+p.Ghost <= 0 {
			return Notification{}, false
		}
		n := renderDrift(p, base)
		n.Kind, n.Severity = KindDriftFound, SeverityWarning
		return n, true
	case eventSignalRaised:
		var p raised
		if json.Unmarshal(e.Payload, &p) != nil || p.Kind != hostKeySignal {
			return Notification{}, false
		}
		n := renderHostKey(p, base)
		n.Kind, n.Severity, n.EntityType = KindHostKeyChanged, SeverityCritical, entityType
		return n, true
	}
	return Notification{}, false
}
