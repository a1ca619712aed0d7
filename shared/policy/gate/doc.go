// Package gate is the execution gate's decision: [Decide] takes the facts the
// api gathered inside the transaction that records the decision and answers
// run now, queue for approval, refuse, or already queued, in the order
// docs/policy.md ("The gate order") gives. It classifies through package
// policy and names typed confirmations through package assent; neither
// imports it.
package gate
