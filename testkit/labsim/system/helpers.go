package system

import "strings"

// optValue is the value of the option at args[*i]: after "=" in --name=value, attached to
// a short option (-n5), or else the next argument, which it consumes.
func optValue(args []string, i *int) string {
	a := args[*i]
	if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "--") {
		return v
	}
	if len(a) > 2 && a[0] == '-' && a[1] != '-' {
		return a[2:]
	}
	if *i+1 < len(args) {
		*i++
		return args[*i]
	}
	return ""
}

// unit is a copy of the unit's state (ok false when the machine has no such unit).
func (m *Machine) unit(name string) (unitState, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.units[name]
	if !ok {
		return unitState{}, false
	}
	return *u, true
}
