package shellword

import (
	"slices"
	"strings"
)

// glob matches s against a pattern whose only special character is '*'.
func glob(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return false
	}
	s, pattern = s[len(pattern[:star]):], pattern[star+1:]
	for {
		star = strings.IndexByte(pattern, '*')
		if star < 0 {
			return strings.HasSuffix(s, pattern)
		}
		j := strings.Index(s, pattern[:star])
		if j < 0 {
			return false
		}
		s, pattern = s[j+star:], pattern[star+1:]
	}
}

// MatchAlt reports whether s matches one of the alternatives, patterns whose
// only special character is '*'.
func MatchAlt(alts []string, s string) bool {
	for _, a := range alts {
		if glob(a, s) {
			return true
		}
	}
	return false
}

// EachOption walks the leading options of args and returns the index of the
// first word after them: options end at the first word that is not one, or
// after a "--". A word only known at run time is an option only when its
// literal text starts with "-" (an expansion's placeholder never does): find
// -exec xargs -I{}. long is called for each "--name[=value]" with the name,
// the attached value and whether there is one; short for each other option
// word. Both get the index of the word, which they advance past a value they
// take from the next word.
func EachOption(args []Word, long func(i *int, w Word, name, val string, attached bool), short func(i *int, w Word)) int {
	i := 0
	for ; i < len(args); i++ {
		w := args[i]
		if len(w.Val) < 2 || w.Val[0] != '-' {
			return i
		}
		if w.Val == "--" {
			return i + 1
		}
		if strings.HasPrefix(w.Val, "--") {
			name, val, has := strings.Cut(w.Val, "=")
			long(&i, w, name, val, has)
			continue
		}
		short(&i, w)
	}
	return i
}

// ScanOpts consumes leading options. shortValue lists the single-letter
// options that take a value; longValue the long ones. It returns the options
// and the index of the first word after them (after a "--").
func ScanOpts(args []Word, shortValue string, longValue []string) ([]Option, int) {
	var opts []Option
	rest := EachOption(args, func(i *int, _ Word, name, val string, has bool) {
		o := Option{Name: name, Value: val, HasValue: has}
		if !has && slices.Contains(longValue, name) && *i+1 < len(args) {
			*i++
			o.Value, o.HasValue, o.ValueDyn = args[*i].Val, true, args[*i].Dyn
		}
		opts = append(opts, o)
	}, func(i *int, w Word) {
		if w.Val[1] >= '0' && w.Val[1] <= '9' {
			opts = append(opts, Option{Name: w.Val})
			return
		}
		for j := 1; j < len(w.Val); j++ {
			o := Option{Name: ShortOpts[w.Val[j]]}
			if strings.IndexByte(shortValue, w.Val[j]) >= 0 {
				o.HasValue = true
				o.Value, o.ValueDyn = ShortOptValue(args, i, j)
				opts = append(opts, o)
				break
			}
			opts = append(opts, o)
		}
	})
	return opts, rest
}

// ShortOptValue returns the value of the short option at args[*i].val[j]: the
// rest of the word (-n5), or else the next word (-n 5), advancing *i.
func ShortOptValue(args []Word, i *int, j int) (string, bool) {
	if w := args[*i]; j+1 < len(w.Val) {
		return w.Val[j+1:], false
	}
	if *i+1 < len(args) {
		*i++
		return args[*i].Val, args[*i].Dyn
	}
	return "", false
}

// HasOption reports whether one of opts is (or abbreviates) one of names.
func HasOption(opts []Option, names ...string) bool {
	for _, o := range opts {
		for _, n := range names {
			if OptionMatches(o.Name, n) {
				return true
			}
		}
	}
	return false
}

// OptionValue returns the first of opts that is (or abbreviates) one of
// names.
func OptionValue(opts []Option, names ...string) (Option, bool) {
	for _, o := range opts {
		for _, n := range names {
			if OptionMatches(o.Name, n) {
				return o, true
			}
		}
	}
	return Option{}, false
}

// IsAssignment reports whether a literal word is NAME=value, as env and sudo
// take before the command.
func IsAssignment(w Word) bool {
	if w.Dyn {
		return false
	}
	name, _, ok := strings.Cut(w.Val, "=")
	if !ok || name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || i > 0 && ch >= '0' && ch <= '9') {
			return false
		}
	}
	return true
}
