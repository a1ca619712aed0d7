package discover

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage/fleetstore"
)

// graphState is what the graph already knows of the services on one target.
type graphState struct {
	// onByUnit and onByName: the service entities (of any service type) running on the
	// target, by their unit (normalised) and by their name, as slugs.
	onByUnit, onByName map[string]string
	// taken: for each candidate slug that exists, where it runs ("" for nowhere).
	taken map[string]string
}

// normUnit is a unit name as systemd completes it: a name without a suffix is a .service.
func normUnit(u string) string {
	u = strings.TrimSpace(u)
	if u != "" && !strings.Contains(u, ".") {
		u += ".service"
	}
	return u
}

// readState reads the services running on target t and where the candidate slugs run.
func (s *Service) readState(ctx context.Context, store *fleetstore.Store, t graph.Entity, candidates []string) (graphState, error) {
	st := graphState{onByUnit: map[string]string{}, onByName: map[string]string{}, taken: map[string]string{}}
	types := s.graph.Ontology().Descendants(serviceType)
	on, err := store.ServicesOn(ctx, t.ID, runsOn, types)
	if err != nil {
		return st, fmt.Errorf("read the services on %s: %w", t.Slug, err)
	}
	for _, v := range on {
		if u := normUnit(v.Unit); u != "" {
			if _, ok := st.onByUnit[u]; !ok {
				st.onByUnit[u] = v.Slug
			}
		}
		if _, ok := st.onByName[v.Name]; !ok {
			st.onByName[v.Name] = v.Slug
		}
	}
	if len(candidates) == 0 {
		return st, nil
	}
	taken, err := store.WhereRun(ctx, candidates, runsOn)
	if err != nil {
		return st, fmt.Errorf("read service slugs: %w", err)
	}
	st.taken = taken
	return st, nil
}

// candidateSlugs are the slugs a discovery may propose: service:<name> and
// service:<name>-<target name> for each unit.
func candidateSlugs(units []Unit, targetName string) []string {
	var out []string
	for _, u := range units {
		n := ServiceName(u.Name)
		out = append(out, serviceType+":"+n, serviceType+":"+qualified(n, targetName))
	}
	sort.Strings(out)
	return out
}

// qualified is a service name made the target's own: nginx on lxc:proxy → nginx-proxy.
func qualified(name, targetName string) string { return name + "-" + targetName }

// onTarget is the slug of a service entity running on the target that is this unit (by its
// unit attribute) or has this name; "" when none.
func (st graphState) onTarget(unit, name string) string {
	if u := normUnit(unit); u != "" {
		if slug, ok := st.onByUnit[u]; ok {
			return slug
		}
	}
	return st.onByName[name]
}

// describeWhere says where a taken slug's entity runs.
func describeWhere(where string) string {
	if where == "" {
		return "runs on nothing"
	}
	return "runs on " + where
}

// propose names the proposal of a unit on the target: the unit's own name when a service of
// that name runs there already (exists) or is free; else the name made the target's own.
func (st graphState) propose(unit, targetName string) (name string, exists bool, entity, note string) {
	base := ServiceName(unit)
	if slug := st.onTarget(unit, base); slug != "" {
		_, n, _ := strings.Cut(slug, ":")
		return n, true, slug, ""
	}
	q := qualified(base, targetName)
	if slug := st.onByName[q]; slug != "" {
		return q, true, slug, ""
	}
	if err := graph.ValidateName(base); err != nil {
		return base, false, "", fmt.Sprintf("%q is no valid entity name; accept it under another name", base)
	}
	where, taken := st.taken[serviceType+":"+base]
	if !taken {
		return base, false, "", ""
	}
	if _, qTaken := st.taken[serviceType+":"+q]; !qTaken {
		return q, false, "", fmt.Sprintf("service:%s already exists (%s), so this one is proposed as %s", base, describeWhere(where), q)
	}
	return q, false, "", fmt.Sprintf("service:%s and service:%s already exist elsewhere; accept it under a name of your own", base, q)
}
