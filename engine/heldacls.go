package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/kmirror/kmirror/engine/store"
)

// heldGrants are the WRITE grants of the source held back from the
// mirror's topics while they are mirrored (metasync_acls.go), applied by a
// topic's stop: a client that may write to a topic on the source may write
// to it on the destination after the failover, and not before.
type heldGrants struct {
	// mu serialises a topic's record writes with its stop's release, so
	// a round that decided before the stop never records after it.
	mu       sync.Mutex
	byTopic  map[string][]store.HeldGrant
	released map[string]bool // topics whose grants this instance applied at their stop
	sink     *stateSink      // where the records go; nil: an ad-hoc mirror, in memory only
}

// setHeldSink gives the mirror the state sink its topics' records go to.
func (m *mirror) setHeldSink(s *stateSink) {
	if s == nil {
		return
	}
	m.held.mu.Lock()
	m.held.sink = s
	m.held.mu.Unlock()
}

// restoreHeld takes a topic's held grants from __mirror_state (a new
// owner), unless this instance synced the topic's grants itself.
func (m *mirror) restoreHeld(rec store.HeldACLs) {
	h := &m.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.byTopic[rec.Topic]; ok {
		return
	}
	if h.byTopic == nil {
		h.byTopic = map[string][]store.HeldGrant{}
	}
	h.byTopic[rec.Topic] = slices.Clone(rec.Grants)
}

// heldFor returns the grants held back from topic.
func (m *mirror) heldFor(topic string) []store.HeldGrant {
	m.held.mu.Lock()
	defer m.held.mu.Unlock()
	return slices.Clone(m.held.byTopic[topic])
}

// holdGrants records the WRITE grants held back from a mirrored topic when
// they changed: in __mirror_state first, so a stop on any instance, with
// the source gone, applies what the last sync saw.
func (m *mirror) holdGrants(ctx context.Context, topic string, acls []aclEntry) error {
	grants := make([]store.HeldGrant, 0, len(acls))
	for _, a := range acls {
		grants = append(grants, a.grant())
	}
	h := &m.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if m.topicStopped(topic) || h.released[topic] {
		return nil // failed over: the stop applied what it had
	}
	if old, ok := h.byTopic[topic]; ok && slices.Equal(old, grants) || !ok && len(grants) == 0 {
		return nil
	}
	if len(grants) > store.MaxHeldGrants {
		return fmt.Errorf("%s: %d WRITE grants on the source, more than the %d kmirror holds back for a topic: none recorded", topic, len(grants), store.MaxHeldGrants)
	}
	if h.sink != nil {
		rec := store.HeldACLs{Mirror: m.cfg.Name, Topic: topic, Grants: grants, UpdatedAt: m.e.now().UTC()}
		if err := h.sink.PutHeldACLs(ctx, rec); err != nil {
			return fmt.Errorf("record the WRITE grants held back from %s: %w", topic, err)
		}
	}
	if h.byTopic == nil {
		h.byTopic = map[string][]store.HeldGrant{}
	}
	h.byTopic[topic] = grants
	if len(grants) > 0 {
		m.e.emit(LevelInfo, m.cfg.Name, topic, -1, fmt.Sprintf("holding back %d WRITE grants on %s until it is stopped: %s", len(grants), topic, describeGrants(grants)))
	}
	return nil
}

// releaseTopic makes a stopped topic writable: the WRITE grants held back
// from it are created, then the write guard (if any) is removed. A
// partition's stop calls it; the first one that succeeds does the work.
func (m *mirror) releaseTopic(ctx context.Context, topic string) error {
	if err := m.applyHeld(ctx, topic); err != nil {
		return err
	}
	return m.unguardTopic(ctx, topic)
}

func (m *mirror) applyHeld(ctx context.Context, topic string) error {
	h := &m.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released[topic] {
		return nil
	}
	var acls []aclEntry
	for _, g := range h.byTopic[topic] {
		acls = append(acls, heldEntry(topic, g))
	}
	n, err := m.createACLs(ctx, acls)
	if err != nil {
		return fmt.Errorf("grant the WRITE held back from %s: %w", topic, err)
	}
	if h.released == nil {
		h.released = map[string]bool{}
	}
	h.released[topic] = true
	if n > 0 {
		m.e.emit(LevelInfo, m.cfg.Name, topic, -1, fmt.Sprintf("failover: granted WRITE on %s as the source did: %s", topic, describeGrants(h.byTopic[topic])))
	}
	return nil
}

// describeGrants lists grants for an event: principal@host.
func describeGrants(gs []store.HeldGrant) string {
	var b strings.Builder
	for i, g := range gs {
		if i > 0 {
			b.WriteString(", ")
		}
		if i == 10 {
			fmt.Fprintf(&b, "and %d more", len(gs)-i)
			break
		}
		b.WriteString(g.Principal + "@" + g.Host)
	}
	return b.String()
}
