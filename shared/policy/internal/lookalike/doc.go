// Package lookalike is the principle that a name which only looks like a
// program is classified as the worst program it could be: confusable letters,
// invisible and bidirectional characters, Unicode spaces, normalisation, and
// the names the syntax gate's messages give them.
package lookalike
