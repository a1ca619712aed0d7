package pgcluster

import (
	"context"
	"syscall"
	"time"
)

// Halt stops the server (fast shutdown) and leaves it stopped, for a test of what happens
// while the database is away; Resume starts it again. Stop after Halt is a no-op.
func (c *Cluster) Halt() error { return c.stop(syscall.SIGINT, 30*time.Second) }

// Resume starts a halted server again on the same data directory and port (fsync off, as
// Restart), returning once it accepts connections.
func (c *Cluster) Resume(ctx context.Context) error {
	nc, err := Start(ctx, Options{DataDir: c.dir, Port: c.port, Fast: true})
	if err != nil {
		return err
	}
	*c = *nc
	return nil
}
