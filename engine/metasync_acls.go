package engine

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/store"
)

// aclRule is one mirror.acl.include rule,
// resourceType;resourceName;operation;permissionType;principal. An Any
// value (from "*") matches everything; principal "" matches every principal.
type aclRule struct {
	resourceType kmsg.ACLResourceType
	name         *regexp.Regexp // whole resource name (or prefix); nil: any
	operation    kmsg.ACLOperation
	permission   kmsg.ACLPermissionType
	principal    string
}

func parseACLRules(rules []string) ([]aclRule, error) {
	var out []aclRule
	var errs []error
	for _, s := range rules {
		r, err := parseACLRule(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("acls.include rule %q: %w", s, err))
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

func parseACLRule(s string) (aclRule, error) {
	f := strings.Split(s, ";")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	if len(f) == 1 {
		// A bare pattern selects resources by name, as the setting's
		// older form did.
		f = []string{"*", f[0], "*", "*", "*"}
	}
	if len(f) == 2 {
		// KIP-1279's TYPE;pattern ("TOPIC;orders-.*").
		f = []string{f[0], f[1], "*", "*", "*"}
	}
	if len(f) != 5 {
		return aclRule{}, fmt.Errorf("want 5 fields resourceType;resourceName;operation;permissionType;principal, got %d", len(f))
	}
	r := aclRule{resourceType: kmsg.ACLResourceTypeAny, operation: kmsg.ACLOperationAny, permission: kmsg.ACLPermissionTypeAny}
	var err error
	if f[0] != "*" {
		if r.resourceType, err = kmsg.ParseACLResourceType(f[0]); err != nil {
			return r, err
		}
	}
	if f[1] != "*" && f[1] != "" {
		if r.name, err = regexp.Compile("^(?:" + f[1] + ")$"); err != nil {
			return r, fmt.Errorf("resource name pattern: %w", err)
		}
	}
	if f[2] != "*" {
		if r.operation, err = kmsg.ParseACLOperation(f[2]); err != nil {
			return r, err
		}
	}
	if f[3] != "*" {
		if r.permission, err = kmsg.ParseACLPermissionType(f[3]); err != nil {
			return r, err
		}
	}
	if f[4] != "*" {
		r.principal = f[4]
	}
	return r, nil
}

// aclEntry is one ACL, comparable so existing ones are found by value.
type aclEntry struct {
	resourceType kmsg.ACLResourceType
	name         string
	pattern      kmsg.ACLResourcePatternType
	principal    string
	host         string
	operation    kmsg.ACLOperation
	permission   kmsg.ACLPermissionType
	// from is, for a held WRITE grant, the source ACL it comes from; ""
	// for ACLs as a cluster lists them (the value is compared whole).
	from string
}

func (a aclEntry) String() string {
	return fmt.Sprintf("%s %s:%s %s %s %s from %s", a.permission, a.resourceType, a.name, a.pattern, a.operation, a.principal, a.host)
}

func (r aclRule) matches(a aclEntry) bool {
	return (r.resourceType == kmsg.ACLResourceTypeAny || r.resourceType == a.resourceType) &&
		(r.name == nil || r.name.MatchString(a.name)) &&
		(r.operation == kmsg.ACLOperationAny || r.operation == a.operation) &&
		(r.permission == kmsg.ACLPermissionTypeAny || r.permission == a.permission) &&
		(r.principal == "" || r.principal == a.principal)
}

// The scope of ACL sync (DESIGN §6). A source ACL reaches the destination
// only where it concerns what the mirror copies:
//
//   - TOPIC: a literal ACL of a mirrored topic; a prefixed or wildcard one
//     only when every destination topic it matches is mirrored (and it
//     matches one): granting it would grant on topics the source's
//     principals have no business with (__mirror_state among them).
//     READ, DESCRIBE and DESCRIBE_CONFIGS are copied; WRITE is held back
//     until the topic's stop, which grants it on the topic (a literal
//     ACL); ALL is copied as READ and DESCRIBE and its WRITE held back,
//     as MirrorMaker 2 copies ALL as READ; the operations that administer
//     a topic (CREATE, DELETE, ALTER, ALTER_CONFIGS) are not copied: the
//     destination's operators own its topics.
//   - GROUP: literal ACLs of groups whose offsets are synced, unless a
//     rule names GROUP, which then selects alone.
//   - CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER: only when a rule
//     names the resource type.
//   - DENY: copied like an ALLOW of the same resource, at once (a DENY
//     only narrows), except a DENY for User:*, which would lock out the
//     destination's own principals, kmirror's too: it is not copied, and
//     neither is any ALLOW it overrides, so the destination never grants
//     what the source denies.

// aclScope is what the destination holds that a source ACL may reach.
type aclScope struct {
	mirrored []string          // mirrored topics, not stopped
	dest     []string          // every destination topic; nil: not known
	group    func(string) bool // groups whose offsets are synced; nil: none
}

// aclPlan is one round's result: the ACLs to create now, the WRITE grants
// held back per mirrored topic (literal, sorted), and the count of source
// ACLs not copied.
type aclPlan struct {
	create  []aclEntry
	held    map[string][]aclEntry
	skipped int
}

// namedOnly are the resource types copied only when a rule names them.
var namedOnly = []kmsg.ACLResourceType{kmsg.ACLResourceTypeCluster, kmsg.ACLResourceTypeTransactionalId,
	kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser}

// readOps are the topic operations copied while a topic is mirrored.
var readOps = []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs}

// planACLs decides what of the source's ACLs reaches the destination.
func (c *metaSyncConfig) planACLs(src []aclEntry, sc aclScope) aclPlan {
	plan := aclPlan{held: map[string][]aclEntry{}}
	var denyAll []aclEntry // DENY User:* ACLs in scope, not copied
	var allows []aclEntry  // ALLOWs to create, before denyAll is applied
	held := map[string][]aclEntry{}
	for _, a := range src {
		topics, ok := c.inScope(a, sc)
		if !ok {
			plan.skipped++
			continue
		}
		switch {
		case a.permission == kmsg.ACLPermissionTypeDeny && a.principal == guardPrincipal:
			denyAll = append(denyAll, a)
			plan.skipped++
		case a.permission == kmsg.ACLPermissionTypeDeny:
			plan.create = append(plan.create, a)
		case a.permission != kmsg.ACLPermissionTypeAllow:
			plan.skipped++
		case a.resourceType != kmsg.ACLResourceTypeTopic:
			allows = append(allows, a)
		case a.operation == kmsg.ACLOperationWrite || a.operation == kmsg.ACLOperationAll:
			for _, t := range topics {
				w := a
				w.name, w.pattern, w.operation = t, kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationWrite
				w.from = fmt.Sprintf("%s %s %s", a.pattern, a.name, a.operation)
				held[t] = append(held[t], w)
			}
			if a.operation == kmsg.ACLOperationAll {
				for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationDescribe} {
					r := a
					r.operation = op
					allows = append(allows, r)
				}
			}
		case slices.Contains(readOps, a.operation):
			allows = append(allows, a)
		default:
			plan.skipped++
		}
	}
	denied := func(a aclEntry) bool {
		return slices.ContainsFunc(denyAll, func(d aclEntry) bool { return d.overrides(a) })
	}
	for _, a := range allows {
		if denied(a) {
			plan.skipped++
			continue
		}
		plan.create = append(plan.create, a)
	}
	for t, ws := range held {
		ws = slices.DeleteFunc(ws, denied)
		slices.SortFunc(ws, func(a, b aclEntry) int { return store.CompareGrants(a.grant(), b.grant()) })
		ws = slices.CompactFunc(ws, func(a, b aclEntry) bool { return a.principal == b.principal && a.host == b.host })
		if len(ws) > 0 {
			plan.held[t] = ws
		}
	}
	plan.create = dedupACLs(plan.create)
	return plan
}

// inScope reports whether a source ACL concerns what the mirror copies
// and some include rule selects it; for a topic ACL it returns the
// mirrored topics it covers.
func (c *metaSyncConfig) inScope(a aclEntry, sc aclScope) ([]string, bool) {
	named := func(rt kmsg.ACLResourceType) bool {
		return slices.ContainsFunc(c.acls, func(r aclRule) bool { return r.resourceType == rt && r.matches(a) })
	}
	if !slices.ContainsFunc(c.acls, func(r aclRule) bool { return r.matches(a) }) {
		return nil, false
	}
	switch {
	case a.resourceType == kmsg.ACLResourceTypeTopic:
		topics := sc.covered(a)
		return topics, len(topics) > 0
	case a.resourceType == kmsg.ACLResourceTypeGroup:
		if named(kmsg.ACLResourceTypeGroup) {
			return nil, true
		}
		return nil, a.pattern == kmsg.ACLResourcePatternTypeLiteral && a.name != "*" && sc.group != nil && sc.group(a.name)
	case slices.Contains(namedOnly, a.resourceType):
		return nil, named(a.resourceType)
	default:
		return nil, false
	}
}

// covered returns the mirrored topics a topic ACL grants on, nil unless
// every destination topic it matches is mirrored. A literal ACL of a topic
// the destination does not have would grant access to whatever topic of
// that name appears there later, so only a mirrored name counts.
func (sc aclScope) covered(a aclEntry) []string {
	if a.pattern == kmsg.ACLResourcePatternTypeLiteral && a.name != "*" {
		if slices.Contains(sc.mirrored, a.name) {
			return []string{a.name}
		}
		return nil
	}
	if sc.dest == nil || (a.pattern != kmsg.ACLResourcePatternTypeLiteral && a.pattern != kmsg.ACLResourcePatternTypePrefixed) {
		return nil
	}
	var out []string
	for _, t := range sc.dest {
		if !matchesName(a, t) {
			continue
		}
		if !slices.Contains(sc.mirrored, t) {
			return nil
		}
		out = append(out, t)
	}
	return out
}

// matchesName reports whether a literal or prefixed ACL names the resource.
func matchesName(a aclEntry, name string) bool {
	switch a.pattern {
	case kmsg.ACLResourcePatternTypeLiteral:
		return a.name == "*" || a.name == name
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, a.name)
	default:
		return false
	}
}

// overrides reports whether the DENY d applies to some request the ALLOW
// a grants: the same resource type, patterns naming a common resource, the
// operation (or ALL), a principal and host d covers.
func (d aclEntry) overrides(a aclEntry) bool {
	if d.resourceType != a.resourceType || (d.operation != kmsg.ACLOperationAll && d.operation != a.operation && a.operation != kmsg.ACLOperationAll) ||
		(d.host != "*" && d.host != a.host) || (d.principal != guardPrincipal && d.principal != a.principal) {
		return false
	}
	return patternsOverlap(d, a)
}

// patternsOverlap reports whether two literal or prefixed ACLs name a
// common resource.
func patternsOverlap(a, b aclEntry) bool {
	lit := func(e aclEntry) bool { return e.pattern == kmsg.ACLResourcePatternTypeLiteral }
	switch {
	case lit(a) && a.name == "*", lit(b) && b.name == "*":
		return true
	case lit(a) && lit(b):
		return a.name == b.name
	case lit(a):
		return matchesName(b, a.name)
	case lit(b):
		return matchesName(a, b.name)
	default:
		return strings.HasPrefix(a.name, b.name) || strings.HasPrefix(b.name, a.name)
	}
}

func dedupACLs(in []aclEntry) []aclEntry {
	seen := make(map[aclEntry]bool, len(in))
	return slices.DeleteFunc(in, func(a aclEntry) bool {
		a.from = ""
		if seen[a] {
			return true
		}
		seen[a] = true
		return false
	})
}

// grant is a held WRITE as __mirror_state stores it.
func (a aclEntry) grant() store.HeldGrant {
	return store.HeldGrant{Principal: a.principal, Host: a.host, From: a.from}
}

// heldEntry is the ACL a stored grant creates on topic.
func heldEntry(topic string, g store.HeldGrant) aclEntry {
	return aclEntry{resourceType: kmsg.ACLResourceTypeTopic, name: topic, pattern: kmsg.ACLResourcePatternTypeLiteral,
		principal: g.Principal, host: g.Host, operation: kmsg.ACLOperationWrite, permission: kmsg.ACLPermissionTypeAllow, from: g.From}
}

// aclCoversStopped reports whether a topic ACL applies to a topic of this
// mirror that is failed over: a literal ACL naming it, a prefixed one whose
// prefix it starts with, or the literal wildcard. After a failover the
// destination's operators own that topic's access, and an ACL created by a
// later sync would grant the old source's principals access to it.
func (m *mirror) aclCoversStopped(a aclEntry) bool {
	if a.resourceType != kmsg.ACLResourceTypeTopic {
		return false
	}
	return slices.ContainsFunc(m.topicList(), func(t string) bool {
		var covers bool
		switch a.pattern {
		case kmsg.ACLResourcePatternTypeLiteral:
			covers = a.name == t || a.name == "*"
		case kmsg.ACLResourcePatternTypePrefixed:
			covers = strings.HasPrefix(t, a.name)
		default:
			covers = false
		}
		return covers && m.topicStopped(t)
	})
}

// describeACLs lists every ACL of a cluster.
func (c *cluster) describeACLs(ctx context.Context) ([]aclEntry, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, c.cl)
	if err == nil {
		if err = kerr.ErrorForCode(resp.ErrorCode); err != nil && resp.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("describe %s ACLs: %w", c.name, err)
	}
	var out []aclEntry
	for _, res := range resp.Resources {
		for _, a := range res.ACLs {
			out = append(out, aclEntry{
				resourceType: res.ResourceType, name: res.ResourceName, pattern: res.ResourcePatternType,
				principal: a.Principal, host: a.Host, operation: a.Operation, permission: a.PermissionType,
			})
		}
	}
	return out, nil
}

// syncACLs creates on the destination the source ACLs in the mirror's
// scope (planACLs) that the destination lacks, and records the WRITE
// grants held back from each mirrored topic for its stop. Destination ACLs
// are never deleted: the destination may grant access of its own (the
// consumers failed over to it, the mirror itself). It returns the ACLs
// created and the source ACLs not copied.
//
// A cluster without an authorizer (SECURITY_DISABLED) ends the round
// quietly: a source without one has no ACLs to copy, a destination without
// one cannot hold them, and ACL sync is on by default.
func (m *mirror) syncACLs(ctx context.Context, mirrored []string) (created, skipped int, err error) {
	cfg := m.settings().metaSync
	src, err := m.src.describeACLs(ctx)
	if errors.Is(err, kerr.SecurityDisabled) {
		return 0, 0, cfg.aclErr
	}
	if err != nil {
		return 0, 0, errors.Join(err, cfg.aclErr)
	}
	dst, err := m.e.dst.describeACLs(ctx)
	if errors.Is(err, kerr.SecurityDisabled) {
		return 0, len(src), cfg.aclErr
	}
	if err != nil {
		return 0, 0, errors.Join(err, cfg.aclErr)
	}
	sc := aclScope{mirrored: mirrored}
	if gs := m.settings().groupSync; gs.interval > 0 {
		sc.group = gs.wants
	}
	if slices.ContainsFunc(src, func(a aclEntry) bool {
		return a.resourceType == kmsg.ACLResourceTypeTopic && (a.pattern != kmsg.ACLResourcePatternTypeLiteral || a.name == "*")
	}) {
		// Prefixed and wildcard topic ACLs are judged by what they
		// match on the destination.
		meta, err := m.e.dst.metadata(ctx, nil)
		if err != nil {
			return 0, 0, errors.Join(fmt.Errorf("list destination topics: %w", err), cfg.aclErr)
		}
		for t := range meta.topics {
			sc.dest = append(sc.dest, t)
		}
		slices.Sort(sc.dest)
	}
	plan := cfg.planACLs(src, sc)
	skipped = plan.skipped
	errs := []error{cfg.aclErr}
	for _, t := range mirrored {
		if err := m.holdGrants(ctx, t, plan.held[t]); err != nil {
			errs = append(errs, err)
		}
	}
	have := make(map[aclEntry]bool, len(dst))
	for _, a := range dst {
		have[a] = true
	}
	missing := slices.DeleteFunc(plan.create, func(a aclEntry) bool { return have[a] })
	// Checked right before the write: a stop may have landed since the
	// round listed the mirrored topics.
	missing = slices.DeleteFunc(missing, func(a aclEntry) bool {
		if m.aclCoversStopped(a) {
			skipped++
			return true
		}
		return false
	})
	n, err := m.createACLs(ctx, missing)
	if err != nil {
		errs = append(errs, err)
	}
	if n > 0 {
		m.e.emit(LevelInfo, m.cfg.Name, "", -1, fmt.Sprintf("synced %d ACLs from the source (%d source ACLs out of the mirror's scope or held back)", n, skipped))
	}
	return n, skipped, errors.Join(errs...)
}

// createACLs creates ACLs on the destination under the instance's lease
// and returns how many were created.
func (m *mirror) createACLs(ctx context.Context, acls []aclEntry) (int, error) {
	if len(acls) == 0 {
		return 0, nil
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = a.resourceType, a.name, a.pattern
		c.Principal, c.Host, c.Operation, c.PermissionType = a.principal, a.host, a.operation, a.permission
		req.Creations = append(req.Creations, c)
	}
	lctx, cancel, err := m.e.gate.leased(ctx)
	defer cancel()
	var resp *kmsg.CreateACLsResponse
	if err == nil {
		resp, err = req.RequestWith(lctx, m.e.dst.cl)
	}
	if err != nil {
		return 0, fmt.Errorf("create destination ACLs: %w", err)
	}
	var errs []error
	created := 0
	for i, r := range resp.Results {
		if i >= len(acls) {
			break
		}
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			errs = append(errs, fmt.Errorf("create destination ACL %s: %w", acls[i], err))
			continue
		}
		created++
	}
	return created, errors.Join(errs...)
}
