package notifyrender

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/shared/signals"
)

// Messages are plain text: every channel can show them (a phone notification, a chat line,
// an e-mail), and a webhook receiver gets the event's payload besides. Each carries what
// the reader needs to act without opening anything first; the link is the place to do it.

// maxAffectedListed is how many affected entities an incident's message names.
const maxAffectedListed = 5

func renderIncident(typ string, p signals.IncidentEvent, base string) notify.Notification {
	root := p.Root
	if root == "" {
		root = "an entity"
	}
	summary := p.Summary
	if summary == "" {
		summary = root + " is unhealthy"
	}
	var title string
	switch typ {
	case eventIncidentResolved:
		title = "Resolved: " + summary
	case eventIncidentUpdated:
		title = "Incident updated: " + summary
	default:
		title = "Incident: " + summary
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", summary)
	sev := p.Severity
	if sev == "" {
		sev = notify.SeverityWarning
	}
	fmt.Fprintf(&b, "Root cause: %s (%s)\n", root, sev)
	if p.Reason != "" {
		fmt.Fprintf(&b, "Reason: %s\n", p.Reason)
	}
	if p.AffectedCount > 0 || len(p.Affected) > 0 {
		n := max(p.AffectedCount, len(p.Affected))
		names := make([]string, 0, maxAffectedListed)
		for _, a := range p.Affected {
			if len(names) == maxAffectedListed {
				break
			}
			name := a.Entity
			if a.Health != "" {
				name += " (" + a.Health + ")"
			}
			names = append(names, name)
		}
		line := fmt.Sprintf("Affected: %d", n)
		if len(names) > 0 {
			line += ": " + strings.Join(names, ", ")
			if n > len(names) {
				line += fmt.Sprintf(" and %d more", n-len(names))
			}
		}
		b.WriteString(line + "\n")
	}
	if len(p.Tags) > 0 {
		fmt.Fprintf(&b, "Tags: %s\n", strings.Join(p.Tags, ", "))
	}
	if !p.OpenedAt.IsZero() {
		fmt.Fprintf(&b, "Opened: %s\n", p.OpenedAt.UTC().Format(time.RFC3339))
	}
	if typ == eventIncidentResolved && p.ResolvedAt != nil {
		fmt.Fprintf(&b, "Resolved: %s\n", p.ResolvedAt.UTC().Format(time.RFC3339))
	}
	link := base + "/signals"
	if p.Root != "" {
		link = base + "/entities/" + url.PathEscape(p.Root)
	}
	b.WriteString(link)
	return notify.Notification{Title: title, Body: b.String(), Link: link}
}

// ApproveCommand is the CLI line that approves an approval: a destructive one needs its
// target typed out (api/cmd/oikos approve --confirm).
func ApproveCommand(approvalID, target, riskClass string) string {
	if riskClass == "destructive" {
		return fmt.Sprintf("oikos approve --confirm %s %s", target, approvalID)
	}
	return "oikos approve " + approvalID
}

func renderApproval(p approval, base string) notify.Notification {
	risk := p.RiskClass
	if risk == "" {
		risk = "unclassified"
	}
	title := fmt.Sprintf("Approval needed: %s on %s", risk, p.Target)
	link := base + "/ops"
	var b strings.Builder
	fmt.Fprintf(&b, "Command: %s\n", p.Command)
	fmt.Fprintf(&b, "Target: %s\n", p.Target)
	fmt.Fprintf(&b, "Risk class: %s", risk)
	if len(p.Reasons) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(p.Reasons, "; "))
	}
	b.WriteString("\n")
	if p.Purpose != "" {
		fmt.Fprintf(&b, "Purpose: %s\n", p.Purpose)
	}
	fmt.Fprintf(&b, "Decide in Operations: %s\n", link)
	fmt.Fprintf(&b, "or run: %s\n", ApproveCommand(p.ApprovalID, p.Target, p.RiskClass))
	fmt.Fprintf(&b, "deny: oikos deny %s", p.ApprovalID)
	return notify.Notification{Title: title, Body: b.String(), Link: link}
}

func renderDrift(p drift, base string) notify.Notification {
	title := fmt.Sprintf("Drift: %d missing, %d ghost", p.Missing, p.Ghost)
	link := base + "/"
	var b strings.Builder
	if p.Missing > 0 {
		fmt.Fprintf(&b, "%d guest(s) run on the Proxmox hosts without an entity in the graph.\n", p.Missing)
	}
	if p.Ghost > 0 {
		fmt.Fprintf(&b, "%d entity(ies) in the graph have no guest on their host.\n", p.Ghost)
	}
	if p.Unchecked > 0 || p.HostsUnreachable > 0 {
		fmt.Fprintf(&b, "Not compared: %d entity(ies); %d host(s) unreachable.\n", p.Unchecked, p.HostsUnreachable)
	}
	b.WriteString("Details: oikos drift\n")
	b.WriteString(link)
	return notify.Notification{Title: title, Body: b.String(), Link: link}
}

func renderHostKey(p raised, base string) notify.Notification {
	addr := strings.TrimPrefix(p.DedupKey, hostKeySignal+":")
	title := "SSH host key changed: " + addr
	link := base + "/signals"
	var b strings.Builder
	if p.Summary != "" {
		b.WriteString(p.Summary + "\n")
	}
	b.WriteString("Oikos refuses to connect until the new key is verified and re-pinned.\n")
	b.WriteString(link)
	return notify.Notification{Title: title, Body: b.String(), Link: link}
}

// TestNotification is the message of a channel test.
func TestNotification(base, channel string) notify.Notification {
	base = strings.TrimRight(base, "/")
	who := "this channel"
	if channel != "" {
		who = "channel " + channel
	}
	return notify.Notification{Kind: notify.KindTest, Severity: notify.SeverityInfo, Title: "Oikos test notification",
		Body: fmt.Sprintf("If you can read this, Oikos can notify %s.\n%s/", who, base), Link: base + "/"}
}
