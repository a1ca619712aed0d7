// Package results is what a check run found and where it goes: the Result a probe returns
// (health, error class, reason, summary, metric samples), how a target's health combines
// from its checks' latest results, and the Writer that stores them.
//
// # Health on the target
//
// Every result is keyed by the check definition's target_id — the entity being observed —
// never by the check's own bookkeeping entity (the original system wrote every result onto
// the probe and left the whole fleet `unknown`). The target's entity_status is recomputed
// from all of its enabled checks' latest results:
//
//	health = the worst of them, in the order down > degraded > unknown > up
//
// A definite finding outranks the absence of one: a stopped container is down even while its
// cpu probe cannot say anything, and a target whose checks are all up but one that cannot
// observe it is unknown, not up. The reason names the checks that set the health. A
// health.changed event is appended only when the combined health changes.
//
// last_check_at advances only when a check actually observed the target, and never moves
// back. A guest whose Proxmox host is unreachable is `unknown` with a reason naming that
// host (not `down`) and is not observed, so it turns `stale` once the staleness sweep finds
// its last observation older than 3× its fastest interval; an `unknown` result never
// overwrites `stale`.
//
// # Writing only what changed, in batches
//
// Most results say what the previous one said. The Writer remembers the state it stored
// for each check (health, error class, reason) and writes a result in one of two ways:
//
//   - a result that changes that state (or the first one of a check, or one whose target's
//     set of checks changed: ForgetTargets) is written in full: its check_results row, and
//     the target's entity_status recomputed, with health.changed on a transition. It waits
//     at most FlushEvery (1 s);
//   - a result that repeats it (same health and class, and the same reason unless up: an
//     up reason carries the run's figure, "cpu 3.2%", which the metric samples keep) only
//     advances its row's at, observed_at and runs, and its target's last_check_at; its
//     row's reason and summary stay those of the run that set the state. It waits at most
//     UnchangedFlushEvery (30 s), far inside the staleness sweep's bound (5 min at least).
//     The statement checks that the row still holds the remembered state and that the
//     target is not stale; a result for which either fails is written in full instead, so
//     a change made elsewhere (another scheduler, the sweep) is never papered over.
//
// Metric samples are written for every result. A flush writes whatever waits, as soon as
// the first deadline passes or FlushBatch results wait, in one transaction of two or three
// round trips (Writer.flush); a healthy fleet's flush is one statement that touches each
// repeating check's row once and each target's status row once.
//
// # Database outages
//
// A write that fails is retried alone, with capped back-off (FlushEvery, doubling, at most
// MaxRetryDelay), before anything newer; the checks go on meanwhile and their results wait
// in the buffer (WriterOptions.Buffer, OIKOS_RESULTS_BUFFER), to be written oldest first,
// with the times they were made, once the database is back. Every batch carries an id,
// stored in its transaction (scheduler_result_batches): a retry of a batch whose COMMIT did
// happen but whose answer was lost fails on that key and writes nothing twice. While writes
// fail, a result that finds the buffer full is not kept but counted for its check; the next
// write appends one check.results_unrecorded event per such check (how many, from when to
// when, and the error), so a gap in a check's history always says why. The runner keeps
// running the units it held while writes fail (no lease can be renewed then); the fence
// writes their results if nobody took the unit over meanwhile.
package results
