package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// HeldGrant is one source grant held back from a mirrored destination
// topic: an ALLOW WRITE for Principal from Host on the topic (a literal
// ACL), applied by the topic's stop. Source WRITE grants, and the write
// half of ALL grants, are held so the destination's mirrored topics stay
// read-only to clients until the failover.
type HeldGrant struct {
	Principal string `json:"principal"`
	Host      string `json:"host"`
	// From is the source ACL the grant comes from, for people reading
	// the record and --describe (e.g. "PREFIXED ord ALL").
	From string `json:"from,omitempty"`
}

// HeldACLs is the value of acls/<mirror>/<topic>: the grants the topic's
// stop applies on the destination, as the topic's owner last synced them
// from the source. It is written by the owner only, so a stop needs only
// the destination (the source may be gone by then).
type HeldACLs struct {
	Mirror    string      `json:"mirror"`
	Topic     string      `json:"topic"`
	Grants    []HeldGrant `json:"grants,omitempty"`
	UpdatedAt time.Time   `json:"updatedAt,omitzero"`
}

// MaxHeldGrants bounds the grants of one record: a source with more WRITE
// grants on one topic than this is refused by the sync, not stored in a
// record too large to produce.
const MaxHeldGrants = 1000

type heldACLsV1 struct {
	V int `json:"v"`
	HeldACLs
}

// EncodeHeldACLs encodes a topic's held grants.
func EncodeHeldACLs(h HeldACLs) ([]byte, error) {
	if err := h.validate(); err != nil {
		return nil, fmt.Errorf("encode held ACLs %s/%s: %w", h.Mirror, h.Topic, err)
	}
	return json.Marshal(heldACLsV1{V: Version, HeldACLs: h})
}

// DecodeHeldACLs decodes a topic's held grants.
func DecodeHeldACLs(b []byte) (HeldACLs, error) {
	var env heldACLsV1
	if err := decode(KindACLs, b, &env); err != nil {
		return HeldACLs{}, err
	}
	h := env.HeldACLs
	h.Grants = nilIfEmpty(h.Grants)
	h.UpdatedAt = h.UpdatedAt.UTC()
	if err := h.validate(); err != nil {
		return HeldACLs{}, fmt.Errorf("%w: held ACLs: %w", ErrMalformed, err)
	}
	return h, nil
}

func (h HeldACLs) validate() error {
	if err := ACLsKey(h.Mirror, h.Topic).Validate(); err != nil {
		return err
	}
	if len(h.Grants) > MaxHeldGrants {
		return fmt.Errorf("%d grants, more than %d", len(h.Grants), MaxHeldGrants)
	}
	for _, g := range h.Grants {
		switch {
		case !strings.Contains(g.Principal, ":"):
			return fmt.Errorf("grant principal %q: want TYPE:name", g.Principal)
		case g.Host == "":
			return errors.New("grant without a host")
		}
	}
	if !slices.IsSortedFunc(h.Grants, CompareGrants) || len(slices.CompactFunc(slices.Clone(h.Grants), func(a, b HeldGrant) bool { return CompareGrants(a, b) == 0 })) != len(h.Grants) {
		return errors.New("grants not sorted or repeated")
	}
	return validTime("updatedAt", h.UpdatedAt)
}

// CompareGrants orders grants by principal, host and origin.
func CompareGrants(a, b HeldGrant) int {
	if c := strings.Compare(a.Principal, b.Principal); c != 0 {
		return c
	}
	if c := strings.Compare(a.Host, b.Host); c != 0 {
		return c
	}
	return strings.Compare(a.From, b.From)
}
