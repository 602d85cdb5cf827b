package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The write guard (mirror.destination.write.guard=acl) keeps other writers
// out of a mirrored destination topic, as KIP-1279's brokers do by refusing
// client writes to a mirror's topics. Kafka ACLs have no "everyone except"
// form, and a DENY beats every ALLOW, so a DENY for User:* with an ALLOW for
// kmirror would lock kmirror out too. Instead kmirror's principal must be a
// destination super user (super.users), which the authorizer lets through
// before it looks at any ACL; the guard is one DENY WRITE ACL for User:* on
// each mirrored topic (literal name, any host). Denying each principal that
// holds a WRITE grant instead would leave a window after every new grant,
// and miss grants to User:* and to prefixes nobody listed.

// guardPrincipal is every principal the authorizer checks ACLs for.
const guardPrincipal = "User:*"

// ErrNoAuthorizer: the write guard needs ACLs, and the destination has no
// authorizer.
var ErrNoAuthorizer = errors.New("mirror.destination.write.guard=acl needs an authorizer on the destination")

// writeGuard is the guard state of one mirror on this instance.
type writeGuard struct {
	// mu serialises the guard's creations and deletions: a partition's
	// stop removes the ACL after any creation decided before the stop
	// reached it, so the creation never lands last.
	mu      sync.Mutex
	guarded map[string]bool // topics known to carry the ACL since it was last removed here
}

func guardACL(topic string) aclEntry {
	return aclEntry{
		resourceType: kmsg.ACLResourceTypeTopic, name: topic, pattern: kmsg.ACLResourcePatternTypeLiteral,
		principal: guardPrincipal, host: "*", operation: kmsg.ACLOperationWrite, permission: kmsg.ACLPermissionTypeDeny,
	}
}

// guardTopic puts the guard ACL on topic, unless this instance already did
// and refresh is false. Creating an ACL that exists changes nothing.
func (m *mirror) guardTopic(ctx context.Context, topic string, refresh bool) error {
	if !m.cfg.WriteGuard {
		return nil
	}
	g := &m.guard
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.guarded[topic] && !refresh {
		return nil
	}
	a := guardACL(topic)
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = a.resourceType, a.name, a.pattern
	c.Principal, c.Host, c.Operation, c.PermissionType = a.principal, a.host, a.operation, a.permission
	req.Creations = append(req.Creations, c)
	lctx, cancel, err := m.e.gate.leased(ctx)
	defer cancel()
	var resp *kmsg.CreateACLsResponse
	if err == nil {
		resp, err = req.RequestWith(lctx, m.e.dst.cl)
	}
	if err == nil {
		err = firstResult(resp.Results, func(r *kmsg.CreateACLsResponseResult) error { return guardErr(r.ErrorCode, r.ErrorMessage) })
	}
	if err != nil {
		return fmt.Errorf("write guard: create %s: %w", a, err)
	}
	if g.guarded == nil {
		g.guarded = map[string]bool{}
	}
	if !g.guarded[topic] {
		m.e.emit(LevelInfo, m.cfg.Name, topic, -1, fmt.Sprintf("write guard on: %s (only super users, kmirror among them, can write to %s until it is stopped)", a, topic))
	}
	g.guarded[topic] = true
	return nil
}

// unguardTopic removes the guard ACL from topic: the stop makes it
// writable. Removing an ACL that is not there changes nothing.
func (m *mirror) unguardTopic(ctx context.Context, topic string) error {
	if !m.cfg.WriteGuard {
		return nil
	}
	g := &m.guard
	g.mu.Lock()
	defer g.mu.Unlock()
	a := guardACL(topic)
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = a.resourceType, &a.name, a.pattern
	f.Principal, f.Host, f.Operation, f.PermissionType = &a.principal, &a.host, a.operation, a.permission
	req.Filters = append(req.Filters, f)
	lctx, cancel, err := m.e.gate.leased(ctx)
	defer cancel()
	var resp *kmsg.DeleteACLsResponse
	if err == nil {
		resp, err = req.RequestWith(lctx, m.e.dst.cl)
	}
	if err == nil {
		err = firstResult(resp.Results, func(r *kmsg.DeleteACLsResponseResult) error { return guardErr(r.ErrorCode, r.ErrorMessage) })
	}
	if err != nil {
		return fmt.Errorf("write guard: delete %s: %w", a, err)
	}
	if g.guarded[topic] || len(resp.Results[0].MatchingACLs) > 0 {
		m.e.emit(LevelInfo, m.cfg.Name, topic, -1, fmt.Sprintf("write guard off: %s removed, %s is writable", a, topic))
	}
	delete(g.guarded, topic)
	return nil
}

// refreshGuards puts the guard back on every mirrored topic none of whose
// partitions here is stopping or stopped, in case someone removed it. It
// runs at each metadata sync, and needs only the destination.
func (m *mirror) refreshGuards(ctx context.Context) {
	if !m.cfg.WriteGuard {
		return
	}
	for _, t := range m.topicList() {
		rs := m.runnersOf(t)
		if len(rs) == 0 {
			continue
		}
		stopping := false
		for _, r := range rs {
			stopping = stopping || r.Stats().StopWanted()
		}
		if stopping {
			continue
		}
		if err := m.guardTopic(ctx, t, true); err != nil && ctx.Err() == nil {
			m.e.emit(LevelWarn, m.cfg.Name, t, -1, err.Error())
		}
	}
}

// firstResult is the error of an answer's one result: there is none, or
// what errOf says of it.
func firstResult[R any](results []R, errOf func(*R) error) error {
	if len(results) == 0 {
		return errors.New("no result in the answer")
	}
	return errOf(&results[0])
}

// guardErr is the error of one ACL creation or deletion result.
func guardErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	if errors.Is(err, kerr.SecurityDisabled) {
		err = fmt.Errorf("%w: %w", ErrNoAuthorizer, err)
	}
	if msg != nil && *msg != "" {
		err = fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

// probeAuthorizer asks the destination whether it has an authorizer, for
// --create of a guarded mirror: without one the guard could never hold, and
// a guard that silently does nothing is worse than none.
func probeAuthorizer(ctx context.Context, dst *kgo.Client) error {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeTopic
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, dst)
	if err == nil {
		err = guardErr(resp.ErrorCode, resp.ErrorMessage)
	}
	if err != nil {
		if errors.Is(err, ErrNoAuthorizer) {
			return err
		}
		return fmt.Errorf("mirror.destination.write.guard=acl: describe destination ACLs: %w", err)
	}
	return nil
}
