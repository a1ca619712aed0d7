package labsim

import (
	"errors"
	"fmt"
	"net"
	"path"
	"time"

	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/testkit/labsim/sandbox"
)

// What the seeded checks look at that no simulated program provides by itself, kept true so
// that a healthy demo fleet reads healthy: a fresh file in every backup directory a machine
// holds (the backup-freshness checks run `find DIR -type f -mmin -N` on the holder), and a
// listener on every NFS export's port (the nfs-export tcp checks).

// backupFile is the file kept fresh in each backup directory.
const backupFile = "labsim-latest.backup"

// backupRefresh is how often the backup files are rewritten: well inside the seeded targets'
// max_age_minutes (the shortest is 1,500), so a simulator left running stays healthy.
const backupRefresh = 30 * time.Minute

// freshenBackups rewrites the backup file of every backup directory of every machine.
func (s *Sim) freshenBackups() error {
	now := s.opts.Clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, name := range s.order {
		h := s.hosts[name]
		if h.M != nil {
			errs = append(errs, writeBackups(h.M.FS, h.Cfg.BackupDirs, now))
		}
		for _, g := range h.Guests {
			if g.M != nil {
				errs = append(errs, writeBackups(g.M.FS, g.Cfg.BackupDirs, now))
			}
		}
	}
	return errors.Join(errs...)
}

func writeBackups(fsys *sandbox.FS, dirs []string, now time.Time) error {
	for _, dir := range dirs {
		f := path.Join(dir, backupFile)
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("labsim: backup dir %s: %w", dir, err)
		}
		if err := fsys.WriteFile(f, []byte("labsim demo backup "+now.UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
			return fmt.Errorf("labsim: backup file %s: %w", f, err)
		}
		if err := fsys.Chtimes(f, now, now); err != nil {
			return fmt.Errorf("labsim: backup file %s: %w", f, err)
		}
	}
	return nil
}

// keepBackupsFresh rewrites the backup files every backupRefresh until the simulator stops.
func (s *Sim) keepBackupsFresh() {
	s.wg.Add(1)
	safego.Go(s.log, "labsim-backups", func() {
		defer s.wg.Done()
		t := time.NewTicker(backupRefresh)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
				if err := s.freshenBackups(); err != nil {
					s.log.Warn().Err(err).Msg("refresh backup files")
				}
			}
		}
	})
}

// listenTCP binds the fleet's extra TCP listeners; each accepts a connection and closes it,
// which is all a tcp check asks of a port.
func (s *Sim) listenTCP() error {
	for _, addr := range s.fleet.TCPListeners {
		ln, err := net.Listen("tcp", s.listenAddr(addr))
		if err != nil {
			return fmt.Errorf("labsim: tcp listener %s: %w", addr, err)
		}
		s.mu.Lock()
		s.tcpLns = append(s.tcpLns, ln)
		if s.tcpActual == nil {
			s.tcpActual = map[string]string{}
		}
		s.tcpActual[addr] = ln.Addr().String()
		s.mu.Unlock()
		s.wg.Add(1)
		safego.Go(s.log, "labsim-tcp-"+addr, func() {
			defer s.wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return // closed by Stop
				}
				c.Close()
			}
		})
	}
	return nil
}
