package incidents

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/signals"
)

// Actor is recorded on the engine's events.
const Actor = "scheduler"

// incident is an unresolved incident as stored.
type incident struct {
	id, dedupKey, rootID, status, severity string
	openedAt                               time.Time
	members                                map[string]member // entity id → row, root included, current only
}

type member struct {
	slug, role, health, reason string
}

// state is what one evaluation reads.
type state struct {
	g       *graph
	th      map[string]entityThresholds
	changed map[string]time.Time // when each entity's health last changed
	open    []*incident
}

// The queries (storage/incidents.go) that take arrays of ids run unprepared, planned for the
// array at hand; see there.

type checkRow struct {
	kind, health        string
	streak, intervalSec int
	at                  time.Time
}

func (e *Engine) load(ctx context.Context, tx *storage.Store) (*state, error) {
	st := &state{g: newGraph(), th: map[string]entityThresholds{}, changed: map[string]time.Time{}}
	nodes, err := tx.IncidentNodes(ctx, Kind)
	if err != nil {
		return nil, fmt.Errorf("read problem entities: %w", err)
	}
	var ids []string
	for _, r := range nodes {
		n := node{id: r.ID, slug: r.Slug, typ: r.Type, state: r.State, health: r.Health, reason: r.Reason}
		n.tags = stringList(r.Tags)
		n.problem = n.health != results.HealthUp && n.state != "destroyed" && n.state != "deprecated"
		st.g.nodes[n.id] = &n
		st.changed[n.id] = r.ChangedAt
		st.th[n.id] = entityThresholds{failure: thresholdAttr(jsonValue(r.FailureTh)), success: thresholdAttr(jsonValue(r.SuccessTh))}
		ids = append(ids, n.id)
	}
	if len(ids) > 0 {
		if err := e.loadChecks(ctx, tx, st, ids); err != nil {
			return nil, err
		}
		if err := loadEdges(ctx, tx, st.g, ids); err != nil {
			return nil, err
		}
	}
	if err := loadOpen(ctx, tx, st); err != nil {
		return nil, err
	}
	return st, nil
}

func (e *Engine) loadChecks(ctx context.Context, tx *storage.Store, st *state, ids []string) error {
	checks, err := tx.IncidentChecks(ctx, ids)
	if err != nil {
		return fmt.Errorf("read checks: %w", err)
	}
	byTarget := map[string][]checkRow{}
	for _, c := range checks {
		byTarget[c.Target] = append(byTarget[c.Target], checkRow{kind: c.Kind, health: c.Health, streak: c.Streak,
			intervalSec: c.IntervalSec, at: c.At})
	}
	released, err := tx.ReleasedMembers(ctx, ids, e.opts.Clock())
	if err != nil {
		return fmt.Errorf("read released members: %w", err)
	}
	th := e.opts.Thresholds
	now := e.opts.Clock()
	for id, n := range st.g.nodes {
		cs := byTarget[id]
		et := st.th[id]
		if n.health == results.HealthUnknown || n.health == results.HealthStale {
			fastest, runs := 0, th.Failure
			for _, c := range cs {
				if fastest == 0 || c.intervalSec < fastest {
					fastest = c.intervalSec
				}
				runs = max(runs, th.failure(et, c.kind))
			}
			window := time.Duration((runs+1)*fastest) * time.Second
			n.settling = now.Sub(st.changed[id]) < window
		}
		if n.problem && (n.health == results.HealthDown || n.health == results.HealthDegraded) {
			for _, c := range cs {
				// A child released from its root's incident (the root recovered, or what
				// linked the two did) fails on its own only once a run after that found it
				// failing still: until then its failure, and its streak, are the outage's.
				if (c.health == results.HealthDown || c.health == results.HealthDegraded) && c.streak >= th.failure(et, c.kind) &&
					c.at.After(released[id]) {
					n.failing = true
					break
				}
			}
		}
		if len(cs) == 0 && !n.failing {
			// No enabled check observes it any more: the cause of an incident it roots is
			// gone with its monitoring.
			n.recovered, n.unmonitored = true, true
			continue
		}
		if n.health == results.HealthUp || n.state == "destroyed" || n.state == "deprecated" {
			n.recovered = true
			for _, c := range cs {
				if c.health != results.HealthUp || c.streak < th.success(et, c.kind) {
					n.recovered = n.state == "destroyed" || n.state == "deprecated"
					break
				}
			}
		}
	}
	return nil
}

func loadEdges(ctx context.Context, tx *storage.Store, g *graph, ids []string) error {
	edges, err := tx.DependencyEdges(ctx, ids, ontology.DependsForward, ontology.DependsReverse)
	if err != nil {
		return fmt.Errorf("read dependency edges: %w", err)
	}
	forward := map[string]bool{}
	for _, t := range ontology.DependsForward {
		forward[t] = true
	}
	for _, ed := range edges {
		if forward[ed.Type] {
			g.depend(ed.Source, ed.Target)
		} else {
			g.depend(ed.Target, ed.Source)
		}
	}
	return nil
}

func loadOpen(ctx context.Context, tx *storage.Store, st *state) error {
	open, err := tx.OpenIncidents(ctx, Kind)
	if err != nil {
		return fmt.Errorf("read open incidents: %w", err)
	}
	byID := map[string]*incident{}
	var ids []string
	for _, o := range open {
		c := incident{id: o.ID, dedupKey: o.DedupKey, rootID: o.RootID, status: o.Status, severity: o.Severity,
			openedAt: o.OpenedAt, members: map[string]member{}}
		st.open = append(st.open, &c)
		byID[c.id] = &c
		ids = append(ids, c.id)
	}
	if len(ids) == 0 {
		return nil
	}
	members, err := tx.IncidentMembers(ctx, ids)
	if err != nil {
		return fmt.Errorf("read incident members: %w", err)
	}
	for _, m := range members {
		byID[m.IncidentID].members[m.EntityID] = member{slug: m.Slug, role: m.Role, health: m.Health, reason: m.Reason}
	}
	return nil
}

// apply opens, updates and resolves incidents so they match st.
func (e *Engine) apply(ctx context.Context, tx *storage.Store, st *state) (Outcome, error) {
	g := st.g
	ps := &pass{tx: tx, g: g, sig: e.sig, now: e.opts.Clock()}
	out := Outcome{}
	for _, n := range g.nodes {
		if n.problem {
			out.Problems++
		}
	}
	hasOpen := map[string]bool{}
	for _, in := range st.open {
		hasOpen[in.rootID] = true
		root := g.nodes[in.rootID]
		if root == nil || root.recovered {
			reason := "recovered"
			switch {
			case root == nil:
				reason = "the root entity is gone"
			case root.state == "destroyed" || root.state == "deprecated":
				reason = "the root entity is " + root.state
			case root.unmonitored:
				reason = root.slug + " is no longer monitored (no enabled check)"
			default:
				reason = fmt.Sprintf("%s recovered: %s", root.slug, clip(root.reason, 160))
			}
			if err := ps.resolve(ctx, in, root, reason); err != nil {
				return out, err
			}
			out.Resolved++
			continue
		}
		changed, err := ps.update(ctx, in, root, g.affected(root.id))
		if err != nil {
			return out, err
		}
		if changed {
			out.Updated++
		}
		out.Open++
	}
	for _, id := range g.roots() {
		if hasOpen[id] {
			continue
		}
		root := g.nodes[id]
		if root.maintenance() {
			out.Covered++
			continue
		}
		if err := ps.open(ctx, root, g.affected(id)); err != nil {
			return out, err
		}
		out.Opened++
		out.Open++
	}
	return out, nil
}

// pass is one evaluation's transaction, graph and time.
type pass struct {
	tx  *storage.Store
	g   *graph
	sig *signals.Store
	now time.Time
}

// payload is the body of the incident.* events (the notification rules and the dashboard
// read it).
type payload = signals.IncidentEvent

func severityOf(health, current string) string {
	switch health {
	case results.HealthDown:
		return signals.SeverityCritical
	case results.HealthDegraded:
		return signals.SeverityWarning
	}
	if current != "" {
		return current
	}
	return signals.SeverityWarning
}

func summaryOf(root *node, affected int) string {
	s := fmt.Sprintf("%s is %s: %s", root.slug, root.health, clip(root.reason, 160))
	switch affected {
	case 0:
	case 1:
		s += "; 1 entity affected"
	default:
		s += fmt.Sprintf("; %d entities affected", affected)
	}
	return s
}

func detailsOf(root *node, affected int) map[string]any {
	return map[string]any{"root": root.slug, "root_type": root.typ, "health": root.health, "reason": root.reason,
		"affected_count": affected}
}

func (ps *pass) open(ctx context.Context, root *node, affected []string) error {
	severity := severityOf(root.health, "")
	key := DedupPrefix + root.id
	r, err := ps.tx.RaiseSignal(ctx, ps.sig, signals.Signal{Kind: Kind, DedupKey: key, EntityID: root.id, Severity: severity,
		Summary: summaryOf(root, len(affected)), Details: detailsOf(root, len(affected))})
	if err != nil {
		return err
	}
	in := &incident{id: r.ID, dedupKey: key, rootID: root.id, status: "open", severity: severity, openedAt: ps.now, members: map[string]member{}}
	if err := ps.writeMembers(ctx, in, root, affected); err != nil {
		return err
	}
	return ps.appendEvent(ctx, EventOpened, root.id, ps.payloadOf(in, root, affected))
}

// update brings an open incident's members, severity and description up to date; it
// appends incident.updated when who is in it or its severity changed.
func (ps *pass) update(ctx context.Context, in *incident, root *node, affected []string) (bool, error) {
	want := map[string]bool{root.id: true}
	var joined, left, leftIDs []string
	for _, id := range affected {
		want[id] = true
		if _, ok := in.members[id]; !ok {
			joined = append(joined, ps.slugOf(id, in))
		}
	}
	rowsChanged := false
	for id, m := range in.members {
		if !want[id] {
			left = append(left, m.slug)
			leftIDs = append(leftIDs, id)
			continue
		}
		if n := ps.g.nodes[id]; n != nil && (n.health != m.health || n.reason != m.reason) {
			rowsChanged = true
		}
	}
	if r, ok := in.members[root.id]; !ok || r.health != root.health || r.reason != root.reason {
		rowsChanged = true
	}
	sort.Strings(joined)
	sort.Strings(left)
	severity := severityOf(root.health, in.severity)
	if len(joined) == 0 && len(left) == 0 && !rowsChanged && severity == in.severity {
		return false, nil
	}
	if err := ps.writeMembers(ctx, in, root, affected); err != nil {
		return false, err
	}
	moved, err := ps.markMoved(ctx, in, root, leftIDs)
	if err != nil {
		return false, err
	}
	if len(joined) == 0 && len(left) == 0 && severity == in.severity {
		// Only the reasons moved: the rows say so, nobody needs an event for it.
		return false, nil
	}
	if _, err := ps.tx.DescribeSignal(ctx, ps.sig, in.dedupKey, severity, summaryOf(root, len(affected)), detailsOf(root, len(affected))); err != nil {
		return false, err
	}
	in.severity = severity
	p := ps.payloadOf(in, root, affected)
	p.Joined, p.Left, p.Moved = joined, left, moved
	return true, ps.appendEvent(ctx, EventUpdated, root.id, p)
}

// markMoved records, of the members that just left in (ids), the guests that left because
// they run on another node now — a check found them there (checkrun's moved note), or the
// graph's hosts edge followed them — with the node they went to: the root's incident lists
// them as moved rather than as recovered. Only an incident whose root is the node they left
// has any.
func (ps *pass) markMoved(ctx context.Context, in *incident, root *node, ids []string) ([]signals.IncidentMoved, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	to, err := ps.tx.MovedGuests(ctx, ids, root.slug, root.id)
	if err != nil || len(to) == 0 {
		return nil, err
	}
	var moved []signals.IncidentMoved
	var mIDs, mTo, healths, reasons []string
	for _, id := range ids {
		dest, ok := to[id]
		if !ok {
			continue
		}
		health, reason := results.HealthUp, "moved to "+dest
		if n := ps.g.nodes[id]; n != nil {
			health, reason = n.health, "moved to "+dest+": "+clip(n.reason, 160)
		}
		mIDs, mTo, healths, reasons = append(mIDs, id), append(mTo, dest), append(healths, health), append(reasons, reason)
		moved = append(moved, signals.IncidentMoved{EntityID: id, Entity: ps.slugOf(id, in), From: root.slug, To: dest})
	}
	if err := ps.tx.MarkMoved(ctx, in.id, mIDs, mTo, healths, reasons); err != nil {
		return nil, fmt.Errorf("record moved members: %w", err)
	}
	sort.Slice(moved, func(i, j int) bool { return moved[i].Entity < moved[j].Entity })
	return moved, nil
}

func (ps *pass) resolve(ctx context.Context, in *incident, root *node, reason string) error {
	if _, err := ps.tx.ResolveSignal(ctx, ps.sig, in.dedupKey, reason); err != nil {
		return err
	}
	if err := ps.tx.CloseIncidentMembers(ctx, in.id, ps.now); err != nil {
		return fmt.Errorf("close incident members: %w", err)
	}
	if root == nil {
		root = &node{id: in.rootID, slug: in.members[in.rootID].slug}
	}
	var affected []string
	for id, m := range in.members {
		if m.role == "affected" {
			affected = append(affected, id)
		}
	}
	sort.Strings(affected)
	moved, err := ps.markMoved(ctx, in, root, affected)
	if err != nil {
		return err
	}
	p := ps.payloadOf(in, root, affected)
	p.Status, p.ResolvedAt, p.Resolution, p.Moved = "resolved", &ps.now, reason, moved
	return ps.appendEvent(ctx, EventResolved, in.rootID, p)
}

// writeMembers makes the incident's current rows root + affected: new ones join, known ones
// take their present health and reason, the others leave.
func (ps *pass) writeMembers(ctx context.Context, in *incident, root *node, affected []string) error {
	ids := []string{root.id}
	roles := []string{"root"}
	healths := []string{root.health}
	reasons := []string{root.reason}
	for _, id := range affected {
		n := ps.g.nodes[id]
		if n == nil {
			continue
		}
		ids = append(ids, id)
		roles = append(roles, "affected")
		healths = append(healths, n.health)
		reasons = append(reasons, n.reason)
	}
	if err := ps.tx.WriteIncidentMembers(ctx, in.id, ps.now, ids, roles, healths, reasons); err != nil {
		return fmt.Errorf("write incident members: %w", err)
	}
	return nil
}

func (ps *pass) slugOf(id string, in *incident) string {
	if n := ps.g.nodes[id]; n != nil {
		return n.slug
	}
	return in.members[id].slug
}

func (ps *pass) payloadOf(in *incident, root *node, affected []string) payload {
	p := payload{IncidentID: in.id, DedupKey: in.dedupKey, RootID: root.id, Root: root.slug, RootType: root.typ,
		Severity: in.severity, Summary: summaryOf(root, len(affected)), Reason: root.reason,
		AffectedCount: len(affected), Affected: []signals.IncidentAffected{}, Tags: root.tags, Status: in.status, OpenedAt: in.openedAt}
	if p.Tags == nil {
		p.Tags = []string{}
	}
	for _, id := range affected {
		if len(p.Affected) == signals.IncidentListed {
			break
		}
		if n := ps.g.nodes[id]; n != nil {
			p.Affected = append(p.Affected, signals.IncidentAffected{EntityID: id, Entity: n.slug, Health: n.health, Reason: n.reason})
		} else if m, ok := in.members[id]; ok {
			p.Affected = append(p.Affected, signals.IncidentAffected{EntityID: id, Entity: m.slug, Health: m.health, Reason: m.reason})
		}
	}
	return p
}

func (ps *pass) appendEvent(ctx context.Context, typ, entity string, p payload) error {
	if _, err := ps.tx.AppendEvent(ctx, eventbus.Event{Type: typ, EntityID: entity, Actor: Actor}, p); err != nil {
		return fmt.Errorf("append %s: %w", typ, err)
	}
	return nil
}

func stringList(raw []byte) []string {
	var out []string
	if len(raw) == 0 || json.Unmarshal(raw, &out) != nil {
		return []string{}
	}
	return out
}

func jsonValue(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return v
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
