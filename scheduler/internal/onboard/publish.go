package onboard

import (
	"context"
	"fmt"

	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/remote"
)

// KeyComment ends the authorized_keys line `oikos ssh-key` prints, so an operator reading
// a host's authorized_keys knows whose key it is.
const KeyComment = "oikos-scheduler"

// PublishKey records the public half of the scheduler's key in scheduler_keys, where the api
// reads it for `oikos ssh-key`: the fleet must trust it, and only the scheduler holds the
// private half. A restart with the same key only stamps last_seen.
// A new key is audited with its event; a known one's restart is a heartbeat, not a change.
func PublishKey(ctx context.Context, db *storage.Pool, signer ssh.Signer, schedulerID string) error {
	pub := signer.PublicKey()
	fp := remote.Fingerprint(pub.Marshal())
	err := storage.New(db).InTx(ctx, func(tx *storage.Store) error {
		inserted, err := tx.PublishKey(ctx, fp, remote.AuthorizedKey(signer, KeyComment), pub.Type(), schedulerID)
		if err != nil {
			return err
		}
		if !inserted {
			return nil
		}
		payload := map[string]any{"fingerprint": fp, "key_type": pub.Type(), "scheduler_id": schedulerID}
		if _, err := tx.AppendEvent(ctx, eventbus.Event{Type: EventKeyPublished, Actor: "scheduler"}, payload); err != nil {
			return err
		}
		return tx.WriteAudit(ctx, audit.Row{Actor: "scheduler", Action: EventKeyPublished, After: payload})
	})
	if err != nil {
		return fmt.Errorf("publish the scheduler's public key: %w", err)
	}
	return nil
}

// EventKeyPublished is appended when a scheduler publishes a key not seen before.
const EventKeyPublished = "scheduler.key_published"
