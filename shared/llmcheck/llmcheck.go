// Package llmcheck is the report of `oikos llm check` (issue #31, "Doctor"): what the agent
// found when it probed its model server, finding by finding, and how a person reads it. The
// probes run in the agent (agent/internal/llmcheck), since the model's configuration and
// Nomos's wire client live there; the CLI and the dashboard reach them through the api
// (POST /api/v1/llm/check) and render this report.
package llmcheck

import (
	"fmt"
	"io"
	"strings"
)

// Status is one finding's verdict.
type Status string

// The verdicts: ok works; warn works with a caveat or a setting worth changing; fail means
// Nomos cannot work with the server as configured; skip is a probe not run because an
// earlier one failed.
const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
	Skip Status = "skip"
)

// The probes, in the order they run.
const (
	ProbeConfig    = "config"
	ProbeModels    = "models"
	ProbeServer    = "server"
	ProbeContext   = "context"
	ProbePlain     = "plain"
	ProbeStream    = "stream"
	ProbeTools     = "tools"
	ProbeReasoning = "reasoning"
)

// Finding is what one probe found.
type Finding struct {
	Probe  string `json:"probe"`
	Status Status `json:"status"`
	// Detail says what happened, in a sentence or two.
	Detail string `json:"detail"`
	// Set are the settings that would fix or improve it, as NAME=value lines.
	Set []string `json:"set,omitempty"`
	// Millis is how long the probe took.
	Millis int64 `json:"ms"`
}

// Report is one check of one endpoint.
type Report struct {
	BaseURL string `json:"base_url"`
	Model   string `json:"model"`
	// Provider is the preset configured (OIKOS_LLM_PROVIDER), "" none.
	Provider string `json:"provider,omitempty"`
	// Detected is the server the identity endpoints named ("" none answered).
	Detected string `json:"detected,omitempty"`
	// ServerVersion is the version it reported.
	ServerVersion string `json:"server_version,omitempty"`
	// ContextTokens is the context window the server reported for the model (0: none).
	ContextTokens int       `json:"context_tokens,omitempty"`
	Findings      []Finding `json:"findings"`
	// OK says no finding failed: Nomos can work with the endpoint.
	OK bool `json:"ok"`
}

// Finish sets OK from the findings.
func (r *Report) Finish() {
	r.OK = true
	for _, f := range r.Findings {
		if f.Status == Fail {
			r.OK = false
		}
	}
}

// Settings are every finding's settings, each once, in order.
func (r Report) Settings() []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range r.Findings {
		for _, s := range f.Set {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// WriteText writes the report for a person: a line per finding, then what to set.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "model server %s, model %s", r.BaseURL, orNone(r.Model))
	if r.Provider != "" {
		fmt.Fprintf(&b, ", OIKOS_LLM_PROVIDER=%s", r.Provider)
	}
	b.WriteString("\n")
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "%-4s  %-9s  %s", strings.ToUpper(string(f.Status)), f.Probe, oneLine(f.Detail))
		if f.Millis > 0 {
			fmt.Fprintf(&b, " (%d ms)", f.Millis)
		}
		b.WriteString("\n")
	}
	if set := r.Settings(); len(set) > 0 {
		b.WriteString("set:\n")
		for _, s := range set {
			fmt.Fprintf(&b, "  %s\n", s)
		}
	}
	if r.OK {
		b.WriteString("result: Nomos can work with this model server\n")
	} else {
		b.WriteString("result: Nomos cannot work with this model server as configured (see FAIL above)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// oneLine keeps a finding on its line: a server's message may hold newlines.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
