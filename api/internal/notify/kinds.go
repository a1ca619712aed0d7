package notify

import (
	"time"

	"github.com/oikos-hq/oikos/api/internal/storage/notifystore"
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
	// Subject is the channel a target-health notification is about: it goes to every other
	// enabled channel that is not failing, whatever the rules, and never to the subject.
	Subject string
}

// Delivery statuses.
const (
	StatusPending    = "pending"
	StatusSent       = "sent"
	StatusFailed     = "failed"
	StatusSuppressed = "suppressed"
)

// Statuses lists them.
var Statuses = []string{StatusPending, StatusSent, StatusFailed, StatusSuppressed}

// The api's views of channels, rules and deliveries are the storage layer's rows.
type (
	Channel        = notifystore.Channel
	Rule           = notifystore.Rule
	Delivery       = notifystore.Delivery
	Attempt        = notifystore.Attempt
	DeliveryFilter = notifystore.DeliveryFilter
	// Meta is who changes something, through which request: what the audit row and the
	// event record.
	Meta = notifystore.Meta
)

// A channel's health reported as events (audited with them, in the transaction of the
// attempt that changed it): failing when its consecutive failed attempts reach the worker's
// threshold, recovered at its next success. Each is also a notification, sent to every other
// enabled channel that is not failing itself, whatever their rules, once per episode: the
// people who would miss the failing channel's messages hear about it where they still can.
const (
	EventTargetFailing   = "notification_target.failing"
	EventTargetRecovered = "notification_target.recovered"
	KindTargetFailing    = EventTargetFailing
	KindTargetRecovered  = EventTargetRecovered
)

// TargetHealth is the payload of EventTargetFailing and EventTargetRecovered.
type TargetHealth struct {
	ChannelID string `json:"channel_id"`
	Channel   string `json:"channel"`
	// ChannelKind is shoutrrr or webhook.
	ChannelKind string `json:"channel_kind"`
	State       string `json:"state"`
	// ConsecutiveFailures is the count that made the channel failing (0 once recovered).
	ConsecutiveFailures int `json:"consecutive_failures"`
	// LastError is the failing attempt's error, redacted ("" on recovery).
	LastError    string     `json:"last_error,omitempty"`
	FailingSince *time.Time `json:"failing_since,omitempty"`
	RecoveredAt  *time.Time `json:"recovered_at,omitempty"`
	// DeliveryID is the delivery whose attempt changed the health.
	DeliveryID string `json:"delivery_id"`
}
