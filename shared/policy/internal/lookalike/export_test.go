package lookalike

// Confusables is the table of letters drawn like ASCII ones, for the
// property test that alters corpus commands with them.
var Confusables = confusables
