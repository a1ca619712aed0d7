package shellword

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// Code hidden in an encoding is still code: `echo cm0gLXJmIC8= | base64 -d |
// sh` runs `rm -rf /`. A decoder fed literal text produces literal text, so
// the classifier decodes it and classifies what the shell would run.

// IsDecoder reports whether name is a program Decode follows.
func IsDecoder(name string) bool {
	switch name {
	case "base64", "base32", "xxd", "rev":
		return true
	}
	return false
}

// Decode is what a decoder writes when it reads the literal text in: only a
// decoding invocation (base64 -d, base32 --decode, xxd -r -p, rev) is
// followed.
func Decode(name string, args []Word, in string) (string, bool) {
	decode, plainHex, reverse := false, false, false
	for _, a := range args {
		if a.Dyn || a.Glob {
			return "", false
		}
		switch v := a.Val; {
		case v == "-":
		case v == "--decode":
			decode = true
		case v == "--ignore-garbage":
		case v == "-ps" || v == "-plain" || v == "-postscript":
			plainHex = true
		case v == "-revert":
			reverse = true
		case strings.HasPrefix(v, "--"), !strings.HasPrefix(v, "-") || len(v) < 2:
			return "", false // a file operand or an option we do not follow
		default:
			for _, ch := range v[1:] {
				switch ch {
				case 'd', 'D':
					decode = true
				case 'i': // --ignore-garbage
				case 'p':
					plainHex = true
				case 'r':
					reverse = true
				default:
					return "", false
				}
			}
		}
	}
	var out string
	switch name {
	case "base64":
		if !decode {
			return "", false
		}
		b, ok := decodeBase64(in)
		if !ok {
			return "", false
		}
		out = b
	case "base32":
		if !decode {
			return "", false
		}
		b, err := base32.StdEncoding.DecodeString(strings.Join(strings.Fields(in), ""))
		if err != nil {
			return "", false
		}
		out = string(b)
	case "xxd":
		if !reverse || !plainHex {
			return "", false
		}
		b, err := hex.DecodeString(strings.Join(strings.Fields(in), ""))
		if err != nil {
			return "", false
		}
		out = string(b)
	case "rev":
		if len(args) > 0 {
			return "", false
		}
		lines := strings.Split(in, "\n")
		for i, l := range lines {
			r := []rune(l)
			for a, b := 0, len(r)-1; a < b; a, b = a+1, b-1 {
				r[a], r[b] = r[b], r[a]
			}
			lines[i] = string(r)
		}
		out = strings.Join(lines, "\n")
	}
	return out, true
}

// decodeBase64 decodes standard or URL-safe base64, padded or not, ignoring
// whitespace, as base64 -d does.
func decodeBase64(s string) (string, bool) {
	s = strings.Join(strings.Fields(s), "")
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return string(b), true
		}
	}
	return "", false
}
