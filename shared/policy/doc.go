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
// The classifier is this package (the walk over the parsed command: classify.go,
// shell.go, input.go) composing parts that each do one job, in internal
// packages imported in one direction, each only from the ones listed before it:
//
//   - internal/shellword: shell words and command lines on mvdan.cc/sh —
//     resolving a word, option grammars, option scanning, decoders;
//   - internal/ruleset: the policy document — the risk classes, the YAML policy
//     file (default_policy.yaml, extended by the operator file), its compiled
//     rules and how a rule matches a command line, read-only SQL;
//   - internal/walk: what one classification records and hands around — the
//     segments and the result, the frame code runs in, the shell's state, what
//     a command reads, the limits — and the Classifier interface the
//     principles call back through;
//   - internal/exfil, internal/lookalike, internal/wrappers: the principles
//     (data leaving the machine, names that only look alike, wrappers
//     classified by what they run), each a table and the code that reads it;
//   - internal/syntaxgate: the syntax gate behind [CheckSyntax].
//
// internal/policytest holds the corpus (testdata) and the principle-table
// check the packages' tests share.
//
// The classifier fails closed: a command that does not parse, a shell construct it
// does not know, or a word whose value is only known at run time never makes a
// command read_only, and a known-destructive program whose arguments cannot be
// resolved is destructive. docs/policy.md describes the classes, the gate order and
// the rule file format; docs/adr/0003-classifier-fails-closed.md records why.
package policy
