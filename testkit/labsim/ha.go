package labsim

import (
	"context"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/proxmox"
)

// haOnFault fences a Proxmox node's HA guests when it goes down and schedules their
// recovery after Options.HARecoveryDelay; a node back up first keeps its guests. The caller
// holds no lock.
func (s *Sim) haOnFault(h *hostRT, old, f Fault, started bool) {
	if old.Down == f.Down || h.Cfg.Kind != KindProxmox {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.haCancel != nil {
		h.haCancel()
		h.haCancel = nil
	}
	if !f.Down {
		s.lab.Unfence(h.Host)
		return
	}
	s.lab.Fence(h.Host)
	if !started || s.opts.HARecoveryDelay < 0 {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	h.haCancel = cancel
	delay, name := s.opts.HARecoveryDelay, h.Cfg.Name
	s.spawn(func(context.Context) {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
			if _, err := s.RecoverHA(name); err != nil {
				s.log.Warn().Err(err).Str("host", name).Msg("ha recovery")
			}
		case <-ctx.Done():
		}
	})
}

// RecoverHA recovers the HA-managed guests of a down node on the surviving members of its
// cluster now (what the recovery timer does after Options.HARecoveryDelay) and returns
// where they went. A node that is up, or a cluster without quorum, recovers nothing.
func (s *Sim) RecoverHA(host string) ([]Placement, error) {
	h, err := s.host(host)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if h.haCancel != nil {
		h.haCancel()
		h.haCancel = nil
	}
	moved := []Placement{}
	for _, g := range s.lab.RecoverHA(h.Host) {
		moved = append(moved, proxmox.PlacementOf(g))
	}
	s.mu.Unlock()
	if len(moved) > 0 {
		s.log.Info().Str("host", host).Int("guests", len(moved)).Msg("ha guests recovered")
		if s.opts.OnHARecovery != nil {
			s.opts.OnHARecovery(host, moved)
		}
	}
	return moved, nil
}
