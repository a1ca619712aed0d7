// Package ruleset is the policy document: the risk classes, the YAML policy
// file (the embedded default_policy.yaml, extended by an operator file;
// docs/policy.md documents the format), compiled into a [Set] of rules, and
// how a rule matches a parsed command line. A read_only rule is a
// permission that applies only when every condition is shown to hold; a
// config_mutation or destructive rule is a trigger that applies unless a
// condition is shown to fail.
package ruleset
