// Package syntaxgate is the syntax gate: it refuses commands that are almost
// certainly typed wrong (a flag separated from its dash, a dash lookalike, an
// invisible, bidirectional or lookalike character, text that does not parse,
// an empty command), with a message that names the fix. It works on parsed
// words, never on the raw text, so quoted text is not inspected.
package syntaxgate
