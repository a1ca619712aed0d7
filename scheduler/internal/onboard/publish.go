package onboard

import (
	"context"
	"fmt"

	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/remote"
)

// KeyComment ends the authorized_keys line `oikos ssh-key` prints, so an operator reading
// a host's authorized_keys knows whose key it is.
const KeyComment = "oikos-scheduler"

// PublishKey records the public half of the scheduler's key in scheduler_keys, where the api
// reads it for `oikos ssh-key`: the fleet must trust it, and only the scheduler holds the
// private half. A restart with the same key only stamps last_seen.
func PublishKey(ctx context.Context, db pg.Querier, signer ssh.Signer, schedulerID string) error {
	pub := signer.PublicKey()
	_, err := db.Exec(ctx, `INSERT INTO scheduler_keys (fingerprint, authorized_key, key_type, scheduler_id)
VALUES ($1, $2, $3, $4)
ON CONFLICT (fingerprint) DO UPDATE SET scheduler_id = EXCLUDED.scheduler_id, last_seen = now()`,
		remote.Fingerprint(pub.Marshal()), remote.AuthorizedKey(signer, KeyComment), pub.Type(), schedulerID)
	if err != nil {
		return fmt.Errorf("publish the scheduler's public key: %w", err)
	}
	return nil
}
