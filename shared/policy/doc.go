// Package policy classifies what Oikos may run on a machine without a human.
//
// It is the first of three pure, deterministic packages that no LLM output can
// influence, imported in one direction (gate → assent → policy):
//
//   - policy, the command risk classifier ([Policy.Classify]) and the syntax gate
//     ([CheckSyntax]): parses a command as shell (mvdan.cc/sh), classifies every
//     simple command it finds — in pipelines, lists, substitutions, function
//     bodies, and inside wrappers such as sudo, bash -c, pct exec or ssh —
//     against a rule set that is data (an embedded default policy, extended by an
//     operator file), and returns the highest class found, never below the class
//     the caller declared;
//   - policy/assent: which pending approvals an operator's chat message grants;
//   - policy/gate: given the facts the api gathered in its transaction (target
//     kind, guest agent, pending duplicates, pending approvals, open windows),
//     whether an execution runs now, queues for approval, is refused or is
//     already queued.
//
// The classifier fails closed: a command that does not parse, a shell construct it
// does not know, or a word whose value is only known at run time never makes a
// command read_only, and a known-destructive program whose arguments cannot be
// resolved is destructive. docs/policy.md describes the classes, the gate order and
// the rule file format; docs/adr/0003-classifier-fails-closed.md records why.
package policy
