package discover

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/fleetstore"
)

// maxAccept bounds how many services one accept creates.
const maxAccept = 200

// AcceptRequest is the body of POST /entities/{ref}/services.
type AcceptRequest struct {
	Services []AcceptService `json:"services"`
}

// AcceptService is one service to create on the target.
type AcceptService struct {
	// Name becomes the slug service:<name>.
	Name string `json:"name"`
	// Unit is the systemd unit (the process check watches it); optional.
	Unit string `json:"unit,omitempty"`
	// Port is the main listening port; optional.
	Port *int `json:"port,omitempty"`
}

// Created is a service an accept created, with its edge.
type Created struct {
	Slug   string `json:"slug"`
	Name   string `json:"name"`
	Unit   string `json:"unit,omitempty"`
	Port   *int   `json:"port,omitempty"`
	RunsOn string `json:"runs_on"`
}

// Skipped is a service an accept left alone, and why.
type Skipped struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
	// Entity is the existing entity concerned.
	Entity string `json:"entity,omitempty"`
}

// Accepted is what an accept did.
type Accepted struct {
	Target  string    `json:"target"`
	Created []Created `json:"created"`
	Skipped []Skipped `json:"skipped"`
	// ChecksChanged counts the check definitions derived for the new services.
	ChecksChanged int `json:"checks_changed"`
}

// unitRe is what systemd accepts in a unit name (letters, digits, : _ . @ \ -).
var unitRe = regexp.MustCompile(`^[A-Za-z0-9:_.@\\-]{1,255}$`)

// validate checks an accept's body, naming the first field at fault; nothing is read or
// written before it passes.
func validate(r AcceptRequest) error {
	if len(r.Services) == 0 {
		return apierr.Invalid("services", `is empty: list the services to create, e.g. [{"name":"jellyfin","unit":"jellyfin.service","port":8096}]`)
	}
	if len(r.Services) > maxAccept {
		return apierr.Invalid("services", "holds %d services; at most %d at once", len(r.Services), maxAccept)
	}
	seen := map[string]int{}
	for i, sv := range r.Services {
		field := fmt.Sprintf("services[%d]", i)
		if sv.Name == "" {
			return apierr.Invalid(field+".name", "is required")
		}
		if err := graph.ValidateName(sv.Name); err != nil {
			var fe *apierr.FieldError
			reason := err.Error()
			if errors.As(err, &fe) {
				reason = fe.Reason
			}
			return apierr.Invalid(field+".name", "%s", reason)
		}
		if j, dup := seen[sv.Name]; dup {
			return apierr.Invalid(field+".name", "%q is already services[%d]", sv.Name, j)
		}
		seen[sv.Name] = i
		if sv.Unit != "" && !unitRe.MatchString(sv.Unit) {
			return apierr.Invalid(field+".unit", "%q is not a systemd unit name (letters, digits and : _ . @ \\ -, such as jellyfin.service)", sv.Unit)
		}
		if sv.Port != nil && (*sv.Port < 1 || *sv.Port > 65535) {
			return apierr.Invalid(field+".port", "must be from 1 to 65535")
		}
	}
	return nil
}

// Accept creates the services r names as entities of type service running on the entity
// ref names (a runs-on edge each), in one transaction through the graph service, and derives
// their checks. A service already running on the target (by name, or by unit) is skipped, as
// is a name another entity holds already; nothing is written for a body that does not
// validate.
func (s *Service) Accept(ctx context.Context, m graph.Meta, ref string, r AcceptRequest) (Accepted, error) {
	if err := validate(r); err != nil {
		return Accepted{}, err
	}
	out := Accepted{Created: []Created{}, Skipped: []Skipped{}}
	err := s.store.InTx(ctx, func(store *fleetstore.Store, tx storage.DB) error {
		out = Accepted{Created: []Created{}, Skipped: []Skipped{}}
		t, err := store.Entity(ctx, ref)
		if err != nil {
			return err
		}
		if err := s.checkTarget(t); err != nil {
			return err
		}
		if t.State == "destroyed" {
			return fmt.Errorf("%w: %s is destroyed; nothing runs on it", apierr.ErrConflict, t.Slug)
		}
		out.Target = t.Slug
		// Accepts on one target are serialised, so two of them never both decide a service is
		// missing and create it twice.
		if err := store.LockAccept(ctx, t.ID); err != nil {
			return fmt.Errorf("lock %s: %w", t.Slug, err)
		}
		slugs := make([]string, 0, len(r.Services))
		for _, sv := range r.Services {
			slugs = append(slugs, serviceType+":"+sv.Name)
		}
		st, err := s.readState(ctx, store, t, slugs)
		if err != nil {
			return err
		}
		var plan graph.BulkPlan
		var created []string
		for _, sv := range r.Services {
			slug := serviceType + ":" + sv.Name
			if on := st.onTarget(sv.Unit, sv.Name); on != "" {
				out.Skipped = append(out.Skipped, Skipped{Name: sv.Name, Entity: on,
					Reason: fmt.Sprintf("%s already runs on %s", on, t.Slug)})
				continue
			}
			if where, taken := st.taken[slug]; taken {
				out.Skipped = append(out.Skipped, Skipped{Name: sv.Name, Entity: slug,
					Reason: fmt.Sprintf("%s already exists (%s); accept it under another name", slug, describeWhere(where))})
				continue
			}
			attrs := map[string]any{}
			if sv.Unit != "" {
				attrs["unit"] = sv.Unit
			}
			if sv.Port != nil {
				attrs["port"] = *sv.Port
			}
			plan.Creates = append(plan.Creates, graph.NewEntity{Type: serviceType, Name: sv.Name, Attributes: attrs})
			plan.Edges = append(plan.Edges, graph.NewEdge{Type: runsOn, Source: slug, Target: t.Slug})
			created = append(created, slug)
			out.Created = append(out.Created, Created{Slug: slug, Name: sv.Name, Unit: sv.Unit, Port: sv.Port, RunsOn: t.Slug})
		}
		if len(created) == 0 {
			return nil
		}
		o := s.graph.Ontology()
		if _, err := s.graph.ApplyBulk(ctx, tx, m, o, plan); err != nil {
			return err
		}
		if out.ChecksChanged, err = s.graph.SyncChecksBulk(ctx, tx, m, o, created); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return Accepted{}, err
	}
	return out, nil
}
