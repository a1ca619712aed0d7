package notify

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/signals"
)

// Audit actions and event types of the store's mutations.
const (
	ActionChannelCreate = "notification_channel.create"
	ActionChannelUpdate = "notification_channel.update"
	ActionChannelDelete = "notification_channel.delete"
	ActionRuleCreate    = "notification_rule.create"
	ActionRuleDelete    = "notification_rule.delete"

	EventChannelCreated = "notification.channel_created"
	EventChannelUpdated = "notification.channel_updated"
	EventChannelDeleted = "notification.channel_deleted"
	EventRuleCreated    = "notification.rule_created"
	EventRuleDeleted    = "notification.rule_deleted"
)

// SignalFailing is the kind of the signal a failing channel raises; its dedup key is
// FailingKey(channel id).
const SignalFailing = "notification_channel_failing"

// FailingKey is the dedup key of a channel's failing signal.
func FailingKey(channelID string) string { return SignalFailing + ":" + channelID }

// minSecretLen is the shortest webhook signing secret accepted: an HMAC key a person could
// guess signs nothing.
const minSecretLen = 16

// Channel is a channel as the api shows it: never its URL or secret, only their references
// and the URL's scheme and host.
type Channel struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Kind       string     `json:"kind"`
	URL        string     `json:"url"`
	URLRef     string     `json:"url_ref"`
	SecretRef  *string    `json:"secret_ref"`
	QuietStart *string    `json:"quiet_start"`
	QuietEnd   *string    `json:"quiet_end"`
	Timezone   string     `json:"timezone"`
	Enabled    bool       `json:"enabled"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	LastOKAt   *time.Time `json:"last_ok_at"`
	LastError  *string    `json:"last_error"`
	Rules      []Rule     `json:"rules"`
}

// ChannelInput creates a channel. Exactly one of URL (a value, stored by the api and never
// shown again) and URLRef (env:NAME or file:/path, read at every send) is given; a webhook
// needs Secret or SecretRef likewise. Rules, when given, are created with the channel in
// the same transaction.
type ChannelInput struct {
	Name       string      `json:"name"`
	Kind       string      `json:"kind"`
	URL        string      `json:"url"`
	URLRef     string      `json:"url_ref"`
	Secret     string      `json:"secret"`
	SecretRef  string      `json:"secret_ref"`
	QuietStart string      `json:"quiet_start"`
	QuietEnd   string      `json:"quiet_end"`
	Timezone   string      `json:"timezone"`
	Enabled    *bool       `json:"enabled"`
	Rules      []RuleInput `json:"rules"`
}

// ChannelPatch changes a channel: nil leaves a member as it is; "" for both quiet_start and
// quiet_end removes the quiet hours. A channel's kind does not change (create another).
type ChannelPatch struct {
	Name       *string `json:"name"`
	Kind       *string `json:"kind"`
	URL        *string `json:"url"`
	URLRef     *string `json:"url_ref"`
	Secret     *string `json:"secret"`
	SecretRef  *string `json:"secret_ref"`
	QuietStart *string `json:"quiet_start"`
	QuietEnd   *string `json:"quiet_end"`
	Timezone   *string `json:"timezone"`
	Enabled    *bool   `json:"enabled"`
}

// RuleInput creates a rule. Channel (an id or a name) is ignored inside a ChannelInput.
type RuleInput struct {
	Channel     string   `json:"channel"`
	Kinds       []string `json:"kinds"`
	MinSeverity string   `json:"min_severity"`
	EntityTypes []string `json:"entity_types"`
	Tags        []string `json:"tags"`
	Enabled     *bool    `json:"enabled"`
}

// Meta is who changes something, through which request: what the audit row and the event
// record.
type Meta struct {
	Actor, Method, Path, CorrelationID string
}

// Store keeps channels and rules. Every mutation writes its audit row and its event in its
// own transaction.
type Store struct {
	pool    *pgxpool.Pool
	secrets Secrets
	// knownType reports whether a rule may name an entity type (nil: any).
	knownType func(string) bool
	now       func() time.Time
}

// StoreOptions configure a Store.
type StoreOptions struct {
	Pool    *pgxpool.Pool
	Secrets Secrets
	// KnownType, when set, refuses rules naming an entity type it does not know.
	KnownType func(string) bool
	Now       func() time.Time
}

// NewStore returns a store.
func NewStore(o StoreOptions) *Store {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{pool: o.Pool, secrets: o.Secrets, knownType: o.KnownType, now: o.Now}
}

const channelColumns = `c.id::text, c.name, c.kind, c.url_redacted, c.url_ref, c.secret_ref,
	to_char(c.quiet_start, 'HH24:MI'), to_char(c.quiet_end, 'HH24:MI'), c.timezone, c.enabled,
	c.created_at, c.updated_at, c.last_ok_at, c.last_error`

func scanChannel(row pgx.Row) (Channel, error) {
	var c Channel
	err := row.Scan(&c.ID, &c.Name, &c.Kind, &c.URL, &c.URLRef, &c.SecretRef, &c.QuietStart, &c.QuietEnd, &c.Timezone,
		&c.Enabled, &c.CreatedAt, &c.UpdatedAt, &c.LastOKAt, &c.LastError)
	c.Rules = []Rule{}
	return c, err
}

const ruleColumns = `r.id::text, r.channel_id::text, c.name, r.kinds, r.min_severity, r.entity_types, r.tags,
	r.enabled, r.created_at`

func scanRule(row pgx.Row) (Rule, error) {
	var r Rule
	err := row.Scan(&r.ID, &r.ChannelID, &r.Channel, &r.Kinds, &r.MinSeverity, &r.EntityTypes, &r.Tags, &r.Enabled,
		&r.CreatedAt)
	return r, err
}

// channelWhere matches a channel by id or by name.
const channelWhere = ` WHERE (c.id::text = $1 OR c.name = $1)`

// getChannel reads one channel, with its rules; lock takes the row for update.
func getChannel(ctx context.Context, q pg.Querier, ref string, lock bool) (Channel, error) {
	sql := `SELECT ` + channelColumns + ` FROM notification_channels c` + channelWhere
	if lock {
		sql += ` FOR UPDATE`
	}
	c, err := scanChannel(q.QueryRow(ctx, sql, ref))
	if errors.Is(err, pgx.ErrNoRows) {
		return Channel{}, fmt.Errorf("%w: notification channel %q", apierr.ErrNotFound, ref)
	}
	if err != nil {
		return Channel{}, fmt.Errorf("read notification channel: %w", err)
	}
	rules, err := listRules(ctx, q, c.ID)
	if err != nil {
		return Channel{}, err
	}
	c.Rules = rules
	return c, nil
}

// Channel returns one channel by id or name.
func (s *Store) Channel(ctx context.Context, ref string) (Channel, error) {
	return getChannel(ctx, s.pool, ref, false)
}

// Channels lists every channel, by name, with its rules.
func (s *Store) Channels(ctx context.Context) ([]Channel, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+channelColumns+` FROM notification_channels c ORDER BY c.name`)
	if err != nil {
		return nil, fmt.Errorf("list notification channels: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Channel, error) { return scanChannel(r) })
	if err != nil {
		return nil, fmt.Errorf("list notification channels: %w", err)
	}
	rules, err := listRules(ctx, s.pool, "")
	if err != nil {
		return nil, err
	}
	for i := range out {
		for _, r := range rules {
			if r.ChannelID == out[i].ID {
				out[i].Rules = append(out[i].Rules, r)
			}
		}
	}
	return out, nil
}

// Rules lists the rules, of one channel (id or name) or of all ("").
func (s *Store) Rules(ctx context.Context, channel string) ([]Rule, error) {
	if channel == "" {
		return listRules(ctx, s.pool, "")
	}
	c, err := getChannel(ctx, s.pool, channel, false)
	if err != nil {
		return nil, err
	}
	return c.Rules, nil
}

func listRules(ctx context.Context, q pg.Querier, channelID string) ([]Rule, error) {
	rows, err := q.Query(ctx, `SELECT `+ruleColumns+` FROM notification_rules r JOIN notification_channels c ON c.id = r.channel_id
		WHERE $1 = '' OR r.channel_id::text = $1 ORDER BY c.name, r.created_at, r.id`, channelID)
	if err != nil {
		return nil, fmt.Errorf("list notification rules: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Rule, error) { return scanRule(r) })
	if err != nil {
		return nil, fmt.Errorf("list notification rules: %w", err)
	}
	if out == nil {
		out = []Rule{}
	}
	return out, nil
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// spec is a channel's checked values, ready to write.
type spec struct {
	name, kind, tz string
	// url/secret: an inline value to store; urlRef/secretRef: a reference as given.
	url, urlRef, redacted string
	secret, secretRef     string
	quietStart, quietEnd  *string
	enabled               bool
}

// checkURL checks a channel's URL, given inline or by reference, and returns it resolved.
func (s *Store) checkURL(ctx context.Context, q pg.Querier, kind, inline, ref string) (string, error) {
	inline, ref = strings.TrimSpace(inline), strings.TrimSpace(ref)
	switch {
	case inline == "" && ref == "":
		return "", apierr.Invalid("url", "is required: send url (the api stores it and never shows it again) or url_ref (env:NAME or file:/path)")
	case inline != "" && ref != "":
		return "", apierr.Invalid("url", "send url or url_ref, not both")
	case inline != "":
		if err := ValidateURL(kind, inline); err != nil {
			return "", apierr.Invalid("url", "%v", err)
		}
		return inline, nil
	}
	if strings.HasPrefix(ref, refStored+":") {
		return "", apierr.Invalid("url_ref", "stored: references are made by the api; send the value itself as url")
	}
	raw, err := s.secrets.Resolve(ctx, q, ref)
	if err != nil {
		return "", apierr.Invalid("url_ref", "%v", err)
	}
	if err := ValidateURL(kind, raw); err != nil {
		return "", apierr.Invalid("url_ref", "%s names a URL that %v", ref, err)
	}
	return raw, nil
}

// checkSecret checks a webhook's signing secret (inline or by reference); a shoutrrr channel
// takes none.
func (s *Store) checkSecret(ctx context.Context, q pg.Querier, kind, inline, ref string) error {
	ref = strings.TrimSpace(ref)
	if kind != ChannelWebhook {
		if inline != "" || ref != "" {
			return apierr.Invalid("secret", "only a webhook channel is signed; a shoutrrr URL carries its own credentials")
		}
		return nil
	}
	switch {
	case inline == "" && ref == "":
		return apierr.Invalid("secret", "a webhook needs a signing secret: send secret or secret_ref (env:NAME or file:/path)")
	case inline != "" && ref != "":
		return apierr.Invalid("secret", "send secret or secret_ref, not both")
	case inline != "":
		if len(inline) < minSecretLen {
			return apierr.Invalid("secret", "must be at least %d characters", minSecretLen)
		}
		return nil
	}
	if strings.HasPrefix(ref, refStored+":") {
		return apierr.Invalid("secret_ref", "stored: references are made by the api; send the value itself as secret")
	}
	v, err := s.secrets.Resolve(ctx, q, ref)
	if err != nil {
		return apierr.Invalid("secret_ref", "%v", err)
	}
	if len(v) < minSecretLen {
		return apierr.Invalid("secret_ref", "%s is shorter than %d characters", ref, minSecretLen)
	}
	return nil
}

// checkQuiet checks quiet hours (both or neither) and the time zone.
func checkQuiet(start, end, tz string) (s, e *string, err error) {
	if _, err := loadZone(tz); err != nil {
		return nil, nil, apierr.Invalid("timezone", "%v", err)
	}
	start, end = strings.TrimSpace(start), strings.TrimSpace(end)
	switch {
	case start == "" && end == "":
		return nil, nil, nil
	case start == "":
		return nil, nil, apierr.Invalid("quiet_start", "quiet hours need both quiet_start and quiet_end")
	case end == "":
		return nil, nil, apierr.Invalid("quiet_end", "quiet hours need both quiet_start and quiet_end")
	}
	if _, err := parseClock(start); err != nil {
		return nil, nil, apierr.Invalid("quiet_start", "%v", err)
	}
	if _, err := parseClock(end); err != nil {
		return nil, nil, apierr.Invalid("quiet_end", "%v", err)
	}
	if _, err := ParseQuiet(start, end, tz); err != nil {
		return nil, nil, apierr.Invalid("quiet_end", "%v", err)
	}
	return &start, &end, nil
}

// checkRule checks a rule; field prefixes its members' names ("rules[0]." inside a channel).
func (s *Store) checkRule(in RuleInput, field string) (RuleInput, error) {
	var errs []error
	if len(in.Kinds) == 0 {
		errs = append(errs, apierr.Invalid(field+"kinds", "name at least one of %s", strings.Join(Kinds, ", ")))
	}
	kinds := []string{}
	for _, k := range in.Kinds {
		k = strings.TrimSpace(k)
		if !slices.Contains(Kinds, k) {
			errs = append(errs, apierr.Invalid(field+"kinds", "%q is not one of %s", k, strings.Join(Kinds, ", ")))
		} else if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	in.Kinds = kinds
	if in.MinSeverity == "" {
		in.MinSeverity = SeverityInfo
	}
	if !slices.Contains(Severities, in.MinSeverity) {
		errs = append(errs, apierr.Invalid(field+"min_severity", "%q is not one of %s", in.MinSeverity, strings.Join(Severities, ", ")))
	}
	in.EntityTypes = clean(in.EntityTypes)
	for _, t := range in.EntityTypes {
		if s.knownType != nil && !s.knownType(t) {
			errs = append(errs, apierr.Invalid(field+"entity_types", "%q is not an entity type of the ontology", t))
		}
	}
	in.Tags = clean(in.Tags)
	return in, errors.Join(errs...)
}

// clean trims, drops empty and repeated values, and never returns nil.
func clean(vs []string) []string {
	out := []string{}
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// CreateChannel creates a channel and the rules it comes with. Errors: *apierr.FieldError
// (ErrInvalid) naming what to fix, ErrDuplicate for a name taken.
func (s *Store) CreateChannel(ctx context.Context, m Meta, in ChannelInput) (Channel, error) {
	if in.Kind == "" {
		in.Kind = ChannelShoutrrr
	}
	var errs []error
	name := strings.TrimSpace(in.Name)
	if !namePattern.MatchString(name) {
		errs = append(errs, apierr.Invalid("name", "must be 1-64 of A-Z a-z 0-9 . _ - starting with a letter or digit"))
	}
	if !slices.Contains(ChannelKinds, in.Kind) {
		errs = append(errs, apierr.Invalid("kind", "%q is not one of %s", in.Kind, strings.Join(ChannelKinds, ", ")))
		return Channel{}, errors.Join(errs...)
	}
	raw, err := s.checkURL(ctx, s.pool, in.Kind, in.URL, in.URLRef)
	errs = append(errs, err)
	errs = append(errs, s.checkSecret(ctx, s.pool, in.Kind, in.Secret, in.SecretRef))
	tz := strings.TrimSpace(in.Timezone)
	if tz == "" {
		tz = "UTC"
	}
	qs, qe, err := checkQuiet(in.QuietStart, in.QuietEnd, tz)
	errs = append(errs, err)
	rules := make([]RuleInput, len(in.Rules))
	for i, r := range in.Rules {
		rules[i], err = s.checkRule(r, fmt.Sprintf("rules[%d].", i))
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Channel{}, err
	}
	sp := spec{name: name, kind: in.Kind, tz: tz, redacted: RedactURL(raw), quietStart: qs, quietEnd: qe, enabled: true,
		url: strings.TrimSpace(in.URL), urlRef: strings.TrimSpace(in.URLRef), secret: in.Secret,
		secretRef: strings.TrimSpace(in.SecretRef)}
	if in.Enabled != nil {
		sp.enabled = *in.Enabled
	}
	var out Channel
	err = pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		urlRef, secretRef, err := storeInline(ctx, tx, sp)
		if err != nil {
			return err
		}
		id, err := uuid.NewV7()
		if err != nil {
			return err
		}
		now := s.now()
		_, err = tx.Exec(ctx, `INSERT INTO notification_channels
			(id, name, kind, url_ref, url_redacted, secret_ref, quiet_start, quiet_end, timezone, enabled, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7::time, $8::time, $9, $10, $11, $11)`,
			id, sp.name, sp.kind, urlRef, sp.redacted, secretRef, sp.quietStart, sp.quietEnd, sp.tz, sp.enabled, now)
		if pg.IsUniqueViolation(err, "notification_channels_name_key") {
			return &apierr.FieldError{Field: "name", Reason: fmt.Sprintf("a channel named %q exists already", sp.name), Err: apierr.ErrDuplicate}
		}
		if err != nil {
			return fmt.Errorf("create notification channel: %w", err)
		}
		for _, r := range rules {
			if _, err := insertRule(ctx, tx, id.String(), r, now); err != nil {
				return err
			}
		}
		if out, err = getChannel(ctx, tx, id.String(), false); err != nil {
			return err
		}
		return record(ctx, tx, m, ActionChannelCreate, EventChannelCreated, nil, out)
	})
	return out, err
}

// storeInline stores a spec's inline URL and secret and returns the references to write.
func storeInline(ctx context.Context, q pg.Querier, sp spec) (urlRef string, secretRef *string, err error) {
	urlRef = sp.urlRef
	if sp.url != "" {
		if urlRef, err = storeSecret(ctx, q, sp.url); err != nil {
			return "", nil, err
		}
	}
	switch {
	case sp.secret != "":
		ref, err := storeSecret(ctx, q, sp.secret)
		if err != nil {
			return "", nil, err
		}
		secretRef = &ref
	case sp.secretRef != "":
		secretRef = &sp.secretRef
	}
	return urlRef, secretRef, nil
}

// UpdateChannel applies a patch; what it does not name stays. Errors as CreateChannel's,
// and ErrNotFound.
func (s *Store) UpdateChannel(ctx context.Context, m Meta, ref string, p ChannelPatch) (Channel, error) {
	var out Channel
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		before, err := getChannel(ctx, tx, ref, true)
		if err != nil {
			return err
		}
		if p.Kind != nil && *p.Kind != before.Kind {
			return apierr.Invalid("kind", "a channel's kind does not change; create another channel")
		}
		var errs []error
		name := before.Name
		if p.Name != nil {
			if name = strings.TrimSpace(*p.Name); !namePattern.MatchString(name) {
				errs = append(errs, apierr.Invalid("name", "must be 1-64 of A-Z a-z 0-9 . _ - starting with a letter or digit"))
			}
		}
		sp := spec{name: name, kind: before.Kind, tz: before.Timezone, redacted: before.URL, enabled: before.Enabled}
		urlRef, secretRef := before.URLRef, before.SecretRef
		var dropped []*string
		if p.URL != nil || p.URLRef != nil {
			raw, err := s.checkURL(ctx, tx, before.Kind, deref(p.URL), deref(p.URLRef))
			if err != nil {
				errs = append(errs, err)
			} else {
				sp.redacted, sp.url, sp.urlRef = RedactURL(raw), strings.TrimSpace(deref(p.URL)), strings.TrimSpace(deref(p.URLRef))
				dropped = append(dropped, &before.URLRef)
			}
		}
		if p.Secret != nil || p.SecretRef != nil {
			if err := s.checkSecret(ctx, tx, before.Kind, deref(p.Secret), deref(p.SecretRef)); err != nil {
				errs = append(errs, err)
			} else {
				sp.secret, sp.secretRef = deref(p.Secret), strings.TrimSpace(deref(p.SecretRef))
				dropped = append(dropped, before.SecretRef)
			}
		}
		if p.Timezone != nil {
			if sp.tz = strings.TrimSpace(*p.Timezone); sp.tz == "" {
				sp.tz = "UTC"
			}
		}
		qs, qe := deref(before.QuietStart), deref(before.QuietEnd)
		if p.QuietStart != nil {
			qs = *p.QuietStart
		}
		if p.QuietEnd != nil {
			qe = *p.QuietEnd
		}
		sp.quietStart, sp.quietEnd, err = checkQuiet(qs, qe, sp.tz)
		errs = append(errs, err)
		if p.Enabled != nil {
			sp.enabled = *p.Enabled
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		newURLRef, newSecretRef, err := storeInline(ctx, tx, sp)
		if err != nil {
			return err
		}
		if sp.url != "" || sp.urlRef != "" {
			urlRef = newURLRef
		}
		if sp.secret != "" || sp.secretRef != "" {
			secretRef = newSecretRef
		}
		_, err = tx.Exec(ctx, `UPDATE notification_channels SET name = $2, url_ref = $3, url_redacted = $4, secret_ref = $5,
			quiet_start = $6::time, quiet_end = $7::time, timezone = $8, enabled = $9, updated_at = $10 WHERE id = $1`,
			before.ID, sp.name, urlRef, sp.redacted, secretRef, sp.quietStart, sp.quietEnd, sp.tz, sp.enabled, s.now())
		if pg.IsUniqueViolation(err, "notification_channels_name_key") {
			return &apierr.FieldError{Field: "name", Reason: fmt.Sprintf("a channel named %q exists already", sp.name), Err: apierr.ErrDuplicate}
		}
		if err != nil {
			return fmt.Errorf("update notification channel: %w", err)
		}
		// A value the operator replaced is not kept.
		for _, d := range dropped {
			if err := dropSecret(ctx, tx, d); err != nil {
				return err
			}
		}
		if out, err = getChannel(ctx, tx, before.ID, false); err != nil {
			return err
		}
		return record(ctx, tx, m, ActionChannelUpdate, EventChannelUpdated, before, out)
	})
	return out, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// DeleteChannel deletes a channel with its rules, deliveries and stored values, and resolves
// its failing signal (a channel that is gone fails no more).
func (s *Store) DeleteChannel(ctx context.Context, m Meta, ref string) (Channel, error) {
	var before Channel
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if before, err = getChannel(ctx, tx, ref, true); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM notification_channels WHERE id = $1`, before.ID); err != nil {
			return fmt.Errorf("delete notification channel: %w", err)
		}
		for _, r := range []*string{&before.URLRef, before.SecretRef} {
			if err := dropSecret(ctx, tx, r); err != nil {
				return err
			}
		}
		if _, err := signals.New(s.now).As(m.Actor).Resolve(ctx, tx, FailingKey(before.ID), "the channel was deleted"); err != nil {
			return err
		}
		return record(ctx, tx, m, ActionChannelDelete, EventChannelDeleted, before, nil)
	})
	return before, err
}

// CreateRule adds a rule to a channel (named by id or name in in.Channel).
func (s *Store) CreateRule(ctx context.Context, m Meta, in RuleInput) (Rule, error) {
	var errs []error
	if strings.TrimSpace(in.Channel) == "" {
		errs = append(errs, apierr.Invalid("channel", "is required: the channel's id or name"))
	}
	in, err := s.checkRule(in, "")
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return Rule{}, err
	}
	var out Rule
	err = pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c, err := getChannel(ctx, tx, strings.TrimSpace(in.Channel), true)
		if errors.Is(err, apierr.ErrNotFound) {
			return apierr.Invalid("channel", "no notification channel %q", in.Channel)
		}
		if err != nil {
			return err
		}
		if out, err = insertRule(ctx, tx, c.ID, in, s.now()); err != nil {
			return err
		}
		return record(ctx, tx, m, ActionRuleCreate, EventRuleCreated, nil, out)
	})
	return out, err
}

func insertRule(ctx context.Context, q pg.Querier, channelID string, in RuleInput, now time.Time) (Rule, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Rule{}, err
	}
	enabled := in.Enabled == nil || *in.Enabled
	r, err := scanRule(q.QueryRow(ctx, `WITH r AS (
		INSERT INTO notification_rules (id, channel_id, kinds, min_severity, entity_types, tags, enabled, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *)
		SELECT `+ruleColumns+` FROM r JOIN notification_channels c ON c.id = r.channel_id`,
		id, channelID, in.Kinds, in.MinSeverity, in.EntityTypes, in.Tags, enabled, now))
	if err != nil {
		return Rule{}, fmt.Errorf("create notification rule: %w", err)
	}
	return r, nil
}

// DeleteRule deletes a rule. ErrNotFound when there is none.
func (s *Store) DeleteRule(ctx context.Context, m Meta, id string) (Rule, error) {
	var before Rule
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		before, err = scanRule(tx.QueryRow(ctx, `WITH r AS (DELETE FROM notification_rules WHERE id::text = $1 RETURNING *)
			SELECT `+ruleColumns+` FROM r JOIN notification_channels c ON c.id = r.channel_id`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: notification rule %q", apierr.ErrNotFound, id)
		}
		if err != nil {
			return fmt.Errorf("delete notification rule: %w", err)
		}
		return record(ctx, tx, m, ActionRuleDelete, EventRuleDeleted, before, nil)
	})
	return before, err
}

// record writes a mutation's audit row and event in tx. Before and after are the api's
// views (a channel's references and redacted URL, never its values).
func record(ctx context.Context, tx pgx.Tx, m Meta, action, event string, before, after any) error {
	row := audit.Row{Actor: m.Actor, Action: action, Method: m.Method, Path: m.Path, CorrelationID: m.CorrelationID}
	if before != nil {
		row.Before = before
	}
	if after != nil {
		row.After = after
	}
	if err := audit.Write(ctx, tx, row); err != nil {
		return err
	}
	payload := after
	if payload == nil {
		payload = before
	}
	if _, err := eventbus.Append(ctx, tx, eventbus.Event{Type: event, CorrelationID: m.CorrelationID, Actor: m.Actor}, payload); err != nil {
		return fmt.Errorf("event %s: %w", event, err)
	}
	return nil
}

// Target resolves a channel's references for a send now (a channel test).
func (s *Store) Target(ctx context.Context, ref string) (Channel, Target, error) {
	c, err := getChannel(ctx, s.pool, ref, false)
	if err != nil {
		return Channel{}, Target{}, err
	}
	t, err := resolveTarget(ctx, s.pool, s.secrets, c.Kind, c.URLRef, c.SecretRef)
	return c, t, err
}

// TestInput is a channel that is not stored: the target of POST /notifications/test.
type TestInput struct {
	Kind      string `json:"kind"`
	URL       string `json:"url"`
	URLRef    string `json:"url_ref"`
	Secret    string `json:"secret"`
	SecretRef string `json:"secret_ref"`
}

// CheckTarget checks a test's target as a channel's would be checked and resolves it.
func (s *Store) CheckTarget(ctx context.Context, in TestInput) (Target, error) {
	if in.Kind == "" {
		in.Kind = ChannelShoutrrr
	}
	if !slices.Contains(ChannelKinds, in.Kind) {
		return Target{}, apierr.Invalid("kind", "%q is not one of %s", in.Kind, strings.Join(ChannelKinds, ", "))
	}
	raw, err := s.checkURL(ctx, s.pool, in.Kind, in.URL, in.URLRef)
	if err := errors.Join(err, s.checkSecret(ctx, s.pool, in.Kind, in.Secret, in.SecretRef)); err != nil {
		return Target{}, err
	}
	t := Target{Kind: in.Kind, URL: raw, Secret: in.Secret}
	if in.SecretRef != "" {
		if t.Secret, err = s.secrets.Resolve(ctx, s.pool, in.SecretRef); err != nil {
			return Target{}, apierr.Invalid("secret_ref", "%v", err)
		}
	}
	return t, nil
}
