// Package shellword reads shell words and command lines the way the shell
// would, without running anything: a word's value as far as it is known
// before run time (expansions, globs, brace expansion, quoting, ANSI-C
// escapes, here-documents), a program's options and positional words by its
// grammar, leading option scanning, which builtins take variable names and
// which words can only hold a literal or a number (for the arithmetic
// check), and the decoders (base64 -d, xxd -r …) whose output the classifier
// follows. It builds on mvdan.cc/sh and knows nothing of classes or rules.
package shellword
