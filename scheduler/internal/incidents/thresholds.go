package incidents

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/oikos-hq/oikos/shared/attr"
)

// Defaults of Thresholds.
const (
	DefaultFailure = 2
	DefaultSuccess = 1
)

// Entity attributes that override the thresholds for one entity.
const (
	AttrFailureThreshold = "failure_threshold"
	AttrSuccessThreshold = "success_threshold"
)

// Thresholds say how many consecutive runs make a failure an incident, and a recovery its
// resolution.
type Thresholds struct {
	Failure, Success int
	// ByKind overrides both per check kind (ssh-script, http, tcp, backup-freshness,
	// proxmox-guest); a zero field keeps the default.
	ByKind map[string]Pair
}

// Pair is a failure and a success threshold; zero means "not set".
type Pair struct{ Failure, Success int }

func (t Thresholds) withDefaults() Thresholds {
	if t.Failure <= 0 {
		t.Failure = DefaultFailure
	}
	if t.Success <= 0 {
		t.Success = DefaultSuccess
	}
	return t
}

// ParseByKind reads OIKOS_INCIDENT_THRESHOLDS: "kind=failure[/success],…", for example
// "http=3,backup-freshness=1/2".
func ParseByKind(s string) (map[string]Pair, error) {
	out := map[string]Pair{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		kind, val, ok := strings.Cut(item, "=")
		kind = strings.TrimSpace(kind)
		if !ok || kind == "" {
			return nil, fmt.Errorf("%q: want kind=failure[/success]", item)
		}
		f, s, hasS := strings.Cut(strings.TrimSpace(val), "/")
		var p Pair
		var err error
		if p.Failure, err = strconv.Atoi(f); err != nil || p.Failure < 1 {
			return nil, fmt.Errorf("%q: failure threshold must be a whole number of runs, at least 1", item)
		}
		if hasS {
			if p.Success, err = strconv.Atoi(s); err != nil || p.Success < 1 {
				return nil, fmt.Errorf("%q: success threshold must be a whole number of runs, at least 1", item)
			}
		}
		out[kind] = p
	}
	return out, nil
}

// entityThresholds are the thresholds of one entity: its attributes, else its check
// kind's, else the defaults.
type entityThresholds struct {
	failure, success int // from the entity's attributes; 0 when not set
}

func (t Thresholds) failure(e entityThresholds, kind string) int {
	if e.failure > 0 {
		return e.failure
	}
	if p := t.ByKind[kind]; p.Failure > 0 {
		return p.Failure
	}
	return t.Failure
}

func (t Thresholds) success(e entityThresholds, kind string) int {
	if e.success > 0 {
		return e.success
	}
	if p := t.ByKind[kind]; p.Success > 0 {
		return p.Success
	}
	return t.Success
}

// thresholdAttr reads an override attribute; anything but a positive whole number is
// ignored (the coverage of a typo is the default, not an incident that never opens).
func thresholdAttr(v any) int {
	if v == nil {
		return 0
	}
	n, err := attr.Int(v)
	if err != nil || n < 1 {
		return 0
	}
	return n
}
