package exfil

import (
	"github.com/oikos-hq/oikos/shared/policy/internal/ruleset"
	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"github.com/oikos-hq/oikos/shared/policy/internal/walk"
	"regexp"
	"strings"
)

// Data that leaves the machine needs an operator. A command whose effect is
// to send local data off the host — an HTTP client uploading a file or a
// substitution's output, a DNS lookup whose name is built from a
// substitution or a variable, netcat, socat, ssh, scp, rsync or rclone to a
// remote, a mail command — is at least config_mutation; when what it sends is
// a credential store (the policy's credential_paths, or the environment), it
// is destructive: a leaked secret cannot be taken back. Reading the same data
// locally stays read_only, and so does sending only what the command itself
// spells out (a literal request body, a literal name to look up).
//
// The senders table says, per program, how it sends: which of its arguments
// name files it uploads, whether it sends its standard input, whether its
// arguments are names it looks up.

type sendKind uint8

const (
	sendHTTP   sendKind = iota + 1 // curl, wget, httpie: upload options, substitutions, stdin with @-
	sendStream                     // nc, socat, telnet, openssl s_client: standard input to a socket
	sendCopy                       // scp, rsync, rclone: local files to a remote
	sendMail                       // mail, sendmail, mutt, swaks: a message with a body and attachments
	sendDNS                        // dig, host, ping …: the name looked up reaches a name server
	sendScript                     // smbclient, lftp, ftp, tftp, sftp: put commands in a script
)

// senders maps a program to how it sends data. Sources: curl(1) (-d, -F,
// -T), wget(1) (--post-file, --body-file), http(1) of HTTPie (field@file,
// request items), nc(1), socat(1) (address types), openssl-s_client(1),
// scp(1), rsync(1), rclone(1), mail(1)/mailx(1) (-a, -A), mutt(1) (-a),
// swaks(1) (--attach, --body, --data), dig(1), host(1), nslookup(1),
// getent(1), resolvectl(1), ping(8), traceroute(8), whois(1).
var senders = map[string]sendKind{
	"curl": sendHTTP, "wget": sendHTTP, "wget2": sendHTTP, "http": sendHTTP, "https": sendHTTP, "xh": sendHTTP, "xhs": sendHTTP,
	"nc": sendStream, "ncat": sendStream, "netcat": sendStream, "socat": sendStream, "telnet": sendStream, "openssl": sendStream,
	"scp": sendCopy, "rsync": sendCopy, "rclone": sendCopy,
	"mail": sendMail, "mailx": sendMail, "s-nail": sendMail, "bsd-mailx": sendMail, "mutt": sendMail, "neomutt": sendMail,
	"sendmail": sendMail, "msmtp": sendMail, "ssmtp": sendMail, "swaks": sendMail, "mpack": sendMail,
	"dig": sendDNS, "host": sendDNS, "nslookup": sendDNS, "drill": sendDNS, "kdig": sendDNS, "delv": sendDNS,
	"getent": sendDNS, "resolvectl": sendDNS, "ping": sendDNS, "ping6": sendDNS, "traceroute": sendDNS,
	"traceroute6": sendDNS, "tracepath": sendDNS, "mtr": sendDNS, "whois": sendDNS, "arping": sendDNS, "fping": sendDNS,
	"smbclient": sendScript, "lftp": sendScript, "ftp": sendScript, "tftp": sendScript, "sftp": sendScript,
}

// verbs say what each kind of sender does with what it sends.
var verbs = [...]string{sendHTTP: "uploads", sendStream: "sends", sendCopy: "copies", sendMail: "mails",
	sendDNS: "looks up", sendScript: "uploads"}

// Payload is one piece of local data a command sends.
type Payload struct {
	What   string // "the file /etc/shadow", "the output of $(hostname)"
	Secret string // the credential store it holds, "" if none is known
}

// Check raises seg when the program sends local data off the machine.
func Check(c walk.Classifier, base string, args []shellword.Word, f *walk.Frame, in walk.Stdin, seg *walk.Segment) {
	kind := senders[base]
	if kind == 0 {
		return
	}
	var sent []Payload
	switch kind {
	case sendHTTP:
		sent = httpPayloads(c, base, args, f, in)
	case sendStream:
		if base == "openssl" && (len(args) == 0 || args[0].Val != "s_client") {
			return
		}
		sent = streamPayloads(c, base, args, f, in)
	case sendCopy:
		sent = copyPayloads(c, base, args, f)
	case sendMail:
		if sent = mailPayloads(c, args, f, in); len(sent) == 0 {
			sent = []Payload{{What: "a message"}}
		}
	case sendDNS:
		sent = dnsPayloads(c, base, args, f)
	case sendScript:
		sent = scriptPayloads(c, args, f, in)
	}
	verb := verbs[kind]
	if len(sent) == 0 {
		return
	}
	class, p := decisive(sent)
	if class.Rank() < seg.Class.Rank() || class == seg.Class && seg.Rule != "" && class == ruleset.Destructive {
		return
	}
	seg.Class, seg.Rule = class, ""
	seg.Reason = base + " " + verb + " " + p.What + " off the machine" + p.note()
	seg.Cause = "exfiltration: " + base + " " + verb + " " + p.What
}

// decisive is the payload that decides what sending sent is, with its class:
// the first credential store (destructive: a leaked secret cannot be taken
// back), else the first payload (config_mutation).
func decisive(sent []Payload) (ruleset.Class, Payload) {
	for _, s := range sent {
		if s.Secret != "" {
			return ruleset.Destructive, s
		}
	}
	return ruleset.ConfigMutation, sent[0]
}

// note ends the reason for sending p.
func (p Payload) note() string {
	if p.Secret != "" {
		return ", a credential store (" + p.Secret + "): a leaked secret cannot be taken back"
	}
	return " (data leaving the machine needs an operator)"
}

// isCommandSubst reports whether a word's dynamic text holds a command or
// process substitution (as opposed to only variables).
func isCommandSubst(w shellword.Word) bool {
	return w.Dyn && (strings.Contains(w.Val, "$(") || strings.Contains(w.Val, "`") || strings.Contains(w.Val, "<("))
}

func substPayload(c walk.Classifier, w shellword.Word, f *walk.Frame) Payload {
	return Payload{What: "the output of " + walk.Clip(w.Val), Secret: SecretInText(c, w.Val, f)}
}

func filePayload(c walk.Classifier, file string, f *walk.Frame, in walk.Stdin) Payload {
	if file == "-" || file == "/dev/stdin" || file == "/dev/fd/0" {
		return Payload{What: "its standard input (" + in.Producer + ")", Secret: SecretOfStdin(c, in, f, 0)}
	}
	return Payload{What: "the file " + file, Secret: c.Rules().CredentialIn(file)}
}

// stdinPayload is what a command reads on its standard input, when that is
// local data: a file, another program's output, text with an expansion.
func stdinPayload(c walk.Classifier, in walk.Stdin, f *walk.Frame) (Payload, bool) {
	switch {
	case in.Kind == walk.StdinOther, in.Kind == walk.StdinText && in.Dyn:
		return Payload{What: "its standard input (" + in.Producer + ")", Secret: SecretOfStdin(c, in, f, 0)}, true
	}
	return Payload{}, false
}

func httpPayloads(c walk.Classifier, base string, args []shellword.Word, f *walk.Frame, in walk.Stdin) []Payload {
	var out []Payload
	httpie := base == "http" || base == "https" || base == "xh" || base == "xhs"
	for i := 0; i < len(args); i++ {
		w := args[i]
		if isCommandSubst(w) {
			out = append(out, substPayload(c, w, f))
			continue
		}
		name, val, attached := strings.Cut(w.Val, "=")
		if !strings.HasPrefix(w.Val, "--") {
			name, val, attached = w.Val, "", false
			if base == "curl" && len(w.Val) > 2 && w.Val[0] == '-' {
				// A cluster: -sd @file, -sT file, -d@file.
				for j := 1; j < len(w.Val); j++ {
					ch := w.Val[j]
					if strings.IndexByte("dFT", ch) >= 0 {
						name = "-" + string(ch)
						if j+1 < len(w.Val) {
							val, attached = w.Val[j+1:], true
						}
						break
					}
					if strings.IndexByte("oHXAeuxwbcDKErmyYzQPtU", ch) >= 0 {
						break
					}
				}
			}
		}
		value := func() string {
			if attached {
				return val
			}
			if i+1 < len(args) {
				i++
				if isCommandSubst(args[i]) {
					out = append(out, substPayload(c, args[i], f))
					return ""
				}
				return args[i].Val
			}
			return ""
		}
		switch {
		case httpie:
			// Request items: field@file, field=@file, field:=@file, @file as
			// the raw body; HTTPie sends a piped standard input as the body.
			if j := strings.Index(w.Val, "@"); j >= 0 && !strings.HasPrefix(w.Val, "-") && !strings.Contains(w.Val[:j], "/") {
				out = append(out, filePayload(c, w.Val[j+1:], f, in))
			}
		case name == "-d" || name == "--data" || name == "--data-ascii" || name == "--data-binary" || name == "--json" ||
			name == "--data-urlencode" || base != "curl" && (name == "--post-data" || name == "--body-data"):
			v := value()
			if _, after, ok := strings.Cut(v, "@"); ok && (name != "--data-urlencode" || !strings.Contains(v[:strings.Index(v, "@")], "=")) {
				out = append(out, filePayload(c, after, f, in))
			}
		case name == "-F" || name == "--form":
			v := value()
			if _, after, ok := strings.Cut(v, "="); ok && (strings.HasPrefix(after, "@") || strings.HasPrefix(after, "<")) {
				file, _, _ := strings.Cut(after[1:], ";")
				out = append(out, filePayload(c, file, f, in))
			}
		case name == "-T" || name == "--upload-file" || name == "--post-file" || name == "--body-file":
			v := value()
			if v == "." {
				v = "-"
			}
			out = append(out, filePayload(c, v, f, in))
		}
	}
	if httpie {
		if p, ok := stdinPayload(c, in, f); ok {
			out = append(out, p)
		}
	}
	return out
}

func streamPayloads(c walk.Classifier, base string, args []shellword.Word, f *walk.Frame, in walk.Stdin) []Payload {
	var out []Payload
	zero := false
	for _, w := range args {
		if isCommandSubst(w) {
			out = append(out, substPayload(c, w, f))
		}
		if base == "socat" {
			// Address types that read a local file: FILE:, OPEN:, GOPEN:,
			// and a bare path.
			for _, part := range strings.FieldsFunc(w.Val, func(r rune) bool { return r == ',' || r == '!' }) {
				kind, rest, ok := strings.Cut(part, ":")
				switch {
				case ok && (strings.EqualFold(kind, "file") || strings.EqualFold(kind, "open") || strings.EqualFold(kind, "gopen")):
					out = append(out, Payload{What: "the file " + rest, Secret: c.Rules().CredentialIn(rest)})
				case !ok && strings.HasPrefix(part, "/"):
					out = append(out, Payload{What: "the file " + part, Secret: c.Rules().CredentialIn(part)})
				}
			}
		}
		if (base == "nc" || base == "ncat" || base == "netcat") && strings.HasPrefix(w.Val, "-") && !strings.HasPrefix(w.Val, "--") && strings.Contains(w.Val, "z") {
			zero = true // -z: scan only, nothing is sent
		}
	}
	if !zero {
		if p, ok := stdinPayload(c, in, f); ok {
			out = append(out, p)
		}
	}
	return out
}

// remotePath reports whether a scp/rsync/rclone argument names a remote
// location: [user@]host:path, host::module, rsync://, scp://, or an rclone
// remote name:path.
func remotePath(s string) bool {
	if strings.Contains(s, "://") {
		return !strings.HasPrefix(s, "file://")
	}
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "~") || strings.HasPrefix(s, "-") {
		return false
	}
	i := strings.IndexByte(s, ':')
	return i > 0 && !strings.Contains(s[:i], "/")
}

func copyPayloads(c walk.Classifier, base string, args []shellword.Word, f *walk.Frame) []Payload {
	var pos []shellword.Word
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.Val == "--dry-run" || base != "scp" && !w.Dyn && len(w.Val) > 1 && w.Val[0] == '-' && w.Val[1] != '-' && strings.IndexByte(w.Val, 'n') > 0 {
			return nil // a dry run sends nothing
		}
		if strings.HasPrefix(w.Val, "-") && !w.Dyn {
			// The value options that take the next word: scp -P -i -o -F -l
			// -c -J -S; rsync -e and the few short ones with a value.
			if base == "scp" && len(w.Val) == 2 && strings.IndexByte("PioFlcJSD", w.Val[1]) >= 0 ||
				base == "rsync" && (w.Val == "-e" || w.Val == "-f" || w.Val == "-T" || w.Val == "-B" || w.Val == "-M") {
				i++
			}
			continue
		}
		pos = append(pos, w)
	}
	if base == "rclone" {
		if len(pos) < 3 {
			return nil
		}
		switch pos[0].Val {
		case "copy", "sync", "move", "copyto", "moveto", "bisync", "copyurl":
		default:
			return nil
		}
		pos = pos[1:]
	}
	if len(pos) < 2 || !pos[len(pos)-1].Dyn && !remotePath(pos[len(pos)-1].Val) {
		return nil
	}
	var out []Payload
	for _, src := range pos[:len(pos)-1] {
		if !src.Dyn && remotePath(src.Val) {
			continue
		}
		out = append(out, Payload{What: "the local path " + walk.Clip(src.Val), Secret: SecretInWord(c, src, f)})
	}
	return out
}

func mailPayloads(c walk.Classifier, args []shellword.Word, f *walk.Frame, in walk.Stdin) []Payload {
	var out []Payload
	for i := 0; i < len(args); i++ {
		w := args[i]
		if isCommandSubst(w) {
			out = append(out, substPayload(c, w, f))
			continue
		}
		switch v := w.Val; {
		case v == "-a" || v == "-A" || v == "--attach" || v == "--attach-type" || v == "--body" || v == "--data" || v == "--attachment":
			if i+1 < len(args) {
				i++
				file := strings.TrimPrefix(args[i].Val, "@")
				if (v == "--body" || v == "--data") && !strings.HasPrefix(args[i].Val, "@") && !strings.HasPrefix(args[i].Val, "/") {
					continue // swaks: literal text, not a file
				}
				out = append(out, Payload{What: "the file " + file, Secret: SecretInWord(c, shellword.Word{Val: file, Dyn: args[i].Dyn}, f)})
			}
		case strings.HasPrefix(v, "--attach=") || strings.HasPrefix(v, "--attachment="):
			_, file, _ := strings.Cut(v, "=")
			out = append(out, Payload{What: "the file " + file, Secret: c.Rules().CredentialIn(strings.TrimPrefix(file, "@"))})
		}
	}
	if p, ok := stdinPayload(c, in, f); ok {
		out = append(out, p)
	}
	return out
}

func dnsPayloads(c walk.Classifier, base string, args []shellword.Word, f *walk.Frame) []Payload {
	var out []Payload
	for i, w := range args {
		if !w.Dyn {
			continue
		}
		if strings.HasPrefix(w.Val, "-") || strings.HasPrefix(w.Val, "+") || strings.HasPrefix(w.Val, "@") {
			continue // an option or the server to ask, not the name
		}
		if i > 0 && (base == "dig" || base == "kdig" || base == "drill") && (args[i-1].Val == "-p" || args[i-1].Val == "-b") {
			continue
		}
		if !isCommandSubst(w) && onlyKnownVars(w.Val, f) {
			continue // a name built from values the command itself spells out
		}
		p := Payload{What: "a name built from " + walk.Clip(w.Val), Secret: SecretInText(c, w.Val, f)}
		out = append(out, p)
	}
	return out
}

// varRefRE finds $NAME and ${NAME} references in a word's text.
var varRefRE = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// onlyKnownVars reports whether every expansion in text is a variable whose
// value the command itself wrote (a literal assignment, a for loop over
// literal words).
func onlyKnownVars(text string, f *walk.Frame) bool {
	refs := varRefRE.FindAllStringSubmatch(text, -1)
	if len(refs) == 0 || strings.Count(text, "$") != len(refs) {
		return false
	}
	for _, m := range refs {
		if _, ok := f.Sh.Lits[m[1]]; !ok && !f.Sh.LoopVars[m[1]] {
			return false
		}
	}
	return true
}

// SSH records what ssh sends to dest: its standard input goes to the remote
// command (unless -n), and a remote command expanded here with a
// substitution carries that output.
func SSH(c walk.Classifier, dest string, opts []shellword.Option, remote []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	var sent []Payload
	for _, w := range remote {
		if isCommandSubst(w) {
			sent = append(sent, substPayload(c, w, f))
		}
	}
	if !shellword.HasOption(opts, "-n", "-f") {
		if p, ok := stdinPayload(c, in, f); ok {
			sent = append(sent, p)
		}
	}
	if len(sent) == 0 {
		return
	}
	seg := walk.Segment{Command: text, Program: "ssh", Class: ruleset.ReadOnly}
	Describe(&seg, "ssh", "sends", dest, sent)
	c.Add(f, seg)
}

// Describe sets seg from what a command sends to dest.
func Describe(seg *walk.Segment, prog, verb, dest string, sent []Payload) {
	class, p := decisive(sent)
	seg.Class, seg.Rule = class, ""
	seg.Reason = prog + " " + verb + " " + p.What + " to " + dest + p.note()
	seg.Cause = "exfiltration: " + prog + " " + verb + " " + p.What + " to " + dest
}

// pathTokenRE finds path-like tokens in the text of an expansion.
var pathTokenRE = regexp.MustCompile(`[~./A-Za-z0-9_-][~./A-Za-z0-9_:*+-]*`)

// envDumpRE finds a program that prints the environment, started by a
// substitution or a pipe: env, printenv, set, export -p, declare -p/-x.
var envDumpRE = regexp.MustCompile("(?:^|\\$\\(|`|\\||;|&&)\\s*(?:/usr/bin/|/bin/)?(?:env|printenv(?:\\s+[A-Za-z_][A-Za-z0-9_]*)*|set|export(?:\\s+-p)?|(?:declare|typeset)\\s+-[pxX]+|compgen\\s+-e)\\s*(?:$|\\)|`|\\||;|&)")

// SecretInText looks into the text of an expansion — $(cat /etc/shadow),
// $(env), $KEY set from a credential earlier in the command — for a
// credential store.
func SecretInText(c walk.Classifier, text string, f *walk.Frame) string {
	if envDumpRE.MatchString(text) {
		return "the environment"
	}
	for _, tok := range pathTokenRE.FindAllString(text, 32) {
		if !strings.ContainsAny(tok, "/.") {
			continue
		}
		if s := c.Rules().CredentialIn(tok); s != "" && !strings.Contains(s, "(with every") {
			return s
		}
	}
	for _, m := range varRefRE.FindAllStringSubmatch(text, 16) {
		if s := f.Sh.Secrets[m[1]]; s != "" {
			return s
		}
	}
	return ""
}

// SecretInWord is the credential store a word names, literally or in its
// expansions.
func SecretInWord(c walk.Classifier, w shellword.Word, f *walk.Frame) string {
	if w.Dyn {
		return SecretInText(c, w.Val, f)
	}
	return c.Rules().CredentialIn(w.Val)
}

// SecretOfStdin is the credential store a command's standard input carries:
// a file redirected in, the output of a program that read one (cat
// /etc/shadow, tar c /etc/pve/priv, env), through any number of pipeline
// stages.
func SecretOfStdin(c walk.Classifier, in walk.Stdin, f *walk.Frame, depth int) string {
	switch {
	case in.Secret != "":
		return in.Secret
	case in.EnvDump:
		return "the environment"
	case depth > 64:
		return ""
	}
	if in.Kind == walk.StdinText && in.Dyn {
		if s := SecretInText(c, in.Text, f); s != "" {
			return s
		}
	}
	for line := range strings.SplitSeq(in.Hint, "\n") {
		if line == "" {
			continue
		}
		if s := c.Rules().CredentialIn(line); s != "" {
			return s
		}
		if strings.Contains(line, "$") {
			if s := SecretInText(c, line, f); s != "" {
				return s
			}
		}
	}
	if in.Up != nil {
		return SecretOfStdin(c, *in.Up, f, depth+1)
	}
	return ""
}

// putRE finds an upload in a file-transfer client's commands (smbclient(1)
// -c, lftp(1) -e/-c, ftp(1), tftp(1), sftp(1) batch): put, mput, reput.
var putRE = regexp.MustCompile(`(?i)(?:^|[;\n]|\s)(?:m|re)?put\s+([^\s;]+)`)

// scriptPayloads: the files a file-transfer client's commands upload, given
// as an option's value or on its standard input.
func scriptPayloads(c walk.Classifier, args []shellword.Word, f *walk.Frame, in walk.Stdin) []Payload {
	var out []Payload
	scan := func(text string) {
		for _, m := range putRE.FindAllStringSubmatch(text, walk.MaxArgScans) {
			file := strings.Trim(m[1], `'"`)
			out = append(out, Payload{What: "the file " + file, Secret: c.Rules().CredentialIn(file)})
		}
	}
	for _, w := range args {
		if isCommandSubst(w) {
			out = append(out, substPayload(c, w, f))
			continue
		}
		scan(w.Val)
	}
	if in.Kind == walk.StdinText {
		scan(in.Text)
	} else if p, ok := stdinPayload(c, in, f); ok {
		out = append(out, p)
	}
	return out
}
