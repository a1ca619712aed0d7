// Package assent detects chat assent: which of the approvals the preceding
// assistant turn asked for an operator's message grants ([Detect]), whether it
// assents to a proposed plan ([ToPlan]), and the typed phrase that confirms a
// destructive approval ([ConfirmationPhrase]). It is deterministic and
// deliberately narrow; it imports only package policy, for the classes.
package assent
