package ontology

import (
	"encoding/json"
	"fmt"
	"time"
)

// Monitoring kinds a type may declare. Each names a checker in the scheduler.
const (
	// KindSSHScript runs a probe script (see the Script* constants) on the machine, through
	// the Proxmox host-hop for guests.
	KindSSHScript = "ssh-script"
	// KindHTTP requests the entity's url attribute, else https://<public_host>/.
	KindHTTP = "http"
	// KindTCP connects to the entity's host and port attributes.
	KindTCP = "tcp"
	// KindBackupFreshness looks for files newer than max_age_minutes under path, on the
	// machine found by walking backs-up-to backwards.
	KindBackupFreshness = "backup-freshness"
	// KindProxmoxGuest asks the owning Proxmox host for pct/qm status.
	KindProxmoxGuest = "proxmox-guest"
)

// Probe scripts an ssh-script check may run.
const (
	ScriptCPU    = "cpu"
	ScriptMemory = "memory"
	ScriptDisk   = "disk"
	ScriptLoad   = "load"
	// ScriptProcess takes the entity's `unit` attribute as its argument.
	ScriptProcess = "process"
)

// Defaults applied when a monitoring entry omits its interval or timeout.
const (
	DefaultInterval = 60 * time.Second
	DefaultTimeout  = 10 * time.Second
)

var knownKinds = map[string]bool{
	KindSSHScript: true, KindHTTP: true, KindTCP: true, KindBackupFreshness: true, KindProxmoxGuest: true,
}

var knownScripts = map[string]bool{
	ScriptCPU: true, ScriptMemory: true, ScriptDisk: true, ScriptLoad: true, ScriptProcess: true,
}

// MonitoringSpec is one check a type warrants. Check derivation turns it into a check
// definition per entity; the coverage sweep compares what a type warrants with what exists.
type MonitoringSpec struct {
	// Kind is one of the Kind* constants.
	Kind string
	// Script names the probe for KindSSHScript; empty for other kinds.
	Script string
	// Interval between runs.
	Interval time.Duration
	// Timeout of one run; never longer than Interval.
	Timeout time.Duration
	// Args are fixed arguments for the probe. The process script gets the entity's unit
	// instead when the entity has one.
	Args []string
	// RequiresAll lists attributes that must all be set on an entity for this check to
	// apply (for example host and port for tcp).
	RequiresAll []string
	// RequiresAny lists attributes of which at least one must be set (for example url or
	// public_host for http). A spec that does not apply to an entity is not derived, so
	// the type can say "http if the service has a url" without false coverage gaps.
	RequiresAny []string
}

// AppliesTo reports whether an entity with these attributes gets this check. An attribute
// counts as set when it is present and not null, false or the empty string.
func (m MonitoringSpec) AppliesTo(attrs map[string]any) bool {
	for _, name := range m.RequiresAll {
		if !isSet(attrs[name]) {
			return false
		}
	}
	if len(m.RequiresAny) == 0 {
		return true
	}
	for _, name := range m.RequiresAny {
		if isSet(attrs[name]) {
			return true
		}
	}
	return false
}

func isSet(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	default:
		return true
	}
}

// monitoringJSON is the stored shape: durations as Go duration strings ("1m0s") so the
// column is readable and round-trips without unit guessing.
type monitoringJSON struct {
	Kind        string   `json:"kind"`
	Script      string   `json:"script,omitempty"`
	Interval    string   `json:"interval"`
	Timeout     string   `json:"timeout"`
	Args        []string `json:"args,omitempty"`
	RequiresAll []string `json:"requires_all,omitempty"`
	RequiresAny []string `json:"requires_any,omitempty"`
}

// MarshalJSON encodes durations as strings such as "1m0s".
func (m MonitoringSpec) MarshalJSON() ([]byte, error) {
	return json.Marshal(monitoringJSON{
		Kind: m.Kind, Script: m.Script,
		Interval: m.Interval.String(), Timeout: m.Timeout.String(),
		Args: m.Args, RequiresAll: m.RequiresAll, RequiresAny: m.RequiresAny,
	})
}

// UnmarshalJSON decodes what MarshalJSON wrote.
func (m *MonitoringSpec) UnmarshalJSON(data []byte) error {
	var j monitoringJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("monitoring spec: %w", err)
	}
	out := MonitoringSpec{Kind: j.Kind, Script: j.Script, Args: j.Args, RequiresAll: j.RequiresAll, RequiresAny: j.RequiresAny}
	var err error
	if j.Interval != "" {
		if out.Interval, err = time.ParseDuration(j.Interval); err != nil {
			return fmt.Errorf("monitoring spec interval: %w", err)
		}
	}
	if j.Timeout != "" {
		if out.Timeout, err = time.ParseDuration(j.Timeout); err != nil {
			return fmt.Errorf("monitoring spec timeout: %w", err)
		}
	}
	*m = out
	return nil
}
