package assent

import (
	"slices"
	"strings"
	"unicode"

	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
)

// PendingApproval is an approval the immediately preceding assistant turn
// asked for. Only those may be granted by the operator's next message: an old
// "yes" never approves something new.
type PendingApproval struct {
	ID         string       `json:"id"`
	TargetSlug string       `json:"target_slug"`
	Class      policy.Class `json:"class"`
	Command    string       `json:"command"`
}

// Grant is one approval an operator message grants.
type Grant struct {
	ApprovalID string `json:"approval_id"`
	// Via is "chat_assent" (a loose word) or "typed_confirmation" (the
	// `confirm <verb> <target>` phrase).
	Via string `json:"via"`
}

// The two ways a chat message can grant an approval.
const (
	ViaChatAssent        = "chat_assent"
	ViaTypedConfirmation = "typed_confirmation"
)

// maxAssentLen bounds a loose assent: a longer message is a sentence, not a
// yes.
const maxAssentLen = 40

// Detect returns the approvals an operator message grants, in the order
// of pending. It is deterministic and deliberately narrow:
//
//   - Loose assent: the whole message, ignoring case, punctuation and emoji,
//     consists only of the words approved, approve, yes, go, go ahead,
//     proceed, continue, ok, okay (and "please"). Any other word — "no",
//     "not", "don't", "wait", "but", "yet" — and the message grants nothing.
//     Loose assent grants every pending approval except destructive ones.
//   - Typed confirmation: every non-empty line of the message is
//     `confirm <verb> <target-slug>` (case-insensitive, any spacing, an
//     optional final . or !), where the slug is an approval's target and the
//     verb is a word of its command (`confirm destroy lxc:test-01` for
//     `pct destroy 101` on lxc:test-01). It grants the matching approvals,
//     destructive ones included.
func Detect(message string, pending []PendingApproval) []Grant {
	if len(pending) == 0 {
		return nil
	}
	if isLooseAssent(message) {
		var out []Grant
		for _, a := range pending {
			if a.Class == policy.Destructive || !a.Class.Valid() {
				continue
			}
			out = append(out, Grant{ApprovalID: a.ID, Via: ViaChatAssent})
		}
		return out
	}
	phrases, ok := parseConfirmations(message)
	if !ok {
		return nil
	}
	var out []Grant
	for _, a := range pending {
		slug := strings.ToLower(strings.TrimSpace(a.TargetSlug))
		if slug == "" {
			continue
		}
		words := commandWords(a.Command)
		for _, ph := range phrases {
			if ph.slug == slug && slices.Contains(words, ph.verb) {
				out = append(out, Grant{ApprovalID: a.ID, Via: ViaTypedConfirmation})
				break
			}
		}
	}
	return out
}

// AssentsToPlan reports whether an operator message assents to the plan the
// immediately preceding assistant turn proposed: the loose assent of
// DetectAssent, and nothing else (the whole message consists of the assent
// words; any other word, a negation, a condition or a longer sentence, and it
// does not). A typed confirmation names an approval's target, not a plan, so
// it is no assent to a plan. Assenting to a plan opens the session's assent
// window (docs/behaviours.md X6), which covers config_mutation requests and
// never a destructive one.
func ToPlan(message string) bool { return isLooseAssent(message) }

// assentWords are the words a loose assent may consist of.
func assentWord(w string) bool {
	switch w {
	case "approved", "approve", "yes", "go", "proceed", "continue", "ok", "okay":
		return true
	}
	return false
}

func isLooseAssent(message string) bool {
	if len(message) > maxAssentLen {
		return false
	}
	words := strings.FieldsFunc(strings.ToLower(message), func(r rune) bool { return !unicode.IsLetter(r) })
	if len(words) == 0 {
		return false
	}
	assent := false
	for i, w := range words {
		switch {
		case assentWord(w):
			assent = true
		case w == "ahead" && i > 0 && words[i-1] == "go":
		case w == "please":
		default:
			return false
		}
	}
	return assent
}

type confirmation struct{ verb, slug string }

// parseConfirmations parses a message in which every non-empty line is a
// confirmation phrase.
func parseConfirmations(message string) ([]confirmation, bool) {
	var out []confirmation
	for _, line := range strings.Split(message, "\n") {
		line = strings.TrimRight(strings.TrimSpace(line), ".!")
		if line == "" {
			continue
		}
		f := strings.Fields(strings.ToLower(line))
		if len(f) != 3 || f[0] != "confirm" {
			return nil, false
		}
		out = append(out, confirmation{verb: f[1], slug: f[2]})
	}
	return out, len(out) > 0
}

// commandWords are the words of a command a confirmation may use as its verb:
// lower-cased, without options, numbers, quoting or paths (a path counts only
// when it names a destructive program, /sbin/wipefs as wipefs).
func commandWords(command string) []string {
	fields := strings.FieldsFunc(strings.ToLower(command), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._:/-+@", r))
	})
	out := fields[:0]
	for _, w := range fields {
		if i := strings.LastIndexByte(w, '/'); i >= 0 {
			if w = w[i+1:]; !destructiveVerb(w) {
				continue
			}
		}
		if w == "" || strings.HasPrefix(w, "-") || shellword.IsDigits(w) {
			continue
		}
		out = append(out, w)
	}
	return out
}

// destructiveVerbs are preferred as the verb of a suggested confirmation.
func destructiveVerb(w string) bool {
	switch w {
	case "destroy", "delete", "purge", "rm", "remove", "wipefs", "dd", "shred", "reboot", "shutdown",
		"poweroff", "halt", "prune", "drop", "truncate", "rollback", "userdel", "flush", "format",
		"blkdiscard", "lvremove", "vgremove", "pvremove", "labelclear", "dropdb", "flushall", "flushdb",
		"reset", "clean", "stop", "stopall", "uninstall", "unlink", "delnode", "mask", "down", "lvreduce", "killall", "pkill":
		return true
	}
	return strings.HasPrefix(w, "mkfs") || strings.HasPrefix(w, "mke2fs")
}

// ConfirmationPhrase is the phrase the dashboard shows for a typed
// confirmation of an approval: `confirm <verb> <target-slug>`, with the verb
// taken from the command (its destructive action word when it has one, else
// its first word).
func ConfirmationPhrase(a PendingApproval) string {
	words := commandWords(a.Command)
	verb := "run"
	for _, w := range words {
		if destructiveVerb(w) {
			verb = w
			break
		}
	}
	if verb == "run" && len(words) > 0 {
		verb = words[0]
	}
	return "confirm " + verb + " " + strings.ToLower(strings.TrimSpace(a.TargetSlug))
}
