// Package incidents turns health problems into incidents, one per root cause
// (docs/behaviours.md S10, S11).
//
// An incident is an ordinary signal (shared/signals: kind "incident", dedup key
// "incident:<root entity id>"), so an operator acknowledges, mutes and resolves it like any
// other, and incident_members lists its root and the entities affected through it.
//
// # When a problem is an incident
//
// Thresholds are counted in runs, not time: check_results.streak is the number of
// consecutive runs of a check that found its current health (the results writer keeps it).
// An entity is failing when it is down or degraded and one of its checks has found that for
// at least the failure threshold (default 2 runs), so one failed probe, or a probe that
// flaps between up and down, raises nothing. An incident resolves when its root is up and
// every check of the root has been up for at least the success threshold (default 1). Both
// are set per check kind (OIKOS_INCIDENT_THRESHOLDS) and per entity (attributes
// failure_threshold, success_threshold).
//
// # One incident per root cause
//
// The grouping looks only at entities with a problem (anything but up) and the graph's
// dependency edges between them (shared/ontology.DependsForward and DependsReverse, the
// edges the blast radius walks). Walking "depends on" edges through problem entities only:
//
//   - a failing entity is a root when no other failing entity lies upstream of it (a cycle
//     of failing entities is one root: its first slug);
//   - every problem entity downstream of a root — failing, unknown because its host is
//     unreachable, stale — is affected by that root's incident instead of opening its own;
//   - an unknown entity with no failing upstream is in no incident: it cannot be observed,
//     which its own reason and the probe-stuck signal say.
//
// Alerting is suppressed, never monitoring: affected entities keep their checks and their
// own health and reasons, which the incident lists. Creation is suppressed, never
// resolution: an open incident stays open until its own root recovers, even if its root now
// sits behind another failure; when a root recovers and a child stays down, the child is a
// root now and opens its own incident.
//
// # Guests that moved
//
// A guest affected through a node's failure that leaves the incident because it runs on
// another node now — its checks found it there (their moved note names the node it left),
// or the graph's hosts edge already followed it — is recorded as moved (incident_members
// .moved_to, the node it went to) and named in the event's moved list: the node's incident
// lists it as moved, not as recovered, and it opens nothing of its own.
//
// # Expected state
//
// An entity in state maintenance keeps its checks and shows its health but opens no
// incident, and what fails behind it is covered by it rather than alerting.
//
// # Evaluation
//
// The engine is level-triggered: every evaluation reads the current state (problem
// entities, their checks' streaks, the edges between them, the open incidents) and makes
// the incidents match it, in one transaction holding an advisory lock, so a restart or a
// second scheduler neither duplicates nor loses an incident. It runs shortly after a
// results write that carried a problem or a change of health, and on a tick that catches
// everything else (an entity put into maintenance, an entity destroyed). Opening, updating
// and resolving append incident.opened, incident.updated and incident.resolved with the
// signal's own events, in the same transaction.
package incidents
