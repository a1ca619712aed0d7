package notify

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/notifytarget"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/notifystore"
	"github.com/oikos-hq/oikos/shared/signals"
)

// Audit actions and event types of the service's mutations.
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

// Service keeps channels and rules: it checks what an operator sends and writes it through
// the storage layer. Every mutation writes its audit row and its event in its own
// transaction.
type Service struct {
	db      *notifystore.Store
	secrets Secrets
	// knownType reports whether a rule may name an entity type (nil: any).
	knownType func(string) bool
	now       func() time.Time
}

// ServiceOptions configure a Service.
type ServiceOptions struct {
	Pool    *storage.Pool
	Secrets Secrets
	// KnownType, when set, refuses rules naming an entity type it does not know.
	KnownType func(string) bool
	Now       func() time.Time
}

// NewService returns a service.
func NewService(o ServiceOptions) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{db: notifystore.New(o.Pool), secrets: o.Secrets, knownType: o.KnownType, now: o.Now}
}

// Channel returns one channel by id or name.
func (s *Service) Channel(ctx context.Context, ref string) (Channel, error) {
	return s.db.Channel(ctx, ref, false)
}

// Channels lists every channel, by name, with its rules.
func (s *Service) Channels(ctx context.Context) ([]Channel, error) { return s.db.Channels(ctx) }

// Rules lists the rules, of one channel (id or name) or of all ("").
func (s *Service) Rules(ctx context.Context, channel string) ([]Rule, error) {
	if channel == "" {
		return s.db.Rules(ctx, "")
	}
	c, err := s.db.Channel(ctx, channel, false)
	if err != nil {
		return nil, err
	}
	return c.Rules, nil
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

// row is the channel's row with the references to write.
func (sp spec) row(urlRef string, secretRef *string) notifystore.ChannelRow {
	return notifystore.ChannelRow{Name: sp.name, Kind: sp.kind, URLRef: urlRef, URLRedacted: sp.redacted,
		SecretRef: secretRef, QuietStart: sp.quietStart, QuietEnd: sp.quietEnd, Timezone: sp.tz, Enabled: sp.enabled}
}

// checkURL checks a channel's URL, given inline or by reference, and returns it resolved.
func (s *Service) checkURL(ctx context.Context, db *notifystore.Store, kind, inline, ref string) (string, error) {
	inline, ref = strings.TrimSpace(inline), strings.TrimSpace(ref)
	switch {
	case inline == "" && ref == "":
		return "", apierr.Invalid("url", "is required: send url (the api stores it and never shows it again) or url_ref (env:NAME or file:/path)")
	case inline != "" && ref != "":
		return "", apierr.Invalid("url", "send url or url_ref, not both")
	case inline != "":
		if err := notifytarget.ValidateURL(kind, inline); err != nil {
			return "", apierr.Invalid("url", "%v", err)
		}
		return inline, nil
	}
	if strings.HasPrefix(ref, refStored+":") {
		return "", apierr.Invalid("url_ref", "stored: references are made by the api; send the value itself as url")
	}
	raw, err := s.secrets.Resolve(ctx, db, ref)
	if err != nil {
		return "", apierr.Invalid("url_ref", "%v", err)
	}
	if err := notifytarget.ValidateURL(kind, raw); err != nil {
		return "", apierr.Invalid("url_ref", "%s names a URL that %v", ref, err)
	}
	return raw, nil
}

// checkSecret checks a webhook's signing secret (inline or by reference); a shoutrrr channel
// takes none.
func (s *Service) checkSecret(ctx context.Context, db *notifystore.Store, kind, inline, ref string) error {
	ref = strings.TrimSpace(ref)
	if kind != notifytarget.ChannelWebhook {
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
	v, err := s.secrets.Resolve(ctx, db, ref)
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
func (s *Service) checkRule(in RuleInput, field string) (RuleInput, error) {
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
func (s *Service) CreateChannel(ctx context.Context, m Meta, in ChannelInput) (Channel, error) {
	if in.Kind == "" {
		in.Kind = notifytarget.ChannelShoutrrr
	}
	var errs []error
	name := strings.TrimSpace(in.Name)
	if !namePattern.MatchString(name) {
		errs = append(errs, apierr.Invalid("name", "must be 1-64 of A-Z a-z 0-9 . _ - starting with a letter or digit"))
	}
	if !slices.Contains(notifytarget.ChannelKinds, in.Kind) {
		errs = append(errs, apierr.Invalid("kind", "%q is not one of %s", in.Kind, strings.Join(notifytarget.ChannelKinds, ", ")))
		return Channel{}, errors.Join(errs...)
	}
	raw, err := s.checkURL(ctx, s.db, in.Kind, in.URL, in.URLRef)
	errs = append(errs, err)
	errs = append(errs, s.checkSecret(ctx, s.db, in.Kind, in.Secret, in.SecretRef))
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
	sp := spec{name: name, kind: in.Kind, tz: tz, redacted: notifytarget.RedactURL(raw), quietStart: qs, quietEnd: qe, enabled: true,
		url: strings.TrimSpace(in.URL), urlRef: strings.TrimSpace(in.URLRef), secret: in.Secret,
		secretRef: strings.TrimSpace(in.SecretRef)}
	if in.Enabled != nil {
		sp.enabled = *in.Enabled
	}
	var out Channel
	err = s.db.InTx(ctx, func(tx *notifystore.Store) error {
		urlRef, secretRef, err := storeInline(ctx, tx, sp)
		if err != nil {
			return err
		}
		now := s.now()
		id, err := tx.InsertChannel(ctx, sp.row(urlRef, secretRef), now)
		if err != nil {
			return err
		}
		for _, r := range rules {
			if _, err := tx.InsertRule(ctx, id, ruleRow(r), now); err != nil {
				return err
			}
		}
		if out, err = tx.Channel(ctx, id, false); err != nil {
			return err
		}
		return tx.Record(ctx, m, ActionChannelCreate, EventChannelCreated, nil, out)
	})
	return out, err
}

// storeInline stores a spec's inline URL and secret and returns the references to write.
func storeInline(ctx context.Context, q *notifystore.Store, sp spec) (urlRef string, secretRef *string, err error) {
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
func (s *Service) UpdateChannel(ctx context.Context, m Meta, ref string, p ChannelPatch) (Channel, error) {
	var out Channel
	err := s.db.InTx(ctx, func(tx *notifystore.Store) error {
		before, err := tx.Channel(ctx, ref, true)
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
				sp.redacted, sp.url, sp.urlRef = notifytarget.RedactURL(raw), strings.TrimSpace(deref(p.URL)), strings.TrimSpace(deref(p.URLRef))
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
		if err := tx.UpdateChannel(ctx, before.ID, sp.row(urlRef, secretRef), s.now()); err != nil {
			return err
		}
		// A value the operator replaced is not kept.
		for _, d := range dropped {
			if err := dropSecret(ctx, tx, d); err != nil {
				return err
			}
		}
		if out, err = tx.Channel(ctx, before.ID, false); err != nil {
			return err
		}
		return tx.Record(ctx, m, ActionChannelUpdate, EventChannelUpdated, before, out)
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
func (s *Service) DeleteChannel(ctx context.Context, m Meta, ref string) (Channel, error) {
	var before Channel
	err := s.db.InTx(ctx, func(tx *notifystore.Store) error {
		var err error
		if before, err = tx.Channel(ctx, ref, true); err != nil {
			return err
		}
		if err := tx.DeleteChannel(ctx, before.ID); err != nil {
			return err
		}
		for _, r := range []*string{&before.URLRef, before.SecretRef} {
			if err := dropSecret(ctx, tx, r); err != nil {
				return err
			}
		}
		if _, err := tx.ResolveSignal(ctx, signals.New(s.now).As(m.Actor), FailingKey(before.ID), "the channel was deleted"); err != nil {
			return err
		}
		return tx.Record(ctx, m, ActionChannelDelete, EventChannelDeleted, before, nil)
	})
	return before, err
}

// CreateRule adds a rule to a channel (named by id or name in in.Channel).
func (s *Service) CreateRule(ctx context.Context, m Meta, in RuleInput) (Rule, error) {
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
	err = s.db.InTx(ctx, func(tx *notifystore.Store) error {
		c, err := tx.Channel(ctx, strings.TrimSpace(in.Channel), true)
		if errors.Is(err, apierr.ErrNotFound) {
			return apierr.Invalid("channel", "no notification channel %q", in.Channel)
		}
		if err != nil {
			return err
		}
		if out, err = tx.InsertRule(ctx, c.ID, ruleRow(in), s.now()); err != nil {
			return err
		}
		return tx.Record(ctx, m, ActionRuleCreate, EventRuleCreated, nil, out)
	})
	return out, err
}

// ruleRow is a checked rule's row; a rule is enabled unless it says otherwise.
func ruleRow(in RuleInput) notifystore.RuleRow {
	return notifystore.RuleRow{Kinds: in.Kinds, MinSeverity: in.MinSeverity, EntityTypes: in.EntityTypes, Tags: in.Tags,
		Enabled: in.Enabled == nil || *in.Enabled}
}

// DeleteRule deletes a rule. ErrNotFound when there is none.
func (s *Service) DeleteRule(ctx context.Context, m Meta, id string) (Rule, error) {
	var before Rule
	err := s.db.InTx(ctx, func(tx *notifystore.Store) error {
		var err error
		if before, err = tx.DeleteRule(ctx, id); err != nil {
			return err
		}
		return tx.Record(ctx, m, ActionRuleDelete, EventRuleDeleted, before, nil)
	})
	return before, err
}

// Target resolves a channel's references for a send now (a channel test).
func (s *Service) Target(ctx context.Context, ref string) (Channel, notifytarget.Target, error) {
	c, err := s.db.Channel(ctx, ref, false)
	if err != nil {
		return Channel{}, notifytarget.Target{}, err
	}
	t, err := ResolveTarget(ctx, s.db, s.secrets, c.Kind, c.URLRef, c.SecretRef)
	return c, t, err
}

// Deliveries lists deliveries newest first, each with its attempts in order; next is the
// cursor of the following page ("" on the last).
func (s *Service) Deliveries(ctx context.Context, f DeliveryFilter) (items []Delivery, next string, err error) {
	return s.db.Deliveries(ctx, f)
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
func (s *Service) CheckTarget(ctx context.Context, in TestInput) (notifytarget.Target, error) {
	if in.Kind == "" {
		in.Kind = notifytarget.ChannelShoutrrr
	}
	if !slices.Contains(notifytarget.ChannelKinds, in.Kind) {
		return notifytarget.Target{}, apierr.Invalid("kind", "%q is not one of %s", in.Kind, strings.Join(notifytarget.ChannelKinds, ", "))
	}
	raw, err := s.checkURL(ctx, s.db, in.Kind, in.URL, in.URLRef)
	if err := errors.Join(err, s.checkSecret(ctx, s.db, in.Kind, in.Secret, in.SecretRef)); err != nil {
		return notifytarget.Target{}, err
	}
	t := notifytarget.Target{Kind: in.Kind, URL: raw, Secret: in.Secret}
	if in.SecretRef != "" {
		if t.Secret, err = s.secrets.Resolve(ctx, s.db, in.SecretRef); err != nil {
			return notifytarget.Target{}, apierr.Invalid("secret_ref", "%v", err)
		}
	}
	return t, nil
}
