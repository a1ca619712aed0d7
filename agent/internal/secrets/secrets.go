// Package secrets gives the agent secrets by reference: a tool names a secret
// ("grafana_token") and the code that needs its value (an http header, an environment
// variable for a command) resolves it at the last moment. Values never reach a tool result,
// a log line or stored output: List returns names only, and Redact replaces any value that
// leaks into an output with "[secret:<name>]".
//
// The backend is picked from the agent's environment (FromEnv):
//
//   - env/file (the default): OIKOS_SECRET_<NAME> variables (the name lower-cased:
//     OIKOS_SECRET_GRAFANA_TOKEN is grafana_token) and the files of OIKOS_SECRETS_DIR (the
//     file name is the secret's name, one trailing newline dropped; dotfiles, directories and
//     names with other characters than letters, digits, '_', '-' and '.' are ignored; a
//     variable wins over a file of the same name). The directory is read at every call, so a
//     rotated file is picked up. Keep it readable by the agent's user only (0700): the
//     package does not refuse a world-readable directory, it cannot know who else is meant
//     to read it.
//   - Infisical, when OIKOS_INFISICAL_URL, OIKOS_INFISICAL_CLIENT_ID,
//     OIKOS_INFISICAL_CLIENT_SECRET and OIKOS_INFISICAL_PROJECT_ID are set
//     (OIKOS_INFISICAL_ENV, the environment slug, defaults to prod): a machine identity's
//     universal-auth login, its access token cached until shortly before it expires, and
//     the secrets of the project's environment at path "/".
//
// Names are case-insensitive and listed in lower case, whatever the backend.
package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Environment variables.
const (
	envPrefix          = "OIKOS_SECRET_"
	dirVar             = "OIKOS_SECRETS_DIR"
	infisicalURLVar    = "OIKOS_INFISICAL_URL"
	infisicalIDVar     = "OIKOS_INFISICAL_CLIENT_ID"
	infisicalSecretVar = "OIKOS_INFISICAL_CLIENT_SECRET"
	infisicalProjVar   = "OIKOS_INFISICAL_PROJECT_ID"
	infisicalEnvVar    = "OIKOS_INFISICAL_ENV"
)

// ErrNotConfigured is FromEnv's answer when no backend is configured; the agent then runs
// without secrets.
var ErrNotConfigured = errors.New("no secrets backend is configured: set OIKOS_SECRETS_DIR, OIKOS_SECRET_<NAME> variables, or OIKOS_INFISICAL_*")

// ErrNotFound is wrapped when a backend has no secret of the name asked for.
var ErrNotFound = errors.New("secret not found")

// ErrConfig is wrapped by every configuration error of FromEnv (a partial Infisical
// configuration, a secrets directory that is not one, two backends at once).
var ErrConfig = errors.New("invalid secrets configuration")

// Backend holds secrets.
type Backend interface {
	// Name says which backend this is ("env/file", "infisical").
	Name() string
	// List returns the names of the secrets, lower-cased and sorted; never values.
	List(ctx context.Context) ([]string, error)
	// Resolve returns a secret's value, for code that injects it; never return it to a
	// tool, log it or store it.
	Resolve(ctx context.Context, name string) (string, error)
}

// FromEnv picks the backend from configuration: Infisical if any OIKOS_INFISICAL_* variable
// is set (then all four required ones must be), else env/file if OIKOS_SECRETS_DIR or any
// OIKOS_SECRET_<NAME> is set, else ErrNotConfigured (and a nil Backend). Setting both
// Infisical and env/file secrets is a configuration error rather than a silent choice.
// getenv and environ default to os.Getenv and os.Environ.
func FromEnv(getenv func(string) string, environ []string) (Backend, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if environ == nil {
		environ = os.Environ()
	}
	vars := envSecrets(environ)
	dir := strings.TrimSpace(getenv(dirVar))

	inf := map[string]string{}
	anyInfisical := false
	for _, k := range []string{infisicalURLVar, infisicalIDVar, infisicalSecretVar, infisicalProjVar, infisicalEnvVar} {
		inf[k] = strings.TrimSpace(getenv(k))
		anyInfisical = anyInfisical || inf[k] != ""
	}
	if anyInfisical {
		if len(vars) > 0 || dir != "" {
			return nil, fmt.Errorf("%w: both Infisical (OIKOS_INFISICAL_*) and env/file secrets (%s, %s<NAME>) are configured; use one",
				ErrConfig, dirVar, envPrefix)
		}
		var missing []string
		for _, k := range []string{infisicalURLVar, infisicalIDVar, infisicalSecretVar, infisicalProjVar} {
			if inf[k] == "" {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			verb := "is"
			if len(missing) > 1 {
				verb = "are"
			}
			return nil, fmt.Errorf("%w: Infisical is partly configured: %s %s not set (Infisical needs %s, %s, %s and %s; %s defaults to prod)",
				ErrConfig, joinAnd(missing), verb, infisicalURLVar, infisicalIDVar, infisicalSecretVar, infisicalProjVar, infisicalEnvVar)
		}
		env := inf[infisicalEnvVar]
		if env == "" {
			env = "prod"
		}
		b, err := newInfisical(inf[infisicalURLVar], inf[infisicalIDVar], inf[infisicalSecretVar], inf[infisicalProjVar], env)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return b, nil
	}
	if len(vars) == 0 && dir == "" {
		return nil, ErrNotConfigured
	}
	if dir != "" {
		info, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrConfig, dirVar, err)
		}
		if !info.IsDir() {
			return nil, fmt.Errorf("%w: %s=%s is not a directory", ErrConfig, dirVar, dir)
		}
	}
	return &envFile{vars: vars, dir: dir}, nil
}

func joinAnd(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// canonical is a secret's name as listed: trimmed and lower-cased.
func canonical(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// validName: letters, digits, '_', '-', '.', not starting with '.', at most 128 bytes.
func validName(n string) bool {
	if n == "" || len(n) > 128 || n[0] == '.' {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// envSecrets collects OIKOS_SECRET_<NAME> variables with a value (a later duplicate wins).
func envSecrets(environ []string) map[string]string {
	out := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		rest, ok := strings.CutPrefix(k, envPrefix)
		if !ok || v == "" {
			continue
		}
		if n := canonical(rest); validName(n) {
			out[n] = v
		}
	}
	return out
}

// maxFileBytes bounds a secret file.
const maxFileBytes = 64 << 10

// envFile is the env/file backend.
type envFile struct {
	vars map[string]string
	dir  string
}

func (b *envFile) Name() string { return "env/file" }

// files maps the canonical names of the secret files to their file names; dups holds
// names that two files claim (differing only in case).
func (b *envFile) files() (map[string]string, map[string][]string, error) {
	out, dups := map[string]string{}, map[string][]string{}
	if b.dir == "" {
		return out, dups, nil
	}
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", dirVar, err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		// Stat follows symlinks (a Kubernetes or Docker secret mount): a link to a regular
		// file is a secret, a dangling one or a directory is not.
		info, err := os.Stat(filepath.Join(b.dir, name))
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		n := canonical(name)
		if !validName(n) || n != strings.ToLower(name) {
			continue
		}
		if prev, dup := out[n]; dup {
			dups[n] = append(dups[n], prev, name)
			continue
		}
		out[n] = name
	}
	return out, dups, nil
}

func (b *envFile) List(context.Context) ([]string, error) {
	files, _, err := b.files()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(b.vars)+len(files))
	for n := range b.vars {
		names = append(names, n)
	}
	for n := range files {
		if _, dup := b.vars[n]; !dup {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

func (b *envFile) Resolve(_ context.Context, name string) (string, error) {
	n := canonical(name)
	if v, ok := b.vars[n]; ok {
		return v, nil
	}
	if b.dir == "" || !validName(n) {
		return "", fmt.Errorf("%w: no secret named %q (%s<NAME> variables%s)", ErrNotFound, name, envPrefix, b.dirNote())
	}
	files, dups, err := b.files()
	if err != nil {
		return "", err
	}
	if d := dups[n]; len(d) > 0 {
		return "", fmt.Errorf("secret %q is ambiguous: files %s in %s differ only in case", name, strings.Join(d, " and "), dirVar)
	}
	file, ok := files[n]
	if !ok {
		return "", fmt.Errorf("%w: no secret named %q (%s<NAME> variables%s)", ErrNotFound, name, envPrefix, b.dirNote())
	}
	f, err := os.Open(filepath.Join(b.dir, file))
	if err != nil {
		return "", fmt.Errorf("reading secret %q: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading secret %q: %w", name, err)
	}
	if len(data) > maxFileBytes {
		return "", fmt.Errorf("secret file %s in %s is larger than %d KiB", file, dirVar, maxFileBytes>>10)
	}
	v := string(data)
	if s, ok := strings.CutSuffix(v, "\n"); ok {
		v = strings.TrimSuffix(s, "\r")
	}
	return v, nil
}

func (b *envFile) dirNote() string {
	if b.dir == "" {
		return ""
	}
	return " or files in " + dirVar
}

// Redact replaces every occurrence of a secret's value in text with "[secret:<name>]":
// values maps names to values (empty values are skipped). The value is also replaced as it
// appears JSON-escaped and URL-escaped, and longer values are replaced before shorter ones,
// so a value containing another is replaced whole. Every non-empty value is redacted, even a
// short one: prefer secrets long enough not to occur by chance.
func Redact(text string, values map[string]string) string {
	type rep struct{ old, name string }
	var reps []rep
	seen := map[string]bool{}
	for name, v := range values {
		if v == "" {
			continue
		}
		forms := []string{v, url.QueryEscape(v), url.PathEscape(v)}
		if j, err := json.Marshal(v); err == nil {
			forms = append(forms, string(j[1:len(j)-1]))
		}
		for _, f := range forms {
			if f != "" && !seen[f+"\x00"+name] {
				seen[f+"\x00"+name] = true
				reps = append(reps, rep{f, name})
			}
		}
	}
	if len(reps) == 0 {
		return text
	}
	// Longest first (strings.Replacer tries the pairs in order at each position), then by
	// name for a deterministic choice between two secrets with the same value.
	slices.SortFunc(reps, func(a, b rep) int {
		if d := len(b.old) - len(a.old); d != 0 {
			return d
		}
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return strings.Compare(a.old, b.old)
	})
	args := make([]string, 0, 2*len(reps))
	for _, r := range reps {
		args = append(args, r.old, "[secret:"+r.name+"]")
	}
	return strings.NewReplacer(args...).Replace(text)
}
