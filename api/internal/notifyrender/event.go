package notifyrender

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/signals"
)

// Event types notifications come from, in the outbox.
const (
	eventIncidentOpened    = signals.EventIncidentOpened
	eventIncidentUpdated   = signals.EventIncidentUpdated
	eventIncidentResolved  = signals.EventIncidentResolved
	eventApprovalRequested = "approval.requested"
	eventDriftReported     = "drift.reported"
	// EventSignalRaised carries its entity by id only: FromEvent wants that entity's type.
	EventSignalRaised = "signal.raised"
)

// SourceEvents lists them: the dispatcher reads these and no others.
var SourceEvents = []string{eventIncidentOpened, eventIncidentUpdated, eventIncidentResolved, eventApprovalRequested,
	eventDriftReported, EventSignalRaised, notify.EventTargetFailing, notify.EventTargetRecovered}

// hostKeySignal is the signal kind the scheduler raises for a changed SSH host key
// (scheduler/internal/hostkeys).
const hostKeySignal = "host_key_changed"

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
func FromEvent(e eventbus.Event, publicURL, entityType string) (notify.Notification, bool) {
	base := strings.TrimRight(publicURL, "/")
	switch e.Type {
	case eventIncidentOpened, eventIncidentUpdated, eventIncidentResolved:
		var p signals.IncidentEvent
		if json.Unmarshal(e.Payload, &p) != nil {
			return notify.Notification{}, false
		}
		n := renderIncident(e.Type, p, base)
		n.Kind, n.EntityType, n.Tags, n.IncidentID = e.Type, p.RootType, p.Tags, p.IncidentID
		n.Severity = notify.SeverityWarning
		if p.Severity == notify.SeverityCritical || p.Severity == notify.SeverityInfo {
			n.Severity = p.Severity
		}
		return n, true
	case eventApprovalRequested:
		var p approval
		if json.Unmarshal(e.Payload, &p) != nil || p.ApprovalID == "" {
			return notify.Notification{}, false
		}
		n := renderApproval(p, base)
		n.Kind, n.Severity = notify.KindApprovalRequested, notify.SeverityWarning
		if p.RiskClass == "destructive" {
			n.Severity = notify.SeverityCritical
		}
		if typ, _, ok := strings.Cut(p.Target, ":"); ok {
			n.EntityType = typ
		}
		return n, true
	case eventDriftReported:
		var p drift
		if json.Unmarshal(e.Payload, &p) != nil || p.Missing+p.Ghost <= 0 {
			return notify.Notification{}, false
		}
		n := renderDrift(p, base)
		n.Kind, n.Severity = notify.KindDriftFound, notify.SeverityWarning
		return n, true
	case notify.EventTargetFailing, notify.EventTargetRecovered:
		var p notify.TargetHealth
		if json.Unmarshal(e.Payload, &p) != nil || p.ChannelID == "" {
			return notify.Notification{}, false
		}
		n := notify.Notification{Kind: e.Type, Severity: notify.SeverityWarning, Link: base + "/notifications",
			Subject: p.ChannelID}
		if e.Type == notify.EventTargetFailing {
			n.Title = "Notification channel " + p.Channel + " is failing"
			n.Body = fmt.Sprintf("%d deliveries in a row failed; the last: %s. Its messages wait and are sent once it answers again.",
				p.ConsecutiveFailures, p.LastError)
		} else {
			n.Severity = notify.SeverityInfo
			n.Title = "Notification channel " + p.Channel + " works again"
			n.Body = "A delivery succeeded; what it missed is being sent."
		}
		return n, true
	case EventSignalRaised:
		var p raised
		if json.Unmarshal(e.Payload, &p) != nil || p.Kind != hostKeySignal {
			return notify.Notification{}, false
		}
		n := renderHostKey(p, base)
		n.Kind, n.Severity, n.EntityType = notify.KindHostKeyChanged, notify.SeverityCritical, entityType
		return n, true
	}
	return notify.Notification{}, false
}
